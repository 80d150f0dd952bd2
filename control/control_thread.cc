#include "control/control_thread.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "control/control_loop.h"
#include "dataplane/runtime/logging.h"

namespace spraynet::control {

ControlThread::ControlThread(ControlLoop& loop, std::mutex& control_lock,
                             std::function<uint64_t()> now_ns, uint64_t max_wait_ns,
                             const cpu_set_t* cpus)
    : loop_(loop),
      control_lock_(control_lock),
      now_ns_(std::move(now_ns)),
      max_wait_ns_(std::max<uint64_t>(max_wait_ns, 1'000)) {
  thread_ = std::thread([this] { run(); });
  pthread_setname_np(thread_.native_handle(), "spraynet-ctl");
  if (cpus != nullptr && pthread_setaffinity_np(thread_.native_handle(), sizeof *cpus, cpus) != 0) {
    if (auto log = runtime::logger("control")) log->warn("control thread: cannot set its CPUs");
  }
}

ControlThread::~ControlThread() {
  stop();
}

void ControlThread::stop() {
  {
    std::lock_guard<std::mutex> g(wait_lock_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ControlThread::run() {
  auto log = runtime::logger("control");
  for (;;) {
    // One clock read per pass: the tick takes microseconds, far below any period.
    const uint64_t now = now_ns_();
    uint64_t next;
    {
      std::lock_guard<std::mutex> g(control_lock_);
      try {
        if (loop_.tick(now)) ticks_.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        if (log) log->error("control tick failed: {}", e.what());
      }
      next = loop_.next_event_ns();
    }
    const uint64_t wait = next > now ? std::min(next - now, max_wait_ns_) : 0;
    std::unique_lock<std::mutex> l(wait_lock_);
    if (stopping_) return;
    if (wait > 0) {
      wake_.wait_for(l, std::chrono::nanoseconds(wait), [this] { return stopping_; });
      if (stopping_) return;
    }
  }
}

}  // namespace spraynet::control
