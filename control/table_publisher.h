// Publishes new bucket tables to the dataplane with RCU: build every group's new table off the
// fast path, make them current with one atomic store each (PathSelector::publish_table), wait
// one grace period (runtime::RcuDomain::synchronize: every lcore has passed a quiescent state,
// so none still reads an old table), then free the old tables. Readers never lock.
//
// Without a domain (virtual time: fabric_emu, tests driving a node on one thread) no reader can
// be inside select() while the publisher runs, so old tables are freed at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spraynet {
class PathSelector;
namespace runtime {
class RcuDomain;
}
}  // namespace spraynet

namespace spraynet::control {

struct TablePublisherCounters {
  uint64_t publications = 0;   // publish() calls
  uint64_t tables = 0;         // bucket tables made current
  uint64_t tables_freed = 0;   // old tables freed after their grace period
  uint64_t grace_periods = 0;  // synchronize() calls (0 without a domain or without groups)
};

class TablePublisher {
 public:
  explicit TablePublisher(runtime::RcuDomain* rcu = nullptr) : rcu_(rcu) {}

  // One table per group from weights[g] (in the group's member order), all made current before
  // the single grace period. Throws std::invalid_argument (before anything is published) when
  // the sizes do not match. One publisher thread at a time.
  void publish(std::span<PathSelector* const> groups,
               std::span<const std::vector<uint32_t>> weights);

  runtime::RcuDomain* rcu() const { return rcu_; }
  const TablePublisherCounters& counters() const { return counters_; }

 private:
  runtime::RcuDomain* rcu_;
  TablePublisherCounters counters_;
};

}  // namespace spraynet::control
