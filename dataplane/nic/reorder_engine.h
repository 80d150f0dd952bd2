// The NIC's receive-side reorder engine: puts sprayed RoCEv2 packets back into PSN order per
// queue pair before they reach the host, because an RC responder (Soft-RoCE among them) drops
// every packet after a PSN gap until the missing one arrives and the requester goes back N.
//
// A QP context is keyed by (source IPv4, BTH DestQP). Per context the engine keeps the next PSN
// it will release (`expected`) and a ring of `window` slots for packets that arrived ahead of it.
// PSNs are 24-bit serial numbers; all comparisons go through psn_diff, so the 2^24 wrap is just
// another PSN.
//
// - In order (psn == expected): released at once, with the contiguous run buffered behind it.
// - Ahead within the window: held. Every held packet carries a deadline, its arrival +
//   hold_timeout_ns. When the earliest deadline of a context passes, the gaps before that packet
//   have been waited for long enough: they are skipped (counted), the packet and the run behind it
//   are released, and the endpoint's go-back-N deals with what was really lost.
// - Ahead beyond the window: the window slides; held packets that fall out of it are released in
//   PSN order, the gaps between them skipped, until the new packet fits.
// - Before expected (already released): passed on at once, a duplicate. The responder re-ACKs
//   duplicates, so dropping them could stall a requester that lost its ACK (rxe needs that).
// - A PSN already held: the copy is dropped (counted duplicates_of_held). Passed on, it would
//   reach the responder ahead of the gap, out of sequence (a NAK, or a re-ACK of the wrong PSN);
//   the held copy is delivered in order, which answers the requester just as well.
//
// READ requests. A READ request consumes as many PSNs as its response has packets (IBA 9.7.1:
// N = max(1, ceil(RETH DMA length / path MTU)); the next request's PSN is the READ's + N), so
// releasing a READ request at PSN p moves `expected` to p + N, not p + 1 (path_mtu).
//
// Learning the start. The NIC is not told a QP's initial PSN, so a new context cannot tell its
// first packet from one that overtook the first. It holds that first packet for hold_timeout_ns;
// a packet arriving meanwhile with an earlier PSN (close enough that everything held still fits
// the window) becomes the new start; one too far before to fit is passed on as a duplicate. When
// the first packet's hold ends, the lowest PSN seen is the start and it is released; from the
// first release on (a hold ending, a window slide) the start is fixed. The price is one hold
// time of latency when a context is created (first packet of a QP, or after its context was
// evicted), which is the only way to never release a QP's second packet before its first.
//
// What is sequenced. Only packets travelling to a responder carry a contiguous PSN sequence:
// SEND, WRITE, READ request, atomics (RC, UC, UD, ...). ACKs and atomic ACKs carry the requester's
// PSNs, and ACKs coalesce (an ACK for PSN n covers all before it), so ordering them would hold
// every coalesced ACK for a whole timeout; CNPs carry no PSN at all. Those are passed on at once
// and counted `unsequenced`.
//
// READ responses. rxe's completer drops a READ response after a PSN gap (rxe_comp.c check_psn:
// COMPST_DONE) and retries once a later response arrives, so they are worth ordering, and they
// form a sequence of their own: the READ's PSNs p .. p+N-1, one packet each. The NIC sees its own
// READ requests leave (TX) and announces each range with expect_read_responses(peer IP, local QP,
// p, N): a second context of that (source IP, DestQP), separate from the one of requests arriving
// for the same QP, then sequences READ responses within the announced ranges exactly like
// requests (in order, held after a gap, the same hold timeout). Ranges follow one another; PSNs
// between two ranges (WRITEs on the same QP, answered by ACKs) are jumped over (up to
// kMaxResponseGaps such jumps pending per QP). A range announced before `expected` is the
// requester's retry (rxe req_retry re-issues the READ from the first missing PSN): the sequence
// moves back to it. A READ response outside every announced range, or of a QP never announced, is
// passed on at once as before (unsequenced, or a duplicate when before the range).
//
// Time. No clock is read: receive/poll take now_ns. Deadlines are kept in one list in arrival
// order across all contexts (they are now + a constant, so arrival order is deadline order; a
// clock stepping back is clamped), unlinked when their packet leaves early. next_event_ns() is
// therefore exact: the deadline of the earliest packet still held. receive() does not expire
// deadlines itself (the driver calls poll() by next_event_ns()), so a missing packet that arrives
// after its deadline but before the poll still goes in order rather than as a duplicate.
//
// Memory. The constructor allocates the QP lookup table (sized for max_qps); the rest grows with
// use up to its limit and never shrinks: a context and its ring of `window` slots (4 bytes each)
// when a QP is first seen (max_qps of them at most), hold records as more packets are held at
// once than ever before (max_buffered at most, their capacity doubling). So the limits are what
// a NIC may need, not what it pays for up front, and once the engine has seen its QPs and its
// deepest reordering nothing more is allocated. When a limit is hit the packet is passed on
// unordered and counted, never dropped. memory_bytes() says what it holds.
//
// Ownership. receive() takes the mbuf in every case; it is released into `out` (then the caller
// owns it) or held. The destructor frees what is still held.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/wire/packet_parser.h"

struct rte_mbuf;

namespace spraynet {

struct ReorderConfig {
  static constexpr uint32_t kMaxWindow = 16384;
  static constexpr uint32_t kMaxQps = 1u << 20;
  static constexpr uint64_t kMaxRingSlots = 1u << 24;  // max_qps x window: 64 MiB of ring
  static constexpr uint32_t kMaxBuffered = 1u << 22;
  static constexpr uint64_t kMaxHoldTimeoutNs = 1'000'000'000;  // 1 s

  // Per QP: how far ahead of the expected PSN a packet may be and still be held (PSNs
  // expected .. expected + window - 1 have a slot). 1 to kMaxWindow.
  uint32_t window = 256;
  // A gap is waited for at most this long after the first packet behind it arrived, then skipped.
  // Must stay far below the QP retransmit timeout (milliseconds): 1 ns to 1 s.
  uint64_t hold_timeout_ns = 100'000;
  // QP contexts, keyed by (source IPv4, DestQP). 1 to kMaxQps, and max_qps x window at most
  // kMaxRingSlots.
  uint32_t max_qps = 4096;
  // Packets held across all QPs. 1 to kMaxBuffered.
  uint32_t max_buffered = 65536;
  // Path MTU of the QPs (payload bytes per packet): how many PSNs a READ request consumes.
  // 256, 512, 1024, 2048 or 4096.
  uint32_t path_mtu = 1024;

  // Empty when valid, else "key: reason" (e.g. "window: must be from 1 to 16384").
  std::string check() const;
};

// Every packet received is in exactly one of: released_in_order, released_after_hold,
// duplicates, unsequenced, not_roce, qp_table_full, buffer_full, duplicates_of_held (freed), or
// still held (buffered()).
struct ReorderCounters {
  uint64_t in = 0;                   // mbufs given to receive()
  uint64_t released_in_order = 0;    // released at once: arrived with psn == expected
  uint64_t released_after_hold = 0;  // held, then released (gap filled, timeout, slide, flush)
  uint64_t duplicates = 0;           // psn before expected: passed on at once
  uint64_t duplicates_of_held = 0;   // psn already held: this copy freed (the held one goes)
  uint64_t unsequenced = 0;          // ACK, atomic ACK, CNP, unannounced READ response: at once
  uint64_t not_roce = 0;             // kind != kRoce: passed on at once
  uint64_t qp_table_full = 0;        // no context free or evictable: passed on unordered
  uint64_t buffer_full = 0;          // no hold record free, none could be made: passed on unordered
  uint64_t gap_timeouts = 0;         // gaps (runs of missing PSNs) skipped when their hold ended
  uint64_t gaps_forced = 0;          // gaps skipped early to make room when the buffer was full
  uint64_t window_slides = 0;        // arrivals beyond the window that slid it
  uint64_t psns_skipped = 0;         // PSNs given up on: timeouts, slides, forced, flush
  uint64_t qps_evicted = 0;          // idle contexts reused for a new QP
  uint64_t max_buffered_seen = 0;    // high-water mark of buffered()
  uint64_t resyncs = 0;              // a retransmission of a given-up gap restarted the sequence
  uint64_t null_mbufs = 0;           // receive() with m == nullptr: ignored (not counted in `in`)
  uint64_t read_requests = 0;        // sequenced READ requests (each consumed N PSNs)
  uint64_t read_ranges_announced = 0;     // expect_read_responses() calls that took effect
  uint64_t read_responses_sequenced = 0;  // READ responses in an announced range (also counted
                                          // under released_* or duplicates_of_held)
  uint64_t read_responses_reordered = 0;  // of those, held and then released
  uint64_t read_ranges_rewound = 0;  // a range announced before expected: a retry, sequence moved
  uint64_t response_gaps_full = 0;   // a jump between ranges not recorded (kMaxResponseGaps)

  // Everything handed back through `out` so far.
  // in == released() + duplicates_of_held + buffered() at all times.
  uint64_t released() const {
    return released_in_order + released_after_hold + duplicates + unsequenced + not_roce +
           qp_table_full + buffer_full;
  }
};

struct ReorderQpCounters {
  uint64_t in = 0;            // sequenced packets of this QP (context lifetime)
  uint64_t reordered = 0;     // held, then released
  uint64_t duplicates = 0;    // before expected, or of a held PSN
  uint64_t gaps_skipped = 0;  // by timeout, slide, forced room or flush
  uint64_t psns_skipped = 0;
};

// One context, for telemetry.
struct ReorderQpView {
  uint32_t src_ip = 0;  // host byte order
  uint32_t dest_qp = 0;
  bool read_responses = false;  // the READ response context of the QP (expect_read_responses)
  uint32_t expected_psn = 0;    // while !start_fixed: the lowest PSN held so far
  bool start_fixed = false;
  uint32_t buffered = 0;
  ReorderQpCounters counters;
};

class ReorderEngine {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  explicit ReorderEngine(const ReorderConfig& config);
  ~ReorderEngine();  // frees every mbuf still held
  ReorderEngine(const ReorderEngine&) = delete;
  ReorderEngine& operator=(const ReorderEngine&) = delete;

  // Takes ownership of m. `p` is m's parse. Appends to `out`, in the order they must reach the
  // host, every mbuf this arrival releases (possibly none, possibly many). `out` is not cleared.
  void receive(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // Ends every hold whose deadline is <= now_ns: skips the gaps in front of those packets and
  // appends what that releases to `out`.
  void poll(uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // Earliest hold deadline; kNever when nothing is held. Exact: poll(next_event_ns()) releases
  // something, poll(next_event_ns() - 1) nothing.
  uint64_t next_event_ns() const;
  // Releases everything held, in PSN order per QP (shutdown, drain). Contexts stay, with their
  // start fixed after the last PSN released.
  void flush(std::vector<rte_mbuf*>& out);

  size_t buffered() const { return buffered_; }
  size_t qp_count() const { return qps_in_use_; }
  // The QP (src_ip, dest_qp) starts at first_psn: a NIC that owns the QP context knows its
  // initial PSN, so its first packet need not be held to learn it. False (and nothing changed)
  // when the QP table is full or the QP is already under way.
  bool expect(uint32_t src_ip, uint32_t dest_qp, uint32_t first_psn);
  // Every QP it is not told of by expect() starts at first_psn too: for a NIC whose peers all
  // start their QPs there (fabric_emu's hosts, whose flows come and go by the thousand: no
  // context is made before a flow's first packet, and an idle one is reused).
  void set_first_psn(uint32_t first_psn) {
    first_psn_ = first_psn & 0xFFFFFF;
    has_first_psn_ = true;
  }
  // This NIC sent a READ request with PSN first_psn for `psns` response packets on its QP
  // dest_qp to the peer src_ip: sequence READ responses from src_ip to dest_qp with PSNs
  // first_psn .. first_psn + psns - 1. False (nothing changed) when the QP table is full.
  bool expect_read_responses(uint32_t src_ip, uint32_t dest_qp, uint32_t first_psn, uint32_t psns);
  // READ response PSNs a READ request with this RETH DMA length asks for: max(1, ceil(len/MTU)).
  uint32_t read_psns(uint32_t dma_length) const;

  // Reorder depth: how many PSNs ahead of the expected one each sequenced packet of a QP with
  // a known start arrived (0: in order); bin kDepthBins - 1 holds that depth and beyond.
  static constexpr size_t kDepthBins = 1025;
  const std::array<uint64_t, kDepthBins>& depth_histogram() const { return depth_histogram_; }
  const ReorderCounters& counters() const { return counters_; }
  const ReorderConfig& config() const { return config_; }
  // Bytes of the engine: the object (with its depth histogram) and the capacity of its
  // contexts, rings, hold records and lookup table.
  uint64_t memory_bytes() const;

  // Calls f(const ReorderQpView&) for every context in use (in table order, not sorted).
  template <typename F>
  void for_each_qp(F&& f) const {
    for (uint32_t i = 0; i < contexts_used_; ++i) {
      const Context& c = contexts_[i];
      if (!c.in_use) continue;
      ReorderQpView v;
      v.src_ip = static_cast<uint32_t>(c.key >> 32);
      v.dest_qp = static_cast<uint32_t>(c.key & 0xFFFFFF);
      v.read_responses = c.responses;
      v.expected_psn = c.expected;
      v.start_fixed = c.fixed;
      v.buffered = c.buffered;
      v.counters = c.counters;
      f(v);
    }
  }

  // True for opcodes whose PSNs form the responder-bound sequence this engine restores.
  static constexpr bool is_sequenced(uint8_t bth_opcode) {
    const uint8_t transport = bth_opcode >> 5;
    const uint8_t op = bth_opcode & 0x1F;
    // 100b is CNP (and reserved): no PSN sequence.
    if (transport == 4) return false;
    // RC, RD and XRC share the response opcodes: READ RESPONSE FIRST (0x0D) .. ATOMIC ACK (0x12).
    const bool has_responses = transport == 0 || transport == 2 || transport == 5;
    return !(has_responses && op >= 0x0D && op <= 0x12);
  }
  // RDMA READ request (RC, RD, XRC): consumes one PSN per response packet.
  static constexpr bool is_read_request(uint8_t bth_opcode) {
    const uint8_t transport = bth_opcode >> 5;
    return (transport == 0 || transport == 2 || transport == 5) && (bth_opcode & 0x1F) == 0x0C;
  }
  // READ RESPONSE FIRST, MIDDLE, LAST, ONLY (RC, RD, XRC).
  static constexpr bool is_read_response(uint8_t bth_opcode) {
    const uint8_t transport = bth_opcode >> 5;
    const uint8_t op = bth_opcode & 0x1F;
    return (transport == 0 || transport == 2 || transport == 5) && op >= 0x0D && op <= 0x10;
  }
  static constexpr uint32_t kMaxResponseGaps = 4;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Low word bit 24 of a key (above the 24-bit DestQP): the READ response context of the QP.
  static constexpr uint64_t kResponseKeyBit = uint64_t{1} << 24;

  struct Context {
    uint64_t key = 0;       // src_ip << 32 | dest_qp
    uint32_t expected = 0;  // next PSN to release; while !fixed, the lowest PSN held (itself held)
    uint32_t head = 0;      // ring index of `expected`
    uint32_t highest = 0;   // highest PSN held (valid while buffered > 0)
    uint32_t buffered = 0;
    uint32_t lru_prev = kNone;  // idle list: contexts in use holding nothing, least recent first
    uint32_t lru_next = kNone;
    bool in_use = false;
    bool fixed = false;  // the start is known: something has been released
    // Where the last gap given up began, until the requester's go-back-N brings it: the
    // responder still expects that PSN, so its retransmission restarts the sequence there.
    bool resync_pending = false;
    uint32_t resync_psn = 0;
    // READ response contexts only: one past the last PSN announced, and the jumps between
    // ranges not yet reached (from: the end of a range, to: the start of the next).
    bool responses = false;
    uint32_t announced_end = 0;  // the furthest range end announced
    uint32_t last_end = 0;       // the end of the range announced last (a retry re-announces)
    uint32_t gap_count = 0;
    std::array<std::pair<uint32_t, uint32_t>, kMaxResponseGaps> gaps{};
    ReorderQpCounters counters;
  };
  // One held packet. Also a node of the list of all held packets in arrival (= deadline) order,
  // and, when free, of the free list (through `next`).
  struct Held {
    rte_mbuf* mbuf = nullptr;
    uint64_t deadline_ns = 0;
    uint32_t prev = kNone;
    uint32_t next = kNone;
    uint32_t context = kNone;
    uint32_t psn = 0;
    uint32_t span = 1;  // PSNs the packet consumes (N for a READ request)
  };
  // QP lookup: open addressing, linear probing, backward-shift deletion (no tombstones).
  struct Bucket {
    uint64_t key = 0;
    uint32_t context = kNone;  // kNone: empty
  };
  // Why a gap was skipped, for the counters.
  enum class SkipReason : uint8_t { kTimeout, kSlide, kForced, kFlush };

  uint32_t find_context(uint64_t key) const;
  // A context for the key: found, or new (taking an unused one or evicting the idle LRU one);
  // kNone when the table is full of contexts that hold packets.
  uint32_t find_or_create_context(uint64_t key);
  // The new-context half of find_or_create_context, for a key find_context did not find.
  uint32_t create_context(uint64_t key);
  void table_insert(uint64_t key, uint32_t ci);
  void table_erase(uint64_t key);
  uint32_t home(uint64_t key) const;

  void idle_push_back(uint32_t ci);
  void idle_unlink(uint32_t ci);

  uint32_t* ring(uint32_t ci) { return ring_.data() + static_cast<size_t>(ci) * config_.window; }
  uint32_t ring_index(const Context& c, uint32_t offset) const {
    const uint32_t i = c.head + offset;
    return i >= config_.window ? i - config_.window : i;
  }
  // Moves `expected` on by the span of the packet just released there; for a span > 1 also
  // releases (in PSN order) anything held inside the span, which the responder will see as
  // duplicates. Then takes a pending jump between READ response ranges when it is reached.
  void consume(uint32_t ci, uint32_t span, std::vector<rte_mbuf*>& out);
  // Releases what is held at ring offsets from_offset .. span - 1, then moves `expected` on by
  // span.
  void skip_span(uint32_t ci, uint32_t from_offset, uint32_t span, std::vector<rte_mbuf*>& out);
  void take_response_gaps(uint32_t ci);
  // PSNs this sequenced packet consumes.
  uint32_t span_of(const rte_mbuf* m, const ParsedPacket& p) const;

  // Places a sequenced packet of context ci.
  void place(uint32_t ci, rte_mbuf* m, uint32_t psn, uint32_t span, uint64_t now_ns,
             std::vector<rte_mbuf*>& out);
  void receive_read_response(rte_mbuf* m, const ParsedPacket& p, uint64_t now_ns,
                             std::vector<rte_mbuf*>& out);
  void hold(uint32_t ci, rte_mbuf* m, uint32_t psn, uint32_t span, uint32_t offset,
            uint64_t now_ns);
  // Releases the packet held in context ci's ring at index `slot` into out.
  void release_held(uint32_t ci, uint32_t slot, std::vector<rte_mbuf*>& out);
  // Moves `expected` forward to `target` (serially after it), releasing in PSN order what is held
  // before target and counting the gaps between as skipped for `why`. Fixes the start.
  void advance_to(uint32_t ci, uint32_t target, SkipReason why, std::vector<rte_mbuf*>& out);
  // Releases the held packet at `expected` and the contiguous run behind it.
  void release_run(uint32_t ci, std::vector<rte_mbuf*>& out);
  // Ring offset of the first held PSN at or after expected (kNone when nothing is held).
  uint32_t first_held_offset(uint32_t ci);
  void pass(rte_mbuf* m, uint64_t ReorderCounters::*counter, std::vector<rte_mbuf*>& out);
  // Makes the storage of the context just handed out (contexts_used_ - 1): its Context and ring.
  void add_context_storage();
  // A hold record is free, or one more may be made (max_buffered).
  bool record_free() const {
    return free_head_ != kNone || held_.size() < config_.max_buffered;
  }
  // A free record (record_free() must be true): the free list's first, else a new one.
  uint32_t take_record();

  ReorderConfig config_;
  // Grown with use (see add_context_storage and take_record), at most max_qps contexts,
  // max_qps x window ring slots and max_buffered records.
  std::vector<Context> contexts_;  // contexts_used_ of them
  std::vector<uint32_t> ring_;     // contexts_used_ x window indices into held_, kNone when empty
  std::vector<Held> held_;         // every record made so far (free ones on the free list)
  std::vector<Bucket> table_;
  uint32_t table_mask_ = 0;
  uint32_t first_psn_ = 0;
  bool has_first_psn_ = false;
  uint32_t contexts_used_ = 0;  // contexts_[0, contexts_used_) have been handed out at least once
  uint32_t qps_in_use_ = 0;
  uint32_t idle_head_ = kNone;  // least recently used idle context
  uint32_t idle_tail_ = kNone;
  uint32_t free_head_ = kNone;      // freed Held records (the ones not yet made follow them)
  uint32_t arrivals_head_ = kNone;  // held packets, earliest deadline first
  uint32_t arrivals_tail_ = kNone;
  size_t buffered_ = 0;
  std::array<uint64_t, kDepthBins> depth_histogram_{};
  ReorderCounters counters_;
};

}  // namespace spraynet
