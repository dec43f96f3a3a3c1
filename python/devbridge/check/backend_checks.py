"""Checks of the generic PyTorch device interfaces devbridge reads through.

devbridge never calls into the plugin directly: everything below goes through
torch.accelerator, torch.Stream/torch.Event and the tensor API, which in turn
reach the plugin's c10 guard and allocator. A failure here means the plugin
does not implement a c10 hook that devbridge (and Inductor) rely on.
"""

from __future__ import annotations

import threading

import torch

from .native_stream import GUARD as _GUARD
from .native_stream import NATIVE_HANDLE_FIX
from .plugin import Backend
from .registry import check
from .result import CheckFailed, CheckResult
from .timing import delay_knob, no_delay_knob, ns_per_call


def _device(backend: Backend, index: int) -> torch.device:
    return torch.device(backend.name, index)


def _in_thread(fn):
    """Run fn on a fresh host thread and return its result (or re-raise)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@check("backend", "PrivateUse1 backend registered, named, and the current accelerator")
def _backend(backend: Backend, result: CheckResult) -> None:
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is None or accelerator.type != backend.name:
        raise CheckFailed(
            f"torch.accelerator.current_accelerator() is {accelerator}, not {backend.name}",
            "register the PrivateUse1 hooks (at::RegisterPrivateUse1HooksInterface) and "
            "return true from isAvailable(); torch.accelerator routes through them",
        )
    result.detail = f"'{backend.name}' ({backend.loaded_from})"


@check("device.count", "device count", depends_on=("backend",))
def _device_count(backend: Backend, result: CheckResult) -> None:
    count = torch.accelerator.device_count()
    module_count = backend.module.device_count()
    if count < 1:
        raise CheckFailed(
            f"torch.accelerator.device_count() is {count}",
            f"implement deviceCount() in {_GUARD} and device_count() in torch.{backend.name}",
        )
    if count != module_count:
        raise CheckFailed(
            f"torch.accelerator.device_count()={count} but torch.{backend.name}.device_count()={module_count}",
            "make the device module's device_count() return the guard's deviceCount()",
        )
    result.detail = f"{count} device(s)"


@check("device.current", "current device get/set round trip", depends_on=("device.count",))
def _current_device(backend: Backend, result: CheckResult) -> None:
    saved = torch.accelerator.current_device_index()
    try:
        for index in range(torch.accelerator.device_count()):
            torch.accelerator.set_device_index(index)
            seen = torch.accelerator.current_device_index()
            if seen != index:
                raise CheckFailed(
                    f"set_device_index({index}) then current_device_index() returned {seen}",
                    f"make setDevice()/getDevice() in {_GUARD} read and write the same "
                    "per-thread current device",
                )
    finally:
        torch.accelerator.set_device_index(saved)
    result.costs_ns["current_device_index"] = ns_per_call(torch.accelerator.current_device_index)
    result.costs_ns["set_device_index"] = ns_per_call(lambda: torch.accelerator.set_device_index(saved))


@check("device.per_thread", "current device is per host thread", depends_on=("device.current",))
def _per_thread_device(backend: Backend, result: CheckResult) -> None:
    count = torch.accelerator.device_count()
    if count < 2:
        result.skip("needs two devices")
        return
    saved = torch.accelerator.current_device_index()
    torch.accelerator.set_device_index(0)
    try:
        def other_thread():
            torch.accelerator.set_device_index(count - 1)
            return torch.accelerator.current_device_index()

        seen_there = _in_thread(other_thread)
        seen_here = torch.accelerator.current_device_index()
    finally:
        torch.accelerator.set_device_index(saved)
    if seen_there != count - 1 or seen_here != 0:
        raise CheckFailed(
            f"after another thread set device {count - 1}, that thread saw {seen_there} and "
            f"this thread sees {seen_here} (expected {count - 1} and 0)",
            "keep the current device in a thread_local (as CUDA does); launchers on "
            "different threads must not move each other's device",
        )
    result.detail = f"thread A on {backend.name}:0, thread B on {backend.name}:{count - 1}"


@check("stream.current", "current stream get/set, per device and per thread", depends_on=("device.current",))
def _current_stream(backend: Backend, result: CheckResult) -> None:
    device = _device(backend, torch.accelerator.current_device_index())
    default = torch.accelerator.current_stream(device)
    if default.device != device:
        raise CheckFailed(
            f"current_stream({device}) returned a stream of {default.device}",
            f"getStream(device) in {_GUARD} must return a stream of that device",
        )
    side = torch.Stream(device=device)
    if side == default:
        raise CheckFailed(
            "torch.Stream(device=...) returned the current (default) stream",
            f"implement getNewStream() in {_GUARD} to hand out a non-default stream",
        )
    torch.accelerator.set_stream(side)
    try:
        now = torch.accelerator.current_stream(device)
        seen_by_other_thread = _in_thread(lambda: torch.accelerator.current_stream(device))
    finally:
        torch.accelerator.set_stream(default)
    if now != side:
        raise CheckFailed(
            f"set_stream({side}) then current_stream() returned {now}",
            f"exchangeStream() in {_GUARD} must make the stream current for its device",
        )
    if seen_by_other_thread == side:
        raise CheckFailed(
            "a stream made current on one thread is current on another thread too",
            "keep the current stream per thread (thread_local), as CUDA and XPU do",
        )
    if torch.accelerator.current_stream(device) != default:
        raise CheckFailed(
            "restoring the previous stream did not take effect",
            f"exchangeStream() in {_GUARD} must return the previous stream and accept it back",
        )
    result.costs_ns["current_stream"] = ns_per_call(lambda: torch.accelerator.current_stream(device))


@check("stream.native_handle", "native stream handle (torch.Stream.native_handle)", depends_on=("stream.current",))
def _native_handle(backend: Backend, result: CheckResult) -> None:
    device = _device(backend, torch.accelerator.current_device_index())
    fix = NATIVE_HANDLE_FIX
    default = torch.accelerator.current_stream(device)
    side = torch.Stream(device=device)
    try:
        handles = (default.native_handle, side.native_handle)
    except (RuntimeError, AttributeError) as exc:
        from devbridge import _C

        detail = f"torch.Stream.native_handle raised: {exc}"
        if _C.native_stream_source(backend.name, device.index) == "resolver":
            # devbridge itself is served; torch's own API (Inductor, other
            # libraries) still is not, and only the override fixes that.
            detail += " (devbridge itself uses the registered stream resolver)"
            fix = NATIVE_HANDLE_FIX.split(";")[0]
        raise CheckFailed(detail, fix) from exc
    if handles[0] == handles[1]:
        raise CheckFailed(
            f"the default stream and a new stream share the native handle {handles[0]:#x}",
            "return each stream's own native handle from getStreamNativeHandle()",
        )
    if not handles[1]:
        raise CheckFailed("a non-default stream's native handle is NULL", fix)
    if side.native_handle != handles[1]:
        raise CheckFailed("the native handle of one stream changed between calls",
                          "return a stable handle for the lifetime of a stream")
    result.detail = f"default {handles[0]:#x}, new stream {handles[1]:#x}"
    result.costs_ns["current_stream().native_handle"] = ns_per_call(
        lambda: torch.accelerator.current_stream(device).native_handle)


@check("allocator", "allocator round trip (empty, copy in, copy out, free)", depends_on=("device.current",))
def _allocator(backend: Backend, result: CheckResult) -> None:
    device = _device(backend, torch.accelerator.current_device_index())
    host = torch.arange(4096, dtype=torch.float32)
    on_device = host.to(device)
    if on_device.device != device or on_device.data_ptr() == 0:
        raise CheckFailed(
            f"host.to({device}) gave a tensor on {on_device.device} with data_ptr "
            f"{on_device.data_ptr():#x}",
            "register the device allocator with REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, ...) "
            "and implement empty.memory_format/empty_strided for PrivateUse1",
        )
    back = on_device.cpu()
    if not torch.equal(back, host):
        raise CheckFailed(
            "a host → device → host round trip changed the data",
            "check _copy_from for PrivateUse1 (both directions) and its stream synchronisation",
        )
    del on_device, back
    result.costs_ns["empty(256 floats)"] = ns_per_call(
        lambda: torch.empty(256, dtype=torch.float32, device=device))


@check("module.to", "Module.to() keeps Parameter objects (tied weights stay tied)", depends_on=("allocator",))
def _module_to(backend: Backend, result: CheckResult) -> None:
    # torch.nn.Module.to() moves a parameter in place (`param.data = moved`)
    # only where aten::_has_compatible_shallow_copy_type says yes; torch's
    # built-in answer (c10/core/TensorImpl.h) does not know PrivateUse1.
    device = _device(backend, torch.accelerator.current_device_index())
    embedding = torch.nn.Embedding(8, 4)
    head = torch.nn.Linear(4, 8, bias=False)
    head.weight = embedding.weight  # tied, as a language model's output layer and embedding
    weight = embedding.weight
    torch.nn.Sequential(embedding, head).to(device)
    if embedding.weight is not weight or head.weight is not embedding.weight:
        raise CheckFailed(
            f"Module.to({device}) put new Parameter objects in the modules: a weight two modules "
            "shared (a tied embedding and output layer) became two, and an optimizer made before "
            "the move would keep updating the old objects",
            "register a PrivateUse1 kernel for aten::_has_compatible_shallow_copy_type that returns "
            "True for your dense tensors against CPU tensors and your own (torch's built-in answer, "
            "c10/core/TensorImpl.h, does not know PrivateUse1)",
        )
    result.detail = f"a tied weight moved to {device} in place, still one Parameter"


@check("device.synchronize", "torch.accelerator.synchronize() waits for every stream",
       depends_on=("stream.current", "allocator"))
def _synchronize(backend: Backend, result: CheckResult) -> None:
    # torch marks a PrivateUse1 device type initialized only by calling
    # torch.<name>._lazy_init(), and torch 2.11's torch.accelerator.synchronize()
    # returns without calling the guard for a device type not marked so (2.13's
    # does not skip it). A plugin must work on every supported torch, so a
    # missing _lazy_init fails here whatever this torch did; the detail says
    # what this torch did.
    has_lazy_init = callable(getattr(backend.module, "_lazy_init", None))
    lazy_init_fix = (f"define _lazy_init() in the torch.{backend.name} device module (it may do nothing); torch "
                     "calls it on the first device tensor and only then counts the device initialized, which "
                     "torch 2.11's torch.accelerator.synchronize() needs to call the guard at all")
    device = _device(backend, torch.accelerator.current_device_index())
    set_delay = delay_knob(backend)
    if set_delay is None:
        if not has_lazy_init:
            raise CheckFailed(f"torch.{backend.name} has no _lazy_init(); whether this torch's "
                              "torch.accelerator.synchronize() waits was not observed, for want of a delay knob: "
                              + no_delay_knob(backend), lazy_init_fix)
        result.detail = f"_lazy_init present; no delay knob to prove the wait: {no_delay_knob(backend)}"
        return
    side = torch.Stream(device=device)
    work = torch.zeros(1024, device=device)
    torch.accelerator.current_stream(device).synchronize()  # the zeros; the check is below
    set_delay(20_000)
    try:
        with side:
            for _ in range(3):
                work.add_(1.0)
        torch.accelerator.synchronize(device)
        drained = side.query()
    finally:
        set_delay(0)
        side.synchronize()
    if not drained:
        fix = f"synchronizeDevice() in {_GUARD} must wait for every stream of the device"
        if not has_lazy_init:
            fix = lazy_init_fix + "; and " + fix
        raise CheckFailed(
            "torch.accelerator.synchronize() returned while a side stream still had queued work"
            + ("" if has_lazy_init else f" (torch.{backend.name} has no _lazy_init())"), fix)
    if not has_lazy_init:
        raise CheckFailed(
            f"torch.{backend.name} has no _lazy_init(); on this torch ({torch.__version__}) "
            "torch.accelerator.synchronize() waited for 60 ms of queued work on a side stream anyway (delay on)",
            lazy_init_fix)
    result.detail = "waited for 60 ms of queued work on a side stream (delay on)"


@check("stream.ordering", "work on two streams ordered by an event", depends_on=("stream.current", "allocator"))
def _ordering(backend: Backend, result: CheckResult) -> None:
    device = _device(backend, torch.accelerator.current_device_index())
    producer = torch.Stream(device=device)
    consumer = torch.Stream(device=device)
    set_delay = delay_knob(backend)
    source = torch.zeros(1 << 16, device=device)
    # Only stream-level waits here: this check is about events, and
    # torch.accelerator.synchronize() is device.synchronize's subject (torch
    # 2.11 makes it a no-op for a device module without _lazy_init, which
    # must fail that check alone).
    current = torch.accelerator.current_stream(device)
    current.synchronize()

    def run(wait: bool) -> float:
        with producer:
            # Three queued ops: with the delay on, the final value lands ~40 ms
            # after the consumer's single op would run if it did not wait.
            source.fill_(3.0)
            source.add_(4.0)
            source.mul_(1.0)
            done = torch.Event()
            done.record(producer)
        with consumer:
            if wait:
                consumer.wait_event(done)
            seen = source.clone()
        consumer.synchronize()
        producer.synchronize()
        value = float(seen[0].item()) if wait else float(seen.min().item())
        source.zero_()
        current.synchronize()
        return value

    if set_delay is not None:
        set_delay(20_000)  # every queued op sleeps 20 ms first: a missing wait shows
    try:
        ordered = run(wait=True)
        stale = run(wait=False) if set_delay is not None else None
    finally:
        if set_delay is not None:
            set_delay(0)
    if ordered != 7.0:
        raise CheckFailed(
            f"the consumer stream waited on the producer's event but read {ordered}, not 7.0",
            f"record()/block() in {_GUARD} must capture and wait for the producer's queued "
            "work; ops must run on the current stream",
        )
    if stale is None:
        result.detail = f"ordered; no delay knob, so asynchrony itself was not observed: {no_delay_knob(backend)}"
    elif stale == 7.0:
        raise CheckFailed(
            "with a 20 ms delay on every queued op, a consumer that did NOT wait still saw the "
            "producer's write: the streams are not really asynchronous",
            "run queued work asynchronously per stream (the delay knob must apply to queued ops)",
        )
    else:
        result.detail = "ordered with the event; without it the consumer read stale data (delay on)"
