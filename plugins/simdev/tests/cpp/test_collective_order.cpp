// CollectiveOrder (csrc/distributed/CollectiveOrder.h): the program order in
// which simdev's collective backend hands collectives to Gloo. Plain C++, so
// it is tested with the runtime, under ASan/UBSan and TSan.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/CollectiveOrder.h"

namespace {

using torch_simdev::CollectiveOrder;
using namespace std::chrono_literals;

TEST(CollectiveOrder, TicketsFollowTheCalls) {
  CollectiveOrder order;
  EXPECT_EQ(order.take(), 0u);
  EXPECT_EQ(order.take(), 1u);
  EXPECT_EQ(order.turn(), 0u);
  EXPECT_TRUE(order.waitTurn(0, 0ms));
  EXPECT_FALSE(order.waitTurn(1, 10ms));  // ticket 0 has not finished
  order.finish(0);
  EXPECT_TRUE(order.waitTurn(1, 0ms));
  order.finish(1);
  EXPECT_EQ(order.turn(), 2u);
}

TEST(CollectiveOrder, ATicketFinishedEarlyDoesNotLetLaterOnesPass) {
  // A ticket whose work could never be queued is finished at once, before
  // the ones before it ran: the turn still waits for those.
  CollectiveOrder order;
  for (int i = 0; i < 4; ++i) order.take();
  order.finish(2);
  EXPECT_EQ(order.turn(), 0u);
  EXPECT_FALSE(order.waitTurn(3, 10ms));
  order.finish(0);
  EXPECT_EQ(order.turn(), 1u);
  order.finish(1);
  EXPECT_EQ(order.turn(), 3u);  // 1, then the early 2
  EXPECT_TRUE(order.waitTurn(3, 0ms));
}

TEST(CollectiveOrder, WorkersOnManyThreadsEnterInTicketOrder) {
  // Like stream workers: tickets handed out in program order, the work for
  // each running on its own thread, started in reverse; the calls must still
  // happen in ticket order.
  constexpr int kTickets = 64;
  CollectiveOrder order;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < kTickets; ++i) tickets.push_back(order.take());
  std::mutex calls_mutex;
  std::vector<uint64_t> calls;
  std::vector<std::thread> workers;
  for (int i = kTickets - 1; i >= 0; --i) {
    workers.emplace_back([&, ticket = tickets[i]] {
      ASSERT_TRUE(order.waitTurn(ticket, 30s));
      {
        std::lock_guard<std::mutex> lock(calls_mutex);
        calls.push_back(ticket);
      }
      order.finish(ticket);
    });
  }
  for (auto& worker : workers) worker.join();
  ASSERT_EQ(calls.size(), static_cast<size_t>(kTickets));
  for (int i = 0; i < kTickets; ++i) EXPECT_EQ(calls[i], static_cast<uint64_t>(i));
}

TEST(CollectiveOrder, ConcurrentTakersGetDistinctTickets) {
  constexpr int kThreads = 8;
  constexpr int kEach = 200;
  CollectiveOrder order;
  std::vector<std::vector<uint64_t>> taken(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t ticket = order.take();
        taken[t].push_back(ticket);
        ASSERT_TRUE(order.waitTurn(ticket, 30s));
        order.finish(ticket);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<bool> seen(kThreads * kEach, false);
  for (const auto& list : taken)
    for (uint64_t ticket : list) {
      ASSERT_LT(ticket, seen.size());
      EXPECT_FALSE(seen[ticket]);
      seen[ticket] = true;
    }
  EXPECT_EQ(order.turn(), static_cast<uint64_t>(kThreads * kEach));
}

}  // namespace
