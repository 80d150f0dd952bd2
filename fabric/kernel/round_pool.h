// The threads that run fabric_emu's logical processes: the caller's and threads - 1 workers,
// which wait between rounds. run() hands them a list of items (LP indices), each claimed once in
// list order by whichever thread is free, and returns when every item is done. What an item
// does must not depend on which thread runs it: the fabric's results do not depend on N.
//
// Workers spin briefly for the next round (rounds come every few microseconds of wall time in a
// busy fabric), then sleep on the round counter. Each registers with the EAL when it is up
// (rte_thread_register), so that the mempools' per-lcore caches serve it; when it cannot (no
// EAL, no free lcore id), it allocates from the pool's ring directly, which is only slower.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spraynet::fabric {

class RoundPool {
 public:
  // threads: 1 or more (0 is taken as 1).
  explicit RoundPool(uint32_t threads);
  ~RoundPool();
  RoundPool(const RoundPool&) = delete;
  RoundPool& operator=(const RoundPool&) = delete;

  // Calls fn(item) once for every item, on the pool's threads; returns when all are done.
  // The first exception an item throws is rethrown here (the other items still run).
  void run(const std::vector<uint32_t>& items, const std::function<void(uint32_t)>& fn);

  uint32_t threads() const { return static_cast<uint32_t>(workers_.size()) + 1; }

 private:
  void work(bool registered);
  void claim();

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> round_{0};
  std::atomic<uint32_t> next_{0};
  std::atomic<uint32_t> busy_{0};  // workers still in the current round
  std::atomic<bool> stop_{false};
  const std::vector<uint32_t>* items_ = nullptr;
  const std::function<void(uint32_t)>* fn_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace spraynet::fabric
