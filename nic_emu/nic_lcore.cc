#include "nic_emu/nic_lcore.h"

namespace spraynet::nic_emu {

bool NicStopPolicy::want_stop(NicNode& node, uint64_t now_ns, bool idle) {
  const RcTrafficEngine* rc = node.rc_engine();
  const bool done = rc != nullptr && rc->done();
  if (rc != nullptr && s_.rc_started_ns == 0) s_.rc_started_ns = now_ns;
  if (done && s_.rc_done_ns == 0) s_.rc_done_ns = now_ns;
  return s_.stop_when_done && done && idle;
}

bool NicStopPolicy::ready_to_stop(NicNode& node, uint64_t now_ns) {
  if (node.probe() == nullptr) return true;
  if (node.probes_sending()) {
    node.stop_probes();
    probe_stop_ns_ = now_ns;
    return false;
  }
  const auto& c = node.counters();
  return !(c.probes_received < c.probes_sent && now_ns - probe_stop_ns_ < kProbeDrainNs);
}

}  // namespace spraynet::nic_emu
