/*!
 * \file simdev_submit_hook.cc
 * \brief A plugin-style submit hook for the launcher tests: launches handed to
 *  it go into a host task queue that a worker thread of its own drains, as
 *  torch_npu's task queue does. Compiled at test time (plain C++, no torch).
 *
 * Exported (extern "C"):
 *   hook_submit           the DevbridgeSubmitFn to register
 *   hook_hold(int)        1: the worker stops taking tasks; 0: it resumes
 *   hook_refuse(int)      1: hook_submit returns -1 (does not take the launch)
 *   hook_drain()          waits until every taken task has run
 *   hook_submitted(), hook_ran(), hook_failed()   counters
 *   hook_ran_on_worker()  1 if every task ran on the worker thread
 */
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Task {
  int (*run)(void*, void*);
  void* ctx;
  void* stream;
};

struct Queue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Task> tasks;
  bool hold = false;
  bool refuse = false;
  int running = 0;
  long submitted = 0, ran = 0, failed = 0;
  bool all_on_worker = true;
  std::thread::id worker_id;

  Queue() {
    std::thread worker([this] { Work(); });
    worker_id = worker.get_id();
    worker.detach();  // lives as long as the process
  }

  void Work() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [this] { return !hold && !tasks.empty(); });
      Task task = tasks.front();
      tasks.pop_front();
      ++running;
      lock.unlock();
      const int status = task.run(task.ctx, task.stream);
      const bool on_worker = std::this_thread::get_id() == worker_id;
      lock.lock();
      --running;
      ++ran;
      if (status != 0) ++failed;
      if (!on_worker) all_on_worker = false;
      changed.notify_all();
    }
  }
};

Queue& TheQueue() {
  static Queue* queue = new Queue();
  return *queue;
}

}  // namespace

EXPORT int hook_submit(int32_t, int32_t, void* stream, int (*run)(void*, void*), void* ctx) {
  Queue& q = TheQueue();
  std::lock_guard<std::mutex> lock(q.mutex);
  if (q.refuse) return -1;
  q.tasks.push_back(Task{run, ctx, stream});
  ++q.submitted;
  q.changed.notify_all();
  return 0;
}

EXPORT void hook_hold(int hold) {
  Queue& q = TheQueue();
  std::lock_guard<std::mutex> lock(q.mutex);
  q.hold = hold != 0;
  q.changed.notify_all();
}

EXPORT void hook_refuse(int refuse) {
  Queue& q = TheQueue();
  std::lock_guard<std::mutex> lock(q.mutex);
  q.refuse = refuse != 0;
}

EXPORT void hook_drain() {
  Queue& q = TheQueue();
  std::unique_lock<std::mutex> lock(q.mutex);
  q.changed.wait(lock, [&q] { return q.tasks.empty() && q.running == 0; });
}

EXPORT long hook_submitted() { std::lock_guard<std::mutex> l(TheQueue().mutex); return TheQueue().submitted; }
EXPORT long hook_ran() { std::lock_guard<std::mutex> l(TheQueue().mutex); return TheQueue().ran; }
EXPORT long hook_failed() { std::lock_guard<std::mutex> l(TheQueue().mutex); return TheQueue().failed; }
EXPORT int hook_ran_on_worker() { std::lock_guard<std::mutex> l(TheQueue().mutex); return TheQueue().all_on_worker; }
