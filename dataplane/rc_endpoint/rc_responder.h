// The responder side of one RoCE RC queue pair for RDMA WRITEs and READs, as Soft-RoCE (Linux
// rxe) behaves. This is what makes packet reordering expensive: rxe keeps no out-of-order state.
//
// Per request packet, in rxe's order (drivers/infiniband/sw/rxe/rxe_resp.c, torvalds/linux):
//  - check_psn(): PSN after the expected one -> the first time, one NAK "PSN sequence error"
//    (syndrome 0x60) carrying the expected PSN (RESPST_ERR_PSN_OUT_OF_SEQ ->
//    send_ack(qp, AETH_NAK_PSN_SEQ_ERROR, qp->resp.psn)), and the latch sent_psn_nak is set;
//    while it is set, later out-of-order packets are dropped silently (RESPST_CLEANUP). The
//    packet with the expected PSN clears it. PSN before the expected one -> duplicate.
//  - duplicate_request(): a duplicate SEND/WRITE is acknowledged again, with the PSN of the last
//    accepted packet (send_ack(qp, AETH_ACK_UNLIMITED, ack_psn - 1)), not the duplicate's own
//    PSN, and for every duplicate whether or not it asks for an ACK (C9-105).
//  - check_op_seq(): after WRITE FIRST/MIDDLE only MIDDLE/LAST may follow (a FIRST, ONLY or READ
//    REQUEST there: RESPST_ERR_MISSING_OPCODE_LAST_C); otherwise a MIDDLE or LAST is missing its
//    FIRST (RESPST_ERR_MISSING_OPCODE_FIRST). check_length(): FIRST and MIDDLE carry exactly one
//    MTU, LAST 1..MTU, ONLY at most one MTU (RESPST_ERR_LENGTH; here also a READ REQUEST with a
//    payload). These are class C errors: do_class_ac_error(AETH_NAK_INVALID_REQ), so
//    acknowledge() sends a NAK "invalid request" (syndrome 0x61) with the packet's own PSN and
//    RESPST_ERROR moves the QP to the error state (rxe_qp_error): from then on every request is
//    dropped unanswered (get_req drains them, counted dropped_in_error) and READ responses not yet
//    sent are dropped with them. Only a packet with the expected PSN gets that far.
//  - execute(): accept, next expected PSN = PSN + 1, MSN + 1 on the last packet of a message;
//    acknowledge(): an ACK (syndrome AETH_ACK_UNLIMITED 0x1F, MSN) with the packet's own PSN
//    when it asks for one (bth_ack).
// The ICRC is checked first (rxe_icrc.c via rxe_recv: a bad one is dropped without a word).
//
// RDMA READ (rxe_resp.c):
//  - A READ REQUEST in sequence (check_op_seq: not inside a WRITE message; no payload) is
//    executed: MSN + 1 at once (execute(), C9-148), a responder resource records it
//    (rxe_prepare_res: first_psn = PSN, last_psn = PSN + N - 1, N = max(1, ceil(len / MTU)),
//    VA, length, rkey; the oldest of max_read_resources is reused), and the next expected PSN is
//    PSN + N (read_reply: resp.psn = cur_psn after the last packet). ack_psn is left alone, as
//    in rxe (execute() sets it for SEND/WRITE only).
//  - read_reply(): N packets with PSNs PSN .. PSN + N - 1: READ RESPONSE ONLY when it fits one
//    MTU, else FIRST, MIDDLE..., LAST; FIRST/LAST/ONLY carry an AETH (ACK, unlimited credits,
//    MSN), MIDDLE none; every one an MTU of payload but the last. They are sent by poll() (the
//    engine's TX budget paces them, as rxe's responder task sends one per pass), and an ACK or
//    NAK decided after a READ waits until its responses are out, so the requester sees them in
//    the order rxe's single responder task would send them.
//  - duplicate_request() for a READ: find_resource() looks for the resource whose PSNs hold the
//    duplicate's; none: dropped (class D error). The duplicate must ask for the same or a
//    subset of the data (VA, length within the resource's, same rkey) else it is dropped; then
//    the resource is reset to it and the reply replayed from the duplicate's PSN: opcodes from
//    FIRST/ONLY when it is the resource's first PSN (rdatm_res_state_new), else MIDDLE/LAST
//    (rdatm_res_state_replay).
//
// Ownership: receive() takes the mbuf in every case and frees it. ACKs/NAKs are built with
// build_roce_mbuf from `pool` and appended to `out`; when the pool is empty they stay pending
// (the newest ACK, plus a NAK the ACK does not supersede), counted, and are retried by
// receive()/poll() no sooner than alloc_retry_ns later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rc_requester.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

class PayloadStore;

struct ParsedPacket;

struct RcResponderConfig {
  uint32_t mtu = 1024;     // path MTU: 256, 512, 1024, 2048 or 4096
  uint32_t first_psn = 0;  // the PSN of the first request expected (the requester's first)
  uint64_t alloc_retry_ns = 1'000;
  // READ resources kept for duplicates (rxe: max_dest_rd_atomic of them). 1..4096.
  uint32_t max_read_resources = 128;
  // Not owned; outlives the endpoint and every packet it builds. Set: payloads are attached
  // from it (chained, no copy) and ICRCs of segments in it fold their known CRC; null: copied.
  PayloadStore* payload_store = nullptr;
  // ACK/NAKs leave with the UDP source port of the packet that made them (the entropy value it
  // was sprayed on), so that a REPS sender learns which values reached it, and every packet is
  // acknowledged, AckReq or not (as Ultra Ethernet acknowledges, and ns-3's L2_ACK_INTERVAL 1);
  // false: the QP's port, ACKs as rxe sends them.
  bool echo_entropy = false;
  // Every packet acknowledged (ns-3 HPCC's L2_ACK_INTERVAL 1): what the ACK-clocked congestion
  // controls (DCTCP, TIMELY, HPCC) react to, per packet.
  bool ack_every_packet = false;
  // DCTCP: an ACK carries BECN (BTH byte 4, bit 6: InfiniBand's backward explicit congestion
  // notification) when a WRITE packet it acknowledges arrived with CE, as ns-3 HPCC's ACK
  // carries the CE of the packet it acknowledges (its CNP flag, cc mode 8). BECN sits in BTH's
  // Resv8a byte, which the ICRC masks, so the ICRC stays the same.
  bool echo_ce = false;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct RcResponderCounters {
  uint64_t packets_received = 0;      // every packet handed to receive()
  uint64_t accepted = 0;              // in order, valid: written
  uint64_t duplicates = 0;            // PSN before the expected one: re-ACKed
  uint64_t out_of_order_dropped = 0;  // PSN after the expected one (the NAK's trigger included)
  uint64_t naks_sent = 0;
  uint64_t becn_sent = 0;  // echo_ce: ACKs that echoed CE
  uint64_t acks_sent = 0;  // including re-ACKs of duplicates
  uint64_t bytes_written = 0;
  uint64_t messages_received = 0;
  uint64_t icrc_errors = 0;
  uint64_t bad_opcode = 0;               // not an RC RDMA WRITE or READ request
  uint64_t read_requests = 0;            // READ requests executed (in sequence)
  uint64_t read_duplicates = 0;          // duplicate READs replayed (also counted in duplicates)
  uint64_t read_duplicates_dropped = 0;  // duplicate READs with no matching resource: dropped
  uint64_t read_responses_sent = 0;      // READ RESPONSE packets, replays included
  uint64_t read_bytes_sent = 0;
  uint64_t opcode_sequence_errors = 0;  // e.g. MIDDLE without FIRST, FIRST inside a message
  uint64_t length_errors = 0;           // payload length the opcode and MTU do not allow
  uint64_t wrong_qp = 0;                // DestQP is not this QP
  uint64_t malformed = 0;               // not RoCE, multi-segment, headers past the mbuf
  uint64_t pool_empty = 0;              // ACK/NAK builds that found no mbuf (left pending)
  uint64_t naks_invalid_request = 0;    // NAK "invalid request" sent (not in naks_sent)
  uint64_t qp_errors = 0;               // times the QP entered the error state (0 or 1)
  uint64_t dropped_in_error = 0;        // requests received in the error state: dropped

  RcResponderCounters& operator+=(const RcResponderCounters& o);
};

class RcResponder {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument when config.check() or address.check() fails, or pool is null.
  // ACKs go from address.local_qp's side to address.peer_qp (the requester's QP).
  RcResponder(const RcResponderConfig& config, const RcQpAddress& address, rte_mempool* pool);
  // The READ response payload a responder of `mtu` sends (and adds to its payload store).
  static std::vector<uint8_t> payload_pattern(uint32_t mtu);

  // An RDMA WRITE or READ request addressed to this QP; takes ownership of m and frees it. `p`
  // must be what PacketParser said of m. Appends the ACK/NAK it causes (and any pending one) to
  // `out`; returns how many were appended (0..2). A READ's responses are left to poll().
  size_t receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // Bytes of this QP's responder: the object, its READ resources and replies queued, and the
  // READ payload pattern when no payload store holds it.
  uint64_t memory_bytes() const;

  // Sends up to max_packets READ response packets due, then (once no READ response is waiting)
  // ACK/NAK left pending by an empty mempool, each no sooner than alloc_retry_ns after a failed
  // build. Returns how many packets were appended.
  size_t poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets = SIZE_MAX);
  // When poll() has something to do: READ responses waiting or a pending ACK/NAK: the retry
  // time (0 when nothing failed); else kNever.
  uint64_t next_event_ns() const;
  bool read_responses_pending() const { return !replies_.empty(); }

  uint32_t expected_psn() const { return expected_psn_; }
  uint32_t msn() const { return msn_; }
  bool nak_latched() const { return nak_sent_; }  // rxe's qp->resp.sent_psn_nak
  bool in_error() const { return error_; }        // rxe's QP_STATE_ERROR (see the top)
  bool control_pending() const { return pending_ack_.valid || pending_nak_.valid; }
  const RcResponderCounters& counters() const { return counters_; }
  const RcResponderConfig& config() const { return config_; }
  const RcQpAddress& address() const { return address_; }

 private:
  struct Control {
    bool valid = false;
    uint8_t syndrome = 0;
    uint32_t psn = 0;
    uint32_t msn = 0;
    uint16_t src_port = 0;  // 0: the QP's (see echo_entropy)
    bool becn = false;      // echo_ce: a packet it acknowledges had CE
  };
  // rxe's struct resp_res, READ part.
  struct ReadResource {
    bool valid = false;
    uint32_t first_psn = 0;
    uint32_t packets = 0;
    uint64_t va_org = 0;
    uint32_t length = 0;
    uint32_t rkey = 0;
  };
  // A READ reply being sent: next PSN, VA and bytes left.
  struct ReadReply {
    uint32_t psn = 0;
    uint64_t va = 0;
    uint32_t resid = 0;
    bool at_start = true;  // the next packet is FIRST/ONLY (rdatm_res_state_new, none sent yet)
    uint32_t msn = 0;      // the AETH's: the MSN when rxe would send it (before later requests)
  };

  void execute_read(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t length);
  void duplicate_read(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t length);
  // Builds the next packet of replies_.front(); false when the pool is empty.
  bool send_read_response(std::vector<rte_mbuf*>& out);

  void queue_ack(uint32_t psn);
  void queue_nak(uint32_t psn);
  size_t flush(uint64_t now_ns, std::vector<rte_mbuf*>& out);  // ACK/NAK, after READ replies
  bool send(const Control& c, std::vector<rte_mbuf*>& out);
  // Returns false (and counts why) when the packet is not acceptable.
  bool check_sequence_and_length(uint8_t op, uint16_t payload);
  // A class C error at `psn`: NAK "invalid request", then the error state.
  void fail_invalid_request(uint32_t psn);

  RcResponderConfig config_;
  RcQpAddress address_;
  rte_mempool* pool_;
  uint32_t expected_psn_;  // rxe's qp->resp.psn
  uint32_t ack_psn_;       // rxe's qp->resp.ack_psn: one past the last accepted PSN
  uint32_t msn_ = 0;       // 24 bits, messages completed
  bool nak_sent_ = false;
  bool ce_seen_ = false;  // echo_ce: CE on an accepted packet not yet echoed
  bool error_ = false;
  bool in_message_ = false;  // the last accepted packet was a WRITE FIRST or MIDDLE
  Control pending_ack_;
  Control pending_nak_;
  std::vector<ReadResource> resources_;
  uint32_t next_resource_ = 0;  // rxe's resp.res_head
  std::deque<ReadReply> replies_;
  std::vector<uint8_t> payload_;            // READ response payload bytes (one MTU)
  std::span<const uint8_t> payload_bytes_;  // payload_, or its copy in the payload store
  uint64_t retry_at_ns_ = 0;
  uint16_t ip_id_ = 0;
  uint16_t echo_port_ = 0;  // echo_entropy: the source port of the packet being received
  RcResponderCounters counters_;
};

}  // namespace spraynet
