// The requester side of one RoCE RC queue pair, as Soft-RoCE (Linux rxe) behaves: it sends RDMA
// WRITE messages segmented by RcWriteSegmenter, or RDMA READ requests, keeps a bounded number of
// PSNs unacknowledged, and recovers by go-back-N, either from a NAK (PSN sequence error: resend
// from the PSN the responder expects) or from the retransmit timer (resend from the oldest
// unacknowledged PSN).
//
// What follows rxe (drivers/infiniband/sw/rxe, checked against torvalds/linux):
//  - AckReq: rxe_req.c init_req_packet sets it on the last packet of a message and otherwise when
//    `noack_pkts++ > RXE_MAX_PKT_PER_ACK` (64, rxe_param.h), resetting the count on every AckReq
//    packet: so a long message asks for an ACK every 66th packet. The count runs per QP, across
//    messages and retransmissions, as in rxe.
//  - Window: rxe_requester() waits (wait_psn) when psn_compare(req.psn, comp.psn +
//    RXE_MAX_UNACKED_PSNS) > 0, so with RXE_MAX_UNACKED_PSNS 128 it sends PSNs comp.psn ..
//    comp.psn + 128: 129 outstanding. max_in_flight counts unacknowledged PSNs exactly, so rxe is
//    max_in_flight 129, the default.
//  - ACKs are cumulative (rxe_comp.c check_psn / COMPST_UPDATE_COMP: comp.psn = ack PSN + 1), and
//    a message completes as rxe's WQE does: when a response passes its last PSN (COMPST_COMP_WQE)
//    or acknowledges that PSN (COMPST_COMP_ACK), once its last packet has gone out. A response
//    older than the oldest unacknowledged PSN is ignored (check_psn returns COMPST_DONE) and
//    counted stale_responses, also while a retry is under way.
//  - An ACK that overtakes a go-back (req_retry has rewound req.psn to comp.psn and the responder
//    had more than the requester knew): rxe's requester does not skip what the completer has
//    acknowledged since, it resends every PSN from the rewind point (req.psn stays behind
//    comp.psn), and the responder re-ACKs each as a duplicate (counted retransmitted_acked).
//    req_retry puts every WQE back in wqe_state_posted, and check_psn takes a response only up to
//    the first message not resent to its end since (get_wqe: posted -> COMPST_DONE; past a WQE
//    still processing -> COMPST_DONE):
//    the rest of it is ignored (responses_ahead_of_resend), so completions wait for the resend
//    and the duplicates' re-ACKs. (Two corners of rxe are not followed: a go-back while a message
//    is wholly acknowledged but not completed completes it, where req_retry would restart at it
//    with nothing left to send; a message completed while still being resent is not resent
//    further, where rxe sends the rest of the completed WQE.)
//  - A NAK "PSN sequence error" implicitly acknowledges every PSN before its own (check_ack:
//    "a nak implicitly acks all packets with psns before"); req_retry() then resends from it.
//  - Once a retry has started, further NAKs do not start another until an ACK arrives or a
//    message completes (COMPST_ERROR_RETRY: started_retry, cleared by reset_retry_counters);
//    a timeout always retries.
//  - The retransmit timer (retrans_timer): armed when a packet is sent and none is armed
//    (update_state); pushed back to now + timeout after every response that reaches the completer
//    while req.psn > comp.psn (rxe_comp.c COMPST_EXIT: reset_retry_timer / mod_timer), a stale
//    duplicate included, so a stream of them holds off the timeout as in rxe. When it fires with
//    req.psn <= comp.psn (nothing outstanding, or resending PSNs an ACK overtook) it retries
//    nothing (COMPST_ERROR_RETRY: "no point in retrying"). A response that starts a retry leaves
//    the re-arm to the resend (rxe's completer re-arms after the requester's resend).
//    Divergence, countable only after an idle gap: rxe never deletes the timer, so with nothing
//    outstanding it stays pending from the last response and the next send does not re-arm it
//    (the next timeout may come up to that gap early, and a lapse with nothing to do wakes the
//    completer); here it lapses when everything is acknowledged and the next send arms it.
//    The default timeout is perftest's: 4.096 us x 2^14 = 67.108864 ms; retries are unlimited
//    (perftest's retry_cnt 7 means "infinite" in rxe).
//  - The error state (rxe_comp.c check_ack -> COMPST_ERROR -> rxe_qp_error): a NAK "invalid
//    request" (0x61), "remote access error" (0x62), "remote operational error" (0x63) or any
//    other NAK code, at a PSN check_psn passes on, fails the QP (counted fatal_naks; a bad READ
//    response, below, too): counted qp_errors, every outstanding message completes in error
//    (messages_flushed, no MessageCompletion: those record successes only), nothing more is sent,
//    the timer stops, later responses are dropped (responses_in_error), a later post() is flushed
//    at once, and done() is true. RNR NAKs are counted other_naks and left to the timer (rxe waits
//    the RNR timer and retries; no responder of ours sends one).
//  - UDP source port: rxe_qp.c, 0xC000 + hash_32(qpn, 14) (see rxe_udp_source_port).
//  - RDMA READ (rxe_req.c, rxe_comp.c): one READ REQUEST packet (RETH: VA, rkey, DMA length,
//    AckReq set as on every last packet) consumes N = max(1, ceil(length / MTU)) PSNs, one per
//    response packet (IBA 9.7.1; rxe update_wqe_psn: req.psn = first_psn + num_pkt); the window
//    check is on the request's own PSN, as rxe's. Responses are taken in PSN order only
//    (rxe_comp.c): check_psn first completes the WRITEs wholly before the response's PSN
//    (implicitly acknowledged) and retries (COMPST_ERROR_RETRY) when an unfinished READ lies
//    wholly before it; a response after the expected PSN within the READ is dropped
//    (COMPST_DONE, counted read_responses_out_of_order), so a lost response is recovered once a
//    response or ACK past the READ arrives, or by the timer. check_ack: FIRST/ONLY must start a
//    READ, MIDDLE/LAST must follow FIRST/MIDDLE (a replay restarting at FIRST/ONLY also passes),
//    AETH on FIRST/LAST/ONLY must be an ACK; a READ response resets the retry state; a READ
//    completes on its last response (do_read: resid 0 and END). An ACK past an unfinished READ
//    also retries (check_psn). The retry re-issues the READ from the first missing response
//    (req_retry: iova += done bytes, RETH length = resid, PSN = comp.psn).
//    A response at the expected PSN that fails check_ack (out of opcode sequence, a NAK syndrome,
//    for a WRITE) is COMPST_ERROR: counted read_response_errors, and the QP enters the error
//    state below. So is a payload other than this packet's share of the READ or an END on
//    the wrong packet (rxe's do_read fails an overlong one and never completes on a short one).
//    Not modelled: max_rd_atomic (outstanding READs are bounded only by the PSN window), fences.
//
// Selective retransmission (RcRequesterConfig::selective_retransmit), for a responder that
// places out of order (RcPlacementResponder) instead of rxe's: nothing is ever gone back over.
//  - A NAK "PSN sequence error" still acknowledges every PSN before its own, and resends that
//    one PSN only (the first one the responder misses; RoCE's NAK names no other).
//  - The retransmit timer resends the oldest unacknowledged PSN only. It is pushed back only by a
//    response that acknowledges something or resends, so that a stream of stale duplicates
//    cannot hold off recovery (rxe's rule, above, re-arms on every response). Until everything sent
//    before the timeout is acknowledged, each ACK that moves the oldest unacknowledged PSN on
//    resends the new oldest at once: it was sent a whole timeout ago and the responder, whose
//    ACK is cumulative, says it is still missing (a tail loss of k packets costs one timeout and
//    k - 1 round trips, not k timeouts).
//  - A resent packet always asks for an ACK, so that the hole it fills is answered at once.
//  - rxe's started_retry latch does not apply: each NAK names its own hole.
//
// Two ways to feed it messages:
//  - fixed (the default): `messages` RDMA operations (config op: WRITE or READ) of message_bytes
//    each (unlimited when 0), sent as fast as the window and message_gap_ns allow;
//  - posted (RcRequesterConfig::posted): nothing is sent until the caller post()s a message of
//    any size (1..2^31 bytes) and op at a time post_ns; messages go in post order, none before its
//    post_ns. Window, AckReq, go-back-N, PSN continuity and message_gap_ns are the same.
// With record_completions, every completed message leaves a MessageCompletion for
// take_completions().
//
// Ownership: receive() takes the mbuf in every case and frees it. poll() appends freshly built
// packets to `out`; the caller owns them. When the mempool is empty the packet is not sent, the
// failure is counted and the requester waits alloc_retry_ns before trying again (no spinning).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/completion_time_stats.h"
#include "dataplane/rc_endpoint/oblivious_entropy.h"
#include "dataplane/rc_endpoint/rc_write_segmenter.h"
#include "dataplane/rc_endpoint/reps_entropy.h"
#include "dataplane/rc_endpoint/sequence_bits.h"
#include "dataplane/wire/packet_builder.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

class PayloadStore;

struct ParsedPacket;

// rxe's UDP source port for a QP: 0xC000 + hash_32(qpn, 14), the kernel's multiplicative hash
// (golden ratio 0x61C88647) keeping the top 14 bits. One port per QP keeps a QP on one ECMP path.
uint16_t rxe_udp_source_port(uint32_t qpn);

// The RDMA operation of a message.
enum class RcOp : uint8_t { kWrite, kRead };
const char* to_string(RcOp op);  // "write" | "read"

// Where one QP's packets go. Shared by the requester and the responder of the RC engine.
struct RcQpAddress {
  MacAddress local_mac{};
  MacAddress peer_mac{};
  uint32_t local_ip = 0;  // host byte order
  uint32_t peer_ip = 0;
  uint32_t local_qp = 0;      // 24 bits; the QP this side's packets are addressed to
  uint32_t peer_qp = 0;       // 24 bits; DestQP of everything this side sends
  uint16_t udp_src_port = 0;  // 0: rxe_udp_source_port(local_qp)
  uint8_t dscp = 0;           // IPv4 TOS = dscp << 2 | ecn
  // The ECN codepoint of the data packets (WRITEs, READ requests and responses): 0 Not-ECT, 2
  // ECT(0), as a NIC with congestion control on sends them so that switches may mark them CE.
  uint8_t ecn = 0;
  // The DSCP of ACK/NAKs: -1, the data's (as NICs do); else their own class (ns-3's
  // AckHighPrio: the CNP's strict-priority class). ACK/NAKs are never ECN-capable.
  int16_t ack_dscp = -1;

  // Empty when valid, else "key: reason".
  std::string check() const;
  // The Ethernet/IPv4/UDP part of a packet from this side to the peer (no payload).
  FrameSpec frame(uint16_t ip_id) const;
};

// An RC ACK or NAK (AETH `syndrome`, `msn`) for `psn`, from `a`'s side to its peer; nullptr
// when the pool is empty. Shared by the responders, which differ only in when they answer.
// `src_port`: the ACK's UDP source port, 0 for the QP's (an echo of the entropy the acknowledged
// packet had, for REPS: RcResponderConfig::echo_entropy). `extension`: bytes after the AETH (an
// IRN NAK's SACK, irn_sack.h), covered by the ICRC.
rte_mbuf* build_rc_ack(rte_mempool* pool, const RcQpAddress& a, uint16_t ip_id, uint32_t psn,
                       uint8_t syndrome, uint32_t msn, uint16_t src_port = 0,
                       bool becn = false, std::span<const uint8_t> extension = {});

struct RcRequesterConfig {
  uint32_t message_bytes = 65536;  // fixed mode only
  uint32_t mtu = 1024;             // path MTU: 256, 512, 1024, 2048 or 4096
  // Unacknowledged PSNs allowed, exactly. rxe's RXE_MAX_UNACKED_PSNS = 128 admits 129 (see the
  // top), hence the default. Must be at least max_pkt_per_ack + 2, or a long message could fill
  // the window with packets none of which asks for an ACK, and only the retransmit timer would
  // move it on.
  uint32_t max_in_flight = 129;
  uint32_t max_pkt_per_ack = 64;  // rxe: RXE_MAX_PKT_PER_ACK
  uint64_t messages = 0;          // fixed mode only; 0: unlimited
  // Minimum time between the first transmissions of consecutive messages; 0: back to back.
  uint64_t message_gap_ns = 0;
  uint64_t retransmit_timeout_ns = 67'108'864;  // 4.096 us x 2^14, perftest's default timeout 14
  uint64_t alloc_retry_ns = 1'000;              // wait after an empty mempool
  uint32_t first_psn = 0;                       // 24 bits
  uint64_t remote_va = 0x00007f0000000000ull;   // RETH VA of message 0; message k at + k x bytes
  uint32_t rkey = 0x1234abcd;
  RcOp op = RcOp::kWrite;  // fixed mode's messages; posted mode: post()'s default
  // Posted mode: send only the messages given to post() (message_bytes, messages ignored).
  bool posted = false;
  // Keep a MessageCompletion per completed message, for take_completions().
  bool record_completions = false;
  // Resend only the PSN a NAK names, or the oldest one on a timeout (see the top); false: rxe's
  // go-back-N.
  bool selective_retransmit = false;
  // Not owned; outlives the endpoint and every packet it builds. Set: payloads are attached
  // from it (chained, no copy) and ICRCs of segments in it fold their known CRC; null: copied.
  PayloadStore* payload_store = nullptr;
  // Oblivious entropy spraying (ObliviousEntropy): every packet's UDP source port the next of a
  // per-QP permutation of this many values (a power of two, 2..16384); 0 or 1: the QP's port.
  uint32_t entropy_values = 0;
  uint64_t entropy_seed = 0;
  // With entropy_values: REPS (RepsEntropy) instead of the oblivious permutation: values
  // recycled from the ACKs that echo them (the responder's echo_entropy), never one a CNP
  // marked, frozen by a retransmission timeout.
  bool entropy_reps = false;
  // IRN (Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018), with
  // selective_retransmit, facing an RcPlacementResponder with sack: a NAK's SACK (irn_sack.h)
  // marks the PSNs the responder has beyond the one it names, and every PSN from that one up to
  // the highest SACKed that is neither SACKed nor already resent since its last send is resent
  // (every hole of the NAK in one round; a hole whose resend is lost is the timer's). The timer
  // is IRN's two: retransmit_timeout_low_ns (RTO_low) while at most rto_low_packets (N) are
  // unacknowledged, retransmit_timeout_ns (RTO_high) otherwise. IRN's BDP cap is max_in_flight.
  bool irn = false;
  uint64_t retransmit_timeout_low_ns = 100'000;  // IRN §4.1: RTO_low 100 us (RTO_high 320 us)
  uint32_t rto_low_packets = 3;                  // IRN §4.1: N = 3

  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct RcRequesterCounters {
  uint64_t messages_started = 0;       // first packet sent
  uint64_t messages_completed = 0;     // last packet acknowledged
  uint64_t packets_sent = 0;           // including retransmissions
  uint64_t packets_retransmitted = 0;  // packets sent again (PSN sent before)
  uint64_t payload_bytes_sent = 0;     // including retransmissions
  uint64_t bytes_acked = 0;            // payload bytes newly acknowledged (by ACK or NAK)
  uint64_t bytes_completed = 0;        // payload bytes of completed messages
  uint64_t responses_received = 0;     // every packet handed to receive()
  uint64_t acks_received = 0;          // AETH ACK syndromes, stale ones included
  uint64_t naks_received = 0;          // NAK PSN sequence error, stale ones included
  uint64_t nak_retries = 0;            // go-back-N started by a NAK
  uint64_t naks_ignored = 0;           // a retry was already under way (rxe's started_retry)
  uint64_t timeouts = 0;               // go-back-N started by the retransmit timer
  uint64_t stale_responses = 0;        // ACK/NAK for a PSN before the oldest unacknowledged
  uint64_t invalid_responses = 0;      // ACK/NAK for a PSN never sent
  uint64_t other_naks = 0;             // RNR NAK, reserved syndromes: ignored, the timer recovers
  uint64_t icrc_errors = 0;
  uint64_t wrong_qp = 0;                     // DestQP is not this QP
  uint64_t bad_opcode = 0;                   // not an RC ACKNOWLEDGE or READ RESPONSE
  uint64_t read_requests_sent = 0;           // READ REQUEST packets, re-issues included
  uint64_t read_responses_received = 0;      // READ RESPONSE packets, every one
  uint64_t read_responses_accepted = 0;      // in PSN order: their payload taken
  uint64_t read_responses_out_of_order = 0;  // after the expected PSN: dropped (COMPST_DONE)
  uint64_t read_response_errors = 0;  // out of opcode sequence, NAK AETH, wrong length, or for a
                                      // WRITE: the QP fails (rxe COMPST_ERROR)
  uint64_t read_retries = 0;  // retries started by a response or ACK past an unfinished READ
  uint64_t read_retries_ignored = 0;  // such a response while a retry was under way
  uint64_t read_bytes_received = 0;   // READ response payload accepted
  // Go-back-N: packets resent for PSNs an ACK had acknowledged since the go-back (rxe resends
  // them; the responder re-ACKs them as duplicates). Also counted in packets_retransmitted.
  uint64_t retransmitted_acked = 0;
  // ACK/NAK/READ responses (wholly or in part) not taken because they lie past a message that
  // has not been (re)sent to its end since the last go-back (rxe get_wqe/check_psn: COMPST_DONE)
  uint64_t responses_ahead_of_resend = 0;
  // The error state (rxe COMPST_ERROR -> rxe_qp_error):
  uint64_t fatal_naks = 0;        // NAK invalid request, remote access or remote operational error
  uint64_t qp_errors = 0;         // times the QP entered the error state (0 or 1 per QP)
  uint64_t messages_flushed = 0;  // messages completed in error (the NAKed one included), and
                                  // posts made in the error state
  uint64_t responses_in_error = 0;  // responses received in the error state: dropped
  uint64_t malformed = 0;   // not RoCE, multi-segment, or headers that the mbuf does not hold
  uint64_t pool_empty = 0;  // packets not built for lack of mbufs (retried later)
  // selective_retransmit: packets resent alone (nak_retries and timeouts count what began them)
  uint64_t selective_retransmissions = 0;
  // irn: NAKs that carried a SACK, PSNs they showed arrived, PSNs a NAK showed missing that were
  // not resent again (resent already since their last send), SACKs that were malformed (the NAK
  // then counts as RoCE's, one PSN), and timeouts taken with RTO_low.
  uint64_t sack_naks = 0;
  uint64_t sacked_packets = 0;
  uint64_t sack_resends_skipped = 0;
  uint64_t sack_malformed = 0;
  uint64_t rto_low_timeouts = 0;
  // Message completion times of this QP: completed - first sent (fixed mode), completed -
  // posted (posted mode).
  DurationSummary completion;

  RcRequesterCounters& operator+=(const RcRequesterCounters& o);
};

// One completed message (recorded when RcRequesterConfig::record_completions).
struct MessageCompletion {
  uint32_t qp_index = 0;  // the engine's QP index (0 from a bare RcRequester)
  uint32_t bytes = 0;
  uint64_t post_ns = 0;  // fixed mode: = first_sent_ns
  uint64_t first_sent_ns = 0;
  uint64_t completed_ns = 0;  // its last packet acknowledged
};

class RcRequester {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument when config.check() or address.check() fails, or when the
  // largest packet does not fit one mbuf of `pool`. Completion times go to `shared_stats` when
  // given (an engine aggregating many QPs; it must outlive this object), else to an own one.
  RcRequester(const RcRequesterConfig& config, const RcQpAddress& address, rte_mempool* pool,
              CompletionTimeStats* shared_stats = nullptr);
  // The payload bytes a requester of `config` sends (and adds to config.payload_store): one
  // MTU, or the message when shorter and not posted.
  static std::vector<uint8_t> payload_pattern(const RcRequesterConfig& config);

  // First fires the retransmit timer if it is due (deadline <= now_ns), then appends to `out`
  // up to max_packets packets that may be sent at now_ns: retransmissions after a go-back, then
  // new packets while the window, the message count and the message gap allow. Returns how
  // many were appended.
  size_t poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets = 32);

  // An RC ACKNOWLEDGE (ACK or NAK) or READ RESPONSE addressed to this QP; takes ownership of m
  // and frees it.
  // `p` must be what PacketParser said of m. Acknowledgements take effect at once; the packets
  // a NAK asks for are sent by the next poll().
  void receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns);

  // Posted mode: queues one RDMA WRITE (or, with op, READ) of `bytes` (1..2^31), not to be sent
  // before post_ns. Without op: config().op.
  // Throws std::invalid_argument for a bad size or when the requester is not in posted mode.
  void post(uint32_t bytes, uint64_t post_ns);
  void post(uint32_t bytes, uint64_t post_ns, RcOp op);

  // When poll() next has something to do: 0 when it can send right away; a time (possibly
  // past) when a send waits for the message gap, a post time or an mbuf retry, or the
  // retransmit deadline; kNever when only a response (or a post()) can make progress.
  uint64_t next_event_ns() const;

  // Fixed mode: every configured message has been sent and acknowledged (never true when
  // unlimited). Posted mode: every posted message has been acknowledged (true with none).
  bool done() const;

  // Appends the completions recorded since the last call to `out` (oldest first) and forgets
  // them; returns how many. Nothing is recorded unless config().record_completions.
  size_t take_completions(std::vector<MessageCompletion>& out);
  bool has_completions() const { return !completions_.empty(); }

  // A CNP echoing the value (UDP source port) of the packet that was marked: REPS never reuses
  // it. Nothing without REPS.
  void on_marked_entropy(uint16_t port) {
    if (reps_) reps_->on_mark(port);
  }
  // REPS' counters (null without REPS).
  const RepsCounters* reps_counters() const { return reps_ ? &reps_->counters() : nullptr; }
  const RcRequesterCounters& counters() const { return counters_; }
  const CompletionTimeStats& completion_times() const { return *stats_; }
  const RcRequesterConfig& config() const { return config_; }
  const RcQpAddress& address() const { return address_; }
  uint32_t packets_per_message() const { return segmenter_.packets(); }  // fixed mode
  uint64_t messages_posted() const { return config_.posted ? created_ : 0; }
  // Messages posted (or, in fixed mode, started) and not yet completed.
  uint64_t messages_outstanding() const { return messages_.size(); }
  uint32_t next_psn() const { return psn_of(next_); }  // next to send
  // Packets since the first: how far the QP is acknowledged (the oldest unacknowledged) and how
  // far it has ever sent (one past the newest PSN sent). Times the MTU, the byte sequence an
  // ACK-clocked congestion control counts windows in (ns-3's ack seq and snd_nxt).
  uint64_t acked_packets() const { return una_; }
  uint64_t sent_packets() const { return high_; }
  // Bytes of this QP's requester: the object and what it allocated (the payload pattern
  // when no payload store holds it, its own completion statistics, the message and resend
  // queues, completions not yet taken).
  uint64_t memory_bytes() const;
  uint32_t oldest_unacked_psn() const { return psn_of(una_); }
  // Sent, not acknowledged, not gone back (0 while resending PSNs an ACK has overtaken).
  uint64_t in_flight() const { return next_ > una_ ? next_ - una_ : 0; }
  // rxe's QP_STATE_ERROR, entered on a fatal NAK: nothing is sent, every message was flushed.
  bool in_error() const { return error_; }
  bool retransmit_timer_armed() const { return timer_armed_; }
  uint64_t retransmit_deadline_ns() const { return timer_armed_ ? deadline_ns_ : kNever; }

 private:
  // A message posted (fixed mode: started, or about to be) and not completed.
  struct Message {
    uint64_t first_seq = 0;  // sequence number of its first packet
    uint64_t va = 0;         // RETH virtual address
    uint64_t post_ns = 0;
    uint64_t first_sent_ns = 0;
    uint32_t bytes = 0;
    uint32_t packets = 0;  // PSNs: WRITE packets, or READ response packets
    RcOp op = RcOp::kWrite;
  };

  uint32_t psn_of(uint64_t seq) const;
  uint32_t payload_of(const Message& m, uint32_t index) const;
  // Sequence number (packets since the first) of `psn`, read relative to the oldest
  // unacknowledged packet: false when the PSN is before it.
  bool seq_of(uint32_t psn, uint64_t& seq) const;
  // Message number next_msg_ exists (posted) or may be created (fixed mode, within messages).
  bool has_next_message() const;
  // next_ is the first packet of a message never sent: the message gap and post time apply.
  bool at_message_start() const;
  uint64_t message_start_ns() const;  // no new message before this
  bool can_send(uint64_t now_ns) const;
  bool new_message_waits(uint64_t now_ns) const;
  void add_message(uint32_t bytes, uint64_t post_ns, RcOp op);
  Message& next_message();  // creates it in fixed mode
  rte_mbuf* build(const Message& msg, uint32_t index, bool ack_req);
  // The READ REQUEST for msg's responses from `index` on (index > 0: a retry's re-issue).
  rte_mbuf* build_read(const Message& msg, uint32_t index);
  // What rxe_comp.c check_psn makes of a response for `seq` (after completing the messages
  // wholly before it whose last packet has been (re)sent since the last go-back).
  enum class PsnCheck {
    kStale,      // before una_: ignored (COMPST_DONE)
    kCompAck,    // the last PSN of the oldest message, before una_: complete it (COMPST_COMP_ACK)
    kAhead,      // past a message not (re)sent to its end since the go-back: ignored
    kReadAhead,  // inside an unfinished READ after una_: ignored (COMPST_DONE)
    kReadRetry,  // past an unfinished READ: COMPST_ERROR_RETRY
    kCheckAck,   // at or after una_ in the oldest message: look at the response (check_ack)
  };
  PsnCheck check_psn(uint64_t seq, uint64_t now_ns);
  // una_ = end_seq (if later), counting the payload acknowledged; completes nothing.
  void advance_una(uint64_t end_seq);
  void complete_front(uint64_t now_ns);  // the oldest message completes (una_ past it)
  // Acknowledges every packet before end_seq; returns whether a message completed.
  bool acknowledge_before(uint64_t end_seq, uint64_t now_ns);
  void go_back_to_una(uint64_t now_ns);
  void restart_timer(uint64_t now_ns);   // selective mode's timer rule
  void completer_pass(uint64_t now_ns);  // go-back-N: rxe's timer re-arm after every response
  bool window_open() const;
  void handle_fatal_nak(uint32_t psn, uint64_t now_ns);
  void enter_error();
  void handle_ack(uint32_t psn, uint64_t now_ns);
  // `sack`: the NAK's SACK extension (irn_sack.h), empty without one.
  void handle_nak(uint32_t psn, uint64_t now_ns, std::span<const uint8_t> sack = {});
  // irn: the timer's length now (RTO_low while few packets are unacknowledged).
  uint64_t timeout_ns() const;
  void arm_timer(uint64_t now_ns);  // deadline now + timeout_ns()
  // irn: flags kept per unacknowledged packet (sequence_bits.h, irn_bits_ slots).
  bool irn_flag(const std::vector<uint64_t>& map, uint64_t seq) const {
    return sequence_bit(map, irn_bits_, seq);
  }
  void irn_mark(std::vector<uint64_t>& map, uint64_t seq, bool v) {
    set_sequence_bit(map, irn_bits_, seq, v);
  }
  // Selective retransmission: queues one packet to resend (once), sends what is queued.
  void queue_resend(uint64_t seq);
  size_t send_resends(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets);
  const Message& message_of(uint64_t seq) const;  // the message holding a sent, unacked packet
  void handle_read_response(uint8_t op, uint8_t syndrome, uint32_t psn, uint32_t payload,
                            uint64_t now_ns);
  // The first READ still unfinished, or nullptr (none outstanding: no READ ever posted).
  const Message* first_unfinished_read() const;
  // rxe COMPST_ERROR_RETRY: go back to una_ unless a retry is already under way.
  void retry_for_read(uint64_t now_ns);

  RcRequesterConfig config_;
  RcQpAddress address_;
  rte_mempool* pool_;
  RcWriteSegmenter segmenter_;  // of message_bytes (fixed mode)
  std::vector<uint8_t> payload_;
  std::span<const uint8_t> payload_bytes_;  // payload_, or its copy in the payload store
  std::unique_ptr<CompletionTimeStats> own_stats_;
  CompletionTimeStats* stats_;

  // Packet sequence numbers count from 0 at first_psn and never wrap; PSN = first_psn + seq.
  uint64_t una_ = 0;   // oldest unacknowledged
  uint64_t next_ = 0;  // next to send (goes back on a retry)
  uint64_t high_ = 0;  // one past the highest ever sent
  // Messages are numbered from 0; messages_ holds numbers completed_messages_.. in order.
  std::deque<Message> messages_;
  uint64_t completed_messages_ = 0;
  uint64_t created_ = 0;   // messages ever added to messages_
  uint64_t next_msg_ = 0;  // the message holding next_ (or the next to start)
  uint64_t end_seq_ = 0;   // one past the last packet of the last message created
  uint64_t next_va_ = 0;   // RETH VA of the next message created
  uint64_t reads_ = 0;     // READ messages in messages_
  int comp_opcode_ = -1;   // rxe's qp->comp.opcode: last READ response taken mid-READ, or -1
  std::vector<MessageCompletion> completions_;
  uint32_t noack_pkts_ = 0;     // rxe's qp->req.noack_pkts
  bool retry_started_ = false;  // rxe's qp->comp.started_retry
  // A response started a go-back: the resend arms the timer (completer_pass).
  bool retry_from_response_ = false;
  bool error_ = false;  // rxe's QP_STATE_ERROR
  // Selective retransmission: the packets to resend, in the order they were found missing, and
  // one past the highest sent when the retransmit timer fired.
  std::deque<uint64_t> resend_;
  uint64_t recover_ = 0;
  // irn: SACKed (the responder has it) and resent (since its last send) per unacknowledged
  // packet; empty without irn.
  size_t irn_bits_ = 0;
  std::vector<uint64_t> sacked_;
  std::vector<uint64_t> resent_;
  bool timer_armed_ = false;
  uint64_t deadline_ns_ = 0;
  uint64_t timer_start_ns_ = 0;  // when the timer was last armed
  uint64_t next_message_ns_ = 0;  // the message gap: no new message before this
  uint64_t alloc_retry_at_ns_ = 0;
  uint16_t ip_id_ = 0;
  // RcRequesterConfig::entropy_values; a pointer, so that QPs without it (most, and a cdf run
  // has millions) pay 8 bytes for it.
  std::unique_ptr<ObliviousEntropy> entropy_;
  std::unique_ptr<RepsEntropy> reps_;  // RcRequesterConfig::entropy_reps
  RcRequesterCounters counters_;
};

}  // namespace spraynet
