#include "dataplane/egress/egress_port.h"

#include "dataplane/wire/int_header.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace spraynet {

std::string EgressPortConfig::check() const {
  if (auto r = link.check(); !r.empty()) return "link: " + r;
  for (int tc = 0; tc < EgressPort::kClasses; ++tc) {
    if (class_limit_bytes[tc] == 0) {
      return "class_limit_bytes[" + std::to_string(tc) + "]: must be > 0";
    }
  }
  if (control_queue_limit_frames == 0) return "control_queue_limit_frames: must be > 0";
  if (delay_line_limit_frames == 0) return "delay_line_limit_frames: must be > 0";
  if (auto r = ecn.check(); !r.empty()) return "ecn: " + r;
  if (int_telemetry.enabled && (int_telemetry.udp_port == 0 || int_telemetry.udp_port == 4791)) {
    return "int_telemetry.udp_port: must be 1..65535 and not 4791 (RoCEv2's)";
  }
  return {};
}

namespace {

const EgressPortConfig& checked(const EgressPortConfig& config) {
  if (auto r = config.check(); !r.empty()) throw std::invalid_argument("egress port: " + r);
  return config;
}

bool any_class_marks(const EcnMarkerConfig& ecn) {
  for (const EcnClassConfig& c : ecn.classes) {
    if (c.enabled) return true;
  }
  return false;
}

}  // namespace

EgressPort::EgressPort(const EgressPortConfig& config)
    : config_(checked(config)), link_(config.link) {
  if (any_class_marks(config_.ecn)) ecn_ = std::make_unique<EcnMarker>(config_.ecn);
}

EgressPort::~EgressPort() {
  // The listener may already be gone at destruction: free silently.
  listener_ = nullptr;
  free_all();
}

EgressEnqueueResult EgressPort::refuse(rte_mbuf* m, int q, uint64_t EgressClassCounters::*counter,
                                       EgressEnqueueResult result) {
  rte_pktmbuf_free(m);
  ++(counters_of(q).*counter);
  ++refused_;
  return result;
}

EgressEnqueueResult EgressPort::enqueue(rte_mbuf* m, uint8_t tc, uint16_t ingress_port,
                                        uint8_t priority, uint64_t now_ns) {
  if (config_.wire && m != nullptr && tc < kClasses) {
    return enqueue_wire(m, tc, ingress_port, priority, now_ns);
  }
  const NextEventRefresh refresh(*this);
  if (m != nullptr) ++offered_;
  if (m == nullptr || tc >= kClasses) {
    if (m != nullptr) {
      rte_pktmbuf_free(m);
      ++refused_;
      ++invalid_requests_with_mbuf_;  // refused, but under no drop cause
    }
    ++invalid_requests_;
    return EgressEnqueueResult::kInvalid;
  }
  advance(now_ns);
  const EgressEnqueueResult r = admit_and_queue(m, tc, ingress_port, priority, now_ns);
  if (r == EgressEnqueueResult::kQueued) advance(now_ns);  // an idle link starts it at once
  return r;
}

// Both enqueues' admission (link, watchdog, class limit, the shared buffer's headroom, ECN at
// enqueue) and the push onto the class queue.
__attribute__((always_inline)) inline EgressEnqueueResult EgressPort::admit_and_queue(
    rte_mbuf* m, uint8_t tc, uint16_t ingress_port, uint8_t priority, uint64_t now_ns) {
  const uint32_t bytes = rte_pktmbuf_pkt_len(m);
  if (!link_.up()) [[unlikely]] {
    return refuse(m, tc, &EgressClassCounters::drops_link_down, EgressEnqueueResult::kLinkDown);
  }
  if (drop_mode(tc)) [[unlikely]] {
    return refuse(m, tc, &EgressClassCounters::drops_watchdog, EgressEnqueueResult::kWatchdogDrop);
  }
  if (queued_bytes_[tc] + bytes > config_.class_limit_bytes[tc]) [[unlikely]] {
    return refuse(m, tc, &EgressClassCounters::drops_queue_full, EgressEnqueueResult::kQueueFull);
  }
  if (listener_ != nullptr && ingress_port != kNoIngressPort &&
      !listener_->admit(ingress_port, priority, bytes, now_ns)) {
    return refuse(m, tc, &EgressClassCounters::drops_headroom_overflow,
                  EgressEnqueueResult::kHeadroomOverflow);
  }
  if (ecn_ != nullptr && config_.ecn.mark_at == EcnMarkPoint::kEnqueue) [[unlikely]] {
    ecn_->on_frame(m, tc, queued_bytes_[tc]);  // the depth it finds, itself not included
  }
  queues_[tc].push_back(Queued{m, now_ns, bytes, ingress_port, priority});
  queued_bytes_[tc] += bytes;
  total_queued_bytes_ += bytes;
  nonempty_ |= 1u << tc;
  ++class_counters_[tc].enqueued;
  if (listener_ != nullptr) listener_->on_enqueue(ingress_port, priority, bytes, now_ns);
  return EgressEnqueueResult::kQueued;
}

// A wire port's enqueue, on every forwarded frame: nothing starts here (advance has nothing to
// do), and the next event moves only when the class was empty (its head is this frame), so it is
// updated in place rather than recomputed over every queue.
EgressEnqueueResult EgressPort::enqueue_wire(rte_mbuf* m, uint8_t tc, uint16_t ingress_port,
                                             uint8_t priority, uint64_t now_ns) {
  ++offered_;
  latest_now_ns_ = std::max(latest_now_ns_, now_ns);
  const bool was_empty = queues_[tc].empty();
  const EgressEnqueueResult r = admit_and_queue(m, tc, ingress_port, priority, now_ns);
  if (r != EgressEnqueueResult::kQueued) return r;
  if (was_empty) {
    const uint64_t ready = head_ready_ns(tc);
    if (ready < next_event_) {
      next_event_ = ready;
      if (next_event_slots_ != nullptr) next_event_slots_->set(next_event_index_, next_event_);
    }
  }
  return EgressEnqueueResult::kQueued;
}

EgressEnqueueResult EgressPort::enqueue_control(rte_mbuf* m, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (m != nullptr) ++offered_;
  if (m == nullptr) {
    ++invalid_requests_;
    return EgressEnqueueResult::kInvalid;
  }
  advance(now_ns);
  const uint32_t bytes = rte_pktmbuf_pkt_len(m);
  if (!link_.up()) {
    return refuse(m, kControl, &EgressClassCounters::drops_link_down,
                  EgressEnqueueResult::kLinkDown);
  }
  if (queues_[kControl].size() >= config_.control_queue_limit_frames) {
    return refuse(m, kControl, &EgressClassCounters::drops_queue_full,
                  EgressEnqueueResult::kQueueFull);
  }
  queues_[kControl].push_back(Queued{m, now_ns, bytes, kNoIngressPort, 0});
  queued_bytes_[kControl] += bytes;
  total_queued_bytes_ += bytes;
  nonempty_ |= 1u << kControl;
  ++control_counters_.enqueued;
  advance(now_ns);
  return EgressEnqueueResult::kQueued;
}

uint16_t EgressPort::dequeue(uint64_t now_ns, rte_mbuf** out, uint16_t max, uint64_t* bytes) {
  const NextEventRefresh refresh(*this);
  if (config_.wire) return dequeue_wire(now_ns, out, max, bytes);
  advance(now_ns);
  return pop_in_flight(now_ns, out, nullptr, max, bytes);
}

uint16_t EgressPort::dequeue_wire(uint64_t now_ns, rte_mbuf** out, uint16_t max, uint64_t* bytes) {
  latest_now_ns_ = std::max(latest_now_ns_, now_ns);
  max = std::min(max, kWireBurst);
  uint16_t n = 0;
  uint64_t sum = 0;
  // What the PMD refused last time left its class then: it goes first, in its order.
  while (n < max && !in_flight_.empty()) {
    const InFlight& f = in_flight_.front();
    wire_taken_queue_[n] = f.queue;
    out[n++] = f.mbuf;
    sum += f.bytes;
    unsent_bytes_ -= f.bytes;
    in_flight_.pop_front();
  }
  // Then the control queue and the classes from the top, each drained before the next (strict
  // priority); a paused class keeps its frames.
  for (uint32_t mask = nonempty_; n < max && mask != 0;) {
    const int q = 31 - std::countl_zero(mask);
    mask &= ~(1u << q);
    if (head_ready_ns(q) > now_ns) continue;  // paused (or, handed over, not yet arrived)
    EgressClassCounters& c = counters_of(q);
    FifoRing<Queued>& queue = queues_[q];
    uint64_t class_bytes = 0;
    uint64_t int_bytes = 0;  // the INT records pushed on them
    const uint16_t first = n;
    while (n < max && !queue.empty()) {
      const Queued& e = queue.front();
      if (e.enqueued_ns > now_ns) break;
      if (ecn_ != nullptr && q != kControl && config_.ecn.mark_at == EcnMarkPoint::kDequeue)
          [[unlikely]] {
        ecn_->on_frame(e.mbuf, static_cast<uint8_t>(q), queued_bytes_[q] - class_bytes - e.bytes);
      }
      if (q != kControl && listener_ != nullptr) {
        listener_->on_release(e.ingress_port, e.priority, e.bytes, now_ns);
      }
      wire_taken_queue_[n] = static_cast<uint8_t>(q);
      out[n++] = e.mbuf;
      class_bytes += e.bytes;
      uint32_t w = e.bytes;
      if (config_.int_telemetry.enabled && q != kControl) [[unlikely]] {
        // The depth behind it: what is still queued less what this burst has taken so far.
        w = push_int(e.mbuf, q, now_ns, w, total_queued_bytes_ - class_bytes);
        int_bytes += w - e.bytes;
      }
      tx_bytes_ += w;
      queue.pop_front();
    }
    const uint16_t taken = n - first;
    if (taken == 0) continue;
    c.transmitted_packets += taken;
    c.transmitted_bytes += class_bytes + int_bytes;
    queued_bytes_[q] -= class_bytes;
    total_queued_bytes_ -= class_bytes;
    sum += class_bytes + int_bytes;
    if (queue.empty()) nonempty_ &= ~(1u << q);
    if (q != kControl) last_start_ns_[q] = now_ns;
  }
  wire_taken_ = n;
  if (bytes != nullptr) *bytes += sum;
  dequeued_ += n;
  return n;
}

void EgressPort::unsend(rte_mbuf* const* pkts, uint16_t n, uint64_t* bytes) {
  if (!config_.wire || n == 0) return;
  const NextEventRefresh refresh(*this);
  n = std::min(n, wire_taken_);
  // Back to the front of the line in their order: the last one first. Never on the wire yet,
  // so a link going down drops them (arrival kNever).
  uint64_t sum = 0;
  for (uint16_t i = n; i-- > 0;) {
    const uint32_t b = rte_pktmbuf_pkt_len(pkts[i]);
    in_flight_.push_front(InFlight{pkts[i], kNever, b, wire_taken_queue_[wire_taken_ - n + i]});
    sum += b;
  }
  wire_taken_ -= n;
  unsent_bytes_ += sum;
  if (bytes != nullptr) *bytes -= sum;
  dequeued_ -= n;  // handed to the driver and given back: not dequeued after all
}

uint16_t EgressPort::take_in_flight(rte_mbuf** out, uint64_t* arrival_ns, uint16_t max,
                                    uint64_t* bytes) {
  const NextEventRefresh refresh(*this);
  return pop_in_flight(kNever, out, arrival_ns, max, bytes);
}

uint16_t EgressPort::pop_in_flight(uint64_t until_ns, rte_mbuf** out, uint64_t* arrival_ns,
                                   uint16_t max, uint64_t* bytes) {
  uint16_t n = 0;
  uint64_t sum = 0;
  while (n < max && !in_flight_.empty() && in_flight_.front().arrival_ns <= until_ns) {
    if (arrival_ns != nullptr) arrival_ns[n] = in_flight_.front().arrival_ns;
    out[n++] = in_flight_.front().mbuf;
    sum += in_flight_.front().bytes;
    in_flight_.pop_front();
  }
  if (bytes != nullptr) *bytes += sum;
  if (config_.wire) unsent_bytes_ -= sum;
  dequeued_ += n;
  return n;
}

uint64_t EgressPort::memory_bytes() const {
  uint64_t b = sizeof(*this) + in_flight_.heap_bytes() + link_.heap_bytes();
  for (const auto& q : queues_) b += q.heap_bytes();
  if (ecn_ != nullptr) b += sizeof(EcnMarker);
  return b;
}

uint64_t EgressPort::compute_next_event() const {
  if (config_.wire) {
    // Due as soon as anything may go: held frames at once, a queue when its head is ready.
    if (!link_.up()) return kNever;
    uint64_t next = in_flight_.empty() ? kNever : latest_now_ns_;
    for (uint32_t mask = nonempty_; mask != 0; mask &= mask - 1) {
      next = std::min(next, head_ready_ns(std::countr_zero(mask)));
    }
    return next;
  }
  uint64_t next = in_flight_.empty() ? kNever : in_flight_.front().arrival_ns;
  if (nonempty_ == 0) return next;
  const uint64_t free_ns = link_.next_start_ns();
  if (free_ns == kNever) return next;
  for (uint32_t mask = nonempty_; mask != 0; mask &= mask - 1) {
    next = std::min(next, std::max(free_ns, head_ready_ns(std::countr_zero(mask))));
  }
  return next;
}

uint64_t EgressPort::head_ready_ns(int q) const {
  if (queues_[q].empty()) return kNever;
  uint64_t ready = queues_[q].front().enqueued_ns;
  if (q != kControl) {
    const PauseTimer& p = pause_[q];
    ready = std::max(ready, p.open ? p.until_ns : p.released_ns);
  }
  return ready;
}

void EgressPort::advance(uint64_t now_ns) {
  latest_now_ns_ = std::max(latest_now_ns_, now_ns);
  if (config_.wire) return;  // frames start when the driver takes them (dequeue_wire)
  while (nonempty_ != 0) {
    const uint64_t free_ns = link_.next_start_ns();  // kNever while down
    if (free_ns > now_ns) return;
    // The frame that starts next is the one that could start first; among equals the control
    // queue, then the highest class (strict priority): the non-empty queues from the top.
    int best = -1;
    uint64_t best_start = kNever;
    uint64_t best_ready = kNever;
    for (uint32_t mask = nonempty_; mask != 0;) {
      const int q = 31 - std::countl_zero(mask);
      mask &= ~(1u << q);
      const uint64_t ready = head_ready_ns(q);
      const uint64_t start = std::max(free_ns, ready);
      if (start < best_start) {
        best = q;
        best_start = start;
        best_ready = ready;
      }
    }
    if (best < 0 || best_start > now_ns) return;
    start_head(best, best_ready);
  }
}

uint32_t EgressPort::push_int(rte_mbuf* m, int q, uint64_t start_ns, uint32_t bytes,
                              uint64_t queued_bytes) {
  IntHopRecord r;
  r.queue_id = static_cast<uint8_t>(q);
  r.qlen_bytes = queued_bytes;
  r.egress_ts_ns = start_ns;
  r.tx_bytes = tx_bytes_;
  r.line_rate_mbps = static_cast<uint32_t>(std::llround(config_.link.rate_gbps * 1000.0));
  switch (int_push_hop(m, r, config_.int_telemetry.udp_port, config_.int_telemetry.max_frame_len)) {
    case IntPushResult::kPushed:
      ++int_counters_.pushed;
      return bytes + static_cast<uint32_t>(kIntHopBytes);
    case IntPushResult::kHopsExceeded:
      ++int_counters_.hops_exceeded;
      break;
    case IntPushResult::kMtuExceeded:
      ++int_counters_.mtu_exceeded;
      break;
    case IntPushResult::kNotInt:
      break;
  }
  return bytes;
}

void EgressPort::start_head(int q, uint64_t ready_ns) {
  const Queued e = queues_[q].front();
  queues_[q].pop_front();
  queued_bytes_[q] -= e.bytes;
  total_queued_bytes_ -= e.bytes;
  if (queues_[q].empty()) nonempty_ &= ~(1u << q);
  if (ecn_ != nullptr) [[unlikely]] {
    // The depth the frame leaves behind it (ns-3 HPCC's switch marks there); never a PFC frame.
    if (q != kControl && config_.ecn.mark_at == EcnMarkPoint::kDequeue) {
      ecn_->on_frame(e.mbuf, static_cast<uint8_t>(q), queued_bytes_[q]);
    }
  }
  uint32_t wire_bytes = e.bytes;
  if (config_.int_telemetry.enabled && q != kControl) [[unlikely]] {
    wire_bytes = push_int(e.mbuf, q, std::max(link_.next_start_ns(), ready_ns), e.bytes,
                          total_queued_bytes_);
  }
  const LinkTransmission t = link_.transmit(wire_bytes, ready_ns);
  EgressClassCounters& c = counters_of(q);
  if (t.fate != LinkFrameFate::kLinkDown) {
    ++c.transmitted_packets;
    c.transmitted_bytes += wire_bytes;
    tx_bytes_ += wire_bytes;
  }
  if (q != kControl) {
    last_start_ns_[q] = t.start_ns;
    if (listener_ != nullptr) {
      listener_->on_release(e.ingress_port, e.priority, e.bytes, t.start_ns);
    }
  }
  switch (t.fate) {
    case LinkFrameFate::kDelivered:
      if (in_flight_.size() < config_.delay_line_limit_frames) {
        in_flight_.push_back(InFlight{e.mbuf, t.arrival_ns, wire_bytes, static_cast<uint8_t>(q)});
        return;
      }
      ++c.drops_delay_line_full;
      break;
    case LinkFrameFate::kBitError:
      ++c.drops_bit_error;
      break;
    case LinkFrameFate::kLost:
      ++c.drops_loss;
      break;
    case LinkFrameFate::kLinkDown:  // advance() never starts a frame on a down link
      ++c.drops_link_down;
      break;
  }
  rte_pktmbuf_free(e.mbuf);
}

uint64_t EgressPort::queued_bytes(uint8_t tc) const {
  return tc < kClasses ? queued_bytes_[tc] : 0;
}

size_t EgressPort::queued_packets(uint8_t tc) const {
  return tc < kClasses ? queues_[tc].size() : 0;
}

void EgressPort::close_expired_pause(int tc, uint64_t now_ns) {
  PauseTimer& p = pause_[tc];
  if (p.open && p.until_ns <= now_ns) {
    const uint64_t length = p.until_ns - std::min(p.since_ns, p.until_ns);
    p.closed_total_ns += length;
    p.longest_ns = std::max(p.longest_ns, length);
    p.released_ns = p.until_ns;
    p.open = false;
    open_pauses_ &= static_cast<uint8_t>(~(1u << tc));
  }
}

void EgressPort::end_pause(int tc, uint64_t now_ns) {
  close_expired_pause(tc, now_ns);
  PauseTimer& p = pause_[tc];
  if (p.open) {
    const uint64_t length = now_ns - std::min(p.since_ns, now_ns);
    p.closed_total_ns += length;
    p.longest_ns = std::max(p.longest_ns, length);
    p.released_ns = now_ns;
    p.open = false;
    open_pauses_ &= static_cast<uint8_t>(~(1u << tc));
  }
}

void EgressPort::pause(uint8_t tc, uint64_t until_ns, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (tc >= kClasses) {
    ++invalid_requests_;
    return;
  }
  advance(now_ns);
  if (pauses_ignored(tc)) {
    ++pauses_ignored_;
    return;
  }
  if (until_ns <= now_ns) {  // a pause that is already over is a resume
    end_pause(tc, now_ns);
    advance(now_ns);
    return;
  }
  close_expired_pause(tc, now_ns);
  if (listener_ != nullptr) listener_->on_pause(tc, until_ns);
  PauseTimer& p = pause_[tc];
  if (!p.open) {
    p.open = true;
    open_pauses_ |= static_cast<uint8_t>(1u << tc);
    p.since_ns = now_ns;
    ++p.intervals;
    p.first_since_ns = std::min(p.first_since_ns, now_ns);
  }
  p.until_ns = until_ns;
}

void EgressPort::resume(uint8_t tc, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (tc >= kClasses) {
    ++invalid_requests_;
    return;
  }
  advance(now_ns);
  end_pause(tc, now_ns);
  advance(now_ns);  // the class may start at once
}

void EgressPort::apply(const PfcPauseUpdate& update, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  for (uint8_t tc = 0; tc < kClasses; ++tc) {
    if ((update.resume_classes >> tc) & 1) {
      resume(tc, now_ns);
    } else if ((update.pause_classes >> tc) & 1) {
      pause(tc, update.pause_until_ns[tc], now_ns);
    }
  }
}

bool EgressPort::paused(uint8_t tc, uint64_t now_ns) const {
  if (tc >= kClasses) return false;
  const PauseTimer& p = pause_[tc];
  return p.open && now_ns < p.until_ns;
}

bool EgressPort::any_paused(uint64_t now_ns, uint8_t class_mask) const {
  for (uint32_t m = open_pauses_ & class_mask; m != 0; m &= m - 1) {
    if (now_ns < pause_[std::countr_zero(m)].until_ns) return true;
  }
  return false;
}

void EgressPort::set_drop_mode(uint8_t tc, bool on, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (tc >= kClasses) {
    ++invalid_requests_;
    return;
  }
  advance(now_ns);
  const uint8_t bit = static_cast<uint8_t>(1u << tc);
  if (!on) {
    drop_mode_mask_ &= static_cast<uint8_t>(~bit);
    pauses_ignored_mask_ &= static_cast<uint8_t>(~bit);
    return;
  }
  if (drop_mode_mask_ & bit) return;
  drop_mode_mask_ |= bit;
  pauses_ignored_mask_ |= bit;
  end_pause(tc, now_ns);
  flush_class(tc, &EgressClassCounters::drops_watchdog, now_ns);
}

void EgressPort::set_forward_mode(uint8_t tc, bool on, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (tc >= kClasses) {
    ++invalid_requests_;
    return;
  }
  advance(now_ns);
  const uint8_t bit = static_cast<uint8_t>(1u << tc);
  if (!on) {
    pauses_ignored_mask_ &= static_cast<uint8_t>(~bit);
    return;
  }
  pauses_ignored_mask_ |= bit;
  end_pause(tc, now_ns);
  advance(now_ns);  // the queue held by the storm starts at once
}

bool EgressPort::drop_mode(uint8_t tc) const {
  return tc < kClasses && ((drop_mode_mask_ >> tc) & 1);
}

uint64_t EgressPort::stalled_since_ns(uint8_t tc, uint64_t now_ns) const {
  // SONiC's detection (pfc_detect_*.lua): a queue is stormed when, poll after poll, it sent
  // nothing and was paused, whether packets wait in it or not. Nothing starts while a class is
  // paused, so the open pause interval is the stall (the max only matters for a frame that
  // started at the very ns the pause arrived).
  if (tc >= kClasses || pauses_ignored(tc) || !paused(tc, now_ns)) return kNever;
  return std::max(pause_[tc].since_ns, last_start_ns_[tc]);
}

void EgressPort::flush_class(int tc, uint64_t EgressClassCounters::*counter, uint64_t now_ns) {
  for (const Queued& e : queues_[tc]) {
    rte_pktmbuf_free(e.mbuf);
    if (counter != nullptr) ++(class_counters_[tc].*counter);
    if (listener_ != nullptr) listener_->on_release(e.ingress_port, e.priority, e.bytes, now_ns);
  }
  queues_[tc].clear();
  total_queued_bytes_ -= queued_bytes_[tc];
  queued_bytes_[tc] = 0;
  nonempty_ &= ~(1u << tc);
}

void EgressPort::flush_control(uint64_t EgressClassCounters::*counter) {
  for (const Queued& e : queues_[kControl]) {
    rte_pktmbuf_free(e.mbuf);
    if (counter != nullptr) ++(control_counters_.*counter);
  }
  queues_[kControl].clear();
  total_queued_bytes_ -= queued_bytes_[kControl];
  queued_bytes_[kControl] = 0;
  nonempty_ &= ~(1u << kControl);
}

void EgressPort::flush_in_flight(uint64_t EgressClassCounters::*counter, uint64_t now_ns) {
  // Arrival times only grow along the delay line: what is still on the wire is at the back.
  while (!in_flight_.empty() && (counter == nullptr || in_flight_.back().arrival_ns > now_ns)) {
    const InFlight& f = in_flight_.back();
    if (config_.wire) unsent_bytes_ -= f.bytes;
    rte_pktmbuf_free(f.mbuf);
    if (counter != nullptr) ++(counters_of(f.queue).*counter);
    in_flight_.pop_back();
  }
}

void EgressPort::set_link_up(bool up, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  if (up == link_.up()) return;
  if (up) {
    link_.set_up(true);
    return;
  }
  advance(now_ns);
  link_.set_up(false);
  for (int tc = 0; tc < kClasses; ++tc) {
    end_pause(tc, now_ns);
    flush_class(tc, &EgressClassCounters::drops_link_down, now_ns);
  }
  flush_control(&EgressClassCounters::drops_link_down);
  // Frames whose last bit had already arrived stay deliverable; the rest die on the wire.
  flush_in_flight(&EgressClassCounters::drops_link_down, now_ns);
}

void EgressPort::set_link_rate_gbps(double rate_gbps, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  advance(now_ns);
  link_.set_rate_gbps(rate_gbps);
}

void EgressPort::set_propagation_delay_ns(uint64_t delay_ns, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  advance(now_ns);
  link_.set_propagation_delay_ns(delay_ns);
}

void EgressPort::set_bit_error_rate(double ber, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  advance(now_ns);
  link_.set_bit_error_rate(ber);
}

void EgressPort::set_loss_rate(double loss_rate, uint64_t now_ns) {
  const NextEventRefresh refresh(*this);
  advance(now_ns);
  link_.set_loss_rate(loss_rate);
}

void EgressPort::free_all() {
  const NextEventRefresh refresh(*this);
  for (const auto& q : queues_) freed_at_shutdown_ += q.size();
  freed_at_shutdown_ += in_flight_.size();
  for (int tc = 0; tc < kClasses; ++tc) flush_class(tc, nullptr, latest_now_ns_);
  flush_control(nullptr);
  flush_in_flight(nullptr, latest_now_ns_);
}

EgressAccounting EgressPort::accounting() const {
  EgressAccounting a;
  a.offered = offered_;
  a.refused = refused_;
  a.dequeued = dequeued_;
  uint64_t drops = 0;
  auto add = [&drops](const EgressClassCounters& c) {
    drops += c.drops_queue_full + c.drops_link_down + c.drops_watchdog +
             c.drops_headroom_overflow + c.drops_bit_error + c.drops_loss +
             c.drops_delay_line_full;
  };
  for (const auto& c : class_counters_) add(c);
  add(control_counters_);
  // Refusals are counted under their cause too; what is left was lost after it was accepted.
  a.lost = drops - (refused_ - invalid_requests_with_mbuf_);
  for (const auto& q : queues_) a.queued += q.size();
  a.in_flight = in_flight_.size();
  a.freed_at_shutdown = freed_at_shutdown_;
  return a;
}

EgressClassCounters EgressPort::counters(uint8_t tc, uint64_t now_ns) const {
  if (tc >= kClasses) return {};
  EgressClassCounters c = class_counters_[tc];
  if (ecn_ != nullptr) {
    c.ecn_marked = ecn_->counters(tc).marked;
    c.ecn_not_ect = ecn_->counters(tc).not_ect;
  }
  const PauseTimer& p = pause_[tc];
  c.paused_ns = p.closed_total_ns;
  c.longest_pause_ns = p.longest_ns;
  c.pause_intervals = p.intervals;
  c.first_pause_ns = p.first_since_ns;
  if (p.intervals > 0) c.last_pause_end_ns = p.released_ns;
  if (p.open) {
    const uint64_t end = std::min(now_ns, p.until_ns);
    c.last_pause_end_ns = std::max(c.last_pause_end_ns, std::max(end, p.since_ns));
    if (end > p.since_ns) {
      c.paused_ns += end - p.since_ns;
      c.longest_pause_ns = std::max(c.longest_pause_ns, end - p.since_ns);
    }
  }
  return c;
}

}  // namespace spraynet
