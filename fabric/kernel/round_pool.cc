#include "fabric/kernel/round_pool.h"

#include <rte_eal.h>
#include <rte_lcore.h>

namespace spraynet::fabric {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins this many times before sleeping: long enough to catch the next round of a busy fabric,
// short enough not to steal a core from a thread that has work when threads outnumber cores.
constexpr int kSpins = 4000;

}  // namespace

RoundPool::RoundPool(uint32_t threads) {
  const uint32_t n = threads == 0 ? 1 : threads;
  // Only threads the EAL knows of get a per-lcore mempool cache; without an EAL there is none.
  const bool eal_up = rte_eal_process_type() != RTE_PROC_INVALID && rte_lcore_count() > 0;
  workers_.reserve(n - 1);
  for (uint32_t i = 1; i < n; ++i) workers_.emplace_back([this, eal_up] { work(eal_up); });
}

RoundPool::~RoundPool() {
  stop_.store(true, std::memory_order_release);
  round_.fetch_add(1, std::memory_order_acq_rel);
  round_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void RoundPool::claim() {
  const std::vector<uint32_t>& items = *items_;
  for (;;) {
    const uint32_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= items.size()) return;
    try {
      (*fn_)(items[i]);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void RoundPool::work(bool eal_up) {
  const bool registered = eal_up && rte_thread_register() == 0;
  // Round 0 is "not started": a worker that starts late still sees the first round as new.
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = round_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpins; ++spin) {
      cpu_relax();
      now = round_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      round_.wait(seen, std::memory_order_acquire);
      now = round_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) break;
    claim();
    busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (registered) rte_thread_unregister();
}

void RoundPool::run(const std::vector<uint32_t>& items, const std::function<void(uint32_t)>& fn) {
  if (items.empty()) return;
  items_ = &items;
  fn_ = &fn;
  next_.store(0, std::memory_order_relaxed);
  // One item needs no second thread: the workers stay where they are.
  const bool parallel = !workers_.empty() && items.size() > 1;
  if (parallel) {
    busy_.store(static_cast<uint32_t>(workers_.size()), std::memory_order_relaxed);
    round_.fetch_add(1, std::memory_order_acq_rel);
    round_.notify_all();
  }
  claim();
  if (parallel) {
    for (int spin = 0; busy_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin < kSpins) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
  items_ = nullptr;
  fn_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace spraynet::fabric
