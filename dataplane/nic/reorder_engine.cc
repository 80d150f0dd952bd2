#include "dataplane/nic/reorder_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <stdexcept>

#include "dataplane/memory_usage.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet {

namespace {

// Checked before anything is allocated: a bad size must not cost gigabytes first.
const ReorderConfig& validated(const ReorderConfig& config) {
  if (auto reason = config.check(); !reason.empty()) {
    throw std::invalid_argument("reorder engine: " + reason);
  }
  return config;
}

// MurmurHash3's 64-bit finaliser: source IPs and QP numbers are sequential in practice, so the
// key's bits must be mixed before the low bits pick a bucket.
uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// What receive() must know of an opcode, from one table load instead of three decodes per packet.
enum : uint8_t { kClassSequenced = 1, kClassReadRequest = 2, kClassReadResponse = 4 };
constexpr std::array<uint8_t, 256> kOpcodeClass = [] {
  std::array<uint8_t, 256> t{};
  for (unsigned op = 0; op < t.size(); ++op) {
    const auto o = static_cast<uint8_t>(op);
    t[op] = static_cast<uint8_t>((ReorderEngine::is_sequenced(o) ? kClassSequenced : 0) |
                                 (ReorderEngine::is_read_request(o) ? kClassReadRequest : 0) |
                                 (ReorderEngine::is_read_response(o) ? kClassReadResponse : 0));
  }
  return t;
}();

uint32_t table_size_for(uint32_t max_qps) {
  // At most half full, so that linear probes stay short even with every context in use.
  uint32_t size = 2;
  while (size < 2 * static_cast<uint64_t>(max_qps)) size <<= 1;
  return size;
}

}  // namespace

std::string ReorderConfig::check() const {
  if (window == 0 || window > kMaxWindow) {
    return "window: must be from 1 to " + std::to_string(kMaxWindow);
  }
  if (hold_timeout_ns == 0 || hold_timeout_ns > kMaxHoldTimeoutNs) {
    return "hold_timeout_ns: must be from 1 to 1000000000 (1 s; RC retransmit timeouts are "
           "milliseconds)";
  }
  if (max_qps == 0 || max_qps > kMaxQps) {
    return "max_qps: must be from 1 to " + std::to_string(kMaxQps);
  }
  if (static_cast<uint64_t>(max_qps) * window > kMaxRingSlots) {
    return "max_qps: times window must be at most " + std::to_string(kMaxRingSlots) + " ring slots";
  }
  if (max_buffered == 0 || max_buffered > kMaxBuffered) {
    return "max_buffered: must be from 1 to " + std::to_string(kMaxBuffered);
  }
  if (path_mtu != 256 && path_mtu != 512 && path_mtu != 1024 && path_mtu != 2048 &&
      path_mtu != 4096) {
    return "path_mtu: must be 256, 512, 1024, 2048 or 4096";
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Construction

ReorderEngine::ReorderEngine(const ReorderConfig& config)
    : config_(validated(config)),
      table_(table_size_for(config.max_qps)),
      table_mask_(table_size_for(config.max_qps) - 1) {}

ReorderEngine::~ReorderEngine() {
  for (uint32_t h = arrivals_head_; h != kNone; h = held_[h].next) {
    rte_pktmbuf_free(held_[h].mbuf);
  }
}

// ---------------------------------------------------------------------------------------------
// QP lookup. A fixed open-addressing table of our own rather than rte_hash: it is sized once from
// max_qps in ordinary memory (rte_hash needs a process-wide unique name and EAL heap, and its
// lookup is an out-of-line call), keys are one 64-bit word, and backward-shift deletion keeps
// probe chains short through any number of evictions without tombstones or rehashing.

inline uint32_t ReorderEngine::home(uint64_t key) const {
  return static_cast<uint32_t>(mix64(key)) & table_mask_;
}

inline uint32_t ReorderEngine::find_context(uint64_t key) const {
  for (uint32_t i = home(key);; i = (i + 1) & table_mask_) {
    const Bucket& b = table_[i];
    if (b.context == kNone) return kNone;
    if (b.key == key) return b.context;
  }
}

void ReorderEngine::table_insert(uint64_t key, uint32_t ci) {
  uint32_t i = home(key);
  while (table_[i].context != kNone) i = (i + 1) & table_mask_;
  table_[i] = Bucket{key, ci};
}

void ReorderEngine::table_erase(uint64_t key) {
  uint32_t i = home(key);
  while (table_[i].key != key || table_[i].context == kNone) {
    if (table_[i].context == kNone) return;  // not present (not reached)
    i = (i + 1) & table_mask_;
  }
  // Backward shift: pull later members of the probe chain into the hole unless their home lies
  // cyclically in (hole, j], where moving them would put them before their home.
  for (uint32_t j = (i + 1) & table_mask_; table_[j].context != kNone; j = (j + 1) & table_mask_) {
    const uint32_t k = home(table_[j].key);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    table_[i] = table_[j];
    i = j;
  }
  table_[i] = Bucket{};
}

// ---------------------------------------------------------------------------------------------
// Storage grows with use, up to the configured limits: a context's ring when the context is first
// handed out, hold records when every record made so far is taken. The records are handed out in
// the order a free list made up front (0, 1, 2, ...) would give them (a freed record goes to the
// front of the list, and the records not yet made are its tail), so the engine behaves the same.

namespace {

// Grows `v` to hold n elements (n <= limit), doubling its capacity but never beyond `limit`.
template <class V>
void reserve_for(V& v, size_t n, size_t limit) {
  if (n <= v.capacity()) return;
  v.reserve(std::min(std::max(n, 2 * v.capacity()), limit));
}

}  // namespace

void ReorderEngine::add_context_storage() {
  const size_t n = contexts_used_;
  if (contexts_.size() < n) {
    reserve_for(contexts_, n, config_.max_qps);
    contexts_.resize(n);
  }
  const size_t slots = n * config_.window;
  if (ring_.size() < slots) {
    reserve_for(ring_, slots, static_cast<size_t>(config_.max_qps) * config_.window);
    ring_.resize(slots, kNone);
  }
}

inline uint32_t ReorderEngine::take_record() {
  if (free_head_ != kNone) {
    const uint32_t h = free_head_;
    free_head_ = held_[h].next;
    return h;
  }
  reserve_for(held_, held_.size() + 1, config_.max_buffered);
  held_.emplace_back();
  return static_cast<uint32_t>(held_.size() - 1);
}

uint64_t ReorderEngine::memory_bytes() const {
  return sizeof(*this) + capacity_bytes(contexts_) + capacity_bytes(ring_) +
         capacity_bytes(held_) + capacity_bytes(table_);
}

uint32_t ReorderEngine::find_or_create_context(uint64_t key) {
  if (uint32_t ci = find_context(key); ci != kNone) return ci;
  return create_context(key);
}

uint32_t ReorderEngine::create_context(uint64_t key) {
  uint32_t ci;
  if (contexts_used_ < config_.max_qps) {
    ci = contexts_used_++;
    add_context_storage();
  } else if (idle_head_ != kNone) {
    ci = idle_head_;
    idle_unlink(ci);
    table_erase(contexts_[ci].key);
    contexts_[ci].in_use = false;
    --qps_in_use_;
    ++counters_.qps_evicted;
  } else {
    return kNone;
  }
  Context& c = contexts_[ci];
  c = Context{};
  c.key = key;
  c.in_use = true;
  table_insert(key, ci);
  ++qps_in_use_;
  idle_push_back(ci);
  return ci;
}

bool ReorderEngine::expect(uint32_t src_ip, uint32_t dest_qp, uint32_t first_psn) {
  const uint64_t key = (uint64_t{src_ip} << 32) | (dest_qp & kPsnMask);
  const uint32_t ci = find_or_create_context(key);
  if (ci == kNone) return false;
  Context& c = contexts_[ci];
  if (c.buffered != 0 || c.fixed) return false;  // already under way: its sequence stands
  c.expected = first_psn & kPsnMask;
  c.head = 0;
  c.fixed = true;
  return true;
}

uint32_t ReorderEngine::read_psns(uint32_t dma_length) const {
  // Capped well inside the half of the PSN space that serial arithmetic can tell apart.
  const uint64_t n = (uint64_t{dma_length} + config_.path_mtu - 1) / config_.path_mtu;
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, 1, uint64_t{1} << 22));
}

uint32_t ReorderEngine::span_of(const rte_mbuf* m, const ParsedPacket& p) const {
  if (!is_read_request(p.bth_opcode)) return 1;
  // The parser has checked that the RETH is there; stay inside the first segment regardless.
  if (size_t{p.bth_offset} + kBthSize + kRethSize > rte_pktmbuf_data_len(m)) return 1;
  auto* reth = rte_pktmbuf_mtod_offset(m, uint8_t*, p.bth_offset + kBthSize);
  return read_psns(RethView(reth).dma_length());
}

bool ReorderEngine::expect_read_responses(uint32_t src_ip, uint32_t dest_qp, uint32_t first_psn,
                                          uint32_t psns) {
  const uint64_t key = (uint64_t{src_ip} << 32) | kResponseKeyBit | (dest_qp & kPsnMask);
  const bool existed = find_context(key) != kNone;
  const uint32_t ci = find_or_create_context(key);
  if (ci == kNone) return false;
  Context& c = contexts_[ci];
  const uint32_t first = first_psn & kPsnMask;
  const uint32_t end = psn_add(first, std::clamp<uint32_t>(psns, 1, 1u << 22));
  ++counters_.read_ranges_announced;
  if (!existed) {
    c.responses = true;
    c.fixed = true;  // the NIC knows where the responses start: nothing to learn
    c.expected = first;
    c.head = 0;
    c.announced_end = end;
    c.last_end = end;
    return true;
  }
  const uint32_t window = config_.window;
  if (const int32_t d = psn_diff(c.expected, first); d < 0) {
    // Before what is expected: the requester's retry re-issues the READ from its first missing
    // response (rxe req_retry), and the responder replays from there. Move back if what is held
    // still fits the window behind the new start; else those responses pass as duplicates.
    const uint32_t back = static_cast<uint32_t>(-d);
    if (c.buffered == 0 ||
        (back < window && static_cast<uint32_t>(psn_diff(first, c.highest)) < window)) {
      c.expected = first;
      c.head = c.head >= back % window ? c.head - back % window : c.head + window - back % window;
      // The requester re-issues everything after it too: the gaps come again with it.
      c.gap_count = 0;
      ++counters_.read_ranges_rewound;
    }
  } else if (psn_before(c.last_end, first)) {
    // PSNs between this range and the one announced before it get no READ response (WRITEs on
    // the same QP, answered by ACKs): jump them.
    // Responses already held past the last range's end (they arrived inside the wider range
    // announced before a rewind) stay before the gap: take_response_gaps jumps over a gap
    // assuming nothing is held inside it.
    uint32_t from = c.last_end;
    if (c.buffered > 0 && !psn_before(c.highest, from)) from = psn_add(c.highest, 1);
    if (c.expected == c.last_end && c.buffered == 0) {
      c.expected = first;
    } else if (!psn_before(from, first)) {
      // Nothing left to jump.
    } else if (c.gap_count < kMaxResponseGaps) {
      c.gaps[c.gap_count++] = {from, first};
    } else {
      ++counters_.response_gaps_full;  // reaching that gap will wait for a hold timeout
    }
  }
  c.last_end = end;
  if (psn_before(c.announced_end, end)) c.announced_end = end;
  return true;
}

// The idle list: contexts in use that hold nothing, least recently used first. Only these may be
// evicted: a context holding packets is the only record of where its QP's sequence stands.

inline void ReorderEngine::idle_push_back(uint32_t ci) {
  Context& c = contexts_[ci];
  if (c.lru_prev != kNone || idle_head_ == ci) return;  // already listed
  c.lru_prev = idle_tail_;
  c.lru_next = kNone;
  if (idle_tail_ != kNone) {
    contexts_[idle_tail_].lru_next = ci;
  } else {
    idle_head_ = ci;
  }
  idle_tail_ = ci;
}

inline void ReorderEngine::idle_unlink(uint32_t ci) {
  Context& c = contexts_[ci];
  if (c.lru_prev == kNone && idle_head_ != ci) return;  // not listed
  if (c.lru_prev != kNone) {
    contexts_[c.lru_prev].lru_next = c.lru_next;
  } else {
    idle_head_ = c.lru_next;
  }
  if (c.lru_next != kNone) {
    contexts_[c.lru_next].lru_prev = c.lru_prev;
  } else {
    idle_tail_ = c.lru_prev;
  }
  c.lru_prev = c.lru_next = kNone;
}

// ---------------------------------------------------------------------------------------------
// Arrivals

inline void ReorderEngine::pass(rte_mbuf* m, uint64_t ReorderCounters::*counter,
                                std::vector<rte_mbuf*>& out) {
  ++(counters_.*counter);
  out.push_back(m);
}

void ReorderEngine::receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                            std::vector<rte_mbuf*>& out) {
  if (m == nullptr) {
    ++counters_.null_mbufs;
    return;
  }
  ++counters_.in;
  if (p.kind != PacketKind::kRoce) return pass(m, &ReorderCounters::not_roce, out);
  const uint8_t cls = kOpcodeClass[p.bth_opcode];
  if (cls & kClassReadResponse) return receive_read_response(m, p, now_ns, out);
  if (!(cls & kClassSequenced)) return pass(m, &ReorderCounters::unsequenced, out);

  const uint64_t key = (uint64_t{p.src_ip} << 32) | (p.dest_qp & kPsnMask);
  uint32_t ci = find_context(key);
  if (ci == kNone) {
    ci = create_context(key);
    if (ci == kNone) return pass(m, &ReorderCounters::qp_table_full, out);
  }
  Context& c = contexts_[ci];
  const uint32_t psn = p.psn & kPsnMask;
  uint32_t span = 1;
  if (cls & kClassReadRequest) {
    span = span_of(m, p);
    ++counters_.read_requests;
  }

  // The common cases of a QP whose start is known, inside its window, without place()'s general
  // machinery: in order, held, or a copy of a held PSN. Each does exactly what place() does for it
  // (the same counters, histogram, releases and idle-list moves); everything else goes to place().
  // The raw 24-bit distance equals psn_diff whenever it is below the window (<= 2^14 < 2^23).
  const uint32_t ahead = (psn - c.expected) & kPsnMask;
  if (c.fixed && ahead < config_.window) {
    if (ahead == 0) {
      ++c.counters.in;
      ++depth_histogram_[0];
      ++counters_.released_in_order;
      out.push_back(m);
      if (c.buffered == 0) {
        if (idle_tail_ != ci) {  // used now: to the back of the eviction order
          idle_unlink(ci);
          idle_push_back(ci);
        }
        return consume(ci, span, out);
      }
      consume(ci, span, out);
      return release_run(ci, out);
    }
    // The ring is read only for a packet ahead: one cache line fewer per in-order packet when
    // thousands of QPs' rings do not fit the cache.
    if (ring(ci)[ring_index(c, ahead)] != kNone) {
      // A second copy of a held PSN: freed, the held copy goes in order (as in place()).
      ++c.counters.in;
      ++depth_histogram_[std::min<size_t>(ahead, kDepthBins - 1)];
      ++c.counters.duplicates;
      ++counters_.duplicates_of_held;
      rte_pktmbuf_free(m);
      return;
    }
    if (record_free()) {
      ++c.counters.in;
      ++depth_histogram_[std::min<size_t>(ahead, kDepthBins - 1)];
      // hold() takes an idle context off the idle list, which is all that receive()'s move to
      // the back of it and then place()'s hold() would have done.
      return hold(ci, m, psn, span, ahead, now_ns);
    }
  }
  if (c.buffered == 0 && idle_tail_ != ci) {  // used now: to the back of the eviction order
    idle_unlink(ci);
    idle_push_back(ci);
  }
  place(ci, m, psn, span, now_ns, out);
}

void ReorderEngine::receive_read_response(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                                          std::vector<rte_mbuf*>& out) {
  const uint64_t key = (uint64_t{p.src_ip} << 32) | kResponseKeyBit | (p.dest_qp & kPsnMask);
  const uint32_t ci = find_context(key);
  if (ci == kNone) return pass(m, &ReorderCounters::unsequenced, out);  // never announced
  Context& c = contexts_[ci];
  const uint32_t psn = p.psn & kPsnMask;
  if (!psn_before(psn, c.announced_end)) return pass(m, &ReorderCounters::unsequenced, out);
  for (uint32_t g = 0; g < c.gap_count; ++g) {
    // Between two ranges: no READ response can carry that PSN.
    if (!psn_before(psn, c.gaps[g].first) && psn_before(psn, c.gaps[g].second)) {
      return pass(m, &ReorderCounters::unsequenced, out);
    }
  }
  ++counters_.read_responses_sequenced;
  if (c.buffered == 0 && idle_tail_ != ci) {
    idle_unlink(ci);
    idle_push_back(ci);
  }
  place(ci, m, psn, 1, now_ns, out);
}

void ReorderEngine::place(uint32_t ci, rte_mbuf* m, uint32_t psn, uint32_t span, uint64_t now_ns,
                          std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  const uint32_t window = config_.window;
  ++c.counters.in;
  // At most three rounds: a slide or a forced skip moves `expected` so that the packet is then in
  // order or fits the window with a hold record free.
  for (;;) {
    if (!c.fixed && c.buffered == 0 && has_first_psn_) {
      // A fresh context of a QP that starts where every QP does (set_first_psn).
      c.expected = first_psn_;
      c.head = 0;
      c.fixed = true;
      continue;
    }
    if (!c.fixed && c.buffered == 0) {
      // A fresh context: its first packet is the tentative start.
      c.expected = psn;
      c.head = 0;
      if (!record_free()) return pass(m, &ReorderCounters::buffer_full, out);
      return hold(ci, m, psn, span, 0, now_ns);
    }

    const int32_t d = psn_diff(c.expected, psn);
    if (d < 0 && !c.fixed) {
      // Before the tentative start: the new start if everything held still fits behind it.
      const uint32_t back = static_cast<uint32_t>(-d);
      if (back < window && static_cast<uint32_t>(psn_diff(psn, c.highest)) < window) {
        if (!record_free()) {
          // No record to hold it: it is the start now, released at once (next round).
          c.expected = psn;
          c.head = c.head >= back ? c.head - back : c.head + window - back;
          c.fixed = true;
          continue;
        }
        c.expected = psn;
        c.head = c.head >= back ? c.head - back : c.head + window - back;
        return hold(ci, m, psn, span, 0, now_ns);
      }
      // Too far before everything held to be the start: older than the window.
    }
    if (d < 0 && c.fixed && c.resync_pending && psn_diff(c.resync_psn, psn) >= 0) {
      // A PSN of a gap given up: the responder NAKed it and still expects resync_psn, so this
      // is the go-back-N retransmission. Restart the sequence there, so that the resent
      // packets (sprayed again) reach the responder in order instead of passing as
      // duplicates and scrambling once more; if what is held would leave the window, they
      // pass on as before.
      const uint32_t back = static_cast<uint32_t>(psn_diff(c.resync_psn, c.expected));
      if (back < window &&
          (c.buffered == 0 || static_cast<uint32_t>(psn_diff(c.resync_psn, c.highest)) < window)) {
        c.expected = c.resync_psn;
        c.head = c.head >= back ? c.head - back : c.head + window - back;
        c.resync_pending = false;
        ++counters_.resyncs;
        continue;
      }
      c.resync_pending = false;
    }
    if (d == 0 && !c.fixed) {
      // The tentative start is held: this is a second copy of it.
      ++c.counters.duplicates;
      ++counters_.duplicates_of_held;
      rte_pktmbuf_free(m);
      return;
    }
    if (d < 0) {
      ++c.counters.duplicates;
      return pass(m, &ReorderCounters::duplicates, out);
    }
    if (c.fixed && d >= 0) {
      ++depth_histogram_[std::min<size_t>(static_cast<size_t>(d), kDepthBins - 1)];
    }
    if (d == 0) {
      ++counters_.released_in_order;
      out.push_back(m);
      consume(ci, span, out);
      return release_run(ci, out);
    }

    const uint32_t ahead = static_cast<uint32_t>(d);
    if (ahead >= window) {
      // Make the packet the last PSN of the window.
      ++counters_.window_slides;
      advance_to(ci, (psn + kPsnMask + 1 - (window - 1)) & kPsnMask, SkipReason::kSlide, out);
      release_run(ci, out);
      continue;
    }
    if (ring(ci)[ring_index(c, ahead)] != kNone) {
      // A second copy of a held PSN (a retransmission that overtook nothing). Passed on, it would
      // reach the responder ahead of the gap; the held copy goes in order instead.
      ++c.counters.duplicates;
      ++counters_.duplicates_of_held;
      rte_pktmbuf_free(m);
      return;
    }
    if (record_free()) return hold(ci, m, psn, span, ahead, now_ns);

    // Every hold record is taken. Give up this QP's first gap early: skip to its first held
    // packet (or to this packet, if that comes first), which frees at least one record or lets
    // this packet go in order. A QP holding nothing cannot make room: pass it on unordered.
    if (c.buffered == 0) return pass(m, &ReorderCounters::buffer_full, out);
    uint32_t target = psn_add(c.expected, first_held_offset(ci));
    if (psn_before(psn, target)) target = psn;
    advance_to(ci, target, SkipReason::kForced, out);
    release_run(ci, out);
  }
}

// Forced inline: GCC keeps it (and release_run) out of line, and the call with its six arguments
// was a tenth of receive()'s instructions on the held path.
[[gnu::always_inline]] inline void ReorderEngine::hold(uint32_t ci, rte_mbuf* m, uint32_t psn,
                                                       uint32_t span, uint32_t offset,
                                                       uint64_t now_ns) {
  Context& c = contexts_[ci];
  const uint32_t h = take_record();
  Held& r = held_[h];

  // Deadlines must be nondecreasing along the list: a clock that steps back (another lcore's
  // timestamp) gets the latest deadline so far instead, a few ns longer than asked.
  uint64_t deadline =
      now_ns > kNever - 1 - config_.hold_timeout_ns ? kNever - 1 : now_ns + config_.hold_timeout_ns;
  if (arrivals_tail_ != kNone) deadline = std::max(deadline, held_[arrivals_tail_].deadline_ns);

  r.mbuf = m;
  r.deadline_ns = deadline;
  r.context = ci;
  r.psn = psn;
  r.span = span;
  r.next = kNone;
  r.prev = arrivals_tail_;
  if (arrivals_tail_ != kNone) {
    held_[arrivals_tail_].next = h;
  } else {
    arrivals_head_ = h;
  }
  arrivals_tail_ = h;

  ring(ci)[ring_index(c, offset)] = h;
  if (c.buffered == 0) {
    idle_unlink(ci);
    c.highest = psn;
  } else if (psn_before(c.highest, psn)) {
    c.highest = psn;
  }
  ++c.buffered;
  ++buffered_;
  counters_.max_buffered_seen = std::max<uint64_t>(counters_.max_buffered_seen, buffered_);
}

// ---------------------------------------------------------------------------------------------
// Releases

inline void ReorderEngine::release_held(uint32_t ci, uint32_t slot, std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  uint32_t& entry = ring(ci)[slot];
  const uint32_t h = entry;
  Held& r = held_[h];
  entry = kNone;

  if (r.prev != kNone) {
    held_[r.prev].next = r.next;
  } else {
    arrivals_head_ = r.next;
  }
  if (r.next != kNone) {
    held_[r.next].prev = r.prev;
  } else {
    arrivals_tail_ = r.prev;
  }
  out.push_back(r.mbuf);
  r.mbuf = nullptr;
  r.prev = kNone;
  r.next = free_head_;
  free_head_ = h;

  ++counters_.released_after_hold;
  if (c.responses) ++counters_.read_responses_reordered;
  ++c.counters.reordered;
  --buffered_;
  if (--c.buffered == 0) idle_push_back(ci);
}

[[gnu::always_inline]] inline void ReorderEngine::release_run(uint32_t ci,
                                                              std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  uint32_t* slots = ring(ci);
  while (c.buffered > 0 && slots[c.head] != kNone) {
    c.fixed = true;
    const uint32_t span = held_[slots[c.head]].span;
    release_held(ci, c.head, out);
    consume(ci, span, out);
  }
}

void ReorderEngine::skip_span(uint32_t ci, uint32_t from_offset, uint32_t span,
                              std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  const uint32_t window = config_.window;
  const uint32_t* slots = ring(ci);
  for (uint32_t off = from_offset; off < std::min(span, window) && c.buffered > 0; ++off) {
    const uint32_t slot = ring_index(c, off);
    if (slots[slot] != kNone) release_held(ci, slot, out);
  }
  c.expected = psn_add(c.expected, span);
  c.head = ring_index(c, span % window);
}

inline void ReorderEngine::consume(uint32_t ci, uint32_t span, std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  if (span == 1) {
    c.expected = psn_add(c.expected, 1);
    c.head = ring_index(c, 1);
  } else {
    skip_span(ci, 1, span, out);
  }
  if (c.gap_count > 0) take_response_gaps(ci);
}

void ReorderEngine::take_response_gaps(uint32_t ci) {
  Context& c = contexts_[ci];
  while (c.gap_count > 0) {
    const auto [from, to] = c.gaps[0];
    if (psn_before(c.expected, from)) return;  // not reached yet
    if (psn_before(c.expected, to)) {
      // Nothing is held inside a gap (receive_read_response passes such PSNs on), and nothing
      // beyond it when it is a window or more wide, so the ring stays consistent.
      const auto dist = static_cast<uint32_t>(psn_diff(c.expected, to));
      c.expected = to;
      c.head = ring_index(c, dist % config_.window);
    }
    for (uint32_t g = 1; g < c.gap_count; ++g) c.gaps[g - 1] = c.gaps[g];
    --c.gap_count;
  }
}

uint32_t ReorderEngine::first_held_offset(uint32_t ci) {
  const Context& c = contexts_[ci];
  if (c.buffered == 0) return kNone;
  const uint32_t* slots = ring(ci);
  const uint32_t last = static_cast<uint32_t>(psn_diff(c.expected, c.highest));
  for (uint32_t off = 0; off <= last; ++off) {
    if (slots[ring_index(c, off)] != kNone) return off;
  }
  return last;  // not reached: `highest` is held
}

void ReorderEngine::advance_to(uint32_t ci, uint32_t target, SkipReason why,
                               std::vector<rte_mbuf*>& out) {
  Context& c = contexts_[ci];
  const uint32_t window = config_.window;
  const int32_t signed_dist = psn_diff(c.expected, target);
  c.fixed = true;
  if (signed_dist <= 0) return;
  const uint32_t dist = static_cast<uint32_t>(signed_dist);

  // Only the first `window` PSNs can have a slot; stop early once nothing is left held.
  const uint32_t* slots = ring(ci);
  const uint32_t scan = std::min(dist, window);
  uint64_t skipped = 0;
  uint64_t gaps = 0;
  bool in_gap = false;
  uint32_t off = 0;
  uint32_t first_skipped = c.expected;
  uint32_t end_offset = 0;  // one past the last PSN consumed by what was released
  for (; off < scan && c.buffered > 0; ++off) {
    const uint32_t slot = ring_index(c, off);
    if (slots[slot] != kNone) {
      end_offset = std::max(end_offset, off + held_[slots[slot]].span);
      release_held(ci, slot, out);
      in_gap = false;
    } else {
      if (skipped == 0) first_skipped = psn_add(c.expected, off);
      ++skipped;
      if (!in_gap) ++gaps;
      in_gap = true;
    }
  }
  if (off < dist) {  // the rest held nothing
    skipped += dist - off;
    if (!in_gap) ++gaps;
  }

  if (skipped > 0 && why != SkipReason::kFlush && !c.resync_pending && !c.responses) {
    // The first PSN given up: where the responder will ask the requester to go back to.
    c.resync_pending = true;
    c.resync_psn = first_skipped;
  }
  c.expected = target;
  const uint32_t step = dist % window;
  c.head = ring_index(c, step);

  counters_.psns_skipped += skipped;
  c.counters.psns_skipped += skipped;
  c.counters.gaps_skipped += gaps;
  if (why == SkipReason::kTimeout) counters_.gap_timeouts += gaps;
  if (why == SkipReason::kForced) counters_.gaps_forced += gaps;
  // A READ request released here may consume PSNs past the target.
  if (end_offset > dist) skip_span(ci, 0, end_offset - dist, out);
  if (c.gap_count > 0) take_response_gaps(ci);
}

void ReorderEngine::poll(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
  // The head of the arrival list is the packet that has waited longest: everything before it in
  // its QP has had its hold time (or more).
  while (arrivals_head_ != kNone && held_[arrivals_head_].deadline_ns <= now_ns) {
    const Held& r = held_[arrivals_head_];
    const uint32_t ci = r.context;
    advance_to(ci, r.psn, SkipReason::kTimeout, out);  // no-op when r.psn is the expected one
    release_run(ci, out);
  }
}

uint64_t ReorderEngine::next_event_ns() const {
  return arrivals_head_ == kNone ? kNever : held_[arrivals_head_].deadline_ns;
}

void ReorderEngine::flush(std::vector<rte_mbuf*>& out) {
  for (uint32_t ci = 0; ci < contexts_used_; ++ci) {
    Context& c = contexts_[ci];
    if (!c.in_use || c.buffered == 0) continue;
    advance_to(ci, psn_add(c.highest, 1), SkipReason::kFlush, out);
  }
}

}  // namespace spraynet
