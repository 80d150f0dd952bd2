// The control loop in virtual time: every period (default 200 ms) it samples the node's ports,
// updates the link-state table, computes new bucket weights for every group and publishes them;
// a link going down is published at once, not at the next tick (DESIGN.md "Control").
//
// Driven by an event clock: the driver calls tick(now_ns) whenever its clock reaches
// next_event_ns() (fabric_emu) or on every pass of its control thread (switch_emu), and
// on_link_down(port, now_ns) right after taking a link down in the dataplane. Nothing here reads
// a clock, sleeps or starts a thread.
//
// Ticks fall on start_ns + k * period exactly: a tick at 199.999999 ms after the start does
// nothing, the one at 200 ms publishes. A driver that calls late (after several boundaries)
// gets one recomputation over the whole elapsed interval; the boundaries it skipped are counted
// in missed_periods and the next tick is the first boundary after now.
//
// Each publication is two steps: compute a ControlSnapshot (the sampled link states and every
// group's weights), immutable once made, then publish it (PathSelector::set_weights for every
// group, in every mode: sprayed packets use the bucket table whatever the group's mode) through
// a TablePublisher: with the target's RcuDomain (switch_emu's control thread) the old tables are
// freed after a grace period, without one (virtual time) at once.
//
// Threads. One thread drives the loop (tick, on_link_down); callers serialise it with their
// control lock. The node's ports are read only while holding the target's node_lock (when set),
// because egress counters belong to the lcores; publication never takes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "control/bucket_reweighter.h"
#include "control/link_state_table.h"
#include "control/table_publisher.h"

namespace spdlog {
class logger;
}

namespace spraynet {
class EgressPort;
class PathSelector;
class PfcState;
namespace runtime {
class RcuDomain;
class NodeGate;
}
}  // namespace spraynet

namespace spraynet::control {

struct ControlSnapshot;

// What the loop controls, as plain dataplane objects, so that control does not depend on the
// programs' node classes (control_target_of below builds it from a SwitchNode). The objects must
// outlive the loop.
struct ControlTarget {
  std::vector<LinkIdentity> links;       // one per port, in port order
  std::vector<const EgressPort*> ports;  // the same order
  // A port's further egress queues (a switch_emu wire port with a tx queue per lcore), asked
  // at every sample (lanes are added after the target is made): their traffic and depth add to
  // the port's sample. Empty: none.
  std::function<std::vector<const EgressPort*>(uint16_t port)> more_queues;
  const PfcState* pfc = nullptr;         // null: no PFC, nothing lossless
  std::vector<PathSelector*> groups;     // member ports index `ports`
  // The operator's weights per group, in member order (empty: equal). They stay in force: the
  // link state scales them (a path's buckets from its utilisation, times its share of the
  // largest configured weight), it never replaces them.
  std::vector<std::vector<uint32_t>> configured_weights;
  unsigned path_id_bits = 4;
  // Concurrency (both null under an event clock): the readers' RCU domain, and the lock that
  // serialises access to the node's ports and PFC state with the lcores.
  runtime::RcuDomain* rcu = nullptr;
  runtime::NodeGate* node_lock = nullptr;
  // Called on the loop's thread after every publication, for what is not a PathSelector (the
  // NIC's spray weights): it publishes its own table and waits out its own grace period.
  std::function<void(const ControlSnapshot&)> on_publish;
  // Called on every port's fresh sample, before the table reads it, for traffic the port carries
  // that the dataplane does not model as frames (fabric_emu's background load): it adds that
  // traffic to the sample the way the port's own counters would count it on real hardware, so
  // that the table sees what the node could really observe. Empty: the samples as read.
  std::function<void(uint16_t port, uint64_t now_ns, PortSample& sample)> adjust_sample;
};

// From any node with SwitchNode's accessors (config(), port_count(), egress(p), pfc(),
// group_count(), group(i)). A template so that control/ does not link switch_emu/.
template <class Node>
ControlTarget control_target_of(Node& node) {
  ControlTarget t;
  t.links = link_identities(node.config());
  t.path_id_bits = path_id_bits(node.config());
  for (uint16_t p = 0; p < node.port_count(); ++p) t.ports.push_back(&node.egress(p));
  if constexpr (requires { node.egress_queues(uint16_t{0}); }) {
    t.more_queues = [&node](uint16_t p) {
      const auto q = node.egress_queues(p);
      return std::vector<const EgressPort*>(q.begin() + 1, q.end());  // [0] is node.egress(p)
    };
  }
  t.pfc = node.pfc();
  for (size_t g = 0; g < node.group_count(); ++g) {
    t.groups.push_back(&node.group(g));
    t.configured_weights.push_back(node.config().groups[g].weights);
  }
  return t;
}

struct ControlLoopConfig {
  uint64_t period_ns = 200'000'000;
  LinkStateTableConfig links;  // path_id_bits is taken from the target
  ReweightConfig reweight;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

// One publication: immutable once computed.
struct ControlSnapshot {
  uint64_t sequence = 0;  // 1 for the first publication, then +1 each
  uint64_t computed_ns = 0;
  bool immediate = false;  // from on_link_down, not from a tick
  std::vector<LinkState> links;
  std::vector<std::vector<uint32_t>> group_weights;  // per group, in member order
};

struct ControlLoopCounters {
  uint64_t ticks = 0;                   // period boundaries acted on
  uint64_t missed_periods = 0;          // boundaries passed without a tick call
  uint64_t publications = 0;            // every publication, ticks and link-down events
  uint64_t immediate_publications = 0;  // of which on link down
};

class ControlLoop {
 public:
  // Takes the counters' baseline at start_ns (the first tick measures [start, start + period)).
  // Nothing is published until the first tick or link-down: the groups keep their configured
  // weights. Throws std::invalid_argument for an invalid config or target (a port or group
  // pointer that is null, links and ports of different sizes). Path-id collisions are logged as
  // warnings (logger may be null).
  ControlLoop(ControlTarget target, uint64_t start_ns, const ControlLoopConfig& config = {},
              std::shared_ptr<spdlog::logger> logger = nullptr);

  // At or after a period boundary: sample, recompute, publish; returns true. Before it: nothing.
  bool tick(uint64_t now_ns);
  // The link of `port` is down (the dataplane already knows): mark it down in the table and
  // publish at once with the table's current utilisations; no counters are sampled and the tick
  // schedule does not move. A link coming back up is published at the next tick, after its
  // counters have been read. Throws std::out_of_range for an unknown port.
  void on_link_down(uint16_t port, uint64_t now_ns);
  // The next period boundary: when tick() next has something to do.
  uint64_t next_event_ns() const { return next_tick_ns_; }

  const LinkStateTable& table() const { return table_; }
  // The latest publication; null before the first one.
  const std::shared_ptr<const ControlSnapshot>& current() const { return current_; }
  const ControlLoopCounters& counters() const { return counters_; }
  const ControlLoopConfig& config() const { return config_; }
  const TablePublisherCounters& publisher_counters() const { return publisher_.counters(); }

 private:
  // Step 1: a new snapshot from the table as it stands (callers update the table first).
  std::shared_ptr<const ControlSnapshot> compute(uint64_t now_ns, bool immediate) const;
  // Step 2: hand it to the dataplane and make it current.
  void publish(std::shared_ptr<const ControlSnapshot> snapshot);
  // Reads the node's ports into samples_ (under the node lock, when there is one).
  void sample(uint64_t now_ns);

  ControlTarget target_;
  ControlLoopConfig config_;
  std::shared_ptr<spdlog::logger> logger_;
  LinkStateTable table_;
  BucketReweighter reweighter_;
  TablePublisher publisher_;
  std::vector<PortSample> samples_;  // scratch, reused every tick
  uint64_t next_tick_ns_;
  std::shared_ptr<const ControlSnapshot> current_;
  ControlLoopCounters counters_;
};

}  // namespace spraynet::control
