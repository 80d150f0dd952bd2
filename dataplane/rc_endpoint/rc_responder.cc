#include "dataplane/rc_endpoint/rc_responder.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/memory_usage.h"
#include "dataplane/wire/payload_store.h"
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
uint32_t read_packets(uint32_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((uint64_t{length} + mtu - 1) / mtu);
}
bool starts_message(uint8_t op) {
  return op == opcode::kRcWriteFirst || op == opcode::kRcWriteOnly || op == opcode::kRcWriteOnlyImm;
}
bool ends_message(uint8_t op) {
  return op == opcode::kRcWriteLast || op == opcode::kRcWriteLastImm ||
         op == opcode::kRcWriteOnly || op == opcode::kRcWriteOnlyImm;
}

const RcResponderConfig& validated(const RcResponderConfig& c) {
  if (const std::string why = c.check(); !why.empty()) throw std::invalid_argument(why);
  return c;
}
const RcQpAddress& validated(const RcQpAddress& a) {
  if (const std::string why = a.check(); !why.empty()) throw std::invalid_argument(why);
  return a;
}

}  // namespace

std::string RcResponderConfig::check() const {
  if (!valid_path_mtu(mtu)) return "mtu: must be 256, 512, 1024, 2048 or 4096";
  if (first_psn > kPsnMask) return "first_psn: must fit 24 bits";
  if (max_read_resources == 0 || max_read_resources > 4096) {
    return "max_read_resources: must be 1..4096";
  }
  return {};
}

RcResponderCounters& RcResponderCounters::operator+=(const RcResponderCounters& o) {
  packets_received += o.packets_received;
  accepted += o.accepted;
  duplicates += o.duplicates;
  out_of_order_dropped += o.out_of_order_dropped;
  naks_sent += o.naks_sent;
  becn_sent += o.becn_sent;
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
  naks_invalid_request += o.naks_invalid_request;
  qp_errors += o.qp_errors;
  dropped_in_error += o.dropped_in_error;
  read_requests += o.read_requests;
  read_duplicates += o.read_duplicates;
  read_duplicates_dropped += o.read_duplicates_dropped;
  read_responses_sent += o.read_responses_sent;
  read_bytes_sent += o.read_bytes_sent;
  return *this;
}

std::vector<uint8_t> RcResponder::payload_pattern(uint32_t mtu) {
  std::vector<uint8_t> p(mtu);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 7);
  return p;
}

RcResponder::RcResponder(const RcResponderConfig& config, const RcQpAddress& address,
                         rte_mempool* pool)
    : config_(validated(config)),
      address_(validated(address)),
      pool_(pool),
      expected_psn_(config_.first_psn),
      // Nothing accepted yet: a duplicate is answered with first_psn - 1, "everything before
      // the first PSN". (rxe leaves ack_psn zeroed until the first request executes.)
      ack_psn_(config_.first_psn),
      resources_(config_.max_read_resources),
      payload_(payload_pattern(config_.mtu)) {
  if (pool_ == nullptr) throw std::invalid_argument("pool: must not be null");
  payload_bytes_ = payload_;
  if (config_.payload_store != nullptr) {
    payload_bytes_ = config_.payload_store->add(payload_);
    std::vector<uint8_t>().swap(payload_);  // the store's copy is the one used
  }
  if (address_.udp_src_port == 0) address_.udp_src_port = rxe_udp_source_port(address_.local_qp);
}

void RcResponder::queue_ack(uint32_t psn) {
  // ACKs are cumulative: the newest one says all the older ones said.
  const bool becn = ce_seen_ || (pending_ack_.valid && pending_ack_.becn);
  ce_seen_ = false;
  pending_ack_ = Control{true, kAckUnlimited, psn, msn_, echo_port_, becn};
  // A NAK still waiting for an mbuf asked for a PSN that this ACK shows has since arrived.
  if (pending_nak_.valid && !psn_before(psn, pending_nak_.psn)) pending_nak_.valid = false;
}

void RcResponder::queue_nak(uint32_t psn) {
  pending_nak_ = Control{true, aeth::kNakPsnSequenceError, psn, msn_, echo_port_};
}

bool RcResponder::send(const Control& c, std::vector<rte_mbuf*>& out) {
  rte_mbuf* m =
      build_rc_ack(pool_, address_, ip_id_, c.psn, c.syndrome, c.msn, c.src_port, c.becn);
  if (m == nullptr) {
    ++counters_.pool_empty;
    return false;
  }
  ++ip_id_;
  if (c.becn) ++counters_.becn_sent;
  out.push_back(m);
  if (c.syndrome == aeth::kNakPsnSequenceError) {
    ++counters_.naks_sent;
  } else if (c.syndrome == aeth::kNakInvalidRequest) {
    ++counters_.naks_invalid_request;
  } else {
    ++counters_.acks_sent;
  }
  return true;
}

size_t RcResponder::flush(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
  // Decided after a READ whose responses are still going out: it waits behind them.
  if (!replies_.empty()) return 0;
  if (!control_pending() || now_ns < retry_at_ns_) return 0;
  size_t sent = 0;
  // A pending ACK is older than a pending NAK (a newer ACK would have dropped the NAK), so it
  // goes first: the requester sees them in the order the responder decided them.
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

size_t RcResponder::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets) {
  size_t sent = 0;
  if (now_ns < retry_at_ns_) return 0;
  while (sent < max_packets && !replies_.empty()) {
    if (!send_read_response(out)) {
      retry_at_ns_ = now_ns + (config_.alloc_retry_ns == 0 ? 1 : config_.alloc_retry_ns);
      return sent;
    }
    ++sent;
  }
  if (sent < max_packets) sent += flush(now_ns, out);
  return sent;
}

uint64_t RcResponder::next_event_ns() const {
  return control_pending() || !replies_.empty() ? retry_at_ns_ : kNever;
}

bool RcResponder::send_read_response(std::vector<rte_mbuf*>& out) {
  ReadReply& r = replies_.front();
  const uint32_t mtu = config_.mtu;
  // rxe read_reply: ONLY/FIRST while the resource is new, MIDDLE/LAST once under way or replayed.
  uint8_t op;
  if (r.at_start) {
    op = r.resid <= mtu ? opcode::kRcReadResponseOnly : opcode::kRcReadResponseFirst;
  } else {
    op = r.resid > mtu ? opcode::kRcReadResponseMiddle : opcode::kRcReadResponseLast;
  }
  const uint32_t payload = std::min(r.resid, mtu);
  FrameSpec f = address_.frame(ip_id_);
  f.payload = payload_bytes_.first(payload);
  RoceSpec rs;
  rs.opcode = op;
  rs.dest_qp = address_.peer_qp;
  rs.psn = r.psn;
  rs.syndrome = kAckUnlimited;  // the AETH of FIRST/LAST/ONLY (the builder omits it on MIDDLE)
  rs.msn = r.msn & kPsnMask;
  rte_mbuf* m = build_roce_mbuf(pool_, f, rs, config_.payload_store);
  if (m == nullptr) {
    ++counters_.pool_empty;
    return false;
  }
  ++ip_id_;
  out.push_back(m);
  ++counters_.read_responses_sent;
  counters_.read_bytes_sent += payload;
  r.psn = psn_add(r.psn, 1);
  r.va += payload;
  r.resid -= payload;
  r.at_start = false;
  if (r.resid == 0) replies_.pop_front();
  return true;
}

void RcResponder::execute_read(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t length) {
  // rxe_prepare_res: the oldest resource is reused.
  ReadResource& res = resources_[next_resource_];
  if (++next_resource_ == resources_.size()) next_resource_ = 0;
  res.valid = true;
  res.first_psn = psn;
  res.packets = read_packets(length, config_.mtu);
  res.va_org = va;
  res.length = length;
  res.rkey = rkey;
  ++counters_.read_requests;
  msn_ = psn_add(msn_, 1);  // execute(): for a READ the MSN goes up at once (C9-148)
  // rxe sends the whole reply before it looks at the next request: its MSN is this one.
  replies_.push_back(ReadReply{psn, va, length, true, msn_});
  ++counters_.messages_received;
  expected_psn_ = psn_add(psn, res.packets);
}

void RcResponder::duplicate_read(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t length) {
  // find_resource: the resource whose PSNs hold the duplicate's.
  for (ReadResource& res : resources_) {
    if (!res.valid) continue;
    const int32_t off = psn_diff(res.first_psn, psn);
    if (off < 0 || static_cast<uint32_t>(off) >= res.packets) continue;
    // The same request or a subset of it, with the same rkey; else dropped.
    if (va < res.va_org || length > res.length || va + length > res.va_org + res.length ||
        rkey != res.rkey) {
      break;
    }
    res.va_org = va;  // "Reset the resource, except length."
    ++counters_.read_duplicates;
    replies_.push_back(ReadReply{psn, va, length, psn == res.first_psn, msn_});
    return;
  }
  ++counters_.read_duplicates_dropped;
}

bool RcResponder::check_sequence_and_length(uint8_t op, uint16_t payload) {
  // rxe check_op_seq (RC): inside a message only MIDDLE or LAST; outside, FIRST or ONLY.
  if (in_message_ == starts_message(op)) {
    ++counters_.opcode_sequence_errors;
    return false;
  }
  // rxe check_length.
  const uint32_t mtu = config_.mtu;
  bool ok = true;
  if (starts_message(op) && ends_message(op)) {
    ok = payload <= mtu;
  } else if (!ends_message(op)) {
    ok = payload == mtu;  // FIRST, MIDDLE
  } else {
    ok = payload > 0 && payload <= mtu;  // LAST
  }
  if (!ok) ++counters_.length_errors;
  return ok;
}

void RcResponder::fail_invalid_request(uint32_t psn) {
  // rxe do_class_ac_error(qp, AETH_NAK_INVALID_REQ, ...) -> acknowledge(): send_ack(qp,
  // aeth_syndrome, pkt->psn) -> RESPST_ERROR: rxe_qp_error. The NAK supersedes nothing pending
  // (a pending ACK goes first, flush), and READ responses not yet out are never sent.
  pending_nak_ = Control{true, aeth::kNakInvalidRequest, psn, msn_};
  error_ = true;
  ++counters_.qp_errors;
  replies_.clear();
}

size_t RcResponder::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                            std::vector<rte_mbuf*>& out) {
  ++counters_.packets_received;
  if (config_.echo_entropy) echo_port_ = p.src_port;
  const size_t before = out.size();
  if (error_) {
    ++counters_.dropped_in_error;  // get_req in QP_STATE_ERROR: drained unanswered
  } else if (!roce_packet_in_mbuf(m, p, p.payload_offset, p.payload_length + kIcrcSize)) {
    ++counters_.malformed;
  } else if (p.dest_qp != address_.local_qp) {
    ++counters_.wrong_qp;
  } else if (!verify_icrc(m, p.l3_offset, p.ip_total_length, config_.payload_store)) {
    ++counters_.icrc_errors;
  } else if (!is_write_request(p.bth_opcode) && p.bth_opcode != opcode::kRcReadRequest) {
    ++counters_.bad_opcode;
  } else if (const int32_t diff = psn_diff(expected_psn_, p.psn); diff > 0) {
    // rxe check_psn: one NAK per gap; later out-of-order packets are dropped silently.
    ++counters_.out_of_order_dropped;
    if (!nak_sent_) {
      nak_sent_ = true;
      queue_nak(expected_psn_);
    }
  } else if (diff < 0) {
    ++counters_.duplicates;
    if (p.bth_opcode == opcode::kRcReadRequest) {
      // rxe duplicate_request, READ: replay the response from the duplicate's PSN.
      const RethView reth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
      duplicate_read(p.psn, reth.virtual_address(), reth.rkey(), reth.dma_length());
    } else {
      // rxe duplicate_request: ACK again with the last accepted PSN.
      queue_ack(psn_add(ack_psn_, kPsnMask));  // ack_psn - 1 modulo 2^24
    }
  } else if (p.bth_opcode == opcode::kRcReadRequest) {
    nak_sent_ = false;
    // check_op_seq: not inside a WRITE message; a READ request carries no payload.
    if (in_message_) {
      ++counters_.opcode_sequence_errors;  // RESPST_ERR_MISSING_OPCODE_LAST_C
      fail_invalid_request(p.psn);
    } else if (p.payload_length != 0) {
      ++counters_.length_errors;
      fail_invalid_request(p.psn);
    } else {
      const RethView reth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
      ++counters_.accepted;
      execute_read(p.psn, reth.virtual_address(), reth.rkey(), reth.dma_length());
    }
  } else {
    nak_sent_ = false;  // the expected PSN has arrived
    if (check_sequence_and_length(p.bth_opcode, p.payload_length)) {
      ++counters_.accepted;
      counters_.bytes_written += p.payload_length;
      expected_psn_ = psn_add(p.psn, 1);
      ack_psn_ = expected_psn_;
      in_message_ = !ends_message(p.bth_opcode);
      if (!in_message_) {
        msn_ = psn_add(msn_, 1);  // the MSN is 24 bits in the AETH
        ++counters_.messages_received;
      }
      if (config_.echo_ce && (p.tos & 0x3) == 0x3) ce_seen_ = true;
      // echo_entropy: every packet acknowledged, so that each value sprayed on comes back.
      if (p.ack_req || config_.echo_entropy || config_.ack_every_packet) queue_ack(p.psn);
    } else {
      fail_invalid_request(p.psn);
    }
  }
  rte_pktmbuf_free(m);
  flush(now_ns, out);
  return out.size() - before;
}

uint64_t RcResponder::memory_bytes() const {
  return sizeof(*this) + capacity_bytes(resources_) + deque_bytes<ReadReply>(replies_.size()) +
         capacity_bytes(payload_);
}

}  // namespace spraynet
