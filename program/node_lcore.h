// The one poll-mode lcore driver for both nodes: rx bursts into the node, the node's timers,
// and its egress into the tx buffers of the ports this lcore serves. SwitchNode and NicNode have
// the same driving interface (receive, poll, transmit, next_event_ns, idle, flush, port_count),
// which is what fabric_emu drives in virtual time too; this is its TSC-time twin.
//
// The node is single-threaded: every call into it holds NodeShared::lock (uncontended with one
// lcore); the control thread and acting telemetry commands take the same lock to change its
// state. Counters reach readers without that lock: the lcores publish a copy (NodeShared::publish)
// that read-only telemetry reads lock-free, so a reader never holds what an lcore waits for.
// Lock order: control_lock before lock, never the reverse; RCU grace periods are waited for
// without holding `lock`.
#pragma once

#include <rte_pause.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "dataplane/egress/egress_port.h"
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
  std::mutex lock;          // the node's dataplane state (lcores hold it per burst)
  std::mutex control_lock;  // control-side state: the control loop, rules, published tables
  control::ControlLoop* control = nullptr;  // null: no control loop (tests)
  runtime::RcuDomain* rcu = nullptr;        // the lcores' RCU domain (null: no concurrent readers)
  std::vector<uint16_t> dpdk_port;          // node port index -> DPDK port id
  std::vector<int> node_port_of;            // DPDK port id -> node port index (-1: not ours)
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
  static constexpr std::chrono::seconds kStopWait{1};
  // Publishes the node's counters for readers that take no lock (telemetry), called with `lock`
  // held: by an lcore at most every kPublishPeriodNs while the node changes and once more after
  // it stops changing, on stop, and by whoever else changes the node under `lock`. Empty: none.
  std::function<void(const Node&, uint64_t now_ns)> publish;
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

template <class Node>
class NodeLcore : public runtime::BurstHandler {
 public:
  // `ports`: node port indices this lcore transmits on (tx queue 0 of each); it receives on
  // whatever rx queues its PollLoop polls. `policy` may be null.
  NodeLcore(NodeShared<Node>& shared, std::vector<uint16_t> ports,
            StopPolicy<Node>* policy = nullptr)
      : s_(shared), ports_(std::move(ports)), policy_(policy) {}

  void on_rx(uint16_t port_id, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override {
    s_.last_rx_ns.store(now_ns, std::memory_order_relaxed);
    const int node_port = port_id < s_.node_port_of.size() ? s_.node_port_of[port_id] : -1;
    std::lock_guard<std::mutex> g(s_.lock);
    // An unknown port id reaches receive() as an out-of-range port: counted there and freed.
    s_.node->receive(node_port < 0 ? UINT16_MAX : static_cast<uint16_t>(node_port), pkts, n,
                     now_ns);
    release(now_ns, tx);  // what the burst made due (a zero-delay link) leaves with it
    changed_ = true;
  }

  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override {
    bool idle, stop = false;
    {
      std::lock_guard<std::mutex> g(s_.lock);
      s_.node->poll(now_ns);
      if (release(now_ns, tx) != 0) changed_ = true;
      idle = s_.node->idle();
      if (policy_ != nullptr) stop = policy_->want_stop(*s_.node, now_ns, idle);
      // Queued frames change with time alone (PFC frames, losses on the wire): keep publishing.
      if (!idle) changed_ = true;
      if (changed_ && s_.publish &&
          now_ns - last_publish_ns_ >= NodeShared<Node>::kPublishPeriodNs) {
        s_.publish(*s_.node, now_ns);
        last_publish_ns_ = now_ns;
        changed_ = false;
      }
    }
    stop = stop || (s_.stop_at_ns != 0 && now_ns >= s_.stop_at_ns);
    if (stop && ready_to_stop(now_ns)) s_.stop->request();
    // Another lcore may have stored a later time than this lcore's now_ns: not idle then.
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
      // Not under the lock: the lcores still receiving need it for their last bursts.
      s_.stopped_lcores.fetch_add(1, std::memory_order_acq_rel);
      const auto give_up = std::chrono::steady_clock::now() + NodeShared<Node>::kStopWait;
      while (s_.stopped_lcores.load(std::memory_order_acquire) < s_.lcores &&
             std::chrono::steady_clock::now() < give_up) {
        rte_pause();
      }
    }
    std::lock_guard<std::mutex> g(s_.lock);
    if constexpr (requires(Node & n) { n.flush(now_ns); }) s_.node->flush(now_ns);
    uint64_t t = now_ns;
    for (unsigned round = 0; round < 1'000'000; ++round) {
      release(t, tx);
      if (s_.node->idle()) break;
      uint64_t next = EgressPort::kNever;
      for (uint16_t p : ports_) next = std::min(next, s_.node->egress(p).next_event_ns());
      if (next == EgressPort::kNever) break;
      t = std::max(next, t + 1);
    }
    if (s_.publish) s_.publish(*s_.node, t);
  }

 private:
  bool ready_to_stop(uint64_t now_ns) {
    if (policy_ == nullptr) return true;
    std::lock_guard<std::mutex> g(s_.lock);
    return policy_->ready_to_stop(*s_.node, now_ns);
  }

  // What this lcore's ports release by now_ns, into the tx buffers; returns how many.
  unsigned release(uint64_t now_ns, runtime::TxSink& tx) {
    rte_mbuf* out[32];
    unsigned total = 0;
    for (uint16_t p : ports_) {
      uint16_t n;
      do {
        n = s_.node->transmit(p, now_ns, out, 32);
        for (uint16_t i = 0; i < n; ++i) tx.send(s_.dpdk_port[p], 0, out[i]);
        total += n;
      } while (n == 32);
    }
    return total;
  }

  NodeShared<Node>& s_;
  std::vector<uint16_t> ports_;
  StopPolicy<Node>* policy_;
  bool changed_ = true;  // since this lcore last published
  uint64_t last_publish_ns_ = 0;
};

}  // namespace spraynet::program
