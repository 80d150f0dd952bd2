#include "dataplane/rc_endpoint/rc_requester.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <stdexcept>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/irn_sack.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/memory_usage.h"
#include "dataplane/wire/payload_store.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet {

uint16_t rxe_udp_source_port(uint32_t qpn) {
  const uint32_t h = (qpn * 0x61C88647u) >> (32 - 14);
  return static_cast<uint16_t>(0xC000 + (h & 0x3FFF));
}

const char* to_string(RcOp op) {
  return op == RcOp::kRead ? "read" : "write";
}

std::string RcQpAddress::check() const {
  if (local_qp > kPsnMask) return "local_qp: must fit 24 bits";
  if (peer_qp > kPsnMask) return "peer_qp: must fit 24 bits";
  if (dscp > 63) return "dscp: must be 0..63";
  if (ecn > 3) return "ecn: must be 0..3";
  if (ack_dscp < -1 || ack_dscp > 63) return "ack_dscp: must be -1 (the data's) or 0..63";
  return {};
}

FrameSpec RcQpAddress::frame(uint16_t ip_id) const {
  FrameSpec f;
  f.eth.dst = peer_mac;
  f.eth.src = local_mac;
  f.ip.src = local_ip;
  f.ip.dst = peer_ip;
  f.ip.tos = static_cast<uint8_t>((dscp << 2) | (ecn & 0x03));
  f.ip.id = ip_id;
  f.udp.src_port = udp_src_port;
  return f;
}

rte_mbuf* build_rc_ack(rte_mempool* pool, const RcQpAddress& a, uint16_t ip_id, uint32_t psn,
                       uint8_t syndrome, uint32_t msn, uint16_t src_port, bool becn,
                       std::span<const uint8_t> extension) {
  RoceSpec r;
  r.opcode = opcode::kRcAck;
  r.dest_qp = a.peer_qp;
  r.psn = psn;
  r.syndrome = syndrome;
  r.msn = msn & kPsnMask;
  r.becn = becn;
  FrameSpec f = a.frame(ip_id);
  f.ip.tos = static_cast<uint8_t>((a.ack_dscp >= 0 ? a.ack_dscp : a.dscp) << 2);  // Not-ECT
  if (src_port != 0) f.udp.src_port = src_port;
  f.payload = extension;
  return build_roce_mbuf(pool, f, r);
}

// ---- counters ---------------------------------------------------------------------------------

RcRequesterCounters& RcRequesterCounters::operator+=(const RcRequesterCounters& o) {
  messages_started += o.messages_started;
  messages_completed += o.messages_completed;
  packets_sent += o.packets_sent;
  packets_retransmitted += o.packets_retransmitted;
  payload_bytes_sent += o.payload_bytes_sent;
  bytes_acked += o.bytes_acked;
  bytes_completed += o.bytes_completed;
  responses_received += o.responses_received;
  acks_received += o.acks_received;
  naks_received += o.naks_received;
  nak_retries += o.nak_retries;
  selective_retransmissions += o.selective_retransmissions;
  sack_naks += o.sack_naks;
  sacked_packets += o.sacked_packets;
  sack_resends_skipped += o.sack_resends_skipped;
  sack_malformed += o.sack_malformed;
  rto_low_timeouts += o.rto_low_timeouts;
  naks_ignored += o.naks_ignored;
  timeouts += o.timeouts;
  stale_responses += o.stale_responses;
  invalid_responses += o.invalid_responses;
  other_naks += o.other_naks;
  icrc_errors += o.icrc_errors;
  wrong_qp += o.wrong_qp;
  bad_opcode += o.bad_opcode;
  malformed += o.malformed;
  pool_empty += o.pool_empty;
  read_requests_sent += o.read_requests_sent;
  read_responses_received += o.read_responses_received;
  read_responses_accepted += o.read_responses_accepted;
  read_responses_out_of_order += o.read_responses_out_of_order;
  read_response_errors += o.read_response_errors;
  read_retries += o.read_retries;
  read_retries_ignored += o.read_retries_ignored;
  read_bytes_received += o.read_bytes_received;
  retransmitted_acked += o.retransmitted_acked;
  responses_ahead_of_resend += o.responses_ahead_of_resend;
  fatal_naks += o.fatal_naks;
  qp_errors += o.qp_errors;
  messages_flushed += o.messages_flushed;
  responses_in_error += o.responses_in_error;
  completion.merge(o.completion);
  return *this;
}

// ---- config -----------------------------------------------------------------------------------

std::string RcRequesterConfig::check() const {
  if (!valid_path_mtu(mtu)) return "mtu: must be 256, 512, 1024, 2048 or 4096";
  // IBA: a message is at most 2^31 bytes (rxe's check_length refuses a longer DMA length).
  if (message_bytes > 0x80000000u) return "message_bytes: at most 2^31";
  if (max_pkt_per_ack > 0x7FFFFFu) return "max_pkt_per_ack: too large";
  if (max_in_flight < max_pkt_per_ack + 2) {
    return "max_in_flight: must be at least max_pkt_per_ack + 2, or the window can fill with "
           "packets that ask for no ACK";
  }
  // PSNs are compared by serial arithmetic, which is unambiguous within half the 24-bit space.
  if (max_in_flight > 0x7FFFFFu) return "max_in_flight: at most 2^23 - 1";
  if (retransmit_timeout_ns == 0) return "retransmit_timeout_ns: must be > 0";
  if (irn) {
    if (!selective_retransmit) return "irn: needs selective_retransmit";
    if (retransmit_timeout_low_ns == 0 || retransmit_timeout_low_ns > retransmit_timeout_ns) {
      return "retransmit_timeout_low_ns: 1 ns .. retransmit_timeout_ns (RTO_low <= RTO_high)";
    }
    if (max_in_flight > 65536) return "max_in_flight: at most 65536 with irn";
  }
  if (op != RcOp::kWrite && op != RcOp::kRead) return "op: must be write or read";
  if (first_psn > kPsnMask) return "first_psn: must fit 24 bits";
  if (entropy_values > ObliviousEntropy::kMaxValues ||
      (entropy_values & (entropy_values - 1)) != 0) {
    return "entropy_values: must be 0 (off) or a power of two up to 16384";
  }
  return {};
}

// ---- RcRequester ------------------------------------------------------------------------------

namespace {

uint32_t packets_for(uint32_t bytes, uint32_t mtu) {
  return bytes == 0 ? 1 : static_cast<uint32_t>((uint64_t{bytes} + mtu - 1) / mtu);
}

template <typename Config>
const Config& validated(const Config& c) {
  if (const std::string why = c.check(); !why.empty()) throw std::invalid_argument(why);
  return c;
}

}  // namespace

std::vector<uint8_t> RcRequester::payload_pattern(const RcRequesterConfig& config) {
  std::vector<uint8_t> p(config.posted ? config.mtu : std::min(config.mtu, config.message_bytes));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i);
  return p;
}

RcRequester::RcRequester(const RcRequesterConfig& config, const RcQpAddress& address,
                         rte_mempool* pool, CompletionTimeStats* shared_stats)
    : config_(validated(config)),
      address_(validated(address)),
      pool_(pool),
      segmenter_(config_.message_bytes, config_.mtu),
      stats_(shared_stats),
      next_va_(config_.remote_va) {
  if (pool_ == nullptr) throw std::invalid_argument("pool: must not be null");
  if (address_.udp_src_port == 0) address_.udp_src_port = rxe_udp_source_port(address_.local_qp);
  if (config_.irn) {
    // Never more than max_in_flight unacknowledged (selective mode never goes back), so a slot
    // per window position holds each unacknowledged packet's flags.
    irn_bits_ = (size_t{config_.max_in_flight} + 63) / 64 * 64;
    sacked_.assign(irn_bits_ / 64, 0);
    resent_.assign(irn_bits_ / 64, 0);
  }
  if (config_.entropy_values > 1 && config_.entropy_reps) {
    reps_ = std::make_unique<RepsEntropy>(config_.entropy_values, address_.udp_src_port,
                                          config_.entropy_seed);
  } else if (config_.entropy_values > 1) {
    entropy_ = std::make_unique<ObliviousEntropy>(config_.entropy_values, address_.udp_src_port,
                                                  config_.entropy_seed);
  }

  // A full-MTU WRITE FIRST is the largest packet; a pool whose mbufs cannot hold it would
  // fail every allocation, which is a set-up error rather than back-pressure. Posted messages
  // may have any size, so there it is always a full MTU.
  payload_ = payload_pattern(config_);
  payload_bytes_ = payload_;
  if (config_.payload_store != nullptr) {
    payload_bytes_ = config_.payload_store->add(payload_);
    std::vector<uint8_t>().swap(payload_);  // the store's copy is the one used: a page a QP less
  }
  FrameSpec f;
  f.payload = config_.payload_store != nullptr ? std::span<const uint8_t>() : payload_bytes_;
  RoceSpec r;
  r.opcode = opcode::kRcWriteFirst;
  // With a store the mbufs hold the headers (and payloads under 256 bytes) only.
  const size_t frame = roce_frame_length(f, r) + (config_.payload_store != nullptr ? 256 : 0);
  const uint32_t room = rte_pktmbuf_data_room_size(pool_);
  if (room < RTE_PKTMBUF_HEADROOM || frame > room - RTE_PKTMBUF_HEADROOM) {
    throw std::invalid_argument("pool: mbufs too small for a " + std::to_string(frame) +
                                "-byte packet at MTU " + std::to_string(config_.mtu));
  }

  if (stats_ == nullptr) {
    own_stats_ = std::make_unique<CompletionTimeStats>();
    stats_ = own_stats_.get();
  }
}

uint32_t RcRequester::psn_of(uint64_t seq) const {
  return psn_add(config_.first_psn, static_cast<uint32_t>(seq & kPsnMask));
}

uint32_t RcRequester::payload_of(const Message& m, uint32_t index) const {
  return index + 1 < m.packets ? config_.mtu : m.bytes - index * config_.mtu;
}

bool RcRequester::seq_of(uint32_t psn, uint64_t& seq) const {
  // Everything this QP can legitimately hear about lies within max_in_flight (< 2^23) of the
  // oldest unacknowledged PSN, where 24-bit serial arithmetic is unambiguous.
  const int32_t d = psn_diff(psn_of(una_), psn & kPsnMask);
  if (d >= 0) {
    seq = una_ + static_cast<uint64_t>(d);
    return true;
  }
  // Before una_: still an answer about the oldest message when that one has not completed (an
  // ACK overtook its resend, see check_psn), else older than anything outstanding.
  const uint64_t back = static_cast<uint64_t>(-static_cast<int64_t>(d));
  const uint64_t base = messages_.empty() ? una_ : std::min(una_, messages_.front().first_seq);
  if (back > una_ - base) return false;
  seq = una_ - back;
  return true;
}

void RcRequester::post(uint32_t bytes, uint64_t post_ns) {
  post(bytes, post_ns, config_.op);
}

void RcRequester::post(uint32_t bytes, uint64_t post_ns, RcOp op) {
  if (!config_.posted) throw std::invalid_argument("post: the requester is not in posted mode");
  if (bytes == 0 || bytes > 0x80000000u) throw std::invalid_argument("post: bytes must be 1..2^31");
  if (op != RcOp::kWrite && op != RcOp::kRead) throw std::invalid_argument("post: unknown op");
  if (error_) {
    // rxe accepts a post on a QP in the error state and completes it flushed at once.
    ++created_;
    ++completed_messages_;
    ++counters_.messages_flushed;
    return;
  }
  add_message(bytes, post_ns, op);
}

void RcRequester::add_message(uint32_t bytes, uint64_t post_ns, RcOp op) {
  Message m;
  m.first_seq = end_seq_;
  m.va = next_va_;
  m.post_ns = post_ns;
  m.bytes = bytes;
  // A READ takes one PSN per response packet (IBA 9.7.1), a WRITE one per request packet: the
  // same count, max(1, ceil(bytes / MTU)).
  m.packets = packets_for(bytes, config_.mtu);
  m.op = op;
  end_seq_ += m.packets;
  next_va_ += bytes;
  ++created_;
  if (op == RcOp::kRead) ++reads_;
  messages_.push_back(m);
}

bool RcRequester::has_next_message() const {
  if (next_msg_ < completed_messages_ + messages_.size()) return true;
  return !config_.posted && (config_.messages == 0 || next_msg_ < config_.messages);
}

RcRequester::Message& RcRequester::next_message() {
  const uint64_t i = next_msg_ - completed_messages_;
  if (i == messages_.size()) add_message(config_.message_bytes, 0, config_.op);  // fixed mode
  return messages_[i];
}

bool RcRequester::at_message_start() const {
  if (next_ != high_) return false;
  const uint64_t i = next_msg_ - completed_messages_;
  return i >= messages_.size() || messages_[i].first_seq == next_;
}

uint64_t RcRequester::message_start_ns() const {
  uint64_t t = next_message_ns_;
  const uint64_t i = next_msg_ - completed_messages_;
  if (config_.posted && i < messages_.size()) t = std::max(t, messages_[i].post_ns);
  return t;
}

bool RcRequester::new_message_waits(uint64_t now_ns) const {
  return at_message_start() && now_ns < message_start_ns();
}

bool RcRequester::can_send(uint64_t now_ns) const {
  return !error_ && has_next_message() && window_open() && now_ns >= alloc_retry_at_ns_ &&
         !new_message_waits(now_ns);
}

rte_mbuf* RcRequester::build(const Message& msg, uint32_t index, bool ack_req) {
  const RcWriteSegmenter seg(msg.bytes, config_.mtu);
  const RcWritePacket w = seg.packet(index, psn_of(msg.first_seq));

  FrameSpec f = address_.frame(ip_id_);
  if (entropy_) f.udp.src_port = entropy_->next();
  if (reps_) f.udp.src_port = reps_->next();
  f.payload = payload_bytes_.first(w.length);
  RoceSpec r;
  r.opcode = w.opcode;
  r.dest_qp = address_.peer_qp;
  r.ack_req = ack_req;
  r.psn = w.psn;
  if (w.has_reth) {
    r.virtual_address = msg.va;
    r.rkey = config_.rkey;
    r.dma_length = msg.bytes;
  }
  rte_mbuf* m = build_roce_mbuf(pool_, f, r, config_.payload_store);
  if (m != nullptr) ++ip_id_;
  return m;
}

rte_mbuf* RcRequester::build_read(const Message& msg, uint32_t index) {
  // rxe req_retry: a re-issued READ starts at the first response not received, its VA moved on
  // by what was received (whole MTUs) and its length the rest (init_req_packet: dma.resid).
  const uint32_t done = index * config_.mtu;
  FrameSpec f = address_.frame(ip_id_);
  if (entropy_) f.udp.src_port = entropy_->next();
  if (reps_) f.udp.src_port = reps_->next();
  RoceSpec r;
  r.opcode = opcode::kRcReadRequest;
  r.dest_qp = address_.peer_qp;
  r.ack_req = true;  // rxe init_req_packet: the last (only) packet of the request
  r.psn = psn_of(msg.first_seq + index);
  r.virtual_address = msg.va + done;
  r.rkey = config_.rkey;
  r.dma_length = msg.bytes - done;
  rte_mbuf* m = build_roce_mbuf(pool_, f, r);
  if (m != nullptr) ++ip_id_;
  return m;
}

void RcRequester::go_back_to_una(uint64_t now_ns) {
  // A message wholly acknowledged but not completed (an ACK overtook its resend, check_psn) is
  // completed here: rxe's req_retry would restart at it (wqe_index = the consumer index) with
  // nothing left to send. Then the message holding una_ is the oldest left.
  while (!messages_.empty() && una_ >= messages_.front().first_seq + messages_.front().packets) {
    complete_front(now_ns);
  }
  next_ = una_;
  next_msg_ = completed_messages_;
}

size_t RcRequester::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets) {
  if (error_) return 0;  // rxe_requester: nothing is sent in QP_STATE_ERROR
  if (timer_armed_ && now_ns >= deadline_ns_) {
    timer_armed_ = false;
    // rxe retransmit_timer -> COMPST_ERROR_RETRY -> req_retry(): resend from comp.psn, but only
    // when req.psn > comp.psn ("no point in retrying if we have already seen the last ack that
    // the requester could have caused"): not while resending PSNs an ACK has overtaken.
    if (next_ > una_) {
      ++counters_.timeouts;
      if (reps_) reps_->on_timeout(now_ns);  // a path lost: freeze on the values last known good
      retry_started_ = true;
      if (config_.selective_retransmit) {
        if (config_.irn) {
          if (high_ - una_ <= config_.rto_low_packets) ++counters_.rto_low_timeouts;
          // A new round: what the NAKs had resent may be lost again.
          std::fill(resent_.begin(), resent_.end(), 0);
          irn_mark(resent_, una_, true);
        }
        queue_resend(una_);
        recover_ = high_;
      } else {
        go_back_to_una(now_ns);
      }
    }
  }

  size_t sent = config_.selective_retransmit ? send_resends(now_ns, out, max_packets) : 0;
  while (sent < max_packets && can_send(now_ns)) {
    Message& msg = next_message();
    const uint64_t seq = next_;
    const auto index = static_cast<uint32_t>(seq - msg.first_seq);
    if (msg.op == RcOp::kRead) {
      // One request for the responses index..packets-1; the next PSN is past all of them.
      rte_mbuf* m = build_read(msg, index);
      if (m == nullptr) {
        ++counters_.pool_empty;
        alloc_retry_at_ns_ = now_ns + config_.alloc_retry_ns;
        if (alloc_retry_at_ns_ == now_ns) ++alloc_retry_at_ns_;
        break;
      }
      noack_pkts_ = 0;
      alloc_retry_at_ns_ = 0;
      out.push_back(m);
      ++sent;
      ++counters_.packets_sent;
      ++counters_.read_requests_sent;
      if (seq == high_) {
        high_ = msg.first_seq + msg.packets;
        ++counters_.messages_started;
        msg.first_sent_ns = now_ns;
        if (!config_.posted) msg.post_ns = now_ns;
        next_message_ns_ = now_ns + config_.message_gap_ns;
      } else {
        ++counters_.packets_retransmitted;
      }
      next_ = msg.first_seq + msg.packets;
      ++next_msg_;
      if (!timer_armed_) {
        arm_timer(now_ns);
      }
      continue;
    }
    const bool last = index + 1 == msg.packets;
    // rxe init_req_packet: ack_req = END || noack_pkts++ > RXE_MAX_PKT_PER_ACK; reset on AckReq.
    const bool ack_req = last || noack_pkts_ > config_.max_pkt_per_ack;
    rte_mbuf* m = build(msg, index, ack_req);
    if (m == nullptr) {
      ++counters_.pool_empty;
      alloc_retry_at_ns_ = now_ns + config_.alloc_retry_ns;
      if (alloc_retry_at_ns_ == now_ns) ++alloc_retry_at_ns_;  // never retry within this poll
      break;
    }
    noack_pkts_ = ack_req ? 0 : noack_pkts_ + 1;
    alloc_retry_at_ns_ = 0;
    out.push_back(m);
    ++sent;
    ++counters_.packets_sent;
    counters_.payload_bytes_sent += payload_of(msg, index);
    if (seq == high_) {
      if (config_.irn) {  // the slot last held a packet acknowledged long ago
        irn_mark(sacked_, seq, false);
        irn_mark(resent_, seq, false);
      }
      ++high_;
      if (index == 0) {
        ++counters_.messages_started;
        msg.first_sent_ns = now_ns;
        if (!config_.posted) msg.post_ns = now_ns;
        next_message_ns_ = now_ns + config_.message_gap_ns;
      }
    } else {
      ++counters_.packets_retransmitted;
      // rxe resends from the go-back point whatever an ACK has acknowledged since (req.psn
      // stays behind comp.psn); the responder re-ACKs them as duplicates.
      if (seq < una_) ++counters_.retransmitted_acked;
    }
    ++next_;
    if (last) ++next_msg_;
    if (!timer_armed_) {  // rxe update_state: mod_timer only when no timer is pending
      arm_timer(now_ns);
    } else if (config_.irn) {
      // IRN: RTO_high once more than N are in flight, counted from when the timer started.
      deadline_ns_ = std::max(deadline_ns_, timer_start_ns_ + timeout_ns());
    }
  }
  return sent;
}

void RcRequester::advance_una(uint64_t end_seq) {
  if (end_seq <= una_) return;
  // Payload of packets una_..end_seq-1, message by message (all sent, so all in messages_).
  uint64_t s = una_;
  for (const Message& m : messages_) {
    if (s >= end_seq) break;
    const uint64_t m_end = m.first_seq + m.packets;
    if (m_end <= s) continue;
    const uint64_t from = s - m.first_seq;
    const uint64_t to = std::min(end_seq, m_end) - m.first_seq;
    counters_.bytes_acked +=
        to == m.packets ? m.bytes - from * config_.mtu : (to - from) * config_.mtu;
    s = m.first_seq + to;
  }
  una_ = end_seq;
}

void RcRequester::complete_front(uint64_t now_ns) {
  const Message& m = messages_.front();
  const uint64_t end = m.first_seq + m.packets;
  advance_una(end);
  if (next_msg_ == completed_messages_ && next_ < end) {
    // Completed while still being resent (a duplicate ACK of its last PSN, check_psn): rxe
    // resends the rest of the completed WQE; here the resend moves on to the next message.
    next_ = end;
    ++next_msg_;
  }
  const uint64_t from = config_.posted ? m.post_ns : m.first_sent_ns;
  const uint64_t took = now_ns > from ? now_ns - from : 0;
  if (m.op == RcOp::kRead) --reads_;
  ++completed_messages_;
  ++counters_.messages_completed;
  counters_.bytes_completed += m.bytes;
  counters_.completion.add(took);
  stats_->add(took);
  if (config_.record_completions) {
    MessageCompletion c;
    c.bytes = m.bytes;
    c.post_ns = m.post_ns;
    c.first_sent_ns = m.first_sent_ns;
    c.completed_ns = now_ns;
    completions_.push_back(c);
  }
  messages_.pop_front();
}

bool RcRequester::acknowledge_before(uint64_t end_seq, uint64_t now_ns) {
  advance_una(end_seq);
  bool completed = false;
  while (!messages_.empty() && una_ >= messages_.front().first_seq + messages_.front().packets) {
    complete_front(now_ns);
    completed = true;
  }
  return completed;
}

RcRequester::PsnCheck RcRequester::check_psn(uint64_t seq, uint64_t now_ns) {
  // rxe_comp.c get_wqe/check_psn, from the oldest message (queue_head) on. A message is in
  // rxe's wqe_state_posted while next_ is at or before its first PSN (not sent, or not resent
  // since req_retry reset it), wqe_state_pending once next_ is past its last PSN (its last
  // packet gone out since), else wqe_state_processing.
  while (!messages_.empty()) {
    const Message& m = messages_.front();
    if (next_ <= m.first_seq) return PsnCheck::kAhead;  // get_wqe: posted -> COMPST_DONE
    const uint64_t end = m.first_seq + m.packets;
    if (seq < end) {
      // "response is most likely a retried packet if it matches an uncompleted WQE go complete
      // it else ignore it"
      if (seq < una_) return seq + 1 == end ? PsnCheck::kCompAck : PsnCheck::kStale;
      if (m.op == RcOp::kRead && seq > una_) return PsnCheck::kReadAhead;
      return PsnCheck::kCheckAck;
    }
    // Past the oldest message: it completes if pending (COMPST_COMP_WQE), a READ retries
    // (COMPST_ERROR_RETRY); one still being (re)sent takes nothing (COMPST_DONE).
    if (next_ < end) return PsnCheck::kAhead;
    if (m.op == RcOp::kRead) return PsnCheck::kReadRetry;
    retry_started_ = false;  // reset_retry_counters
    complete_front(now_ns);
  }
  return PsnCheck::kStale;  // nothing outstanding: get_wqe -> COMPST_DONE
}

size_t RcRequester::take_completions(std::vector<MessageCompletion>& out) {
  const size_t n = completions_.size();
  out.insert(out.end(), completions_.begin(), completions_.end());
  completions_.clear();
  return n;
}

void RcRequester::restart_timer(uint64_t now_ns) {
  // Selective mode: re-armed to now + timeout while PSNs are outstanding, left to lapse when none
  // are (the next send arms it again).
  timer_armed_ = una_ < next_;
  if (timer_armed_) arm_timer(now_ns);
}

void RcRequester::completer_pass(uint64_t now_ns) {
  if (error_) return;
  if (retry_from_response_) {
    // rxe: the completer that starts a retry has the requester resend at once, and its next pass
    // re-arms the timer after that resend: here the resend arms it (poll, update_state).
    retry_from_response_ = false;
    timer_armed_ = false;
    return;
  }
  // rxe_comp.c COMPST_EXIT (reset_retry_timer): mod_timer(now + timeout) whenever the completer
  // has run and req.psn > comp.psn, whatever the response was (a stale duplicate included).
  if (next_ > una_) {
    arm_timer(now_ns);
  } else if (una_ == high_) {
    timer_armed_ = false;  // nothing outstanding: let it lapse (rxe leaves it pending, see top)
  }
}

void RcRequester::handle_ack(uint32_t psn, uint64_t now_ns) {
  uint64_t seq = 0;
  if (!seq_of(psn, seq)) {
    ++counters_.stale_responses;  // a duplicate or late ACK: already acknowledged
    return;
  }
  if (seq >= high_) {
    ++counters_.invalid_responses;  // acknowledges a PSN never sent
    return;
  }
  if (config_.selective_retransmit) {
    if (seq < una_) {
      ++counters_.stale_responses;
      return;
    }
    retry_started_ = false;
    const uint64_t before = una_;
    acknowledge_before(seq + 1, now_ns);
    // After a timeout: the responder still misses una_, sent a timeout ago (see the top).
    if (una_ > before && una_ < recover_ && !(config_.irn && irn_flag(resent_, una_))) {
      if (config_.irn) irn_mark(resent_, una_, true);
      queue_resend(una_);
    }
    restart_timer(now_ns);
    return;
  }
  switch (check_psn(seq, now_ns)) {
    case PsnCheck::kStale:
      ++counters_.stale_responses;
      break;
    case PsnCheck::kCompAck:  // the last PSN of a message already acknowledged: complete it
      complete_front(now_ns);
      break;
    case PsnCheck::kAhead:
      ++counters_.responses_ahead_of_resend;
      break;
    case PsnCheck::kReadAhead:
      ++counters_.stale_responses;  // an ACK inside an unfinished READ answers nothing
      break;
    case PsnCheck::kReadRetry:
      retry_for_read(now_ns);
      break;
    case PsnCheck::kCheckAck: {
      const Message& m = messages_.front();
      if (m.op == RcOp::kRead) {
        ++counters_.stale_responses;  // an ACK at an unfinished READ's first PSN: no answer
        break;
      }
      retry_started_ = false;  // check_ack: AETH_ACK -> reset_retry_counters()
      const uint64_t end = m.first_seq + m.packets;
      if (seq + 1 == end && next_ >= end) {
        complete_front(now_ns);  // COMPST_WRITE_SEND -> COMPST_COMP_ACK
      } else {
        advance_una(seq + 1);  // COMPST_UPDATE_COMP: comp.psn = psn + 1
      }
      break;
    }
  }
}

const RcRequester::Message* RcRequester::first_unfinished_read() const {
  if (reads_ == 0) return nullptr;  // WRITE-only traffic: no scan
  for (const Message& m : messages_) {
    if (m.op == RcOp::kRead) return &m;
  }
  return nullptr;
}

void RcRequester::retry_for_read(uint64_t now_ns) {
  // rxe COMPST_ERROR_RETRY: not while a retry is under way (started_retry), and only when
  // something is outstanding (req.psn > comp.psn).
  if (retry_started_ || next_ <= una_) {
    ++counters_.read_retries_ignored;
    return;
  }
  retry_started_ = true;
  ++counters_.read_retries;
  go_back_to_una(now_ns);
  retry_from_response_ = true;
}

void RcRequester::handle_read_response(uint8_t op, uint8_t syndrome, uint32_t psn, uint32_t payload,
                                       uint64_t now_ns) {
  uint64_t seq = 0;
  if (!seq_of(psn, seq)) {
    ++counters_.stale_responses;  // a replayed response already taken
    return;
  }
  if (seq >= high_) {
    ++counters_.invalid_responses;
    return;
  }
  // rxe check_psn: WRITEs wholly before the response are implicitly acknowledged; an unfinished
  // READ wholly before it lost responses.
  switch (check_psn(seq, now_ns)) {
    case PsnCheck::kStale:
      ++counters_.stale_responses;
      return;
    case PsnCheck::kCompAck:
      complete_front(now_ns);
      return;
    case PsnCheck::kAhead:
      ++counters_.responses_ahead_of_resend;
      return;
    case PsnCheck::kReadAhead:
      ++counters_.read_responses_out_of_order;  // rxe: COMPST_DONE, dropped
      return;
    case PsnCheck::kReadRetry:
      retry_for_read(now_ns);
      return;
    case PsnCheck::kCheckAck:
      break;
  }
  const Message& msg = messages_.front();
  if (msg.op != RcOp::kRead) {
    // A READ response for a WRITE's PSN: check_ack -> IB_WC_FATAL_ERR, COMPST_ERROR.
    ++counters_.read_response_errors;
    enter_error();
    return;
  }
  // seq == una_: rxe check_ack, opcode sequence first.
  const bool starts = op == opcode::kRcReadResponseFirst || op == opcode::kRcReadResponseOnly;
  const bool ends = op == opcode::kRcReadResponseLast || op == opcode::kRcReadResponseOnly;
  const auto index = static_cast<uint32_t>(seq - msg.first_seq);
  bool ok;
  if (comp_opcode_ < 0) {
    ok = starts;
  } else {
    ok = !starts || (index == 0 && op == opcode::kRcReadResponseFirst) ||
         (msg.packets == 1 && op == opcode::kRcReadResponseOnly);
  }
  // FIRST/LAST/ONLY carry an AETH, which must say ACK.
  if (op != opcode::kRcReadResponseMiddle && !aeth::is_ack(syndrome)) ok = false;
  // do_read copies the payload; a response must carry exactly what this packet of the READ holds,
  // and END must come with the last one.
  const uint32_t want = payload_of(msg, index);
  if (payload != want || ends != (index + 1 == msg.packets)) ok = false;
  if (!ok) {
    // check_ack / do_read -> COMPST_ERROR -> rxe_qp_error.
    ++counters_.read_response_errors;
    enter_error();
    return;
  }
  retry_started_ = false;  // check_ack: READ response -> reset_retry_counters()
  ++counters_.read_responses_accepted;
  counters_.read_bytes_received += payload;
  comp_opcode_ = ends ? -1 : op;  // COMPST_UPDATE_COMP
  if (ends) {
    complete_front(now_ns);  // do_read: resid 0 and END -> COMPST_COMP_ACK
  } else {
    advance_una(seq + 1);
  }
}

void RcRequester::arm_timer(uint64_t now_ns) {
  timer_armed_ = true;
  timer_start_ns_ = now_ns;
  deadline_ns_ = now_ns + timeout_ns();
}

uint64_t RcRequester::timeout_ns() const {
  if (config_.irn && high_ - una_ <= config_.rto_low_packets) {
    return config_.retransmit_timeout_low_ns;
  }
  return config_.retransmit_timeout_ns;
}

void RcRequester::handle_nak(uint32_t psn, uint64_t now_ns, std::span<const uint8_t> sack) {
  uint64_t seq = 0;
  if (!seq_of(psn, seq)) {
    ++counters_.stale_responses;
    return;
  }
  // The NAK's PSN is the one the responder expects: at most one past the highest sent.
  if (seq > high_) {
    ++counters_.invalid_responses;
    return;
  }
  if (config_.selective_retransmit) {
    if (seq < una_) {
      ++counters_.stale_responses;
      return;
    }
    acknowledge_before(seq, now_ns);
    ++counters_.nak_retries;
    if (!config_.irn) {
      queue_resend(seq);  // that PSN alone: the ones after it may well have been placed
      restart_timer(now_ns);
      return;
    }
    IrnSack bits;
    if (!bits.read(sack)) ++counters_.sack_malformed;  // then read as RoCE's NAK: seq alone
    uint64_t end = seq + 1;  // one past the highest SACKed PSN (at least the NAK's own)
    if (bits.any()) {
      ++counters_.sack_naks;
      for (uint32_t i = 0; i <= bits.highest(); ++i) {
        const uint64_t s = seq + 1 + i;
        if (s >= high_) break;  // never sent: a SACK cannot be right about it
        if (!bits.test(i)) continue;
        if (!irn_flag(sacked_, s)) ++counters_.sacked_packets;
        irn_mark(sacked_, s, true);
        end = s + 1;
      }
    }
    for (uint64_t s = seq; s < end && s < high_; ++s) {
      if (irn_flag(sacked_, s)) continue;
      if (irn_flag(resent_, s)) {
        ++counters_.sack_resends_skipped;
        continue;
      }
      irn_mark(resent_, s, true);
      queue_resend(s);
    }
    restart_timer(now_ns);
    return;
  }
  // rxe check_psn first: it completes every message wholly before the NAK's PSN whose last
  // packet has gone out since the last go-back (a completed message resets the retry state).
  switch (check_psn(seq, now_ns)) {
    case PsnCheck::kStale:
    case PsnCheck::kReadAhead:
      ++counters_.stale_responses;
      return;
    case PsnCheck::kCompAck:
      complete_front(now_ns);
      return;
    case PsnCheck::kAhead:
      ++counters_.responses_ahead_of_resend;
      return;
    case PsnCheck::kCheckAck:
      // check_ack: "a nak implicitly acks all packets with psns before" (comp.psn = psn).
      advance_una(seq);
      break;
    case PsnCheck::kReadRetry:
      // An unfinished READ before the expected PSN: its missing responses are not NAKed, they
      // are retried (check_psn -> COMPST_ERROR_RETRY, the same go-back as the NAK's).
      break;
  }
  // COMPST_ERROR_RETRY: not while a retry is under way (started_retry), nor when nothing sent
  // is unacknowledged (req.psn <= comp.psn).
  if (retry_started_ || next_ <= una_) {
    ++counters_.naks_ignored;
    return;
  }
  retry_started_ = true;
  ++counters_.nak_retries;
  go_back_to_una(now_ns);  // una_ == seq: go back N from the PSN the responder expects
  retry_from_response_ = true;
}

void RcRequester::handle_fatal_nak(uint32_t psn, uint64_t now_ns) {
  uint64_t seq = 0;
  if (!seq_of(psn, seq)) {
    ++counters_.stale_responses;
    return;
  }
  if (seq >= high_) {
    ++counters_.invalid_responses;
    return;
  }
  if (config_.selective_retransmit) {
    if (seq < una_) {
      ++counters_.stale_responses;
      return;
    }
  } else {
    // Only a NAK that check_psn passes on to check_ack fails the QP; others are ignored.
    switch (check_psn(seq, now_ns)) {
      case PsnCheck::kStale:
      case PsnCheck::kReadAhead:
        ++counters_.stale_responses;
        return;
      case PsnCheck::kCompAck:
        complete_front(now_ns);
        return;
      case PsnCheck::kAhead:
        ++counters_.responses_ahead_of_resend;
        return;
      case PsnCheck::kReadRetry:
        retry_for_read(now_ns);
        return;
      case PsnCheck::kCheckAck:
        break;
    }
  }
  // check_ack: AETH_NAK_INVALID_REQ / REM_ACC_ERR / REM_OP_ERR (and any other NAK code) ->
  // COMPST_ERROR: the message completes in error and rxe_qp_error() fails the QP.
  ++counters_.fatal_naks;
  enter_error();
}

void RcRequester::enter_error() {
  // rxe_qp_error: QP_STATE_ERROR. The failed WQE and every one after it complete with an error
  // status (the completer's rxe_drain_resp_pkts flushes them: IB_WC_WR_FLUSH_ERR), the requester
  // sends nothing more, the retransmit timer is dead and responses are dropped.
  error_ = true;
  ++counters_.qp_errors;
  counters_.messages_flushed += messages_.size();
  completed_messages_ += messages_.size();
  messages_.clear();
  reads_ = 0;
  resend_.clear();
  next_ = una_;
  next_msg_ = completed_messages_;
  timer_armed_ = false;
  retry_from_response_ = false;
}

void RcRequester::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns) {
  ++counters_.responses_received;
  if (error_) {
    ++counters_.responses_in_error;  // rxe_completer in QP_STATE_ERROR: drained
    rte_pktmbuf_free(m);
    return;
  }
  const bool read_response =
      p.bth_opcode >= opcode::kRcReadResponseFirst && p.bth_opcode <= opcode::kRcReadResponseOnly;
  const size_t ext = p.bth_opcode == opcode::kRcReadResponseMiddle ? 0 : kAethSize;
  bool completer = false;  // the response reached rxe's completer (rxe_rcv passed it on)
  if (!roce_packet_in_mbuf(m, p, size_t{p.bth_offset} + kBthSize + ext, kIcrcSize)) {
    ++counters_.malformed;
  } else if (p.dest_qp != address_.local_qp) {
    ++counters_.wrong_qp;
  } else if (p.bth_opcode != opcode::kRcAck && !read_response) {
    ++counters_.bad_opcode;
  } else if (!verify_icrc(m, p.l3_offset, p.ip_total_length, config_.payload_store)) {
    ++counters_.icrc_errors;
  } else if (read_response) {
    completer = true;
    ++counters_.read_responses_received;
    const uint8_t syndrome =
        ext == 0 ? aeth::kAck
                 : AethView(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize).syndrome();
    handle_read_response(p.bth_opcode, syndrome, p.psn, p.payload_length, now_ns);
  } else {
    completer = true;
    const uint8_t syndrome =
        AethView(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize).syndrome();
    if (aeth::is_ack(syndrome)) {
      ++counters_.acks_received;
      if (reps_) reps_->on_ack(p.src_port, now_ns);  // the acknowledged packet's value
      handle_ack(p.psn, now_ns);
    } else if (syndrome == aeth::kNakPsnSequenceError) {
      ++counters_.naks_received;
      // IRN's SACK follows the AETH (irn_sack.h); the headers are in the first segment.
      const size_t from = size_t{p.bth_offset} + kBthSize + kAethSize;
      std::span<const uint8_t> sack;
      if (config_.irn && p.payload_length != 0 &&
          from + p.payload_length <= rte_pktmbuf_data_len(m)) {
        sack = {rte_pktmbuf_mtod_offset(m, const uint8_t*, from), p.payload_length};
      } else if (config_.irn && p.payload_length != 0) {
        ++counters_.sack_malformed;
      }
      handle_nak(p.psn, now_ns, sack);
    } else if (aeth::is_nak(syndrome)) {
      handle_fatal_nak(p.psn, now_ns);
    } else {
      // RNR NAK (we never post receive WQEs, so no responder of ours sends one; rxe would
      // retry after the RNR timer) and the reserved syndromes 0x40-0x5F: the timer recovers.
      ++counters_.other_naks;
    }
  }
  // Selective mode keeps its own timer rule (restart_timer, see the top).
  if (completer && !config_.selective_retransmit) completer_pass(now_ns);
  rte_pktmbuf_free(m);
}

void RcRequester::queue_resend(uint64_t seq) {
  if (seq < una_ || seq >= high_) return;  // acknowledged, or never sent: nothing to resend
  if (std::find(resend_.begin(), resend_.end(), seq) != resend_.end()) return;
  resend_.push_back(seq);
}

const RcRequester::Message& RcRequester::message_of(uint64_t seq) const {
  // messages_ is in first_seq order and holds every message not completed, so the one whose
  // first packet is the last at or before seq holds it.
  const auto it = std::upper_bound(messages_.begin(), messages_.end(), seq,
                                   [](uint64_t s, const Message& m) { return s < m.first_seq; });
  return *std::prev(it);
}

size_t RcRequester::send_resends(uint64_t now_ns, std::vector<rte_mbuf*>& out, size_t max_packets) {
  size_t sent = 0;
  while (sent < max_packets && !resend_.empty() && now_ns >= alloc_retry_at_ns_) {
    const uint64_t seq = resend_.front();
    if (seq < una_) {  // acknowledged since it was queued
      resend_.pop_front();
      continue;
    }
    if (config_.irn && irn_flag(sacked_, seq)) {  // a later SACK showed it arrived after all
      resend_.pop_front();
      continue;
    }
    const Message& msg = message_of(seq);
    const auto index = static_cast<uint32_t>(seq - msg.first_seq);
    rte_mbuf* m = build(msg, index, true);
    if (m == nullptr) {
      ++counters_.pool_empty;
      alloc_retry_at_ns_ = now_ns + config_.alloc_retry_ns;
      if (alloc_retry_at_ns_ == now_ns) ++alloc_retry_at_ns_;
      break;
    }
    resend_.pop_front();
    alloc_retry_at_ns_ = 0;
    noack_pkts_ = 0;  // it asked for an ACK, as rxe resets the count on every AckReq packet
    out.push_back(m);
    ++sent;
    ++counters_.packets_sent;
    ++counters_.packets_retransmitted;
    ++counters_.selective_retransmissions;
    counters_.payload_bytes_sent += payload_of(msg, index);
    if (!timer_armed_) {
      arm_timer(now_ns);
    }
  }
  return sent;
}

bool RcRequester::window_open() const {
  // Exactly max_in_flight PSNs unacknowledged at most; while resending PSNs an ACK has
  // overtaken (next_ behind una_) the window is open, as rxe's req.psn check is.
  return next_ < una_ || next_ - una_ < config_.max_in_flight;
}

uint64_t RcRequester::next_event_ns() const {
  if (error_) return kNever;
  uint64_t t = kNever;
  if (has_next_message() && window_open()) {
    t = alloc_retry_at_ns_;
    if (at_message_start()) t = std::max(t, message_start_ns());
  }
  if (!resend_.empty()) t = std::min(t, alloc_retry_at_ns_);  // resends wait for no gap
  if (timer_armed_) t = std::min(t, deadline_ns_);
  return t;
}

bool RcRequester::done() const {
  if (error_) return true;  // every message completed, in error; nothing more will happen
  if (config_.posted) return messages_.empty();
  return config_.messages != 0 && completed_messages_ >= config_.messages;
}

uint64_t RcRequester::memory_bytes() const {
  return sizeof(*this) + capacity_bytes(payload_) +
         (own_stats_ != nullptr ? sizeof(CompletionTimeStats) : 0) +
         deque_bytes<Message>(messages_.size()) + capacity_bytes(completions_) +
         deque_bytes<uint64_t>(resend_.size()) + capacity_bytes(sacked_) +
         capacity_bytes(resent_) +
         (entropy_ != nullptr ? sizeof(ObliviousEntropy) : 0) +
         (reps_ != nullptr ? sizeof(RepsEntropy) : 0);
}

}  // namespace spraynet
