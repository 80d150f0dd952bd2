#include "dataplane/runtime/rcu_domain.h"

#include <rte_common.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace spraynet::runtime {

RcuDomain::RcuDomain(unsigned max_readers)
    : max_readers_(max_readers), registered_(max_readers, false) {
  if (max_readers == 0 || max_readers > RTE_MAX_LCORE) {
    throw std::invalid_argument("RcuDomain: max_readers must be 1.." +
                                std::to_string(RTE_MAX_LCORE) + ", got " +
                                std::to_string(max_readers));
  }
  const size_t size = rte_rcu_qsbr_get_memsize(max_readers);
  // rte_rcu_qsbr wants cache-line alignment; plain aligned_alloc keeps the domain usable before
  // any DPDK heap exists. The size is a whole number of cache lines (rte_rcu_qsbr_get_memsize).
  qsbr_ = static_cast<rte_rcu_qsbr*>(
      std::aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL(size, RTE_CACHE_LINE_SIZE)));
  if (qsbr_ == nullptr) throw std::bad_alloc();
  if (rte_rcu_qsbr_init(qsbr_, max_readers) != 0) {
    std::free(qsbr_);
    throw std::runtime_error("rte_rcu_qsbr_init failed for " + std::to_string(max_readers) +
                             " readers");
  }
}

RcuDomain::~RcuDomain() {
  std::free(qsbr_);
}

void RcuDomain::register_reader(unsigned id) {
  if (id >= max_readers_) {
    throw std::out_of_range("RcuDomain: reader id " + std::to_string(id) + " beyond " +
                            std::to_string(max_readers_ - 1));
  }
  // rte_rcu_qsbr_thread_register does not refuse a second registration; a reader id shared by
  // two threads would let one quiesce for the other, so refuse it here.
  {
    std::lock_guard<std::mutex> g(registry_lock_);
    if (registered_[id]) {
      throw std::logic_error("RcuDomain: reader id " + std::to_string(id) + " registered twice");
    }
    registered_[id] = true;
  }
  if (rte_rcu_qsbr_thread_register(qsbr_, id) != 0) {
    throw std::runtime_error("rte_rcu_qsbr_thread_register failed for reader " +
                             std::to_string(id));
  }
}

void RcuDomain::unregister_reader(unsigned id) {
  if (id >= max_readers_) return;
  rte_rcu_qsbr_thread_unregister(qsbr_, id);
  std::lock_guard<std::mutex> g(registry_lock_);
  registered_[id] = false;
}

void RcuDomain::synchronize() {
  // rte_rcu_qsbr_synchronize() spins with rte_pause(). The writer is a control thread that may
  // share a core with the very lcore it waits for (2 lcores and a control thread on 2 cores), so
  // it yields between checks instead: the lcore gets the core, passes its quiescent state, and
  // the grace period ends in microseconds rather than at the next scheduler tick.
  const uint64_t token = rte_rcu_qsbr_start(qsbr_);
  while (rte_rcu_qsbr_check(qsbr_, token, false) != 1) std::this_thread::yield();
  grace_periods_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace spraynet::runtime
