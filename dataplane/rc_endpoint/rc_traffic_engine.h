// The RoCE RC traffic engine of one node (a NIC in nic_emu, a host in fabric_emu): N queue pairs,
// each with an RcRequester sending RDMA WRITEs or READs (op) to the peer node, an RcResponder
// answering the peer's WRITEs and READs, or both (an RC QP is bidirectional). With ooo_placement
// the responders are RcPlacementResponders and the requesters retransmit selectively: an RNIC
// that places out of order, instead of rxe (WRITEs only).
//
// QP i is local QP first_local_qp + i. Without qp_specs it talks to peer QP first_peer_qp + i at
// peer_ip/peer_mac; with qp_specs each QP has its own peer, role and traffic (a host of a fabric
// talking to many hosts). Two engines pair up
// by mirroring each other: node A {first_local_qp = a, first_peer_qp = b} and node B
// {first_local_qp = b, first_peer_qp = a}, the same first_psn, and complementary roles (a
// requester on one side needs a responder on the other; kBoth on both sides sends both ways).
//
// The driver's part, per iteration at now_ns:
//   for each RoCE packet parsed for this node:  receive(m, p, now_ns, out)  (ACK/NAK/ACKs out)
//   post(qp, bytes, t) for QPs whose requester is in posted mode (any time, any order of QPs)
//   poll(now_ns, out[, max_packets])  (requesters' packets due, round robin across QPs)
//   transmit `out`; come back by next_event_ns().
// Ownership: receive() takes every mbuf (forwarded to a QP, or counted and freed); everything
// appended to `out` belongs to the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/rc_endpoint/dcqcn_rate_control.h"
#include "dataplane/rc_endpoint/dctcp_rate_control.h"
#include "dataplane/rc_endpoint/hpcc_rate_control.h"
#include "dataplane/rc_endpoint/rate_control.h"
#include "dataplane/rc_endpoint/timely_rate_control.h"
#include "dataplane/rc_endpoint/qp_schedule.h"
#include "dataplane/rc_endpoint/rc_placement_responder.h"
#include "dataplane/rc_endpoint/rc_requester.h"
#include "dataplane/rc_endpoint/rc_responder.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

class PayloadStore;

struct ParsedPacket;

enum class RcQpRole : uint8_t {
  kRequester = 1,  // sends WRITEs, takes ACK/NAKs
  kResponder = 2,  // takes WRITEs, sends ACK/NAKs
  kBoth = 3,
};

// QP i of an engine configured per QP (local QP = first_local_qp + i).
// (Fields ordered by size: a cdf workload keeps one spec per flow end, 48 bytes each, not 64.)
struct RcQpSpec {
  uint64_t messages = 0;        // requester: fixed-size messages; 0 = unlimited unless posted
  uint64_t message_gap_ns = 0;  // this QP's (the engine's message_gap_ns does not apply)
  uint32_t peer_ip = 0;         // host order
  uint32_t peer_qp = 0;         // 24 bits
  uint32_t message_bytes = 0;   // 0: the engine's message_bytes
  MacAddress peer_mac{};
  uint16_t udp_src_port = 0;    // 0: rxe_udp_source_port(local qp)
  RcQpRole role = RcQpRole::kRequester;
  bool posted = false;          // requester in posted mode (messages/message_bytes ignored)
  RcOp op = RcOp::kWrite;       // requester: fixed mode's messages, post()'s default
  // A flow of one message (a workload drawn from a flow-size distribution: every flow its own
  // QP). The QP's state exists only while the flow does: a requester (posted mode) from its
  // post until the message is acknowledged and its completion taken, a responder from its first
  // packet until retire_responder(). Then the QP is retired: its memory is freed for the QPs
  // that follow, its counters kept in the engine's totals and flow_counters(). Requester or
  // responder, not both.
  bool one_shot = false;
};

struct RcTrafficEngineConfig {
  using RcQpSpec = ::spraynet::RcQpSpec;

  uint32_t qps = 1;
  RcQpRole role = RcQpRole::kRequester;  // of every QP, unless qp_roles says otherwise
  std::vector<RcQpRole> qp_roles;        // empty, or one per QP (empty when qp_specs is used)
  // Empty: every QP talks to peer_ip/peer_mac/first_peer_qp + i with the settings below.
  // Else exactly `qps` entries: role, peer and traffic of each QP from its spec (role,
  // qp_roles, peer_*, first_peer_qp, messages_per_qp and message_gap_ns unused); local
  // addresses, MTU, window, timers, PSN and DSCP still from this config.
  std::vector<RcQpSpec> qp_specs;
  bool record_completions = false;  // passed to every requester (see take_completions)

  uint32_t message_bytes = 65536;
  RcOp op = RcOp::kWrite;  // of every requester without qp_specs
  uint32_t mtu = 1024;
  uint32_t max_in_flight = 129;  // per QP; rxe's, see RcRequesterConfig
  uint32_t max_pkt_per_ack = 64;
  uint64_t messages_per_qp = 0;  // 0: unlimited
  uint64_t message_gap_ns = 0;
  uint64_t retransmit_timeout_ns = 67'108'864;
  uint64_t alloc_retry_ns = 1'000;
  uint32_t first_psn = 0;   // of every QP, both directions
  uint32_t max_burst = 32;  // packets poll() emits per call at most
  // The receive model of every QP: false, rxe's (RcResponder, go-back-N requesters); true,
  // out-of-order placement (RcPlacementResponder, requesters with selective_retransmit).
  bool ooo_placement = false;
  uint32_t placement_window = 0;  // PSNs; 0: max_in_flight, which a peer like us never overflows
  uint64_t placement_nak_delay_ns = 100'000;  // see RcPlacementResponderConfig::nak_delay_ns
  // IRN, lossy RoCE (Mittal et al., SIGCOMM 2018; needs ooo_placement): NAKs carry a SACK and
  // requesters resend every hole it shows (RcRequesterConfig::irn, RcPlacementResponderConfig::
  // sack); responders ACK every packet; retransmit_timeout_ns is RTO_high, irn_rto_low_ns RTO_low
  // while at most irn_rto_low_packets are unacknowledged; max_in_flight is the BDP cap.
  bool irn = false;
  uint64_t irn_rto_low_ns = 100'000;
  uint32_t irn_rto_low_packets = 3;
  // Not owned; outlives the endpoint and every packet it builds. Set: payloads are attached
  // from it (chained, no copy) and ICRCs of segments in it fold their known CRC; null: copied.
  PayloadStore* payload_store = nullptr;

  uint32_t first_local_qp = 0x11;
  uint32_t first_peer_qp = 0x11;
  MacAddress local_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  MacAddress peer_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  uint32_t local_ip = 0x0A000001;  // 10.0.0.1, host byte order
  uint32_t peer_ip = 0x0A000002;
  uint8_t dscp = 26;  // the usual RoCE class (TOS 0x68)
  // Congestion control. With dcqcn, every QP has DCQCN's reaction point (DcqcnRateControl):
  // its sends (WRITE packets, READ requests, READ responses) are paced at its current rate, and
  // a CNP addressed to it (receive()) cuts that rate. Without, nothing paces a QP but its window.
  std::optional<DcqcnConfig> dcqcn;
  // Or one of the ACK-clocked ones (at most one of the four): every packet is acknowledged and
  // each ACK goes to the QP's RateControl. DCTCP: responders echo CE as BECN in their ACKs;
  // TIMELY: the RTT from the send time of the packet an ACK acknowledges; HPCC: the INT records
  // the ACK echoes, and a window on the bytes in flight.
  std::optional<DctcpConfig> dctcp;
  std::optional<TimelyConfig> timely;
  std::optional<HpccConfig> hpcc;
  // A window on the bytes in flight, scaled by the rate (ns-3 HPCC's HAS_WIN 1, VAR_WIN 1:
  // W = this x rate / line rate, at least 1 byte), on top of any window the control keeps
  // itself; run.py gives DCTCP one BDP. 0: none.
  uint64_t var_window_bytes = 0;
  uint8_t ecn = 0;        // data packets' ECN codepoint (2: ECT(0), what a switch may mark CE)
  // Oblivious entropy spraying by every requester (RcRequesterConfig::entropy_values; 0: off).
  uint32_t entropy_values = 0;
  uint64_t entropy_seed = 0;
  bool entropy_reps = false;  // with entropy_values: REPS (RcRequesterConfig::entropy_reps)
  // Responders' ACK/NAKs, and the NIC's CNPs, carry the source port of the packet that made
  // them (what a REPS sender learns from); false: the QP's port.
  bool echo_entropy = false;
  int16_t ack_dscp = -1;  // ACK/NAKs' DSCP; -1: the data's (RcQpAddress::ack_dscp)

  // One of the ACK-clocked controls (DCTCP, TIMELY, HPCC): every packet is acknowledged.
  bool ack_clocked() const { return dctcp || timely || hpcc; }
  RcQpRole role_of(uint32_t qp_index) const;
  // What QP i's requester / responder is built with.
  RcRequesterConfig requester_config(uint32_t qp_index) const;
  RcQpAddress address(uint32_t qp_index) const;
  RcPlacementResponderConfig placement_config() const;  // of every QP (with ooo_placement)
  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct RcEngineCounters {
  uint64_t received = 0;      // every packet handed to receive()
  uint64_t not_roce = 0;      // ParsedPacket is not a RoCE packet
  uint64_t unknown_qp = 0;    // DestQP outside this engine's QPs
  uint64_t no_requester = 0;  // an ACK/NAK for a QP that has no requester
  uint64_t no_responder = 0;  // a WRITE or READ request for a QP that has no responder
  uint64_t bad_opcode = 0;    // not an ACKNOWLEDGE, READ RESPONSE, RDMA WRITE, READ request or CNP
  uint64_t cnps = 0;          // CNPs taken by a QP's reaction point
  uint64_t cnp_no_cc = 0;     // CNPs for a QP of an engine without congestion control: dropped
  uint64_t retired_qp = 0;    // a packet for a one-shot QP already retired (a late duplicate)
  uint64_t not_started = 0;   // an ACK/NAK/CNP for a one-shot QP whose flow has not started
};

// What a QP's requester leaves for its flow's record (live or retired): flows.csv's columns.
struct RcQpFlowCounters {
  uint64_t bytes_acked = 0;
  uint64_t packets_sent = 0;
  uint64_t packets_retransmitted = 0;
  uint64_t naks_received = 0;
  uint64_t timeouts = 0;
  bool has_requester = false;  // the QP has (or had) a requester
};

// How much of its QPs an engine looked at: the work a poll or next_event costs, which depends on
// the QPs with something due, not on how many QPs the engine has.
struct RcEngineWork {
  uint64_t polls = 0;
  uint64_t qp_visits = 0;  // QPs looked at by poll() and next_event_ns()
  uint64_t qps_created = 0;  // one-shot QPs whose state was made (at their post / first packet)
  uint64_t qps_retired = 0;
  uint64_t qps_live_peak = 0;  // one-shot QPs with state at once, at the most
};

// The reaction points of an engine summed at a moment (RcTrafficEngine::cc_summary).
struct RcCcSummary {
  uint64_t cnps = 0;
  uint64_t rate_cuts = 0;
  uint64_t cuts_deferred = 0;
  uint64_t qps = 0;              // QPs with a reaction point that sent anything
  uint64_t qps_at_min_rate = 0;  // of those, at rpg_min_rate at that moment
  uint64_t qps_limited = 0;      // of those, below line rate at that moment
  double rate_fraction_sum = 0;  // over those QPs: their time-mean rate over line rate, summed
  // The live QPs' RateControl::figures() summed, in the order figures() gives them (a fixed
  // array: the summary crosses fabric_emu's ranks as bytes). ACK-clocked controls only.
  static constexpr size_t kMaxFigures = 32;
  uint64_t figure_qps = 0;
  double figure_sum[kMaxFigures] = {};
};

// Where a driver with several uplinks that keeps each QP on one of them (per-flow, as a NIC
// bound to one port per QP does) lets poll() put packets: a QP's requester (and its READ
// responses) get a packet only while the uplink it leaves by has room, so a paused or slower
// uplink holds back its own QPs and no other's, and nothing queues beyond what it can take.
struct RcTxRoom {
  static constexpr uint16_t kAnyUplink = 0xFFFF;
  std::span<const uint16_t> qp_uplink;  // per QP index: the uplink its packets take (or kAnyUplink)
  std::span<uint32_t> frames;           // per uplink: packets it may still be given; poll() takes

  // Whether QP i may have a packet now.
  bool admits(uint32_t qp_index) const {
    const uint16_t u = qp_index < qp_uplink.size() ? qp_uplink[qp_index] : kAnyUplink;
    return u >= frames.size() || frames[u] > 0;
  }
  void take(uint32_t qp_index) {
    const uint16_t u = qp_index < qp_uplink.size() ? qp_uplink[qp_index] : kAnyUplink;
    if (u < frames.size() && frames[u] > 0) --frames[u];
  }
};

class RcTrafficEngine {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument when config.check() fails, the pool is null or its mbufs are
  // too small for the MTU.
  RcTrafficEngine(const RcTrafficEngineConfig& config, rte_mempool* pool);
  // The requesters record into this object's completion statistics: it stays where it is.
  RcTrafficEngine(const RcTrafficEngine&) = delete;
  RcTrafficEngine& operator=(const RcTrafficEngine&) = delete;

  // First ACK/NAKs that earlier waited for mbufs, then READ responses due (one per responder per
  // round), then the requesters' packets due at now_ns, one per QP per round starting where the
  // previous call stopped, so no QP starves; at most min(max_packets, max_burst) READ response
  // and requester packets together (the responders' ACK/NAKs are not limited).
  // Appends to `out`; returns how many were appended. Without max_packets: max_burst.
  // With `room`, a QP also needs room on its uplink (RcTxRoom), which each packet takes.
  size_t poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets,
              RcTxRoom* room = nullptr);
  size_t poll(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
    return poll(now_ns, out, config_.max_burst);
  }

  // Queues one RDMA WRITE of `bytes` (1..2^31) on QP qp_index, not sent before post_ns.
  // Throws std::out_of_range for a bad index, std::invalid_argument when that QP has no
  // requester in posted mode or bytes is out of range.
  void post(uint32_t qp_index, uint32_t bytes, uint64_t post_ns);

  // Appends every requester's completions recorded since the last call (qp_index filled in;
  // QP by QP, each QP's in completion order) and forgets them; returns how many. Empty unless
  // config().record_completions.
  size_t take_completions(std::vector<MessageCompletion>& out);

  // Dispatches by DestQP and opcode: ACKNOWLEDGE and READ RESPONSE -> that QP's requester,
  // RDMA WRITE and READ request -> its responder (whose ACK/NAK is appended to `out`). Anything
  // else is counted and freed.
  // Returns how many packets were appended.
  // `hops`: HPCC's INT records the ACK echoes, path order (the NIC strips them off the wire
  // before it hands the ACK over; empty for every other packet).
  size_t receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns, std::vector<rte_mbuf*>& out,
                 std::span<const IntHop> hops = {});

  // Earliest time poll() has something to do: 0 (or a time <= now) when packets are ready,
  // else the earliest retransmit deadline / message-gap / mbuf-retry time; kNever when only
  // arriving packets can make progress.
  // With `room`: only the QPs it admits (a QP whose uplink is full waits for that uplink to
  // drain, which the driver's egress says when).
  uint64_t next_event_ns(const RcTxRoom* room = nullptr) const;

  // A QP's congestion control (nullptr without one or out of range), as of its last event (its
  // timers are advanced lazily, at its sends, CNPs and ACKs and by cc_summary).
  const RateControl* rate_control(uint32_t qp_index) const;
  // Every reaction point advanced to now_ns and summed; the mean rates are over [0, now_ns].
  RcCcSummary cc_summary(uint64_t now_ns);

  // Every requester has sent all its messages and had them acknowledged (true without
  // requesters; never true with unlimited messages; posted QPs: all posted so far).
  bool done() const;

  // A one-shot responder QP whose flow is over (its requester had the last ACK): its state is
  // freed; later packets for it are counted (retired_qp) and freed. Throws std::out_of_range /
  // std::invalid_argument for a bad index or a QP that is not a one-shot responder.
  void retire_responder(uint32_t qp_index);
  // The flow counters of QP i's requester, live or retired (zero without one).
  RcQpFlowCounters flow_counters(uint32_t qp_index) const;
  const RcEngineWork& work() const { return work_; }
  // QPs with state now (every QP that is not one-shot, and the one-shot ones between their
  // start and retirement).
  uint64_t qps_live() const { return live_qps_; }

  uint32_t qps() const { return config_.qps; }
  const RcTrafficEngineConfig& config() const { return config_; }
  const RcEngineCounters& counters() const { return counters_; }
  // Sums over the QPs.
  RcRequesterCounters requester_totals() const;
  RepsCounters reps_totals() const;  // every requester's REPS counters (zero without REPS)
  RcResponderCounters responder_totals() const;
  RcPlacementResponderCounters placement_totals() const;  // zero without ooo_placement
  // Message completion times of all requesters.
  const CompletionTimeStats& completion_times() const { return completion_; }
  // Per QP (index 0..qps-1); nullptr when the QP has no such role, the index is out of range,
  // or (one-shot) its state does not exist now.
  const RcRequester* requester(uint32_t qp_index) const;
  const RcResponder* responder(uint32_t qp_index) const;
  const RcPlacementResponder* placement_responder(uint32_t qp_index) const;
  // The local requester QP that talks to (peer_ip, peer_qp), for a NIC that sees a READ request
  // leave and must know which QP its responses will be addressed to. False when none does.
  bool local_qp_of(uint32_t peer_ip, uint32_t peer_qp, uint32_t& local_qp) const;
  // Bytes of the engine: the object (its completion statistics inside), its config's per-QP
  // vectors, and every QP's requester, responder, placement responder and DCQCN reaction point,
  // with the lookup by peer.
  uint64_t memory_bytes() const;

 private:
  enum class Life : uint8_t { kLive, kNotStarted, kRetired };
  struct Qp {
    std::unique_ptr<RcRequester> requester;
    std::unique_ptr<RcResponder> responder;  // one of these two when the QP responds
    std::unique_ptr<RcPlacementResponder> placement;
    std::unique_ptr<RateControl> rate;  // with a congestion control
    // TIMELY: the send time of each packet in flight, by its sequence number modulo the size.
    std::vector<uint64_t> send_ns;
    bool sent = false;                       // anything sent under the reaction point
    bool one_shot = false;
    bool completing = false;  // in completing_
    Life life = Life::kLive;
  };
  // The parts of QP i that its role asks for (a one-shot QP at its start; every other QP at
  // construction). The reaction point starts as if it had existed since 0 (at line rate).
  void make_requester(uint32_t i, uint64_t now_ns);
  void make_responder(uint32_t i, uint64_t now_ns);
  void make_rate(Qp& q, uint64_t now_ns);
  // An ACK the requester took, to an ACK-clocked congestion control (becn: it echoed CE).
  void ack_feedback(Qp& q, const RcRequester& r, bool becn, uint64_t now_ns,
                    std::span<const IntHop> hops);
  // The congestion control's window (HPCC) lets the requester send.
  bool window_open(const Qp& q, uint64_t now_ns) const;
  double cc_line_rate_gbps() const;  // the congestion control's line rate; 0 without one
  size_t rate_control_bytes() const;  // sizeof the congestion control's class
  // Recomputes QP i's due times (ACK/NAKs, READ responses, requester) from its state.
  void reschedule(uint32_t i);
  // After QP i's requester changed: its completions noted, and a one-shot QP whose flow is
  // acknowledged (and whose completions were taken) retired.
  void after_requester(uint32_t i);
  void retire(uint32_t i);
  // The reaction point's figures of a retired QP, folded into cc_summary().
  void fold_rate(const Qp& q, uint64_t now_ns);
  // Round robin over `due` (QPs in index order) from the first at or after *cursor: try(i) is
  // one packet from QP i (true when it sent); a whole round without one ends it. Returns the
  // packets sent; *cursor becomes the QP after the last that sent.
  template <class Try>
  size_t round_robin(const std::vector<uint32_t>& due, uint32_t& cursor, size_t budget, Try&& try_one);
  static void insert_sorted(std::vector<uint32_t>& v, uint32_t i);
  static void erase_sorted(std::vector<uint32_t>& v, uint32_t i);
  // With a reaction point: whether QP i may send at now_ns (its timers brought up to now), and
  // what a packet it sent costs it (its pacing and byte counter).
  bool paced_ok(Qp& q, uint64_t now_ns);
  void paced_sent(Qp& q, const rte_mbuf* m, uint64_t now_ns);
  // When QP i, ready at `ready_ns`, may really send (its pacing), or wake to re-pace.
  uint64_t paced_next(const Qp& q, uint64_t ready_ns) const;

  RcTrafficEngineConfig config_;
  rte_mempool* pool_;
  CompletionTimeStats completion_;
  std::vector<Qp> qp_;
  // Indices of the QPs with a requester / responder now, in index order (totals, done()).
  std::vector<uint32_t> requesters_;
  std::vector<uint32_t> responders_;
  std::unordered_map<uint64_t, uint32_t> by_peer_;  // peer_ip << 24 | peer_qp -> local QP
  // When each QP next has work: ACK/NAKs (and a placement responder's timers), READ responses
  // (paced), requester packets (paced). poll() and next_event_ns() look at the due QPs only.
  QpSchedule ack_due_, read_due_, req_due_;
  std::vector<uint32_t> due_scratch_;
  std::vector<uint32_t> completing_;  // QPs whose requester holds completions not yet taken
  uint32_t next_requester_ = 0;       // round robin: the QP index to start at
  uint32_t next_responder_ = 0;       // READ responses' round robin
  RcEngineCounters counters_;
  mutable RcEngineWork work_;  // next_event_ns() counts its visits too
  uint64_t live_qps_ = 0;
  uint64_t live_one_shot_ = 0;
  // Retired one-shot QPs: their requesters' counters summed, each one's flow counters, and their
  // reaction points' figures (the rate integral to retirement, then idle at line rate).
  RcRequesterCounters retired_requesters_;
  RepsCounters retired_reps_;
  RcResponderCounters retired_responders_;
  RcPlacementResponderCounters retired_placement_;
  // Retired requesters' figures, in the order they retired, and per QP index its entry there
  // (kNoSlot: none; sized on the first retirement): a responder keeps 4 bytes, not 48.
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  std::vector<uint32_t> retired_slot_;
  uint32_t one_shot_requesters_ = 0;
  std::vector<RcQpFlowCounters> retired_flow_;
  RcCcSummary retired_cc_;                      // cnps, cuts, qps (rate fraction apart)
  double retired_rate_integral_gbit_ = 0;
  double retired_at_ns_sum_ = 0;
};

}  // namespace spraynet
