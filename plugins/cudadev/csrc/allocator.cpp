#include "allocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "device.h"
#include "graphs.h"
#include "streams.h"

namespace cudadev {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;
constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// The context of a DataPtr for memory this allocator obtained itself.
struct Block {
  void* ptr;
  size_t size;    // bytes obtained from the pool (the request rounded up)
  size_t nbytes;  // bytes the tensor asked for, for the stats
  c10::DeviceIndex device;
  cudaStream_t allocation_stream;
  // Whether a freed block may wait in the cache for its stream: only
  // cudadev's own streams live as long as the process; an external stream's
  // creator may destroy it while the block waits.
  bool cacheable;
  // Other streams the memory was used on (record_stream); guarded by the
  // device's mutex.
  std::vector<cudaStream_t> used_on;
};

// Requests are rounded up so that buffers of nearly the same size (Inductor's
// per-step temporaries vary by a few elements between kernels) share cached
// blocks.
constexpr size_t kRoundBytes = 512;
// A cached block serves a request up to this fraction larger than it.
constexpr size_t kMaxWasteDivisor = 4;

size_t rounded_size(size_t nbytes) { return (nbytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes; }

// The caching front (on unless CUDADEV_ALLOCATOR_CACHE=0, read once).
//
// Why: every cudaMallocFromPoolAsync / cudaFreeAsync pair costs about 5 us
// of host time. A compiled training step allocates tens of buffers, which
// torch.cuda's caching allocator serves from its free lists without a CUDA
// call; without a cache cudadev paid the CUDA calls on every step.
//
// How it stays stream-ordered: a block freed with no use recorded on other
// streams goes to the free list of its allocation stream, and only an
// allocation on that same stream takes it back. Work queued on one stream
// runs in order, so the new user's work starts after the old user's work
// ended -- the rule torch.cuda's caching allocator relies on. Blocks used on
// other streams (record_stream) are freed to the pool as before, ordered
// after all of those streams.
bool cache_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("CUDADEV_ALLOCATOR_CACHE");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

// The context of a DataPtr for adopted torch.cuda memory.
struct AdoptedStorage {
  c10::Storage cuda_storage;
  size_t nbytes;
  c10::DeviceIndex device;
};

struct DeviceState {
  std::mutex mutex;
  c10::CachingDeviceAllocator::DeviceStats stats;
  std::once_flag pool_created;
  cudaMemPool_t pool = nullptr;
  // Freed blocks waiting for reuse, per allocation stream, by size.
  std::unordered_map<cudaStream_t, std::multimap<size_t, Block*>> cached;
  // Frees parked while a stream they must be ordered on captures (see
  // return_to_pool), with the streams they were used on.
  std::vector<std::pair<Block*, std::vector<cudaStream_t>>> parked;
};

// Leaked on purpose (see streams.cpp): frees can arrive during shutdown.
DeviceState& state(c10::DeviceIndex idx) {
  static auto* all = new std::array<DeviceState, kMaxDevices>();
  return (*all)[idx];
}

// cudadev's own pool rather than the device's default pool, so that its
// settings (keep freed memory cached) do not change anybody else's
// cudaMallocAsync behaviour.
cudaMemPool_t pool_of(c10::DeviceIndex idx) {
  DeviceState& s = state(idx);
  std::call_once(s.pool_created, [&s, idx] {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = idx;
    cudaMemPool_t pool = nullptr;
    CUDADEV_CHECK(cudaMemPoolCreate(&pool, &props));
    // Keep freed memory in the pool instead of returning it to the driver at
    // every synchronisation; empty_cache() trims it.
    uint64_t keep_everything = std::numeric_limits<uint64_t>::max();
    CUDADEV_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    // Pool memory is visible to its own device only unless the pool says
    // otherwise; let every peer-capable GPU read and write it, so that copies
    // between cudadev devices can go GPU to GPU.
    std::vector<cudaMemAccessDesc> peers;
    for (int other = 0; other < device_count(); ++other) {
      int can_access = 0;
      if (other != idx && cudaDeviceCanAccessPeer(&can_access, other, idx) == cudaSuccess &&
          can_access) {
        cudaMemAccessDesc desc{};
        desc.location.type = cudaMemLocationTypeDevice;
        desc.location.id = other;
        desc.flags = cudaMemAccessFlagsProtReadWrite;
        peers.push_back(desc);
      }
      (void)cudaGetLastError();
    }
    if (!peers.empty()) {
      CUDADEV_CHECK(cudaMemPoolSetAccess(pool, peers.data(), peers.size()));
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    s.pool = pool;
  });
  return s.pool;
}

// Stats of a tensor's memory coming into use (`size` bytes held for a
// request of `nbytes`). Caller holds the device's mutex.
void count_allocation(DeviceState& s, size_t size, size_t nbytes) {
  s.stats.allocation[kAll].increase(1);
  s.stats.active[kAll].increase(1);
  s.stats.allocated_bytes[kAll].increase(size);
  s.stats.active_bytes[kAll].increase(size);
  s.stats.requested_bytes[kAll].increase(nbytes);
}

void count_release(DeviceState& s, size_t size, size_t nbytes) {
  s.stats.allocation[kAll].decrease(1);
  s.stats.active[kAll].decrease(1);
  s.stats.allocated_bytes[kAll].decrease(size);
  s.stats.active_bytes[kAll].decrease(size);
  s.stats.requested_bytes[kAll].decrease(nbytes);
}

// A cached block of at least `size` bytes, and not much more, freed on
// `stream`; nullptr if none. Caller holds the device's mutex.
Block* take_cached(DeviceState& s, cudaStream_t stream, size_t size) {
  auto list = s.cached.find(stream);
  if (list == s.cached.end()) {
    return nullptr;
  }
  auto it = list->second.lower_bound(size);
  if (it == list->second.end() || it->first - size > size / kMaxWasteDivisor) {
    return nullptr;
  }
  Block* block = it->second;
  list->second.erase(it);
  return block;
}

std::string format_bytes(size_t nbytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  constexpr double kMiB = 1024.0 * 1024.0;
  char text[64];
  if (static_cast<double>(nbytes) >= kGiB) {
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(nbytes) / kGiB);
  } else {
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(nbytes) / kMiB);
  }
  return text;
}

void report(const char* what, cudaError_t status) noexcept {
  (void)cudaGetLastError();
  // At interpreter shutdown the CUDA runtime may already be gone; the memory
  // goes with the process, so that is not worth a message.
  if (status == cudaErrorCudartUnloading || status == cudaErrorContextIsDestroyed) {
    return;
  }
  std::fprintf(stderr, "cudadev: %s failed while freeing device memory: %s\n", what,
               cudaGetErrorString(status));
}

void return_to_pool(Block* block, std::vector<cudaStream_t> used_on) noexcept;

// Deleter of own blocks. Runs whenever the last tensor using the memory dies,
// on any thread, and must not throw. A block used on its allocation stream
// only waits in that stream's free list (see cache_enabled); any other goes
// back to the pool.

void free_block(void* context) noexcept {
  auto* block = static_cast<Block*>(context);
  std::vector<cudaStream_t> used_on;
  {
    DeviceState& s = state(block->device);
    std::lock_guard<std::mutex> lock(s.mutex);
    used_on.swap(block->used_on);
    count_release(s, block->size, block->nbytes);
    if (used_on.empty() && block->cacheable && cache_enabled()) {
      try {
        s.cached[block->allocation_stream].emplace(block->size, block);
        return;
      } catch (const std::bad_alloc&) {
        // No host memory for the list entry: free the block instead.
      }
    }
  }
  return_to_pool(block, std::move(used_on));
}

// Frees `block` to its pool with cudaFreeAsync, ordered after its allocation
// stream and every stream in `used_on`, and deletes it.
//
// Stream order: cudaFreeAsync makes the memory reusable only when the GPU
// reaches the free. Used on one stream only, the free goes on the allocation
// stream right behind the work that used it. Recorded on other streams too,
// the free goes on the device's release stream after it has waited for every
// one of them; freeing on the allocation stream instead would make that
// stream wait for the others, a false dependency for the work queued after it.
void return_to_pool(Block* block, std::vector<cudaStream_t> used_on) noexcept {
  // A stream-ordered free on a capturing stream, or a wait for one, would be
  // recorded into the capture instead of run: park it until the capture ends.
  if (any_capture_in_progress()) {  // spares the per-stream queries when nothing captures
    bool capturing = stream_is_capturing(block->allocation_stream);
    for (cudaStream_t stream : used_on) {
      capturing = capturing || stream_is_capturing(stream);
    }
    if (capturing) {
      DeviceState& s = state(block->device);
      std::lock_guard<std::mutex> lock(s.mutex);
      try {
        s.parked.emplace_back(block, std::move(used_on));
        return;
      } catch (const std::bad_alloc&) {
        // No host memory to park it: leak the block rather than corrupt the capture.
        return;
      }
    }
  }
  {
    DeviceState& s = state(block->device);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats.num_device_free += 1;
  }
  const int previous = exchange_device_noexcept(block->device);
  cudaStream_t free_on = block->allocation_stream;
  if (!used_on.empty()) {
    try {
      const cudaStream_t release = release_stream(block->device);
      stream_wait_stream(release, block->allocation_stream);
      for (cudaStream_t stream : used_on) {
        stream_wait_stream(release, stream);
      }
      free_on = release;
    } catch (const std::exception& e) {
      // Could not order the free after the other streams: wait for the whole
      // device instead, which is always safe.
      std::fprintf(stderr, "cudadev: %s; synchronizing the device before a free\n", e.what());
      (void)cudaDeviceSynchronize();
      (void)cudaGetLastError();
    }
  }
  const cudaError_t status = cudaFreeAsync(block->ptr, free_on);
  if (status != cudaSuccess) {
    report("cudaFreeAsync", status);
  }
  if (previous >= 0) {
    (void)exchange_device_noexcept(previous);
  }
  delete block;
}

// Frees every cached block of device `idx` to its pool (stream-ordered).
void release_cached(c10::DeviceIndex idx) {
  std::vector<Block*> blocks;
  {
    DeviceState& s = state(idx);
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [stream, list] : s.cached) {
      for (auto& [size, block] : list) {
        blocks.push_back(block);
      }
    }
    s.cached.clear();
  }
  for (Block* block : blocks) {
    return_to_pool(block, {});
  }
}

// Gives the frees parked during captures on device `idx` to the pool.
void release_parked(c10::DeviceIndex idx) noexcept {
  std::vector<std::pair<Block*, std::vector<cudaStream_t>>> parked;
  {
    DeviceState& s = state(idx);
    std::lock_guard<std::mutex> lock(s.mutex);
    parked.swap(s.parked);
  }
  for (auto& [block, used_on] : parked) {
    return_to_pool(block, std::move(used_on));  // parks again any whose stream still captures
  }
}

// Deleter of adopted torch.cuda storages: dropping the reference hands the
// memory back to torch's CUDA caching allocator, stream-ordered there.
void release_adopted(void* context) noexcept {
  auto* adopted = static_cast<AdoptedStorage*>(context);
  {
    DeviceState& s = state(adopted->device);
    std::lock_guard<std::mutex> lock(s.mutex);
    count_release(s, adopted->nbytes, adopted->nbytes);
  }
  delete adopted;
}

[[noreturn]] void raise_out_of_memory(c10::DeviceIndex idx, size_t nbytes) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  size_t held = 0;
  {
    DeviceState& s = state(idx);
    std::lock_guard<std::mutex> lock(s.mutex);
    held = static_cast<size_t>(s.stats.allocated_bytes[kAll].current);
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "cudadev: out of memory on cudadev:",
                   static_cast<int>(idx), " allocating ", format_bytes(nbytes), " (", nbytes,
                   " bytes). cudadev tensors hold ", format_bytes(held), "; the GPU has ",
                   format_bytes(free_bytes), " free of ", format_bytes(total_bytes),
                   ". Free tensors you no longer need (del), call torch.cudadev.empty_cache() "
                   "and torch.cuda.empty_cache() (cudadev shares the GPU with torch.cuda's "
                   "caching allocator), or work on smaller tensors.");
}

// An allocation on a capturing stream: torch's CUDA caching allocator, with
// the stream current, serves it from the private pool of the capture
// (at::cuda::CUDAGraph routes the capturing stream there), which keeps the
// memory for the graph's replays until the graph is destroyed.
c10::DataPtr allocate_for_capture(c10::DeviceIndex idx, cudaStream_t stream, size_t nbytes) {
  c10::cuda::CUDAStreamGuard on(c10::cuda::getStreamFromExternal(stream, idx));
  c10::DataPtr memory = c10::cuda::CUDACachingAllocator::get()->allocate(nbytes);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(memory), /*allocator=*/nullptr,
                       /*resizable=*/false);
  return allocator().adopt_cuda_storage(std::move(storage), idx);
}

}  // namespace

c10::DataPtr CudadevAllocator::allocate(size_t nbytes) {
  const c10::DeviceIndex idx = current_device();
  check_device_index(idx);
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, c10::Device(kType, idx));
  }
  const c10::Stream current = current_stream(idx);
  const cudaStream_t stream = native_stream(current);
  const size_t size = rounded_size(nbytes);
  if (C10_UNLIKELY(stream_is_capturing(stream))) {
    return allocate_for_capture(idx, stream, nbytes);
  }
  DeviceState& s = state(idx);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (Block* block = take_cached(s, stream, size)) {
      block->nbytes = nbytes;
      count_allocation(s, block->size, nbytes);
      return c10::DataPtr(block->ptr, block, &free_block, c10::Device(kType, idx));
    }
  }
  const cudaMemPool_t pool = pool_of(idx);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&ptr, size, pool, stream);
  if (status == cudaErrorMemoryAllocation) {
    // Memory waiting in the cache, and frees still queued on busy streams,
    // become reusable once given back and reached by the GPU: do both once,
    // then try again.
    (void)cudaGetLastError();
    release_cached(idx);
    CUDADEV_CHECK(cudaDeviceSynchronize());
    status = cudaMallocFromPoolAsync(&ptr, size, pool, stream);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.stats.num_ooms += 1;
    }
    raise_out_of_memory(idx, nbytes);
  }
  CUDADEV_CHECK(status);
  const bool own_stream = (current.id() & kExternalStreamTag) == 0;
  auto* block = new Block{ptr, size, nbytes, idx, stream, own_stream, {}};
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats.num_device_alloc += 1;
    count_allocation(s, size, nbytes);
  }
  return c10::DataPtr(ptr, block, &free_block, c10::Device(kType, idx));
}

void CudadevAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  if (count == 0) {
    return;
  }
  CUDADEV_CHECK(cudaMemcpyAsync(dest, src, count, cudaMemcpyDeviceToDevice,
                                current_native_stream(-1)));
}

void CudadevAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  for (c10::DeviceIndex idx = 0; idx < device_count(); ++idx) {
    DeviceState& s = state(idx);
    cudaMemPool_t pool = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      pool = s.pool;
    }
    if (pool == nullptr) {
      continue;  // never allocated on this device
    }
    ScopedDevice on(idx);
    release_cached(idx);
    // Pending frees return their memory to the pool only when the GPU
    // reaches them; after that, give everything unused back to the driver.
    CUDADEV_CHECK(cudaDeviceSynchronize());
    CUDADEV_CHECK(cudaMemPoolTrimTo(pool, 0));
  }
}

void CudadevAllocator::recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) {
  if (data_ptr.get() == nullptr) {
    return;  // empty tensors own no memory
  }
  const cudaStream_t native = native_stream(stream);  // validates the stream
  if (auto* block = data_ptr.cast_context<Block>(&free_block)) {
    TORCH_CHECK(stream.device_index() == block->device, "cudadev: record_stream got a stream of cudadev:",
                static_cast<int>(stream.device_index()), " for memory on cudadev:",
                static_cast<int>(block->device), "; use a stream of the tensor's device.");
    if (native == block->allocation_stream) {
      return;
    }
    std::lock_guard<std::mutex> lock(state(block->device).mutex);
    if (std::find(block->used_on.begin(), block->used_on.end(), native) == block->used_on.end()) {
      block->used_on.push_back(native);
    }
    return;
  }
  if (auto* adopted = data_ptr.cast_context<AdoptedStorage>(&release_adopted)) {
    TORCH_CHECK(stream.device_index() == adopted->device, "cudadev: record_stream got a stream of cudadev:",
                static_cast<int>(stream.device_index()), " for memory on cudadev:",
                static_cast<int>(adopted->device), "; use a stream of the tensor's device.");
    // torch's caching allocator owns this memory: tell it, with the cudadev
    // stream presented as an external CUDA stream.
    c10::cuda::CUDACachingAllocator::recordStream(
        adopted->cuda_storage.data_ptr(), c10::cuda::getStreamFromExternal(native, adopted->device));
  }
  // Any other memory (e.g. from_blob over foreign memory) is not ours to track.
}

c10::CachingDeviceAllocator::DeviceStats CudadevAllocator::getDeviceStats(c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& s = state(device);
  c10::CachingDeviceAllocator::DeviceStats stats;
  cudaMemPool_t pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stats = s.stats;
    pool = s.pool;
  }
  if (pool != nullptr) {
    // "Reserved" is what cudadev's pool holds from the driver, used or not.
    uint64_t current = 0;
    uint64_t high = 0;
    CUDADEV_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &current));
    CUDADEV_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
    stats.reserved_bytes[kAll].current = static_cast<int64_t>(current);
    stats.reserved_bytes[kAll].peak = static_cast<int64_t>(high);
  }
  return stats;
}

void CudadevAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto* array : {&s.stats.allocation, &s.stats.active, &s.stats.allocated_bytes,
                      &s.stats.active_bytes, &s.stats.requested_bytes}) {
    for (auto& stat : *array) {
      stat.reset_accumulated();
    }
  }
  s.stats.num_ooms = 0;
  s.stats.num_device_alloc = 0;
  s.stats.num_device_free = 0;
}

void CudadevAllocator::resetPeakStats(c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto* array : {&s.stats.allocation, &s.stats.active, &s.stats.allocated_bytes,
                      &s.stats.active_bytes, &s.stats.requested_bytes}) {
    for (auto& stat : *array) {
      stat.reset_peak();
    }
  }
  if (s.pool != nullptr) {
    uint64_t zero = 0;
    CUDADEV_CHECK(cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReservedMemHigh, &zero));
  }
}

std::pair<size_t, size_t> CudadevAllocator::getMemoryInfo(c10::DeviceIndex device) {
  ScopedDevice on(resolve_device_index(device));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDADEV_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

c10::DataPtr CudadevAllocator::adopt_cuda_storage(c10::Storage cuda_storage, c10::DeviceIndex device) {
  TORCH_INTERNAL_ASSERT(cuda_storage.device_type() == c10::DeviceType::CUDA,
                        "cudadev: adopt_cuda_storage expects torch.cuda memory");
  void* data = cuda_storage.mutable_data();
  const size_t nbytes = cuda_storage.nbytes();
  auto* adopted = new AdoptedStorage{std::move(cuda_storage), nbytes, device};
  {
    DeviceState& s = state(device);
    std::lock_guard<std::mutex> lock(s.mutex);
    count_allocation(s, nbytes, nbytes);
  }
  return c10::DataPtr(data, adopted, &release_adopted, c10::Device(kType, device));
}

void CudadevAllocator::release_parked_frees(c10::DeviceIndex device) { release_parked(device); }

bool CudadevAllocator::owns(const c10::DataPtr& data_ptr) const {
  return data_ptr.get_deleter() == &free_block || data_ptr.get_deleter() == &release_adopted;
}

CudadevAllocator& allocator() {
  // Leaked so that frees during shutdown still find it.
  static auto* instance = new CudadevAllocator();
  return *instance;
}

namespace {
// Registers at load time, before any PrivateUse1 tensor can exist.
const bool registered = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator());
  return true;
}();
}  // namespace

}  // namespace cudadev
