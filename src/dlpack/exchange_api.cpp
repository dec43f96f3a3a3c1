// The static DLPackExchangeAPI table and the delegate (PyTorch's table).
#include <atomic>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/error.h"
#include "dlpack/entry_points.h"

namespace devbridge {
namespace {

DLPackExchangeAPI MakeExchangeAPI() {
  DLPackExchangeAPI api{};
  // Exactly the header's version: consumers (tvm-ffi's tests) compare it with
  // their own compiled DLPack macros.
  api.header.version.major = DLPACK_MAJOR_VERSION;
  api.header.version.minor = DLPACK_MINOR_VERSION;
  api.header.prev_api = nullptr;  // no older API version is served
  api.managed_tensor_allocator = &dlpack_entry::ManagedTensorAllocator;
  api.managed_tensor_from_py_object_no_sync = &dlpack_entry::ManagedTensorFromPyObjectNoSync;
  api.managed_tensor_to_py_object_no_sync = &dlpack_entry::ManagedTensorToPyObjectNoSync;
  api.dltensor_from_py_object_no_sync = &dlpack_entry::DLTensorFromPyObjectNoSync;
  api.current_work_stream = &dlpack_entry::CurrentWorkStream;
  return api;
}

std::atomic<const DLPackExchangeAPI*> g_delegate{nullptr};

}  // namespace

const DLPackExchangeAPI* ExchangeAPI() noexcept {
  static const DLPackExchangeAPI api = MakeExchangeAPI();
  return &api;
}

void SetDelegateExchangeAPI(const DLPackExchangeAPI* api) {
  if (api == ExchangeAPI()) {
    throw Error(ErrorKind::kValue,
                "devbridge: cannot delegate to devbridge's own exchange table (it would call "
                "itself); pass the table that was installed before devbridge's");
  }
  if (api != nullptr && api->header.version.major != DLPACK_MAJOR_VERSION) {
    throw Error(ErrorKind::kValue,
                "devbridge: the previous exchange table has DLPack major version " +
                    std::to_string(api->header.version.major) + ", devbridge speaks " +
                    std::to_string(DLPACK_MAJOR_VERSION));
  }
  if (api != nullptr && api->current_work_stream == nullptr) {
    throw Error(ErrorKind::kValue,
                "devbridge: the previous exchange table has no current_work_stream");
  }
  g_delegate.store(api, std::memory_order_release);
}

const DLPackExchangeAPI* DelegateExchangeAPI() noexcept {
  return g_delegate.load(std::memory_order_acquire);
}

}  // namespace devbridge
