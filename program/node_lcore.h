// The one poll-mode lcore driver for both nodes: rx bursts into the node, the node's timers,
// and its egress into the tx buffers of the ports this lcore serves. SwitchNode and NicNode have
// the same driving interface (receive, poll, transmit, next_event_ns, idle, flush, port_count),
// which is what fabric_emu drives in virtual time too; this is its TSC-time twin.
//
// One lcore, one lane. A node with lanes (SwitchNode::add_lane) gets one per lcore: the first
// lcore drives lane 0, each further lcore a lane owning the egress of its ports, and the lanes
// run at once with nothing shared on the fast path (the node hands a packet to the lane owning
// its egress port through a ring). A node without lanes (NicNode) runs on one lcore. Lanes that
// cannot run at once (a switch with PFC: one shared lossless buffer) are serialised by
// NodeShared::lane_lock, which only they take.
//
// Everyone else reaches the node through NodeShared::lock, a runtime::NodeGate: every call into
// the node passes it as a worker (a store and a load on the lcore's own cache line); the control
// thread and acting telemetry commands close it (std::lock_guard) to have the whole node while
// every lcore waits outside. Counters reach readers without it: the lcores publish a copy
// (NodeShared::publish) that read-only telemetry reads lock-free. Lock order: control_lock
// before lock, never the reverse; RCU grace periods are waited for without holding `lock`.
#pragma once

#include <rte_ethdev.h>
#include <rte_pause.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "dataplane/egress/egress_port.h"
#include "dataplane/runtime/node_gate.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/stop_signal.h"

namespace spraynet::control {
class ControlLoop;
}

namespace spraynet::program {

// What the lcores, the control thread and the telemetry handlers share about one node.
template <class Node>
struct NodeShared {
  Node* node = nullptr;
  runtime::NodeGate lock;   // the whole node: lcores pass it per call, control closes it
  std::mutex lane_lock;     // serialises lanes that cannot run at once (a switch with PFC)
  std::mutex control_lock;  // control-side state: the control loop, rules, published tables
  control::ControlLoop* control = nullptr;  // null: no control loop (tests)
  runtime::RcuDomain* rcu = nullptr;        // the lcores' RCU domain (null: no concurrent readers)
  std::vector<uint16_t> dpdk_port;          // node port index -> DPDK port id
  std::vector<int> node_port_of;            // DPDK port id -> node port index (-1: not ours)
  // Node port index -> its tx queue's descriptors when its PMD reports their status
  // (rte_eth_tx_descriptor_status), for a wire port's depth; 0 or missing: it does not.
  std::vector<uint16_t> tx_status_descriptors;
  runtime::StopSignal* stop = nullptr;
  std::atomic<uint64_t> last_rx_ns{0};
  uint64_t idle_exit_ns = 0;  // stop once idle this long with empty queues (0: never)
  uint64_t stop_at_ns = 0;    // stop at this TSC time (0: never)
  // The lcores running the node (run_lcores sets it). On stop each lcore waits, at most
  // kStopWait, until all of them have stopped receiving before it drains its ports: otherwise
  // another lcore's last bursts land on ports whose owner has already drained them, and stay
  // there until the node frees them. 0 or 1: no wait.
  unsigned lcores = 0;
  std::atomic<unsigned> stopped_lcores{0};
  unsigned drivers = 0;  // NodeLcores made for this node (the first drives lane 0)
  static constexpr std::chrono::seconds kStopWait{1};
  // Publishes the node's counters for readers that take no lock (telemetry), called with `lock`
  // held (every lane outside the node): by an lcore at most every kPublishPeriodNs while the
  // node changes and once more after it stops changing, on stop, and by whoever else changes
  // the node under `lock`. Empty: none.
  // A laned node's lane publishes its own part (`lane`); see the node's snapshot for how.
  std::function<void(const Node&, unsigned lane, uint64_t now_ns)> publish;
  // Called when a NodeLcore has given the node a new lane (before any lcore runs).
  std::function<void(unsigned lane)> lane_added;
  static constexpr uint64_t kPublishPeriodNs = 1'000'000;
  // (A publication copies a few KB of counters, ~30k instructions with 10 ports: once per
  // millisecond it costs a few instructions a packet at Mpps rates.)
};

// What a program adds to the driver's own stop rules (--duration-ms, --idle-exit-ms): called on
// every poll with the lock held. `want_stop` asks for a stop; `ready_to_stop` may hold a stop
// back (nic_emu drains its latency probes first). Both run on the lcore.
template <class Node>
class StopPolicy {
 public:
  virtual ~StopPolicy() = default;
  virtual bool want_stop(Node& node, uint64_t now_ns, bool idle) = 0;
  virtual bool ready_to_stop(Node& /*node*/, uint64_t /*now_ns*/) { return true; }
};

// A node with lanes: SwitchNode's add_lane / receive(lane, ...) / poll(lane, ...) / idle(lane).
template <class Node>
concept LanedNode = requires(Node& n, std::span<const uint16_t> ports, rte_mbuf** pkts) {
  n.add_lane(ports);
  n.receive(0u, uint16_t{0}, pkts, uint16_t{0}, uint64_t{0});
  n.poll(0u, uint64_t{0});
  n.lanes_run_in_parallel();
};

template <class Node>
class NodeLcore : public runtime::BurstHandler {
 public:
  // `ports`: node port indices whose egress this lcore owns; it transmits on tx_queues() and
  // receives on whatever rx queues its PollLoop polls. `policy` may be null. Make every NodeLcore
  // of a node before any of them runs (a laned node gets a lane per NodeLcore after the first).
  NodeLcore(NodeShared<Node>& shared, std::vector<uint16_t> ports,
            StopPolicy<Node>* policy = nullptr)
      : s_(shared), ports_(std::move(ports)), policy_(policy) {
    worker_ = s_.lock.add_worker();
    if (s_.drivers++ > 0) {
      if constexpr (LanedNode<Node>) {
        lane_ = s_.node->add_lane(ports_);
        if (s_.lane_added) s_.lane_added(lane_);
      } else {
        throw std::invalid_argument("this node runs on one lcore");
      }
    }
  }

  // The (node port, tx queue) pairs this lcore transmits on: its ports' queue 0, and on a laned
  // node's ports with a tx queue per lane, its lane's (SwitchNode::lane_tx_queues). Known once
  // every NodeLcore of the node is made (lanes change which ports have a queue each).
  const std::vector<std::pair<uint16_t, uint16_t>>& tx_queues() {
    if (!tx_known_) {
      tx_.clear();
      if constexpr (requires(const Node& n) { n.lane_tx_queues(0u); }) {
        tx_ = s_.node->lane_tx_queues(lane_);
      } else {
        for (uint16_t p : ports_) tx_.push_back({p, 0});
      }
      tx_known_ = true;
    }
    return tx_;
  }

  void on_rx(uint16_t port_id, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override {
    s_.last_rx_ns.store(now_ns, std::memory_order_relaxed);
    const int node_port = port_id < s_.node_port_of.size() ? s_.node_port_of[port_id] : -1;
    // An unknown port id reaches receive() as an out-of-range port: counted there and freed.
    const uint16_t p = node_port < 0 ? UINT16_MAX : static_cast<uint16_t>(node_port);
    {
      Inside in(*this);
      if constexpr (LanedNode<Node>) {
        s_.node->receive(lane_, p, pkts, n, now_ns);
      } else {
        s_.node->receive(p, pkts, n, now_ns);
      }
      release(now_ns, tx);  // what the burst made due (a zero-delay link) leaves with it
    }
    changed_ = true;
  }

  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override {
    bool idle, stop = false;
    {
      Inside in(*this);
      poll_node(now_ns);
      if (release(now_ns, tx) != 0) changed_ = true;
      idle = node_idle();
      if (policy_ != nullptr) stop = policy_->want_stop(*s_.node, now_ns, idle);
      // Queued frames change with time alone (PFC frames, losses on the wire): keep publishing.
      if (!idle) changed_ = true;
      if (changed_ && s_.publish &&
          now_ns - last_publish_ns_ >= NodeShared<Node>::kPublishPeriodNs) {
        s_.publish(*s_.node, lane_, now_ns);  // this lane's part, between two calls
        last_publish_ns_ = now_ns;
        changed_ = false;
      }
    }
    stop = stop || (s_.stop_at_ns != 0 && now_ns >= s_.stop_at_ns);
    if (stop && ready_to_stop(now_ns)) s_.stop->request();
    // Another lcore may have stored a later time than this lcore's now_ns: not idle then.
    if constexpr (requires(Node & n) { n.set_tx_backlog(0u, uint16_t{0}, uint64_t{0}); }) {
      if (now_ns - last_backlog_ns_ >= kTxBacklogPeriodNs) {
        last_backlog_ns_ = now_ns;
        Inside in(*this);
        read_tx_backlog();
      }
    }
    const uint64_t last_rx = s_.last_rx_ns.load(std::memory_order_relaxed);
    if (s_.idle_exit_ns != 0 && idle && now_ns > last_rx && now_ns - last_rx >= s_.idle_exit_ns) {
      s_.stop->request();
    }
  }

  // A stopped node owes its ports what it already accepted: egress is drained on the emulated
  // links' own time (serialisation, delay), not the wall clock's. The NIC first flushes what
  // its reorder engine holds. Whatever cannot leave is freed by the node's free_all().
  void on_stop(uint64_t now_ns, runtime::TxSink& tx) override {
    if (s_.lcores > 1) {
      // Not inside the node: the lcores still receiving may need it for their last bursts.
      s_.stopped_lcores.fetch_add(1, std::memory_order_acq_rel);
      const auto give_up = std::chrono::steady_clock::now() + NodeShared<Node>::kStopWait;
      while (s_.stopped_lcores.load(std::memory_order_acquire) < s_.lcores &&
             std::chrono::steady_clock::now() < give_up) {
        rte_pause();
      }
    }
    uint64_t t = now_ns;
    {
      Inside in(*this);
      if constexpr (requires(Node & n) { n.flush(now_ns); }) s_.node->flush(now_ns);
      for (unsigned round = 0; round < 1'000'000; ++round) {
        // What the other lanes handed over before they stopped leaves by this lane's ports.
        if constexpr (LanedNode<Node>) {
          if (s_.node->lanes_run_in_parallel()) s_.node->poll(lane_, t);
        }
        release(t, tx);
        if (node_idle()) break;
        uint64_t next = EgressPort::kNever;
        for (const auto& [p, q] : tx_queues()) next = std::min(next, egress_of(p).next_event_ns());
        if (next == EgressPort::kNever) break;
        t = std::max(next, t + 1);
      }
      if (s_.publish) s_.publish(*s_.node, lane_, t);
    }
  }

 private:
  // This lcore inside the node for one scope: through the gate, and through the lane lock when
  // the node's lanes cannot run at once.
  class Inside {
   public:
    explicit Inside(NodeLcore& l) : l_(l) {
      l_.s_.lock.enter(l_.worker_);
      if constexpr (LanedNode<Node>) {
        // Several lanes that cannot run at once (a switch with PFC) take turns.
        const Node& n = *l_.s_.node;
        if (n.lane_count() > 1 && !n.lanes_run_in_parallel()) {
          l_.s_.lane_lock.lock();
          serial_ = true;
        }
      }
    }
    ~Inside() {
      if (serial_) l_.s_.lane_lock.unlock();
      l_.s_.lock.leave(l_.worker_);
    }
    Inside(const Inside&) = delete;
    Inside& operator=(const Inside&) = delete;

   private:
    NodeLcore& l_;
    bool serial_ = false;
  };

  // The node's timers, and whether what this lcore serves is idle: its lane's, or the node's.
  void poll_node(uint64_t now_ns) {
    if constexpr (LanedNode<Node>) {
      s_.node->poll(lane_, now_ns);
    } else {
      s_.node->poll(now_ns);
    }
  }
  bool node_idle() const {
    if constexpr (LanedNode<Node>) {
      return s_.node->idle(lane_);
    } else {
      return s_.node->idle();
    }
  }

  bool ready_to_stop(uint64_t now_ns) {
    if (policy_ == nullptr) return true;
    Inside in(*this);
    return policy_->ready_to_stop(*s_.node, now_ns);
  }
  // The egress this lcore transmits for port p (its lane's own on a port with one per lane).
  const EgressPort& egress_of(uint16_t p) const {
    if constexpr (LanedNode<Node>) {
      return s_.node->egress(lane_, p);
    } else {
      return s_.node->egress(p);
    }
  }
  uint16_t node_transmit(uint16_t p, uint64_t now_ns, rte_mbuf** out, uint16_t max) {
    if constexpr (LanedNode<Node>) {
      return s_.node->transmit(lane_, p, now_ns, out, max);
    } else {
      return s_.node->transmit(p, now_ns, out, max);
    }
  }

  // A wire port's frames go straight to its PMD (no tx buffer: what the PMD refuses stays the
  // port's, first in line, and the port's queues hold the rest, as a NIC's scheduler does when
  // its tx ring is full); returns how many the PMD took.
  unsigned release_wire(uint16_t p, uint16_t queue, uint64_t now_ns, runtime::TxSink& tx) {
    rte_mbuf* out[EgressPort::kWireBurst];
    unsigned total = 0;
    for (;;) {
      const uint16_t n = node_transmit(p, now_ns, out, EgressPort::kWireBurst);
      if (n == 0) break;
      const uint16_t sent = tx.burst(s_.dpdk_port[p], queue, out, n);
      total += sent;
      if (sent < n) {
        const auto left = static_cast<uint16_t>(n - sent);
        if constexpr (LanedNode<Node>) {
          s_.node->unsend(lane_, p, out + sent, left);
        } else if constexpr (requires(Node & node) { node.unsend(p, out, n); }) {
          s_.node->unsend(p, out + sent, left);
        } else {
          rte_pktmbuf_free_bulk(out + sent, left);  // a node without wire ports: none
        }
        break;
      }
      if (n < EgressPort::kWireBurst) break;
    }
    return total;
  }

  // Each wire port's PMD backlog (tx descriptors in use, by a binary search over
  // rte_eth_tx_descriptor_status: from the tail, the free descriptors come first, then the
  // oldest frames not yet sent) times the port's mean frame, into the node's load views.
  void read_tx_backlog() {
    for (const auto& [p, queue] : tx_queues()) {
      const uint16_t desc =
          p < s_.tx_status_descriptors.size() ? s_.tx_status_descriptors[p] : uint16_t{0};
      if (desc == 0 || !egress_of(p).wire()) continue;
      const uint16_t port_id = s_.dpdk_port[p];
      uint16_t lo = 0, hi = desc;  // the first offset in use is in [lo, hi]
      while (lo < hi) {
        const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
        if (rte_eth_tx_descriptor_status(port_id, queue, mid) == RTE_ETH_TX_DESC_FULL) {
          hi = mid;
        } else {
          lo = static_cast<uint16_t>(mid + 1);
        }
      }
      const uint64_t in_use = desc - lo;
      const auto& c = s_.node->lane_port_counters(lane_, p);
      const uint64_t mean = c.tx_packets != 0 ? c.tx_bytes / c.tx_packets : 0;
      s_.node->set_tx_backlog(lane_, p, in_use * mean);  // only a laned node has wire ports
    }
  }

  // What this lcore's tx queues release by now_ns, into the tx buffers; returns how many.
  unsigned release(uint64_t now_ns, runtime::TxSink& tx) {
    rte_mbuf* out[32];
    unsigned total = 0;
    for (const auto& [p, queue] : tx_queues()) {
      if (const EgressPort& e = egress_of(p); e.wire()) {
        // Most ports have nothing due after a burst: one load rather than a dequeue each.
        if (e.next_event_ns() <= now_ns) total += release_wire(p, queue, now_ns, tx);
        continue;
      }
      uint16_t n;
      do {
        n = node_transmit(p, now_ns, out, 32);
        for (uint16_t i = 0; i < n; ++i) tx.send(s_.dpdk_port[p], queue, out[i]);
        total += n;
      } while (n == 32);
    }
    return total;
  }

  NodeShared<Node>& s_;
  std::vector<uint16_t> ports_;
  StopPolicy<Node>* policy_;
  unsigned worker_ = 0;  // this lcore's slot in s_.lock
  unsigned lane_ = 0;
  bool changed_ = true;  // since this lcore last published
  uint64_t last_publish_ns_ = 0;
  static constexpr uint64_t kTxBacklogPeriodNs = 10'000;  // wire ports' PMD depth, read this often
  uint64_t last_backlog_ns_ = 0;
  std::vector<std::pair<uint16_t, uint16_t>> tx_;  // tx_queues()
  bool tx_known_ = false;
};

}  // namespace spraynet::program
