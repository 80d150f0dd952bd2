// What the hosts of a fabric do: which QPs each host's RC engine has, whom each talks to, and
// which messages are posted when. Built once per run from the config and the seed; during the
// run the driver hands every completed message to on_completion(), which is how a ring
// all-reduce's steps wait for one another.
//
// Workloads (DESIGN.md "fabric_emu"):
//   permutation  each host runs qps_per_host QPs to one host on another leaf (a random
//                bijection between leaves without a fixed point, random within), unlimited
//                messages of msg_bytes back to back (message_gap_ns apart when set);
//   allreduce    ring all-reduce of `bytes` over all hosts, NCCL-style: ranks placed on hosts
//                at random (a scheduler's placement), `channels` rings each on its own QPs;
//                2(n-1) steps of bytes/(n*channels) per channel, step k+1 of rank r+1 posted when
//                rank r's step k is acknowledged (fabric_emu tells rank r+1 one lookahead, the
//                shortest fabric cable's delay, later: fabric/fabric.h);
//   alltoall     every host one message of `bytes` to every other host, all posted at 0;
//   incast       incast_senders random hosts one message of `bytes` each to one random host;
//   cdf          per host, Poisson arrivals over [0, duration) at `load` of its line rate, sizes
//                from the flow-size CDF, destinations uniform over the other hosts; every flow
//                its own one-shot QP pair (RcQpSpec::one_shot), posted at its arrival time.
#pragma once

#include <cstdint>
#include <vector>

#include "dataplane/rc_endpoint/rc_requester.h"
#include "dataplane/rc_endpoint/rc_traffic_engine.h"
#include "fabric/fabric_config.h"
#include "fabric/topology.h"

namespace spraynet::fabric {

class FlowSizeCdf;

// One QP pair: src's requester QP to dst's responder QP.
struct QpFlow {
  uint32_t src = 0;  // host
  uint32_t dst = 0;
  uint32_t src_qp_index = 0;  // in src's engine
  uint32_t dst_qp_index = 0;  // in dst's engine
  uint32_t src_qpn = 0;
  uint32_t dst_qpn = 0;
};

struct Post {
  uint32_t host = 0;
  uint32_t qp_index = 0;
  uint32_t bytes = 0;
  uint64_t at_ns = 0;
};

class WorkloadPlan {
 public:
  // Throws std::invalid_argument for a workload the topology cannot hold.
  WorkloadPlan(const FabricConfig& config, const Topology& topology, uint64_t seed,
               const FlowSizeCdf* cdf);

  const std::vector<RcTrafficEngineConfig>& engines() const { return engines_; }  // per host
  // Host h's engine, moved out: the engine made from it keeps the only copy of its QP specs (a
  // cdf run has one per flow and end; two copies would be a fifth of its memory).
  RcTrafficEngineConfig take_engine(uint32_t h) { return std::move(engines_.at(h)); }
  const std::vector<QpFlow>& flows() const { return flows_; }
  // Every post known at the start, by host and then time for cdf (whose flows are posted as
  // they arrive, their QPs made then: posts_arrive()); at 0 for the others.
  const std::vector<Post>& initial_posts() const { return posts_; }
  bool posts_arrive() const { return config_.workload == Workload::kCdf; }
  // Posts that the completion of (host, qp_index) makes due (allreduce steps); appends to out.
  void on_completion(uint32_t host, uint32_t qp_index, uint64_t now_ns, std::vector<Post>& out);

  // Runs until every message completes (false: until the duration).
  bool finite() const { return finite_; }
  uint64_t messages_total() const { return messages_total_; }  // finite workloads
  uint64_t bytes_total() const { return bytes_total_; }
  uint32_t senders() const { return senders_; }  // hosts with at least one requester QP
  uint32_t first_psn() const { return first_psn_; }
  // allreduce: the buffer each rank reduces, and the rank count.
  uint64_t allreduce_bytes() const { return allreduce_bytes_; }
  uint32_t ranks() const { return ranks_; }

 private:
  struct RingQp {
    uint32_t rank = 0;
    uint32_t channel = 0;
    uint32_t host = 0;
    uint32_t qp_index = 0;
    uint32_t steps_done = 0;
  };
  // one_shot: a flow of one message, whose QPs exist only while it does (cdf).
  uint32_t add_flow(uint32_t src, uint32_t dst, bool posted, uint64_t messages,
                    uint32_t message_bytes, uint64_t gap_ns, bool one_shot = false);

  const FabricConfig& config_;
  const Topology& topology_;
  std::vector<RcTrafficEngineConfig> engines_;
  std::vector<QpFlow> flows_;
  std::vector<Post> posts_;
  bool finite_ = true;
  uint64_t messages_total_ = 0;
  uint64_t bytes_total_ = 0;
  uint32_t senders_ = 0;
  uint32_t first_psn_ = 0;
  uint64_t allreduce_bytes_ = 0;
  uint32_t ranks_ = 0;
  // allreduce: per (host, qp index) of a ring requester, where it stands; rank -> host and
  // (rank, channel) -> requester QP index.
  std::vector<std::vector<int32_t>> ring_of_;  // host -> qp index -> index into ring_, or -1
  std::vector<RingQp> ring_;
  std::vector<std::vector<uint32_t>> ring_qp_;  // [channel][rank] -> index into ring_
  std::vector<uint32_t> ring_host_;             // rank -> host
  uint32_t chunk_bytes_ = 0;
  uint32_t steps_ = 0;
};

}  // namespace spraynet::fabric
