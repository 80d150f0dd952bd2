// What nic_emu's poll-mode lcore runs: rx bursts into the NicNode, the node's timers, and its
// egress into the ports' tx buffers. The node is single-threaded: every call into it holds
// NicShared::lock, which the control thread (sampling) and telemetry take too.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/stop_signal.h"
#include "nic_emu/nic_node.h"

namespace spraynet::nic_emu {

struct NicShared {
  NicNode* node = nullptr;
  std::mutex lock;                  // the node's dataplane state
  std::mutex control_lock;          // the control loop and the published spray weights
  std::vector<uint16_t> dpdk_port;  // node port -> DPDK port id
  std::vector<int> node_port_of;    // DPDK port id -> node port (-1: not ours)
  runtime::StopSignal* stop = nullptr;
  std::atomic<uint64_t> last_rx_ns{0};
  uint64_t idle_exit_ns = 0;    // stop once idle this long with nothing queued or held (0: never)
  uint64_t stop_at_ns = 0;      // stop at this TSC time (0: never)
  bool stop_when_done = false;  // stop once the RC engine has completed every message
  // With the RC engine: the lcore's first poll (the engine starts sending) and the poll that
  // saw every message done (0: not yet), on the loop's TSC time; under `lock`. Goodput from
  // these is the program's own, not a telemetry poller's.
  uint64_t rc_started_ns = 0;
  uint64_t rc_done_ns = 0;
};

class NicLcore : public runtime::BurstHandler {
 public:
  // A stop the program decides on (--duration-ms, the RC engine done) first stops the latency
  // probe and waits this long at most for the probes in flight, so that the report's `lost`
  // counts probes the path lost, not probes cut off by the stop. (SIGINT/SIGTERM stop at once.)
  static constexpr uint64_t kProbeDrainNs = 100'000'000;

  explicit NicLcore(NicShared& shared) : s_(shared) {}

  void on_rx(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override;
  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override;
  void on_stop(uint64_t now_ns, runtime::TxSink& tx) override;

 private:
  void release(uint64_t now_ns, runtime::TxSink& tx);
  // True while probes may still come back (stops the probe the first time). Holds the lock.
  bool probes_in_flight(uint64_t now_ns);

  NicShared& s_;
  uint64_t probe_stop_ns_ = 0;
};

}  // namespace spraynet::nic_emu
