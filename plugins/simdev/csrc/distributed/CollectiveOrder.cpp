#include "distributed/CollectiveOrder.h"

namespace torch_simdev {

uint64_t CollectiveOrder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_++;
}

bool CollectiveOrder::waitTurn(uint64_t ticket, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return turn_changed_.wait_for(lock, timeout, [&] { return turn_ >= ticket; });
}

void CollectiveOrder::finish(uint64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ticket != turn_) {
      finished_.insert(ticket);
      return;
    }
    ++turn_;
    while (!finished_.empty() && *finished_.begin() == turn_) {
      finished_.erase(finished_.begin());
      ++turn_;
    }
  }
  turn_changed_.notify_all();
}

uint64_t CollectiveOrder::turn() {
  std::lock_guard<std::mutex> lock(mutex_);
  return turn_;
}

}  // namespace torch_simdev
