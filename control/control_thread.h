// The process's control thread (never a polling lcore): runs a ControlLoop on wall-clock time.
// Whenever the clock reaches the loop's next period boundary it calls tick() holding the
// control lock, which telemetry commands take too, so run-time changes (link down, TCAM, group
// modes) and periodic reweighting never interleave. Between boundaries it waits on a condition
// variable, so stop() is prompt.
//
// The clock is handed in (the program passes TSC time): control owns periodic work, runtime
// owns the clock. Virtual-time drivers (fabric_emu, tests) call ControlLoop::tick themselves
// and need no thread.
#pragma once

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace spraynet::control {

class ControlLoop;

class ControlThread {
 public:
  // Starts the thread. `loop` and `control_lock` must outlive this object. `max_wait_ns` bounds
  // one wait, so a clock that drifts from the steady clock is re-read often enough.
  // `cpus` (may be null: where the creating thread may run) pins it, e.g. to EAL's control CPUs.
  ControlThread(ControlLoop& loop, std::mutex& control_lock, std::function<uint64_t()> now_ns,
                uint64_t max_wait_ns = 10'000'000, const cpu_set_t* cpus = nullptr);
  ~ControlThread();  // stop()
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;

  // Stops and joins the thread; idempotent.
  void stop();
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
  // Exceptions thrown by tick() (logged; the thread keeps running).
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  void run();

  ControlLoop& loop_;
  std::mutex& control_lock_;
  std::function<uint64_t()> now_ns_;
  uint64_t max_wait_ns_;
  std::mutex wait_lock_;
  std::condition_variable wake_;
  bool stopping_ = false;  // under wait_lock_
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> errors_{0};
  std::thread thread_;
};

}  // namespace spraynet::control
