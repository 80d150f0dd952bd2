// What a poll-mode lcore runs for a switch: rx bursts into the SwitchNode, and the node's egress
// for the ports this lcore polls into their tx buffers. The node is single-threaded, so every
// call into it holds SwitchShared::lock (uncontended with one lcore); telemetry takes the same
// lock to read counters.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/stop_signal.h"
#include "switch_emu/switch_node.h"

namespace spraynet::control {
class ControlLoop;
}

namespace spraynet::switch_emu {

// What the lcores, the control thread and the telemetry handlers share. Lock order: control_lock
// before lock, never the reverse; RCU grace periods are waited for without holding `lock`.
struct SwitchShared {
  SwitchNode* node = nullptr;
  std::mutex lock;          // the node's dataplane state (lcores hold it per burst)
  std::mutex control_lock;  // control-side state: the control loop, TCAM rules, published tables
  control::ControlLoop* control = nullptr;  // null: no control loop (tests)
  runtime::RcuDomain* rcu = nullptr;        // the lcores' RCU domain (null: no concurrent readers)
  std::vector<uint16_t> dpdk_port;    // node port index -> DPDK port id
  std::vector<int> node_port_of;      // DPDK port id -> node port index (-1: not ours)
  runtime::StopSignal* stop = nullptr;
  std::atomic<uint64_t> last_rx_ns{0};
  uint64_t idle_exit_ns = 0;  // stop once idle this long with empty queues (0: never)
  uint64_t stop_at_ns = 0;    // stop at this TSC time (0: never)
};

class SwitchLcore : public runtime::BurstHandler {
 public:
  // `ports`: node port indices this lcore polls and transmits on (tx queue 0 of each).
  SwitchLcore(SwitchShared& shared, std::vector<uint16_t> ports);

  void on_rx(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override;
  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override;
  void on_stop(uint64_t now_ns, runtime::TxSink& tx) override;

 private:
  void release(uint64_t now_ns, runtime::TxSink& tx);

  SwitchShared& s_;
  std::vector<uint16_t> ports_;
};

}  // namespace spraynet::switch_emu
