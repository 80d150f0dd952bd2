// One RCU domain (DPDK's rte_rcu_qsbr, quiescent-state based) shared by a process's poll-mode
// lcores, the readers, and its control thread, the writer.
//
// Readers never lock: a poll loop reports a quiescent state once per iteration, at a point where
// it holds no reference to a published table. The writer publishes a new table with one atomic
// store, calls synchronize() — which returns once every online reader has passed a quiescent
// state after the call, so no reader can still be looking at the old table — and only then
// frees the old one. A reader that goes offline (a loop that stopped) is not waited for.
//
// Lives in runtime/ because readers are lcores, which only runtime/ owns; control/ uses it as
// the writer (control/table_publisher.h).
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace spraynet::runtime {

class RcuDomain {
 public:
  // Room for reader ids 0..max_readers-1 (an lcore loop uses its index). Throws
  // std::invalid_argument for 0 or more than RTE_MAX_LCORE readers, std::runtime_error when
  // rte_rcu_qsbr_init fails.
  explicit RcuDomain(unsigned max_readers);
  ~RcuDomain();
  RcuDomain(const RcuDomain&) = delete;
  RcuDomain& operator=(const RcuDomain&) = delete;

  unsigned max_readers() const { return max_readers_; }
  rte_rcu_qsbr* qsbr() const { return qsbr_; }

  // Reader side, each on its own thread with its own id. register_reader() and online()
  // before the first read; quiescent() whenever no published pointer is held; offline() and
  // unregister_reader() when the thread stops reading. Throws std::out_of_range for an id
  // beyond max_readers, std::logic_error for an id registered twice.
  void register_reader(unsigned id);
  void unregister_reader(unsigned id);
  void online(unsigned id) { rte_rcu_qsbr_thread_online(qsbr_, id); }
  void offline(unsigned id) { rte_rcu_qsbr_thread_offline(qsbr_, id); }
  void quiescent(unsigned id) { rte_rcu_qsbr_quiescent(qsbr_, id); }

  // Writer side: blocks until every reader that is online now has reported a quiescent state
  // (returns at once when none is), yielding the core while it waits. Must not be called by an
  // online reader of this domain.
  void synchronize();
  // The same without blocking: start() after publishing returns a token; check(token) is true
  // once every reader online at start() has quiesced since (then the old table may be freed).
  uint64_t start() { return rte_rcu_qsbr_start(qsbr_); }
  bool check(uint64_t token) { return rte_rcu_qsbr_check(qsbr_, token, false) == 1; }
  uint64_t grace_periods() const { return grace_periods_.load(std::memory_order_relaxed); }

 private:
  unsigned max_readers_;
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::atomic<uint64_t> grace_periods_{0};
  std::mutex registry_lock_;  // registration only, never on the read path
  std::vector<bool> registered_;
};

// A reader's registration for one poll loop: online while it exists.
class RcuReader {
 public:
  RcuReader(RcuDomain& domain, unsigned id) : domain_(domain), id_(id) {
    domain_.register_reader(id_);
    domain_.online(id_);
  }
  ~RcuReader() {
    domain_.offline(id_);
    domain_.unregister_reader(id_);
  }
  RcuReader(const RcuReader&) = delete;
  RcuReader& operator=(const RcuReader&) = delete;

  void quiescent() { domain_.quiescent(id_); }

 private:
  RcuDomain& domain_;
  unsigned id_;
};

}  // namespace spraynet::runtime
