#include "dataplane/rc_endpoint/rc_placement_responder.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <stdexcept>

#include "dataplane/memory_usage.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/irn_sack.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet {

namespace {

// rxe's AETH_ACK_UNLIMITED: an ACK whose credit field says "no end-to-end flow control".
constexpr uint8_t kAckUnlimited = 0x1F;

bool is_write_request(uint8_t op) {
  switch (op) {
    case opcode::kRcWriteFirst:
    case opcode::kRcWriteMiddle:
    case opcode::kRcWriteLast:
    case opcode::kRcWriteLastImm:
    case opcode::kRcWriteOnly:
    case opcode::kRcWriteOnlyImm:
      return true;
    default:
      return false;
  }
}
bool starts_message(uint8_t op) {
  return op == opcode::kRcWriteFirst || op == opcode::kRcWriteOnly || op == opcode::kRcWriteOnlyImm;
}
bool ends_message(uint8_t op) {
  return op == opcode::kRcWriteLast || op == opcode::kRcWriteLastImm ||
         op == opcode::kRcWriteOnly || op == opcode::kRcWriteOnlyImm;
}

// rxe check_length: FIRST and MIDDLE carry exactly one MTU, LAST 1..MTU, ONLY at most one MTU.
// Unlike the opcode order, this needs no neighbour, so it is checked on arrival.
bool length_ok(uint8_t op, uint32_t payload, uint32_t mtu) {
  if (starts_message(op) && ends_message(op)) return payload <= mtu;
  if (!ends_message(op)) return payload == mtu;
  return payload > 0 && payload <= mtu;
}

const RcPlacementResponderConfig& validated(const RcPlacementResponderConfig& c) {
  if (const std::string why = c.check(); !why.empty()) throw std::invalid_argument(why);
  return c;
}
const RcQpAddress& validated(const RcQpAddress& a) {
  if (const std::string why = a.check(); !why.empty()) throw std::invalid_argument(why);
  return a;
}

}  // namespace

std::string RcPlacementResponderConfig::check() const {
  if (!valid_path_mtu(mtu)) return "mtu: must be 256, 512, 1024, 2048 or 4096";
  if (first_psn > kPsnMask) return "first_psn: must fit 24 bits";
  if (window < 1 || window > kMaxWindow) {
    return "window: must be from 1 to " + std::to_string(kMaxWindow) + " PSNs";
  }
  return {};
}

RcPlacementResponderCounters& RcPlacementResponderCounters::operator+=(
    const RcPlacementResponderCounters& o) {
  packets_received += o.packets_received;
  placed += o.placed;
  placed_out_of_order += o.placed_out_of_order;
  duplicates += o.duplicates;
  window_overflows += o.window_overflows;
  holes_opened += o.holes_opened;
  holes_naked += o.holes_naked;
  naks_sent += o.naks_sent;
  acks_sent += o.acks_sent;
  bytes_written += o.bytes_written;
  messages_received += o.messages_received;
  icrc_errors += o.icrc_errors;
  bad_opcode += o.bad_opcode;
  opcode_sequence_errors += o.opcode_sequence_errors;
  length_errors += o.length_errors;
  wrong_qp += o.wrong_qp;
  malformed += o.malformed;
  pool_empty += o.pool_empty;
  max_distance = std::max(max_distance, o.max_distance);
  sack_naks += o.sack_naks;
  becn_sent += o.becn_sent;
  return *this;
}

RcPlacementResponder::RcPlacementResponder(const RcPlacementResponderConfig& config,
                                           const RcQpAddress& address, rte_mempool* pool)
    : config_(validated(config)),
      address_(validated(address)),
      pool_(pool),
      bits_((config_.window + 63u) / 64u * 64u),
      arrived_(bits_ / 64, 0),
      starts_(bits_ / 64, 0),
      ends_(bits_ / 64, 0),
      ack_req_(bits_ / 64, 0),
      expected_psn_(config_.first_psn) {
  if (pool_ == nullptr) throw std::invalid_argument("pool: must not be null");
  if (address_.udp_src_port == 0) address_.udp_src_port = rxe_udp_source_port(address_.local_qp);
}

void RcPlacementResponder::queue_ack() {
  // Cumulative: everything before expected has arrived. (Before the first PSN, first_psn - 1
  // says "nothing yet", as RcResponder answers a duplicate then.)
  const bool becn = ce_seen_ || (pending_ack_.valid && pending_ack_.becn);
  ce_seen_ = false;
  pending_ack_ =
      Control{true, kAckUnlimited, psn_add(expected_psn_, kPsnMask), msn_, echo_port_, becn};
  // A NAK still waiting for an mbuf named a PSN that has arrived since.
  if (pending_nak_.valid && psn_before(pending_nak_.psn, expected_psn_)) pending_nak_.valid = false;
}

void RcPlacementResponder::queue_nak(uint32_t psn) {
  pending_nak_ = Control{true, aeth::kNakPsnSequenceError, psn, msn_, echo_port_};
}

bool RcPlacementResponder::send(const Control& c, std::vector<rte_mbuf*>& out) {
  const bool nak = c.syndrome == aeth::kNakPsnSequenceError;
  // IRN's SACK, as placed when the NAK leaves (a retry after an empty pool says what is newest).
  IrnSack sack;
  uint8_t ext[kIrnSackHeaderBytes + IrnSack::kMaxBits / 8];
  size_t ext_len = 0;
  uint64_t nak_seq = 0;
  if (nak && config_.sack) {
    const int32_t ahead = psn_diff(expected_psn_, c.psn);  // queue_ack drops a NAK before expected
    nak_seq = expected_seq_ + static_cast<uint64_t>(std::max(ahead, 0));
    if (hole_open()) {
      for (uint64_t s = nak_seq + 1; s <= highest_seq_ && s - nak_seq - 1 < IrnSack::kMaxBits;
           ++s) {
        if (s - expected_seq_ < config_.window && test(arrived_, s)) {
          sack.set(static_cast<uint32_t>(s - nak_seq - 1));
        }
      }
    }
    ext_len = sack.write(ext);
  }
  rte_mbuf* m = build_rc_ack(pool_, address_, ip_id_, c.psn, c.syndrome, c.msn, c.src_port, c.becn,
                             std::span<const uint8_t>(ext, ext_len));
  if (m == nullptr) {
    ++counters_.pool_empty;
    return false;
  }
  ++ip_id_;
  out.push_back(m);
  if (c.becn) ++counters_.becn_sent;
  if (nak) {
    ++counters_.naks_sent;
    if (config_.sack) {
      // What this NAK told, missing or arrived: every PSN up to the highest it SACKs.
      reported_end_ = std::max(reported_end_, nak_seq + 1 + (sack.any() ? sack.highest() + 1 : 0));
      if (ext_len != 0) ++counters_.sack_naks;
    }
  } else {
    ++counters_.acks_sent;
  }
  return true;
}

size_t RcPlacementResponder::flush(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
  if (!control_pending() || now_ns < retry_at_ns_) return 0;
  size_t sent = 0;
  // The ACK first: the requester sees the cumulative point before the hole it is NAKed at.
  for (Control* c : {&pending_ack_, &pending_nak_}) {
    if (!c->valid) continue;
    if (!send(*c, out)) {
      retry_at_ns_ = now_ns + (config_.alloc_retry_ns == 0 ? 1 : config_.alloc_retry_ns);
      return sent;
    }
    c->valid = false;
    ++sent;
  }
  return sent;
}

void RcPlacementResponder::start_hole_clock(uint64_t now_ns) {
  ++counters_.holes_opened;
  hole_since_ns_ = now_ns;
  hole_naked_ = false;
}

void RcPlacementResponder::sack_gap(uint64_t seq, uint64_t now_ns) {
  if (seq < reported_end_ || sack_clock_) return;  // a NAK told it, or one is already due
  ++counters_.holes_opened;
  sack_clock_ = true;
  hole_since_ns_ = now_ns;
}

void RcPlacementResponder::nak_if_due(uint64_t now_ns) {
  if (config_.sack) {
    if (!sack_clock_) return;
    if (!hole_open()) {  // every gap filled before its NAK was due
      sack_clock_ = false;
      return;
    }
    if (now_ns < hole_since_ns_ || now_ns - hole_since_ns_ < config_.nak_delay_ns) return;
    sack_clock_ = false;
    ++counters_.holes_naked;
    queue_nak(expected_psn_);  // the first missing PSN, and the SACK of what is beyond
    return;
  }
  if (!hole_open() || hole_naked_) return;
  // A clock stepping back never NAKs early.
  if (now_ns < hole_since_ns_ || now_ns - hole_since_ns_ < config_.nak_delay_ns) return;
  hole_naked_ = true;
  ++counters_.holes_naked;
  queue_nak(expected_psn_);  // RoCE's NAK names one PSN: the first missing one
}

bool RcPlacementResponder::advance(uint64_t now_ns) {
  const bool hole_was_open = hole_open();
  bool ack_req = false;
  bool first = true;  // the packet just placed at expected is not counted in placed_beyond_
  while (test(arrived_, expected_seq_)) {
    const uint64_t s = expected_seq_;
    // rxe check_op_seq, as late as placement allows: inside a message only MIDDLE or LAST.
    if (test(starts_, s) == in_message_) ++counters_.opcode_sequence_errors;
    in_message_ = !test(ends_, s);
    if (!in_message_) {
      msn_ = psn_add(msn_, 1);  // the MSN is 24 bits in the AETH
      ++counters_.messages_received;
    }
    ack_req = ack_req || test(ack_req_, s);
    for (auto* map : {&arrived_, &starts_, &ends_, &ack_req_}) set(*map, s, false);
    ++expected_seq_;
    expected_psn_ = psn_add(expected_psn_, 1);
    if (!first) --placed_beyond_;
    first = false;
  }
  if (hole_was_open) {
    // The next missing PSN is a new hole if anything is placed beyond it: its own clock (sack:
    // unless a NAK has reported it).
    if (hole_open()) {
      if (config_.sack) {
        sack_gap(expected_seq_, now_ns);
      } else {
        start_hole_clock(now_ns);
      }
    }
    return true;  // a gap closed: the requester's window is likely waiting for this ACK
  }
  return ack_req;
}

size_t RcPlacementResponder::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                                     std::vector<rte_mbuf*>& out) {
  ++counters_.packets_received;
  if (config_.echo_entropy) echo_port_ = p.src_port;
  const size_t before = out.size();
  if (!roce_packet_in_mbuf(m, p, p.payload_offset, p.payload_length + kIcrcSize)) {
    ++counters_.malformed;
  } else if (p.dest_qp != address_.local_qp) {
    ++counters_.wrong_qp;
  } else if (!verify_icrc(m, p.l3_offset, p.ip_total_length, config_.payload_store)) {
    ++counters_.icrc_errors;
  } else if (!is_write_request(p.bth_opcode)) {
    ++counters_.bad_opcode;
  } else if (const int32_t diff = psn_diff(expected_psn_, p.psn); diff < 0) {
    ++counters_.duplicates;
    queue_ack();  // rxe duplicate_request: ACK again with the last PSN before expected
  } else if (static_cast<uint32_t>(diff) >= config_.window) {
    ++counters_.window_overflows;  // no bit for it: the requester's timer or a NAK resends it
  } else if (const uint64_t seq = expected_seq_ + static_cast<uint64_t>(diff);
             test(arrived_, seq)) {
    ++counters_.duplicates;
    queue_ack();
  } else if (!length_ok(p.bth_opcode, p.payload_length, config_.mtu)) {
    ++counters_.length_errors;
  } else {
    set(arrived_, seq, true);
    set(starts_, seq, starts_message(p.bth_opcode));
    set(ends_, seq, ends_message(p.bth_opcode));
    // echo_entropy, ack_every_packet: ACK every packet.
    set(ack_req_, seq, p.ack_req || config_.echo_entropy || config_.ack_every_packet);
    if (config_.echo_ce && (p.tos & 0x3) == 0x3) ce_seen_ = true;
    ++counters_.placed;
    counters_.bytes_written += p.payload_length;
    counters_.max_distance = std::max<uint64_t>(counters_.max_distance, diff);
    if (diff > 0) {
      ++counters_.placed_out_of_order;
      // The gap this packet shows: from expected, or from past the highest placed before it.
      const bool first_beyond = ++placed_beyond_ == 1;
      const bool new_gap = first_beyond || seq > highest_seq_ + 1;
      highest_seq_ = first_beyond ? seq : std::max(highest_seq_, seq);
      if (!config_.sack) {
        if (first_beyond) start_hole_clock(now_ns);
      } else if (new_gap) {
        sack_gap(seq - 1, now_ns);
      }
      // A duplicate cumulative ACK: the ACK-clocked controls hear of every packet.
      if (config_.ack_every_packet) queue_ack();
    } else if (advance(now_ns)) {
      queue_ack();
    }
  }
  rte_pktmbuf_free(m);
  nak_if_due(now_ns);
  flush(now_ns, out);
  return out.size() - before;
}

size_t RcPlacementResponder::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
  nak_if_due(now_ns);
  return flush(now_ns, out);
}

uint64_t RcPlacementResponder::next_event_ns() const {
  uint64_t t = kNever;
  if (config_.sack ? sack_clock_ : hole_open() && !hole_naked_) {
    t = hole_since_ns_ + config_.nak_delay_ns;
  }
  if (control_pending()) t = std::min(t, retry_at_ns_);
  return t;
}

uint64_t RcPlacementResponder::memory_bytes() const {
  return sizeof(*this) + capacity_bytes(arrived_) + capacity_bytes(starts_) +
         capacity_bytes(ends_) + capacity_bytes(ack_req_);
}

}  // namespace spraynet
