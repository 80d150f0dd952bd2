#include "dataplane/rc_endpoint/rc_traffic_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <stdexcept>

#include "dataplane/memory_usage.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/payload_store.h"
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
  r.irn = c.irn;
  r.retransmit_timeout_low_ns = c.irn_rto_low_ns;
  r.rto_low_packets = c.irn_rto_low_packets;
  // IRN's responder ACKs every packet; the AckReq bit then asks for nothing more, and a BDP cap
  // below rxe's 66 is allowed.
  if (c.irn) r.max_pkt_per_ack = 0;
  r.op = c.op;
  r.payload_store = c.payload_store;
  r.entropy_values = c.entropy_values;
  r.entropy_reps = c.entropy_reps;
  return r;
}

RcResponderConfig responder_config(const RcTrafficEngineConfig& c) {
  RcResponderConfig r;
  r.mtu = c.mtu;
  r.first_psn = c.first_psn;
  r.alloc_retry_ns = c.alloc_retry_ns;
  r.payload_store = c.payload_store;
  r.echo_entropy = c.echo_entropy;
  r.ack_every_packet = c.ack_clocked();
  r.echo_ce = c.dctcp.has_value();
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
  // Each QP its own order: the engine's seed mixed with the QP's local address.
  r.entropy_seed = entropy_seed ^ (uint64_t{local_ip} << 24) ^ (first_local_qp + qp_index);
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
  r.echo_entropy = echo_entropy;
  r.sack = irn;
  r.ack_every_packet = irn || ack_clocked();  // IRN's responder ACKs every packet too
  r.echo_ce = dctcp.has_value();
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
  if (int(dcqcn.has_value()) + int(dctcp.has_value()) + int(timely.has_value()) +
          int(hpcc.has_value()) > 1) {
    return "cc: at most one of dcqcn, dctcp, timely, hpcc";
  }
  if (dctcp) {
    if (std::string why = dctcp->check(); !why.empty()) return "dctcp: " + why;
  }
  if (timely) {
    if (std::string why = timely->check(); !why.empty()) return "timely: " + why;
  }
  if (hpcc) {
    if (std::string why = hpcc->check(); !why.empty()) return "hpcc: " + why;
  }
  if (dcqcn) {
    if (std::string why = dcqcn->check(); !why.empty()) return "dcqcn: " + why;
  }
  if (irn && !ooo_placement) return "irn: needs ooo_placement (IRN's responder places out of order)";
  if (irn && (irn_rto_low_ns == 0 || irn_rto_low_ns > retransmit_timeout_ns)) {
    return "irn_rto_low_ns: 1 ns .. retransmit_timeout_ns (RTO_low <= RTO_high)";
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
    if (s.one_shot && s.role == RcQpRole::kBoth) {
      return at + "one_shot: a requester or a responder, not both";
    }
    if (s.one_shot && s.role == RcQpRole::kRequester && !s.posted) {
      return at + "one_shot: a requester in posted mode";
    }
    if (has(s.role, RcQpRole::kRequester)) {
      if (std::string why = requester_config(i).check(); !why.empty()) return at + why;
    } else if (s.posted) {
      return at + "posted: only a requester posts messages";
    }
  }
  return responder_config(*this).check();
}

RcTrafficEngine::RcTrafficEngine(const RcTrafficEngineConfig& config, rte_mempool* pool)
    : config_(validated(config)),
      pool_(pool),
      ack_due_(config_.qps),
      read_due_(config_.qps),
      req_due_(config_.qps) {
  if (pool == nullptr) throw std::invalid_argument("pool: must not be null");
  qp_.resize(config_.qps);
  bool one_shot_responders = false;
  for (uint32_t i = 0; i < config_.qps; ++i) {
    // Only a requester sends READ requests, whose responses local_qp_of() is asked about.
    if (has(config_.role_of(i), RcQpRole::kRequester)) {
      const RcQpAddress a = config_.address(i);
      by_peer_.emplace((uint64_t{a.peer_ip} << 24) | a.peer_qp, a.local_qp);
    }
    Qp& q = qp_[i];
    q.one_shot = i < config_.qp_specs.size() && config_.qp_specs[i].one_shot;
    if (q.one_shot) {
      q.life = Life::kNotStarted;  // made at its post (requester) or first packet (responder)
      if (has(config_.role_of(i), RcQpRole::kRequester)) {
        ++one_shot_requesters_;
      } else {
        one_shot_responders = true;
      }
      continue;
    }
    ++live_qps_;
    const RcQpRole role = config_.role_of(i);
    make_rate(q, 0);
    if (has(role, RcQpRole::kRequester)) make_requester(i, 0);
    if (has(role, RcQpRole::kResponder)) make_responder(i, 0);
    reschedule(i);
  }
  // The payloads of QPs made later go into the store now: stores that saw the same engines made
  // must agree on where each payload lies (fabric_emu --mpi ranks send segments as (region,
  // offset)), whichever QPs each one went on to make. One-shot requesters post (one MTU).
  if (config_.payload_store != nullptr) {
    if (one_shot_requesters_ > 0) {
      RcRequesterConfig r = base_requester_config(config_);
      r.posted = true;
      config_.payload_store->add(RcRequester::payload_pattern(r));
    }
    if (one_shot_responders) config_.payload_store->add(RcResponder::payload_pattern(config_.mtu));
  }
}

namespace {

std::unique_ptr<RateControl> make_rate_control(const RcTrafficEngineConfig& c) {
  if (c.dcqcn) return std::make_unique<DcqcnRateControl>(*c.dcqcn);
  if (c.dctcp) return std::make_unique<DctcpRateControl>(*c.dctcp);
  if (c.timely) return std::make_unique<TimelyRateControl>(*c.timely);
  if (c.hpcc) return std::make_unique<HpccRateControl>(*c.hpcc);
  return nullptr;
}

}  // namespace

void RcTrafficEngine::make_rate(Qp& q, uint64_t now_ns) {
  if (q.rate) return;
  q.rate = make_rate_control(config_);
  if (!q.rate) return;
  if (config_.timely) q.send_ns.assign(std::max<uint32_t>(config_.max_in_flight, 1), 0);
  // A reaction point is at line rate until its first CNP and runs no timer before it: made now,
  // it is what it would be had it existed since 0 (its rate integral included).
  q.rate->advance(now_ns);
}

void RcTrafficEngine::make_requester(uint32_t i, uint64_t now_ns) {
  Qp& q = qp_[i];
  make_rate(q, now_ns);
  q.requester =
      std::make_unique<RcRequester>(config_.requester_config(i), config_.address(i), pool_, &completion_);
  insert_sorted(requesters_, i);
}

void RcTrafficEngine::make_responder(uint32_t i, uint64_t now_ns) {
  Qp& q = qp_[i];
  make_rate(q, now_ns);
  if (config_.ooo_placement) {
    q.placement =
        std::make_unique<RcPlacementResponder>(config_.placement_config(), config_.address(i), pool_);
  } else {
    q.responder = std::make_unique<RcResponder>(responder_config(config_), config_.address(i), pool_);
  }
  insert_sorted(responders_, i);
}

void RcTrafficEngine::insert_sorted(std::vector<uint32_t>& v, uint32_t i) {
  // QPs are made in index order at construction (appends) and one-shot ones in their flows' order.
  if (v.empty() || v.back() < i) {
    v.push_back(i);
    return;
  }
  v.insert(std::lower_bound(v.begin(), v.end(), i), i);
}

void RcTrafficEngine::erase_sorted(std::vector<uint32_t>& v, uint32_t i) {
  const auto it = std::lower_bound(v.begin(), v.end(), i);
  if (it != v.end() && *it == i) v.erase(it);
}

void RcTrafficEngine::reschedule(uint32_t i) {
  const Qp& q = qp_[i];
  uint64_t ack = kNever, read = kNever, req = kNever;
  if (q.placement) {
    ack = q.placement->next_event_ns();
  } else if (q.responder) {
    // ACK/NAKs go whatever the room (and pace); READ responses only with room, at their pace.
    if (!q.responder->read_responses_pending()) {
      ack = q.responder->next_event_ns();
    } else {
      read = paced_next(q, q.responder->next_event_ns());
    }
  }
  if (q.requester) {
    req = paced_next(q, q.requester->next_event_ns());
    // A full window (HPCC): an ACK reschedules it; until then only the timer can.
    if (req != kNever && !window_open(q, req)) {
      req = std::max(req, q.requester->retransmit_deadline_ns());
    }
  }
  ack_due_.set(i, ack);
  read_due_.set(i, read);
  req_due_.set(i, req);
}

template <class Try>
size_t RcTrafficEngine::round_robin(const std::vector<uint32_t>& due, uint32_t& cursor,
                                    size_t budget, Try&& try_one) {
  // The QPs not due would pass their turn without sending, so the order of the packets, and
  // where the next call starts, are those of a round robin over every QP.
  const size_t n = due.size();
  if (n == 0 || budget == 0) return 0;
  size_t pos = static_cast<size_t>(std::lower_bound(due.begin(), due.end(), cursor) - due.begin());
  if (pos == n) pos = 0;
  size_t sent = 0;
  for (size_t idle = 0; budget > 0 && idle < n;) {
    const uint32_t qi = due[pos];
    if (++pos == n) pos = 0;
    ++work_.qp_visits;
    if (try_one(qi)) {
      cursor = qi + 1;
      ++sent;
      --budget;
      idle = 0;
    } else {
      ++idle;
    }
  }
  return sent;
}

size_t RcTrafficEngine::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets,
                             RcTxRoom* room) {
  ++work_.polls;
  size_t sent = 0;
  due_scratch_.clear();
  ack_due_.due_by(now_ns, due_scratch_);
  for (const uint32_t i : due_scratch_) {
    ++work_.qp_visits;
    Qp& q = qp_[i];
    if (RcPlacementResponder* pr = q.placement.get()) {
      if (pr->next_event_ns() <= now_ns) sent += pr->poll(now_ns, out);
    } else if (RcResponder* r = q.responder.get()) {
      // ACK/NAKs only here; READ responses share the TX budget below.
      if (!r->read_responses_pending() && r->next_event_ns() <= now_ns) sent += r->poll(now_ns, out);
    }
    reschedule(i);
  }
  size_t budget = std::min<size_t>(max_packets, config_.max_burst);
  // READ responses: one packet per responder per round, as the requesters below.
  due_scratch_.clear();
  read_due_.due_by(now_ns, due_scratch_);
  size_t n = round_robin(due_scratch_, next_responder_, budget, [&](uint32_t qi) {
    Qp& q = qp_[qi];
    RcResponder* r = q.responder.get();
    // A placement responder answers no READs (the configs refuse op read with ooo-placement).
    const bool reading = r && r->read_responses_pending() && r->next_event_ns() <= now_ns &&
                         (room == nullptr || room->admits(qi)) && paced_ok(q, now_ns);
    const bool one = reading && r->poll(now_ns, out, 1) > 0;
    if (one) {
      paced_sent(q, out.back(), now_ns);
      if (room != nullptr) room->take(qi);
    }
    reschedule(qi);
    return one;
  });
  sent += n;
  budget -= n;

  // One packet per QP per round. A whole round without a packet means nobody due has anything
  // left (or room for it).
  due_scratch_.clear();
  req_due_.due_by(now_ns, due_scratch_);
  sent += round_robin(due_scratch_, next_requester_, budget, [&](uint32_t qi) {
    Qp& q = qp_[qi];
    if (!q.requester) return false;  // retired in this call (its last ACK came with no record)
    RcRequester& r = *q.requester;
    const uint64_t high = r.sent_packets();
    const bool one = (room == nullptr || room->admits(qi)) && window_open(q, now_ns) &&
                     paced_ok(q, now_ns) && r.poll(now_ns, out, 1) == 1;
    if (one) {
      // A new packet (not a resend): its send time, for TIMELY's RTT.
      if (!q.send_ns.empty() && r.sent_packets() > high) q.send_ns[high % q.send_ns.size()] = now_ns;
      paced_sent(q, out.back(), now_ns);
      if (room != nullptr) room->take(qi);
    }
    after_requester(qi);
    return one;
  });
  return sent;
}

void RcTrafficEngine::post(uint32_t qp_index, uint32_t bytes, uint64_t post_ns) {
  if (qp_index >= qp_.size()) throw std::out_of_range("post: no QP " + std::to_string(qp_index));
  Qp& q = qp_[qp_index];
  if (q.life == Life::kNotStarted && has(config_.role_of(qp_index), RcQpRole::kRequester)) {
    if (bytes == 0 || bytes > (1u << 31)) {
      throw std::invalid_argument("post: bytes must be 1..2^31");
    }
    make_requester(qp_index, post_ns);
    q.life = Life::kLive;
    ++live_qps_;
    ++work_.qps_created;
    work_.qps_live_peak = std::max(work_.qps_live_peak, ++live_one_shot_);
  } else if (q.life == Life::kRetired) {
    throw std::invalid_argument("post: QP " + std::to_string(qp_index) +
                                " is one-shot and its flow is over");
  }
  RcRequester* r = q.requester.get();
  if (r == nullptr || !r->config().posted) {
    throw std::invalid_argument("post: QP " + std::to_string(qp_index) +
                                " has no requester in posted mode");
  }
  r->post(bytes, post_ns);
  reschedule(qp_index);
}

void RcTrafficEngine::after_requester(uint32_t i) {
  Qp& q = qp_[i];
  if (q.requester->has_completions()) {
    if (!q.completing) {
      q.completing = true;
      completing_.push_back(i);
    }
  } else if (q.one_shot && q.requester->done()) {
    retire(i);
    return;
  }
  reschedule(i);
}

size_t RcTrafficEngine::take_completions(std::vector<MessageCompletion>& out) {
  if (completing_.empty()) return 0;
  // QP by QP in index order, as a walk over every requester would give them.
  std::sort(completing_.begin(), completing_.end());
  size_t n = 0;
  for (const uint32_t i : completing_) {
    Qp& q = qp_[i];
    q.completing = false;
    const size_t from = out.size();
    n += q.requester->take_completions(out);
    for (size_t k = from; k < out.size(); ++k) out[k].qp_index = i;
    if (q.one_shot && q.requester->done()) retire(i);
  }
  completing_.clear();
  return n;
}

void RcTrafficEngine::retire(uint32_t i) {
  Qp& q = qp_[i];
  if (q.life != Life::kLive) return;
  const uint64_t now_ns = q.rate ? q.rate->last_advance_ns() : 0;
  if (q.requester) {
    if (retired_slot_.size() < qp_.size()) {
      retired_slot_.resize(qp_.size(), kNoSlot);
      retired_flow_.reserve(one_shot_requesters_);  // each retires once: no doubling
    }
    if (retired_slot_[i] == kNoSlot) {
      retired_slot_[i] = static_cast<uint32_t>(retired_flow_.size());
      retired_flow_.push_back(flow_counters(i));
    } else {
      retired_flow_[retired_slot_[i]] = flow_counters(i);
    }
    retired_requesters_ += q.requester->counters();
    if (const RepsCounters* r = q.requester->reps_counters()) retired_reps_ += *r;
    erase_sorted(requesters_, i);
  }
  if (q.responder) retired_responders_ += q.responder->counters();
  if (q.placement) retired_placement_ += q.placement->counters();
  if (q.responder || q.placement) erase_sorted(responders_, i);
  fold_rate(q, now_ns);
  q.requester.reset();
  q.responder.reset();
  q.placement.reset();
  q.rate.reset();
  q.life = Life::kRetired;
  ack_due_.set(i, kNever);
  read_due_.set(i, kNever);
  req_due_.set(i, kNever);
  --live_qps_;
  --live_one_shot_;
  ++work_.qps_retired;
}

void RcTrafficEngine::fold_rate(const Qp& q, uint64_t now_ns) {
  if (!q.rate) return;
  const RateControl& r = *q.rate;
  if (const auto* d = dynamic_cast<const DcqcnRateControl*>(&r)) {
    retired_cc_.cnps += d->counters().cnps;
    retired_cc_.rate_cuts += d->counters().rate_cuts;
    retired_cc_.cuts_deferred += d->counters().cuts_deferred;
  }
  if (!q.sent) return;
  ++retired_cc_.qps;
  retired_rate_integral_gbit_ += r.rate_integral_gbit();
  retired_at_ns_sum_ += static_cast<double>(now_ns);
}

void RcTrafficEngine::retire_responder(uint32_t qp_index) {
  if (qp_index >= qp_.size()) {
    throw std::out_of_range("retire_responder: no QP " + std::to_string(qp_index));
  }
  Qp& q = qp_[qp_index];
  if (!q.one_shot || !has(config_.role_of(qp_index), RcQpRole::kResponder)) {
    throw std::invalid_argument("retire_responder: QP " + std::to_string(qp_index) +
                                " is not a one-shot responder");
  }
  if (q.life == Life::kNotStarted) {
    q.life = Life::kRetired;  // its flow ended before any of its packets came: nothing to free
    ++work_.qps_retired;
    return;
  }
  retire(qp_index);
}

RcQpFlowCounters RcTrafficEngine::flow_counters(uint32_t qp_index) const {
  if (qp_index >= qp_.size()) return {};
  const Qp& q = qp_[qp_index];
  if (q.life == Life::kRetired) {
    return qp_index < retired_slot_.size() && retired_slot_[qp_index] != kNoSlot
               ? retired_flow_[retired_slot_[qp_index]]
               : RcQpFlowCounters{};
  }
  RcQpFlowCounters f;
  if (q.requester) {
    const RcRequesterCounters& k = q.requester->counters();
    f.bytes_acked = k.bytes_acked;
    f.packets_sent = k.packets_sent;
    f.packets_retransmitted = k.packets_retransmitted;
    f.naks_received = k.naks_received;
    f.timeouts = k.timeouts;
    f.has_requester = true;
  } else if (q.life == Life::kNotStarted && has(config_.role_of(qp_index), RcQpRole::kRequester)) {
    f.has_requester = true;
  }
  return f;
}

size_t RcTrafficEngine::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                                std::vector<rte_mbuf*>& out, std::span<const IntHop> hops) {
  ++counters_.received;
  uint64_t* drop = nullptr;
  const uint32_t index = p.dest_qp - config_.first_local_qp;  // wraps below the first QP
  if (p.kind != PacketKind::kRoce) {
    drop = &counters_.not_roce;
  } else if (p.dest_qp < config_.first_local_qp || index >= config_.qps) {
    drop = &counters_.unknown_qp;
  } else if (qp_[index].life == Life::kRetired) {
    drop = &counters_.retired_qp;
  } else if (p.bth_opcode == opcode::kRcAck || (p.bth_opcode >= opcode::kRcReadResponseFirst &&
                                                p.bth_opcode <= opcode::kRcReadResponseOnly)) {
    if (RcRequester* r = qp_[index].requester.get()) {
      Qp& q = qp_[index];
      // The ACK-clocked controls (not DCQCN, which reacts to CNPs) see every ACK after the
      // requester took it: how far the QP is acknowledged and has sent, and what the ACK echoes.
      const bool feedback = q.rate && !config_.dcqcn && p.bth_opcode == opcode::kRcAck &&
                            roce_packet_in_mbuf(m, p, p.bth_offset + kBthSize, 0);
      const bool becn =
          feedback && BthView(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset).becn();
      r->receive(m, p, now_ns);
      if (feedback) ack_feedback(q, *r, becn, now_ns, hops);
      after_requester(index);
      return 0;
    }
    drop = qp_[index].life == Life::kNotStarted ? &counters_.not_started : &counters_.no_requester;
  } else if (p.bth_opcode == opcode::kCnp) {
    // REPS: the CNP echoes the marked packet's entropy, never to be reused (with or without
    // congestion control).
    if (RcRequester* r = qp_[index].requester.get()) r->on_marked_entropy(p.src_port);
    if (RateControl* rate = config_.dcqcn ? qp_[index].rate.get() : nullptr) {
      rate->on_cnp(now_ns);
      ++counters_.cnps;
      rte_pktmbuf_free(m);
      reschedule(index);
      return 0;
    }
    drop = !config_.dcqcn ? &counters_.cnp_no_cc
           : qp_[index].life == Life::kNotStarted ? &counters_.not_started
                                                  : &counters_.cnp_no_cc;
  } else if (is_write_request(p.bth_opcode) || p.bth_opcode == opcode::kRcReadRequest) {
    Qp& q = qp_[index];
    if (q.life == Life::kNotStarted && has(config_.role_of(index), RcQpRole::kResponder)) {
      make_responder(index, now_ns);
      q.life = Life::kLive;
      ++live_qps_;
      ++work_.qps_created;
      work_.qps_live_peak = std::max(work_.qps_live_peak, ++live_one_shot_);
    }
    size_t n = 0;
    bool taken = true;
    if (RcResponder* r = q.responder.get()) {
      n = r->receive(m, p, now_ns, out);
    } else if (RcPlacementResponder* r = q.placement.get()) {
      n = r->receive(m, p, now_ns, out);
    } else {
      taken = false;
    }
    if (taken) {
      reschedule(index);
      return n;
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
  uint64_t t = ack_due_.earliest();
  if (room == nullptr) {
    t = std::min({t, read_due_.earliest(), req_due_.earliest()});
  } else {
    const auto admits = [&](uint32_t qi) {
      ++work_.qp_visits;
      return room->admits(qi);
    };
    t = std::min({t, read_due_.earliest_if(admits), req_due_.earliest_if(admits)});
  }
  return t;
}

void RcTrafficEngine::ack_feedback(Qp& q, const RcRequester& r, bool becn, uint64_t now_ns,
                                   std::span<const IntHop> hops) {
  const uint64_t acked = r.acked_packets();
  AckFeedback fb;
  fb.now_ns = now_ns;
  fb.ack_seq = acked * config_.mtu;
  fb.snd_nxt = r.sent_packets() * config_.mtu;
  fb.ecn_echo = becn;
  fb.hops = hops;
  // TIMELY: the newest packet this ACK acknowledges, if its send time is still in the ring.
  if (!q.send_ns.empty() && acked > 0 && r.sent_packets() - (acked - 1) <= q.send_ns.size()) {
    fb.echoed_ts_ns = q.send_ns[(acked - 1) % q.send_ns.size()];
  }
  q.rate->on_ack(fb);
}

bool RcTrafficEngine::window_open(const Qp& q, uint64_t now_ns) const {
  if (q.rate == nullptr || q.requester == nullptr) return true;
  uint64_t window = q.rate->window_bytes();
  if (config_.var_window_bytes != 0) {
    const double line = cc_line_rate_gbps();
    const auto w = static_cast<uint64_t>(static_cast<double>(config_.var_window_bytes) *
                                         q.rate->rate_gbps() / line);
    window = std::min(window, std::max<uint64_t>(w, 1));
  }
  if (window == UINT64_MAX) return true;
  // A full window waits for ACKs, or for the retransmit timer (which goes back to the oldest
  // unacknowledged packet and empties it).
  return q.requester->in_flight() * config_.mtu < window ||
         now_ns >= q.requester->retransmit_deadline_ns();
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

double RcTrafficEngine::cc_line_rate_gbps() const {
  if (config_.dcqcn) return config_.dcqcn->line_rate_gbps;
  if (config_.dctcp) return config_.dctcp->line_rate_gbps;
  if (config_.timely) return config_.timely->line_rate_gbps;
  if (config_.hpcc) return config_.hpcc->line_rate_gbps;
  return 0;
}

size_t RcTrafficEngine::rate_control_bytes() const {
  if (config_.dcqcn) return sizeof(DcqcnRateControl);
  if (config_.dctcp) return sizeof(DctcpRateControl);
  if (config_.timely) return sizeof(TimelyRateControl);
  if (config_.hpcc) return sizeof(HpccRateControl);
  return 0;
}

const RateControl* RcTrafficEngine::rate_control(uint32_t qp_index) const {
  return qp_index < qp_.size() ? qp_[qp_index].rate.get() : nullptr;
}

RcCcSummary RcTrafficEngine::cc_summary(uint64_t now_ns) {
  RcCcSummary s;
  for (uint32_t i = 0; i < qp_.size(); ++i) {
    Qp& q = qp_[i];
    if (q.rate == nullptr) continue;
    RateControl& r = *q.rate;
    r.advance(now_ns);
    reschedule(i);  // its timers ran: its pace may be another now
    if (const auto* d = dynamic_cast<const DcqcnRateControl*>(&r)) {
      s.cnps += d->counters().cnps;
      s.rate_cuts += d->counters().rate_cuts;
      s.cuts_deferred += d->counters().cuts_deferred;
    }
    if (!q.sent) continue;
    if (!config_.dcqcn) {  // the QPs that sent under it
      const std::vector<RateControlFigure> f = r.figures();
      for (size_t k = 0; k < f.size() && k < RcCcSummary::kMaxFigures; ++k) s.figure_sum[k] += f[k].second;
      ++s.figure_qps;
    }
    ++s.qps;
    if (r.at_min_rate()) ++s.qps_at_min_rate;
    if (r.limited()) ++s.qps_limited;
    if (now_ns > 0) {
      s.rate_fraction_sum += r.rate_integral_gbit() * 1e9 /
                             (static_cast<double>(now_ns) * cc_line_rate_gbps());
    }
  }
  if (retired_cc_.cnps + retired_cc_.qps > 0 && cc_line_rate_gbps() > 0) {
    // Retired QPs: idle at line rate (not limited) from their retirement on.
    s.cnps += retired_cc_.cnps;
    s.rate_cuts += retired_cc_.rate_cuts;
    s.cuts_deferred += retired_cc_.cuts_deferred;
    s.qps += retired_cc_.qps;
    if (now_ns > 0 && retired_cc_.qps > 0) {
      const double now = static_cast<double>(now_ns);
      s.rate_fraction_sum +=
          retired_rate_integral_gbit_ * 1e9 / (now * cc_line_rate_gbps()) +
          static_cast<double>(retired_cc_.qps) - retired_at_ns_sum_ / now;
    }
  }
  return s;
}

bool RcTrafficEngine::done() const {
  // A one-shot QP not started has nothing posted, a retired one is done: only live ones count.
  return std::all_of(requesters_.begin(), requesters_.end(),
                     [&](uint32_t i) { return qp_[i].requester->done(); });
}

RcRequesterCounters RcTrafficEngine::requester_totals() const {
  RcRequesterCounters sum = retired_requesters_;
  for (const uint32_t i : requesters_) sum += qp_[i].requester->counters();
  return sum;
}

RepsCounters RcTrafficEngine::reps_totals() const {
  RepsCounters sum = retired_reps_;
  for (const uint32_t i : requesters_) {
    if (const RepsCounters* r = qp_[i].requester->reps_counters()) sum += *r;
  }
  return sum;
}

RcResponderCounters RcTrafficEngine::responder_totals() const {
  RcResponderCounters sum = retired_responders_;
  for (const uint32_t i : responders_) {
    if (qp_[i].responder) sum += qp_[i].responder->counters();
  }
  return sum;
}

RcPlacementResponderCounters RcTrafficEngine::placement_totals() const {
  RcPlacementResponderCounters sum = retired_placement_;
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
               unordered_map_bytes(by_peer_) + ack_due_.memory_bytes() +
               read_due_.memory_bytes() + req_due_.memory_bytes() +
               capacity_bytes(due_scratch_) + capacity_bytes(completing_) +
               capacity_bytes(retired_flow_) + capacity_bytes(retired_slot_);
  for (const Qp& q : qp_) {
    if (q.requester) b += q.requester->memory_bytes();
    if (q.responder) b += q.responder->memory_bytes();
    if (q.placement) b += q.placement->memory_bytes();
    if (q.rate) b += rate_control_bytes() + capacity_bytes(q.send_ns);
  }
  return b;
}

}  // namespace spraynet
