#include "Runtime.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <exception>

namespace hostplug {

Stream::Stream(c10::DeviceIndex device, c10::StreamId id)
    : device_(device), id_(id), worker_([this] { workerMain(); }) {
  worker_.detach();  // never joined: streams outlive every user (see Runtime.h)
}

void Stream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    ++queued_;
  }
  work_ready_.notify_one();
}

void Stream::workerMain() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [this] { return !queue_.empty(); });
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string failure;
    try {
      task();
    } catch (const c10::Error& e) {
      failure = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    task = nullptr;  // drop what the task held (storages) before reporting it done
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure.empty() && failure_.empty()) failure_ = failure;
      ++finished_;
    }
    work_done_.notify_all();
  }
}

void Stream::synchronize() {
  std::string failure;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = queued_;
    work_done_.wait(lock, [&] { return finished_ >= target; });
    failure.swap(failure_);
  }
  TORCH_CHECK(failure.empty(), "hostplug: an operation queued on hostplug:", static_cast<int>(device_),
              " (stream ", id_, ") failed: ", failure);
}

bool Stream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ == queued_;
}

namespace {

struct DeviceStreams {
  std::mutex mutex;  // guards creation only; lookups read the atomics
  std::array<std::atomic<Stream*>, kMaxStreams + 1> streams{};
  std::atomic<int64_t> next{0};
};

DeviceStreams& streamsOf(c10::DeviceIndex device) {
  static std::array<DeviceStreams, kDeviceCount> all;
  checkDevice(device);
  return all[device];
}

thread_local c10::DeviceIndex current_device = 0;
thread_local std::array<c10::StreamId, kDeviceCount> current_streams{};
std::atomic<int64_t> op_delay_us{0};

}  // namespace

void checkDevice(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < kDeviceCount, "hostplug has ", static_cast<int>(kDeviceCount),
              " devices (hostplug:0 and hostplug:1); device index ", static_cast<int>(device), " is out of range");
}

Stream& stream(c10::DeviceIndex device, c10::StreamId id) {
  DeviceStreams& streams = streamsOf(device);
  TORCH_CHECK(id >= 0 && id <= kMaxStreams, "hostplug: unknown stream id ", id);
  Stream* found = streams.streams[id].load(std::memory_order_acquire);
  if (found != nullptr) return *found;
  std::lock_guard<std::mutex> lock(streams.mutex);
  found = streams.streams[id].load(std::memory_order_relaxed);
  if (found == nullptr) {
    found = new Stream(device, id);  // lives for the process
    streams.streams[id].store(found, std::memory_order_release);
  }
  return *found;
}

c10::StreamId newStreamId(c10::DeviceIndex device) {
  return 1 + streamsOf(device).next.fetch_add(1) % kMaxStreams;
}

c10::DeviceIndex currentDevice() { return current_device; }

void setCurrentDevice(c10::DeviceIndex device) {
  checkDevice(device);
  current_device = device;
}

Stream& currentStream(c10::DeviceIndex device) {
  checkDevice(device);
  return stream(device, current_streams[device]);
}

void setCurrentStream(c10::DeviceIndex device, c10::StreamId id) {
  stream(device, id);  // validates
  current_streams[device] = id;
}

void synchronizeDevice(c10::DeviceIndex device) {
  DeviceStreams& streams = streamsOf(device);
  for (auto& slot : streams.streams) {
    if (Stream* s = slot.load(std::memory_order_acquire)) s->synchronize();
  }
}

void setOpDelayUs(int64_t us) {
  TORCH_CHECK(us >= 0, "set_op_delay_us: expected microseconds >= 0, got ", us);
  op_delay_us.store(us);
}

int64_t opDelayUs() { return op_delay_us.load(); }

void enqueueOperator(c10::DeviceIndex device, std::function<void()> op) {
  const int64_t delay = opDelayUs();
  if (delay == 0) {
    currentStream(device).enqueue(std::move(op));
    return;
  }
  currentStream(device).enqueue([delay, op = std::move(op)] {
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    op();
  });
}

std::shared_ptr<Marker> recordMarker(Stream& s) {
  auto marker = std::make_shared<Marker>();
  s.enqueue([marker] {
    {
      std::lock_guard<std::mutex> lock(marker->mutex);
      marker->done = true;
      marker->when = std::chrono::steady_clock::now();
    }
    marker->reached.notify_all();
  });
  return marker;
}

void waitForMarker(Stream& s, std::shared_ptr<Marker> marker) {
  s.enqueue([marker = std::move(marker)] { marker->wait(); });
}

void Marker::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  reached.wait(lock, [this] { return done; });
}

}  // namespace hostplug
