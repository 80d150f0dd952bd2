// Stopping a program's poll loops from SIGINT/SIGTERM, or from code.
#pragma once

#include <csignal>

#include <atomic>

namespace spraynet::runtime {

// Installs SIGINT and SIGTERM handlers that set one process-wide flag, cleared on construction;
// the destructor restores the handlers that were there before. Create one per program (or
// test) around the poll loops; lcores poll requested() once per loop.
class StopSignal {
 public:
  StopSignal();
  ~StopSignal();

  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  bool requested() const { return flag_.load(std::memory_order_relaxed); }
  void request() { flag_.store(true, std::memory_order_relaxed); }

 private:
  static void on_signal(int);

  // A signal handler can reach no object, so the flag is the one static in the runtime.
  static std::atomic<bool> flag_;
  static_assert(std::atomic<bool>::is_always_lock_free,
                "the flag is written from a signal handler");

  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace spraynet::runtime
