// The cable delays each flow's packets met, each way: what makes a flow's ideal FCT the one of
// the path its load balancer gave it rather than the fastest path of its pair (cables differ
// by up to --cable-spread-ns; an idle ECMP flow on a slow spine is not slowed down by the
// network). Every frame carries, in an mbuf dynamic field, the delay of the cables it crossed
// since it left its host, and a frame going back to a flow's sender echoes the least delay the
// flow's packets had on the way there: the sender's side then knows both halves without
// reading the receiver's state (which may run in another thread or rank).
//
// Thread use: the receiver side (fwd_at_dst_) is written and read only where the flow's
// destination host runs, the sender side (seen_) only where its source host runs, as the
// fabric's LPs run hosts.
#pragma once

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "fabric/workload.h"

namespace spraynet::fabric {

class FlowPathDelays {
 public:
  static constexpr uint32_t kUnknown = UINT32_MAX;

  // `flows`: the plan's; `host_ips` and `first_qpn` per host (its engine's first local QP
  // number), `qps` per host (its engine's QP count); `cable_delay_ns` per cable (both ways).
  // `first_psn`: every QP's first PSN; `packet_ns`: the least time a packet ahead of another
  // holds the sender's link (a full frame at the host rate; 0 where the NIC may send packets
  // side by side on several links); `ns_per_bit` per flow (empty: 0): the sum over its hops of
  // one bit's time at the hop's rate (a frame is serialised whole on every hop).
  // Throws std::runtime_error when the dynamic field cannot be registered (EAL not up).
  FlowPathDelays(const std::vector<QpFlow>& flows, const std::vector<uint32_t>& host_ips,
                 const std::vector<uint32_t>& first_qpn, const std::vector<uint32_t>& qps,
                 std::vector<uint32_t> cable_delay_ns, uint32_t first_psn = 0, double packet_ns = 0,
                 std::vector<float> ns_per_bit = {});

  // Frames leaving `host` onto its first cable: their delay starts at 0; a RoCEv2 RC frame to
  // a flow's sender from the flow's receiver echoes the flow's least forward delay so far.
  void depart(uint32_t host, rte_mbuf* const* frames, uint16_t n) const;
  // Frames that crossed `cable`: its delay added.
  void cross(uint32_t cable, rte_mbuf* const* frames, uint16_t n) const;
  // Frames arriving at `host` (after their last cable): RC frames of a flow recorded, at the
  // receiver as forward, at the sender as reverse (with the echoed forward).
  void arrive(uint32_t host, rte_mbuf* const* frames, uint16_t n);

  // The least delay the flow's packets met from its source to its destination, as its sender
  // knows it; kUnknown until a frame came back.
  uint32_t forward_ns(size_t flow) const { return seen_[flow].forward; }
  // The way back of the frame back with the highest PSN (the ACK or read response that
  // completes what was sent; the least of equals).
  uint32_t reverse_ns(size_t flow) const { return seen_[flow].reverse; }
  // For a flow of one message: the earliest its last packet can have reached the destination,
  // max over packets p (p-th from the first PSN) of p x packet_ns (the packets ahead of it on
  // the sender's link) + its own forward delay + its frame serialised on every hop (LinkEmulator
  // wire bits x ns_per_bit). A sprayed message whose last packets took slow lanes ends by then
  // at the earliest, however fast its first lane was. kUnknown until a frame came back.
  uint32_t forward_tail_ns(size_t flow) const { return seen_[flow].forward_tail; }
  // What a rank that ran the flow's source hands the others (fabric_emu --mpi).
  void set_seen(size_t flow, uint32_t forward, uint32_t forward_tail, uint32_t reverse) {
    seen_[flow] = Seen{forward, forward_tail, reverse, 0};
  }
  size_t flows() const { return seen_.size(); }
  // The flow (index into the plan's flows) host's QP `qp_index` sends, or -1.
  int32_t flow_sent(uint32_t host, uint32_t qp_index) const {
    if (host >= role_.size() || qp_index >= role_[host].size()) return -1;
    const int32_t r = role_[host][qp_index];
    return r >= 0 ? r : -1;
  }

 private:
  struct Stamp {
    uint32_t path_ns;  // cables crossed since the frame left its host
    // A frame back to a flow's sender: the flow's least forward delay and forward tail so far.
    uint32_t echo_ns;
    uint32_t echo_tail_ns;
  };
  struct Seen {
    uint32_t forward = kUnknown, forward_tail = kUnknown, reverse = kUnknown;
    uint32_t reverse_psn = 0;  // of the frame `reverse` is from, from the first PSN
  };
  struct AtDestination {
    uint32_t least = kUnknown;
    uint32_t tail = kUnknown;  // kUnknown: none yet (else at least the least)
  };
  Stamp* stamp(rte_mbuf* m) const { return RTE_MBUF_DYNFIELD(m, offset_, Stamp*); }
  // A RoCEv2 RC frame's destination IP and QP number; false for anything else.
  static bool rc_frame(const rte_mbuf* m, uint32_t& dst_ip, uint32_t& dst_qpn, uint32_t& psn);
  // (host, QP number) as a flow: >= 0 the flow the QP sends, <= -2 the flow it receives
  // (-2 - flow), -1 none.
  int32_t role(uint32_t host, uint32_t qpn) const;

  int offset_ = -1;
  std::vector<uint32_t> cable_delay_ns_;
  std::vector<uint32_t> first_qpn_;
  std::vector<std::vector<int32_t>> role_;  // per host, per QP index
  std::unordered_map<uint32_t, uint32_t> host_of_ip_;
  std::vector<uint32_t> flow_dst_;  // per flow
  uint32_t first_psn_ = 0;
  double packet_ns_ = 0;
  std::vector<float> ns_per_bit_;          // per flow
  std::vector<AtDestination> fwd_at_dst_;  // per flow, written where its destination runs
  std::vector<Seen> seen_;                 // per flow, written where its source runs
};

}  // namespace spraynet::fabric
