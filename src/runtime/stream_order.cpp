// Ordering a consumer's stream after the producer's current stream: what
// DLPack's `__dlpack__(stream=...)` and the runtime table's
// wait_current_stream ask of a producer.
//
// The consumer names its stream by native handle; c10 events need a
// c10::Stream. The plugin's external-stream hook maps one to the other; with
// no hook, devbridge recognises the two streams it can name itself (the
// current and the default stream) and refuses the rest, naming the fix,
// rather than guessing or synchronising the host.
#include <c10/core/Event.h>
#include <c10/util/Exception.h>

#include <cstdio>

#include "devbridge/runtime.h"

namespace devbridge {
namespace {

std::string Hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "%#zx", static_cast<size_t>(reinterpret_cast<uintptr_t>(pointer)));
  return text;
}

}  // namespace

c10::Stream DeviceRuntime::DefaultStream(c10::DeviceIndex index) const {
  const auto* impl = Guard();
  CheckIndex(StateFor(impl), index);
  try {
    return impl->getDefaultStream(c10::Device(type_, index));
  } catch (const c10::Error& error) {
    throw Error(ErrorKind::kNotImplemented,
                "devbridge: " + Name() + "'s device guard has no default stream (" +
                    error.what_without_backtrace() +
                    "); override getDefaultStream in the plugin's DeviceGuardImplInterface, or "
                    "pass a native stream (or -1) instead of None");
  }
}

c10::Stream DeviceRuntime::StreamFromNative(c10::DeviceIndex index, void* native) const {
  if (type_ == c10::DeviceType::CPU) {
    throw Error(ErrorKind::kValue, "devbridge: the CPU has no streams; a CPU consumer passes no stream");
  }
  const auto* impl = Guard();
  CheckIndex(StateFor(impl), index);
  const c10::Device device(type_, index);
  const std::string where = Name() + ":" + std::to_string(index);
  if (const DevbridgeExternalStreamFn hook = GetExternalStreamHook(type_)) {
    int64_t id = 0;
    if (hook(index, native, &id) != 0) {
      throw Error(ErrorKind::kValue, "devbridge: " + Hex(native) + " is not a stream of " + where +
                                         " (the plugin's external-stream hook does not know it); "
                                         "pass a native stream of the tensor's own device");
    }
    return c10::Stream(c10::Stream::UNSAFE, device, id);
  }
  const c10::Stream current = impl->getStream(device);
  if (NativeHandle(current) == native) return current;
  try {
    const c10::Stream fallback = impl->getDefaultStream(device);
    if (NativeHandle(fallback) == native) return fallback;
  } catch (const c10::Error&) {
    // The guard has no getDefaultStream: only the current stream is known.
  }
  throw Error(
      ErrorKind::kBuffer,
      "devbridge: stream " + Hex(native) + " is neither the current nor the default stream of " +
          where + ", and the plugin '" + Name() +
          "' registers no external-stream hook, so devbridge cannot tell which of its streams it "
          "is and cannot order it after the producer's work. Fix one of: (1) in the plugin, "
          "register a DevbridgeExternalStreamFn (devbridge.register_external_stream_hook(capsule, "
          "'" + Name() + "'), docs/plugin-authors.md); (2) make that stream current "
          "(with torch.Stream(...)) before exporting; (3) pass stream=-1 and order the work "
          "yourself");
}

void DeviceRuntime::WaitForCurrentStream(const c10::Stream& consumer) const {
  const c10::Stream current = Guard()->getStream(consumer.device());
  // Both are streams of consumer.device() by construction: the ids decide
  // (some guards, c10's NoOp one among them, label their streams index -1).
  if (current.id() == consumer.id()) return;
  // A c10::Event without timing: the plugin records it on the producer's
  // stream and makes the consumer wait for it on the device; destroying it
  // right after is allowed while the wait is pending (as in CUDA).
  c10::Event event(type_, c10::EventFlag::PYTORCH_DEFAULT);
  event.record(current);
  event.block(consumer);
}

}  // namespace devbridge
