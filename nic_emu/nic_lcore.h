// What nic_emu's poll-mode lcore runs: the common node driver (program/node_lcore.h) on a
// NicNode, with the NIC's own stop rules: stop once the RC traffic engine has completed every
// message, and drain the latency probes in flight before a stop the program decides on.
#pragma once

#include <cstdint>

#include "nic_emu/nic_node.h"
#include "program/node_lcore.h"

namespace spraynet::nic_emu {

struct NicShared : program::NodeShared<NicNode> {
  bool stop_when_done = false;  // stop once the RC engine has completed every message
  // With the RC engine: the lcore's first poll (the engine starts sending) and the poll that
  // saw every message done (0: not yet), on the loop's TSC time; under `lock`. Goodput from
  // these is the program's own, not a telemetry poller's.
  uint64_t rc_started_ns = 0;
  uint64_t rc_done_ns = 0;
};

class NicStopPolicy : public program::StopPolicy<NicNode> {
 public:
  // A stop the program decides on (--duration-ms, the RC engine done) first stops the latency
  // probe and waits this long at most for the probes in flight, so that the report's `lost`
  // counts probes the path lost, not probes cut off by the stop. (SIGINT/SIGTERM stop at once.)
  static constexpr uint64_t kProbeDrainNs = 100'000'000;

  explicit NicStopPolicy(NicShared& shared) : s_(shared) {}

  bool want_stop(NicNode& node, uint64_t now_ns, bool idle) override;
  // False while probes may still come back (stops the probe the first time).
  bool ready_to_stop(NicNode& node, uint64_t now_ns) override;

 private:
  NicShared& s_;
  uint64_t probe_stop_ns_ = 0;
};

using NicLcore = program::NodeLcore<NicNode>;

}  // namespace spraynet::nic_emu
