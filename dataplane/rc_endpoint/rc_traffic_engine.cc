#include "dataplane/rc_endpoint/rc_traffic_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <stdexcept>

#include "dataplane/memory_usage.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/egress/link_emulator.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet {

namespace {

bool has(RcQpRole role, RcQpRole part) {
  return (static_cast<uint8_t>(role) & static_cast<uint8_t>(part)) != 0;
}

bool is_write_request(uint8_t op) {
  return op == opcode::kRcWriteFirst || op == opcode::kRcWriteMiddle ||
         op == opcode::kRcWriteLast || op == opcode::kRcWriteLastImm ||
         op == opcode::kRcWriteOnly || op == opcode::kRcWriteOnlyImm;
}

RcRequesterConfig base_requester_config(const RcTrafficEngineConfig& c) {
  RcRequesterConfig r;
  r.message_bytes = c.message_bytes;
  r.mtu = c.mtu;
  r.max_in_flight = c.max_in_flight;
  r.max_pkt_per_ack = c.max_pkt_per_ack;
  r.messages = c.messages_per_qp;
  r.message_gap_ns = c.message_gap_ns;
  r.retransmit_timeout_ns = c.retransmit_timeout_ns;
  r.alloc_retry_ns = c.alloc_retry_ns;
  r.first_psn = c.first_psn;
  r.record_completions = c.record_completions;
  r.selective_retransmit = c.ooo_placement;
  r.op = c.op;
  r.payload_store = c.payload_store;
  return r;
}

RcResponderConfig responder_config(const RcTrafficEngineConfig& c) {
  RcResponderConfig r;
  r.mtu = c.mtu;
  r.first_psn = c.first_psn;
  r.alloc_retry_ns = c.alloc_retry_ns;
  r.payload_store = c.payload_store;
  return r;
}

const RcTrafficEngineConfig& validated(const RcTrafficEngineConfig& c) {
  if (const std::string why = c.check(); !why.empty()) throw std::invalid_argument(why);
  return c;
}

}  // namespace

RcQpRole RcTrafficEngineConfig::role_of(uint32_t qp_index) const {
  if (!qp_specs.empty()) return qp_index < qp_specs.size() ? qp_specs[qp_index].role : role;
  return qp_roles.empty() || qp_index >= qp_roles.size() ? role : qp_roles[qp_index];
}

RcRequesterConfig RcTrafficEngineConfig::requester_config(uint32_t qp_index) const {
  RcRequesterConfig r = base_requester_config(*this);
  if (qp_index < qp_specs.size()) {
    const RcQpSpec& s = qp_specs[qp_index];
    if (s.message_bytes != 0) r.message_bytes = s.message_bytes;
    r.messages = s.messages;
    r.posted = s.posted;
    r.message_gap_ns = s.message_gap_ns;
    r.op = s.op;
  }
  return r;
}

RcPlacementResponderConfig RcTrafficEngineConfig::placement_config() const {
  RcPlacementResponderConfig r;
  r.mtu = mtu;
  r.first_psn = first_psn;
  r.alloc_retry_ns = alloc_retry_ns;
  r.window = placement_window != 0 ? placement_window : max_in_flight;
  r.nak_delay_ns = placement_nak_delay_ns;
  r.payload_store = payload_store;
  return r;
}

RcQpAddress RcTrafficEngineConfig::address(uint32_t qp_index) const {
  RcQpAddress a;
  a.local_mac = local_mac;
  a.local_ip = local_ip;
  a.local_qp = first_local_qp + qp_index;
  a.dscp = dscp;
  a.ecn = ecn;
  a.ack_dscp = ack_dscp;
  if (qp_index < qp_specs.size()) {
    const RcQpSpec& s = qp_specs[qp_index];
    a.peer_mac = s.peer_mac;
    a.peer_ip = s.peer_ip;
    a.peer_qp = s.peer_qp;
    a.udp_src_port = s.udp_src_port;
  } else {
    a.peer_mac = peer_mac;
    a.peer_ip = peer_ip;
    a.peer_qp = first_peer_qp + qp_index;
  }
  if (a.udp_src_port == 0) a.udp_src_port = rxe_udp_source_port(a.local_qp);
  return a;
}

std::string RcTrafficEngineConfig::check() const {
  if (qps == 0) return "qps: must be >= 1";
  if (first_local_qp + uint64_t{qps} - 1 > kPsnMask) return "first_local_qp: QPs run past 2^24";
  if (max_burst == 0) return "max_burst: must be >= 1";
  if (dscp > 63) return "dscp: must be 0..63";
  if (ecn > 3) return "ecn: must be 0..3";
  if (ack_dscp < -1 || ack_dscp > 63) return "ack_dscp: must be -1 (the data's) or 0..63";
  if (dcqcn) {
    if (std::string why = dcqcn->check(); !why.empty()) return "dcqcn: " + why;
  }
  if (ooo_placement) {
    if (std::string why = placement_config().check(); !why.empty()) return "placement_" + why;
    // The placement responder models WRITE placement only; a READ would go unanswered.
    if (op == RcOp::kRead)
      return "op: read is answered by the rxe responder only, not with ooo_placement";
    for (const RcQpSpec& s : qp_specs) {
      if (s.op == RcOp::kRead) return "qp_specs: op read is not answered with ooo_placement";
    }
  }
  if (qp_specs.empty()) {
    if (first_peer_qp + uint64_t{qps} - 1 > kPsnMask) return "first_peer_qp: QPs run past 2^24";
    if (!qp_roles.empty() && qp_roles.size() != qps) return "qp_roles: must be empty or one per QP";
    for (uint32_t i = 0; i < qps; ++i) {
      const auto r = static_cast<uint8_t>(role_of(i));
      if (r < 1 || r > 3) return "qp_roles: unknown role";
    }
    if (std::string why = base_requester_config(*this).check(); !why.empty()) return why;
    return responder_config(*this).check();
  }
  if (qp_specs.size() != qps) return "qp_specs: must be empty or one per QP";
  if (!qp_roles.empty()) return "qp_roles: must be empty when qp_specs is given";
  for (uint32_t i = 0; i < qps; ++i) {
    const RcQpSpec& s = qp_specs[i];
    const std::string at = "qp_specs[" + std::to_string(i) + "].";
    const auto r = static_cast<uint8_t>(s.role);
    if (r < 1 || r > 3) return at + "role: unknown role";
    if (s.peer_qp > kPsnMask) return at + "peer_qp: must fit 24 bits";
    if (has(s.role, RcQpRole::kRequester)) {
      if (std::string why = requester_config(i).check(); !why.empty()) return at + why;
    } else if (s.posted) {
      return at + "posted: only a requester posts messages";
    }
  }
  return responder_config(*this).check();
}

RcTrafficEngine::RcTrafficEngine(const RcTrafficEngineConfig& config, rte_mempool* pool)
    : config_(validated(config)) {
  if (pool == nullptr) throw std::invalid_argument("pool: must not be null");
  const RcResponderConfig sc = responder_config(config_);
  qp_.resize(config_.qps);
  for (uint32_t i = 0; i < config_.qps; ++i) {
    const RcQpAddress a = config_.address(i);
    const RcQpRole role = config_.role_of(i);
    by_peer_.emplace((uint64_t{a.peer_ip} << 24) | a.peer_qp, a.local_qp);
    if (config_.dcqcn) qp_[i].rate = std::make_unique<DcqcnRateControl>(*config_.dcqcn);
    if (has(role, RcQpRole::kRequester)) {
      qp_[i].requester =
          std::make_unique<RcRequester>(config_.requester_config(i), a, pool, &completion_);
      requesters_.push_back(i);
    }
    if (has(role, RcQpRole::kResponder)) {
      if (config_.ooo_placement) {
        qp_[i].placement =
            std::make_unique<RcPlacementResponder>(config_.placement_config(), a, pool);
      } else {
        qp_[i].responder = std::make_unique<RcResponder>(sc, a, pool);
      }
      responders_.push_back(i);
    }
  }
}

size_t RcTrafficEngine::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets,
                             RcTxRoom* room) {
  size_t sent = 0;
  for (const uint32_t i : responders_) {
    if (RcPlacementResponder* pr = qp_[i].placement.get()) {
      if (pr->next_event_ns() <= now_ns) sent += pr->poll(now_ns, out);
      continue;
    }
    RcResponder& r = *qp_[i].responder;
    // ACK/NAKs only here; READ responses share the TX budget below.
    if (!r.read_responses_pending() && r.next_event_ns() <= now_ns) sent += r.poll(now_ns, out);
  }
  size_t budget = std::min<size_t>(max_packets, config_.max_burst);
  // READ responses: one packet per responder per round, as the requesters below.
  for (size_t idle = 0; budget > 0 && idle < responders_.size();) {
    const uint32_t qi = responders_[next_responder_];
    RcResponder* r = qp_[qi].responder.get();
    if (++next_responder_ == responders_.size()) next_responder_ = 0;
    // A placement responder answers no READs (the configs refuse op read with ooo-placement).
    const bool reading = r && r->read_responses_pending() && r->next_event_ns() <= now_ns &&
                         (room == nullptr || room->admits(qi)) && paced_ok(qp_[qi], now_ns);
    const size_t n = reading ? r->poll(now_ns, out, 1) : 0;
    if (n > 0) {
      paced_sent(qp_[qi], out.back(), now_ns);
      if (room != nullptr) room->take(qi);
      sent += n;
      --budget;
      idle = 0;
    } else {
      ++idle;
    }
  }
  if (requesters_.empty()) return sent;

  // One packet per QP per round. A whole round without a packet means nobody has anything
  // left (or room for it): stop, so an idle engine costs one pass over its QPs.
  size_t idle = 0;
  while (budget > 0 && idle < requesters_.size()) {
    const uint32_t qi = requesters_[next_requester_];
    Qp& q = qp_[qi];
    RcRequester& r = *q.requester;
    if (++next_requester_ == requesters_.size()) next_requester_ = 0;
    if ((room == nullptr || room->admits(qi)) && paced_ok(q, now_ns) &&
        r.poll(now_ns, out, 1) == 1) {
      paced_sent(q, out.back(), now_ns);
      if (room != nullptr) room->take(qi);
      ++sent;
      --budget;
      idle = 0;
    } else {
      ++idle;
    }
  }
  return sent;
}

void RcTrafficEngine::post(uint32_t qp_index, uint32_t bytes, uint64_t post_ns) {
  if (qp_index >= qp_.size()) throw std::out_of_range("post: no QP " + std::to_string(qp_index));
  RcRequester* r = qp_[qp_index].requester.get();
  if (r == nullptr || !r->config().posted) {
    throw std::invalid_argument("post: QP " + std::to_string(qp_index) +
                                " has no requester in posted mode");
  }
  r->post(bytes, post_ns);
}

size_t RcTrafficEngine::take_completions(std::vector<MessageCompletion>& out) {
  size_t n = 0;
  for (const uint32_t i : requesters_) {
    const size_t from = out.size();
    n += qp_[i].requester->take_completions(out);
    for (size_t k = from; k < out.size(); ++k) out[k].qp_index = i;
  }
  return n;
}

size_t RcTrafficEngine::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                                std::vector<rte_mbuf*>& out) {
  ++counters_.received;
  uint64_t* drop = nullptr;
  const uint32_t index = p.dest_qp - config_.first_local_qp;  // wraps below the first QP
  if (p.kind != PacketKind::kRoce) {
    drop = &counters_.not_roce;
  } else if (p.dest_qp < config_.first_local_qp || index >= config_.qps) {
    drop = &counters_.unknown_qp;
  } else if (p.bth_opcode == opcode::kRcAck || (p.bth_opcode >= opcode::kRcReadResponseFirst &&
                                                p.bth_opcode <= opcode::kRcReadResponseOnly)) {
    if (RcRequester* r = qp_[index].requester.get()) {
      r->receive(m, p, now_ns);
      return 0;
    }
    drop = &counters_.no_requester;
  } else if (p.bth_opcode == opcode::kCnp) {
    if (DcqcnRateControl* rate = qp_[index].rate.get()) {
      rate->on_cnp(now_ns);
      ++counters_.cnps;
      rte_pktmbuf_free(m);
      return 0;
    }
    drop = &counters_.cnp_no_cc;
  } else if (is_write_request(p.bth_opcode) || p.bth_opcode == opcode::kRcReadRequest) {
    if (RcResponder* r = qp_[index].responder.get()) return r->receive(m, p, now_ns, out);
    if (RcPlacementResponder* r = qp_[index].placement.get()) {
      return r->receive(m, p, now_ns, out);
    }
    drop = &counters_.no_responder;
  } else {
    drop = &counters_.bad_opcode;
  }
  ++*drop;
  rte_pktmbuf_free(m);
  return 0;
}

uint64_t RcTrafficEngine::next_event_ns(const RcTxRoom* room) const {
  uint64_t t = kNever;
  for (const uint32_t i : responders_) {
    const Qp& q = qp_[i];
    if (q.placement) {
      t = std::min(t, q.placement->next_event_ns());
      continue;
    }
    // ACK/NAKs go whatever the room (and pace); READ responses only with room, at their pace.
    if (!q.responder->read_responses_pending()) {
      t = std::min(t, q.responder->next_event_ns());
    } else if (room == nullptr || room->admits(i)) {
      t = std::min(t, paced_next(q, q.responder->next_event_ns()));
    }
  }
  for (const uint32_t i : requesters_) {
    if (room != nullptr && !room->admits(i)) continue;
    t = std::min(t, paced_next(qp_[i], qp_[i].requester->next_event_ns()));
    if (t == 0) break;
  }
  return t;
}

bool RcTrafficEngine::paced_ok(Qp& q, uint64_t now_ns) {
  if (q.rate == nullptr) return true;
  q.rate->advance(now_ns);
  return q.rate->next_send_ns() <= now_ns;
}

void RcTrafficEngine::paced_sent(Qp& q, const rte_mbuf* m, uint64_t now_ns) {
  if (q.rate == nullptr) return;
  // The rate is the wire's: the frame with its preamble, inter-frame gap and FCS, as the
  // link counts it, so a QP at line rate fills its link exactly.
  q.rate->on_sent(rte_pktmbuf_pkt_len(m) + LinkEmulator::kWireOverheadBytes, now_ns);
  q.sent = true;
}

uint64_t RcTrafficEngine::paced_next(const Qp& q, uint64_t ready_ns) const {
  if (q.rate == nullptr || ready_ns == kNever) return ready_ns;
  const uint64_t pace = q.rate->next_send_ns();
  if (pace <= ready_ns) return ready_ns;
  // Waiting for its pace: a rate increase before then (a timer) shortens the wait, so wake for
  // it too (poll() advances the QP's timers and looks again).
  return std::max(ready_ns, std::min(pace, q.rate->next_timer_ns()));
}

const DcqcnRateControl* RcTrafficEngine::rate_control(uint32_t qp_index) const {
  return qp_index < qp_.size() ? qp_[qp_index].rate.get() : nullptr;
}

RcCcSummary RcTrafficEngine::cc_summary(uint64_t now_ns) {
  RcCcSummary s;
  for (Qp& q : qp_) {
    if (q.rate == nullptr) continue;
    DcqcnRateControl& r = *q.rate;
    r.advance(now_ns);
    s.cnps += r.counters().cnps;
    s.rate_cuts += r.counters().rate_cuts;
    s.cuts_deferred += r.counters().cuts_deferred;
    if (!q.sent) continue;
    ++s.qps;
    if (r.at_min_rate()) ++s.qps_at_min_rate;
    if (r.limited()) ++s.qps_limited;
    if (now_ns > 0) {
      s.rate_fraction_sum += r.rate_integral_gbit() * 1e9 /
                             (static_cast<double>(now_ns) * r.config().line_rate_gbps);
    }
  }
  return s;
}

bool RcTrafficEngine::done() const {
  return std::all_of(requesters_.begin(), requesters_.end(),
                     [&](uint32_t i) { return qp_[i].requester->done(); });
}

RcRequesterCounters RcTrafficEngine::requester_totals() const {
  RcRequesterCounters sum;
  for (const uint32_t i : requesters_) sum += qp_[i].requester->counters();
  return sum;
}

RcResponderCounters RcTrafficEngine::responder_totals() const {
  RcResponderCounters sum;
  for (const uint32_t i : responders_) {
    if (qp_[i].responder) sum += qp_[i].responder->counters();
  }
  return sum;
}

RcPlacementResponderCounters RcTrafficEngine::placement_totals() const {
  RcPlacementResponderCounters sum;
  for (const uint32_t i : responders_) {
    if (qp_[i].placement) sum += qp_[i].placement->counters();
  }
  return sum;
}

const RcPlacementResponder* RcTrafficEngine::placement_responder(uint32_t qp_index) const {
  return qp_index < qp_.size() ? qp_[qp_index].placement.get() : nullptr;
}

const RcRequester* RcTrafficEngine::requester(uint32_t qp_index) const {
  return qp_index < qp_.size() ? qp_[qp_index].requester.get() : nullptr;
}

bool RcTrafficEngine::local_qp_of(uint32_t peer_ip, uint32_t peer_qp, uint32_t& local_qp) const {
  const auto it = by_peer_.find((uint64_t{peer_ip} << 24) | (peer_qp & kPsnMask));
  if (it == by_peer_.end()) return false;
  local_qp = it->second;
  return true;
}

const RcResponder* RcTrafficEngine::responder(uint32_t qp_index) const {
  return qp_index < qp_.size() ? qp_[qp_index].responder.get() : nullptr;
}

uint64_t RcTrafficEngine::memory_bytes() const {
  uint64_t b = sizeof(*this) + capacity_bytes(config_.qp_roles) + capacity_bytes(config_.qp_specs) +
               capacity_bytes(qp_) + capacity_bytes(requesters_) + capacity_bytes(responders_) +
               unordered_map_bytes(by_peer_);
  for (const Qp& q : qp_) {
    if (q.requester) b += q.requester->memory_bytes();
    if (q.responder) b += q.responder->memory_bytes();
    if (q.placement) b += q.placement->memory_bytes();
    if (q.rate) b += sizeof(DcqcnRateControl);
  }
  return b;
}

}  // namespace spraynet
