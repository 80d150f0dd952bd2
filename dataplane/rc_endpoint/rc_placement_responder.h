// The responder side of one RoCE RC queue pair for RDMA WRITEs as a modern RNIC with
// out-of-order data placement receives them (NVIDIA ConnectX-5 and later with OOO enabled; IRN,
// Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018). Where RcResponder (rxe)
// drops everything after a PSN gap, this one places every packet that falls inside its window at
// once, whatever the order, and keeps a bitmap of the PSNs that have arrived.
//
// The model, per request packet (after the ICRC, QP, opcode and length checks RcResponder does):
//  - `expected` is the cumulative point: every PSN before it has arrived, it has not. A packet
//    at expected is placed and expected moves past it and past every PSN already placed behind
//    it (the gap closes). A packet up to window - 1 PSNs after expected is placed and its bit set
//    (placed out of order). Beyond that it cannot be tracked: dropped, counted as a window
//    overflow (the requester resends it). Before expected, or with its bit already set: a
//    duplicate, re-ACKed with expected - 1, as rxe does.
//  - ACKs are cumulative, "everything up to expected - 1 has arrived": sent when a packet that
//    asks for one (AckReq) is passed by expected, and whenever a gap closes (the requester's
//    window is probably waiting on it). An AckReq packet placed beyond a hole is answered when
//    the hole closes, not before: an ACK can only name the cumulative point.
//  - A message completes (MSN + 1) when all its PSNs are placed and so are all the earlier
//    messages': the MSN counts in order, as the AETH requires, so a message that is complete
//    behind a hole completes when the hole closes.
//
// When to NAK a hole. Under per-packet spraying a PSN after a hole is the normal case, not a
// sign of loss: a responder that NAKs on the first out-of-order arrival (rxe; IRN, whose NACK
// goes out on every out-of-order packet because it assumes one path per flow) makes the
// requester resend what is merely late. NVIDIA documents OOO placement only as "these packets
// can be handled instead of being dropped, in order to avoid retransmission" (MLNX_OFED/DOCA
// "Out-of-Order (OOO) Data Placement") and does not publish its NAK timing. Here the hole at
// expected is NAKed ("PSN sequence error" naming expected, the first missing PSN, as RoCE's NAK
// carries one PSN) once it has stayed open for nak_delay_ns with a packet beyond it, the same
// rule the reorder engine uses to give a gap up (its hold timeout): long enough for the slowest
// path to deliver, far below the requester's retransmit timeout. The clock of a hole starts
// when it becomes the first hole: a packet placed beyond expected while no hole was open, or
// expected moving onto the next missing PSN while packets beyond it are placed. Each hole is
// NAKed once (rxe's sent_psn_nak latch); a NAK or retransmission that is lost again is the
// requester's retransmit timer's to recover. nak_delay_ns = 0 NAKs at the first out-of-order
// arrival, as rxe and IRN do.
//
// Opcode order (FIRST, MIDDLE..., LAST) cannot be checked when a packet arrives before its
// neighbours: it is checked as the cumulative point passes the packets, and a break is counted
// (the data is already placed; this emulation writes no memory and keeps the QP alive, as
// RcResponder does for its protocol errors).
//
// Time: no clock is read. receive() and poll() take now_ns; next_event_ns() says when the open
// hole becomes due for its NAK (or a pending ACK/NAK may retry an empty mempool).
//
// Ownership: receive() takes the mbuf in every case and frees it. ACK/NAKs are built from `pool`
// and appended to `out`; when the pool is empty they stay pending (the newest ACK, plus a NAK the
// ACK does not supersede), counted, and are retried no sooner than alloc_retry_ns later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rc_requester.h"
#include "dataplane/rc_endpoint/sequence_bits.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

class PayloadStore;

struct ParsedPacket;

struct RcPlacementResponderConfig {
  static constexpr uint32_t kMaxWindow = 65536;

  uint32_t mtu = 1024;     // path MTU: 256, 512, 1024, 2048 or 4096
  uint32_t first_psn = 0;  // the PSN of the first request expected (the requester's first)
  uint64_t alloc_retry_ns = 1'000;
  // Not owned; outlives the endpoint and every packet it builds. Set: payloads are attached
  // from it (chained, no copy) and ICRCs of segments in it fold their known CRC; null: copied.
  PayloadStore* payload_store = nullptr;
  // ACK/NAKs leave with the UDP source port of the packet that made them (the entropy value it
  // was sprayed on), so that a REPS sender learns which values reached it, and every packet is
  // acknowledged, AckReq or not (as Ultra Ethernet acknowledges, and ns-3's L2_ACK_INTERVAL 1);
  // false: the QP's port, ACKs as rxe sends them.
  bool echo_entropy = false;
  // PSNs tracked from the cumulative point: expected .. expected + window - 1. A requester never
  // has a PSN more than max_in_flight - 1 after its oldest unacknowledged one, which is at or
  // before expected, so window >= the requester's max_in_flight never overflows. 1..kMaxWindow.
  uint32_t window = 128;
  // A hole is NAKed once it has been the first hole for this long with packets beyond it; 0:
  // at the first packet beyond it.
  uint64_t nak_delay_ns = 100'000;
  // IRN (Mittal et al., SIGCOMM 2018): every NAK carries a SACK of the PSNs placed beyond the
  // one it names (irn_sack.h), and a NAK is due whenever a gap opens that no NAK has reported
  // yet (a packet placed past the highest one before it, or the cumulative point reaching a
  // hole past the last NAK's bitmap), nak_delay_ns after that gap was found. A gap a NAK has
  // reported is not NAKed again: the requester resends it once, its timer recovers a resend
  // that is lost. False: RoCE's NAK (one PSN, the first hole, see the top).
  bool sack = false;
  // ACK every packet placed (a cumulative ACK, a duplicate when the packet lands beyond a hole):
  // what the ACK-clocked congestion controls (DCTCP, TIMELY, HPCC) count on.
  bool ack_every_packet = false;
  // DCTCP: an ACK carries BECN when a packet since the previous ACK arrived with CE.
  bool echo_ce = false;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct RcPlacementResponderCounters {
  uint64_t packets_received = 0;     // every packet handed to receive()
  uint64_t placed = 0;               // valid, new PSNs, in the window: written
  uint64_t placed_out_of_order = 0;  // of those, placed beyond a hole (psn after expected)
  uint64_t duplicates = 0;           // before expected or already placed: re-ACKed
  uint64_t window_overflows = 0;     // window or more PSNs after expected: dropped
  uint64_t holes_opened = 0;         // times a first hole started waiting (see nak_delay_ns)
  uint64_t holes_naked = 0;          // holes that stayed open nak_delay_ns: NAKed
  uint64_t naks_sent = 0;            // NAK packets built (a pool retry builds it once)
  uint64_t acks_sent = 0;            // including re-ACKs of duplicates
  uint64_t bytes_written = 0;
  uint64_t messages_received = 0;  // completed, in MSN order
  uint64_t icrc_errors = 0;
  uint64_t bad_opcode = 0;              // not an RC RDMA WRITE request
  uint64_t opcode_sequence_errors = 0;  // found when expected passes (e.g. MIDDLE after LAST)
  uint64_t length_errors = 0;           // payload length the opcode and MTU do not allow
  uint64_t wrong_qp = 0;                // DestQP is not this QP
  uint64_t malformed = 0;               // not RoCE, multi-segment, headers past the mbuf
  uint64_t pool_empty = 0;              // ACK/NAK builds that found no mbuf (left pending)
  uint64_t max_distance = 0;            // farthest a placed packet was after expected, in PSNs
  uint64_t sack_naks = 0;               // sack: NAKs sent with a SACK extension
  uint64_t becn_sent = 0;               // echo_ce: ACKs with BECN

  RcPlacementResponderCounters& operator+=(const RcPlacementResponderCounters& o);
};

class RcPlacementResponder {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument when config.check() or address.check() fails, or pool is null.
  // ACKs go from address.local_qp's side to address.peer_qp (the requester's QP).
  RcPlacementResponder(const RcPlacementResponderConfig& config, const RcQpAddress& address,
                       rte_mempool* pool);

  // An RDMA WRITE request addressed to this QP; takes ownership of m and frees it. `p` must be
  // what PacketParser said of m. Appends the ACK/NAK it causes (and any pending one) to `out`;
  // returns how many were appended.
  size_t receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // Bytes of this QP's placement responder: the object and its four window bitmaps.
  uint64_t memory_bytes() const;

  // NAKs the open hole when its delay has passed; sends ACK/NAKs left pending by an empty pool.
  size_t poll(uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // When poll() has something to do: the open hole's NAK time, a pending ACK/NAK's retry time,
  // else kNever.
  uint64_t next_event_ns() const;

  uint32_t expected_psn() const { return expected_psn_; }  // the first PSN not yet placed
  uint32_t msn() const { return msn_; }
  // A hole is open: expected has not arrived, a later PSN has.
  bool hole_open() const { return placed_beyond_ > 0; }
  bool hole_naked() const { return hole_naked_; }
  // PSNs placed after expected (out of order, waiting for the hole to close).
  uint32_t placed_beyond() const { return placed_beyond_; }
  bool control_pending() const { return pending_ack_.valid || pending_nak_.valid; }
  const RcPlacementResponderCounters& counters() const { return counters_; }
  const RcPlacementResponderConfig& config() const { return config_; }
  const RcQpAddress& address() const { return address_; }

 private:
  struct Control {
    bool valid = false;
    uint8_t syndrome = 0;
    uint32_t psn = 0;
    uint32_t msn = 0;
    uint16_t src_port = 0;  // 0: the QP's (see echo_entropy)
    bool becn = false;
  };
  // Bit s % bits_ of a bitmap is sequence number (PSNs since first_psn) s (sequence_bits.h).
  bool test(const std::vector<uint64_t>& map, uint64_t seq) const {
    return sequence_bit(map, bits_, seq);
  }
  void set(std::vector<uint64_t>& map, uint64_t seq, bool v) {
    set_sequence_bit(map, bits_, seq, v);
  }
  // Moves expected over the placed run at it, completing messages; returns whether a packet
  // asking for an ACK was passed.
  bool advance(uint64_t now_ns);
  void start_hole_clock(uint64_t now_ns);
  // sack: a gap at or past seq opened; starts the NAK clock unless a NAK already reported it.
  void sack_gap(uint64_t seq, uint64_t now_ns);
  void nak_if_due(uint64_t now_ns);
  void queue_ack();
  void queue_nak(uint32_t psn);
  size_t flush(uint64_t now_ns, std::vector<rte_mbuf*>& out);
  bool send(const Control& c, std::vector<rte_mbuf*>& out);

  RcPlacementResponderConfig config_;
  RcQpAddress address_;
  rte_mempool* pool_;
  size_t bits_;  // window rounded up to whole 64-bit words
  // What is remembered of a placed PSN until the cumulative point passes it, one bitmap each.
  std::vector<uint64_t> arrived_;  // placed: the placement bitmap
  std::vector<uint64_t> starts_;   // a FIRST or ONLY
  std::vector<uint64_t> ends_;     // a LAST or ONLY
  std::vector<uint64_t> ack_req_;  // asked for an ACK
  uint64_t expected_seq_ = 0;      // sequence number of expected_psn_
  uint32_t expected_psn_;
  uint32_t msn_ = 0;            // 24 bits, messages completed
  uint32_t placed_beyond_ = 0;  // bits set after expected
  bool in_message_ = false;     // expected is inside a message (after a FIRST or MIDDLE)
  uint64_t hole_since_ns_ = 0;  // while hole_open(): when the first hole started waiting
  bool hole_naked_ = false;     // the first hole has had its NAK (sack: no NAK is due)
  uint64_t highest_seq_ = 0;    // while hole_open(): the highest PSN placed (its sequence number)
  uint64_t reported_end_ = 0;   // sack: one past the last PSN the last NAK's bitmap described
  bool ce_seen_ = false;        // echo_ce: CE on a placed packet not yet echoed
  bool sack_clock_ = false;     // sack: an unreported gap waits for its NAK since hole_since_ns_
  Control pending_ack_;
  Control pending_nak_;
  uint64_t retry_at_ns_ = 0;
  uint16_t ip_id_ = 0;
  uint16_t echo_port_ = 0;  // echo_entropy: the source port of the packet being received
  RcPlacementResponderCounters counters_;
};

}  // namespace spraynet
