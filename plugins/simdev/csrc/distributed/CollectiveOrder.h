// The order in which a process enters its collectives.
//
// Gloo (like every collective library) matches the collectives of the ranks
// by the order in which each process calls them: its tag is a counter taken
// at call time, and the header of ProcessGroupGloo says "collectives are
// kicked off in identical order across processes". simdev runs a collective
// on the worker thread of the stream it was issued on, and each stream has
// its own worker, so two collectives issued on two streams would reach Gloo
// in whichever order the workers get there: not the same on every rank.
//
// The host program order is the same on every rank (NCCL asks the same of
// its users), so a collective takes a ticket when it is issued, on the host
// thread, and its stream work waits for its turn before it calls Gloo. The
// calls into Gloo are then serialized, in program order, on every rank; the
// waits for the results still overlap.
//
// It cannot deadlock on its own: the work queued on a stream before ticket n
// depends only on events recorded before n was issued, and so on nothing
// queued after it. A ticket that will never run (its work could not be
// queued) must be finished at once, or every later ticket waits for it.
//
// Plain C++ (no torch), so that its unit test runs under TSan.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace torch_simdev {

class CollectiveOrder {
 public:
  // The next ticket, in the order of the calls.
  uint64_t take();

  // Blocks until every ticket before `ticket` has finished. False when that
  // did not happen within `timeout` (the ticket is then still unfinished).
  bool waitTurn(uint64_t ticket, std::chrono::milliseconds timeout);

  // `ticket` is done with Gloo (or never ran): later tickets may proceed.
  // Called exactly once per ticket, in any order.
  void finish(uint64_t ticket);

  // The first ticket not yet finished (the one whose turn it is).
  uint64_t turn();

 private:
  std::mutex mutex_;
  std::condition_variable turn_changed_;
  uint64_t next_ = 0;             // the next ticket to hand out
  uint64_t turn_ = 0;             // every ticket below it has finished
  std::set<uint64_t> finished_;   // finished tickets above turn_ (finished out of order)
};

}  // namespace torch_simdev
