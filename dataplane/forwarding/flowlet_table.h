// Flowlets, as switch ASICs keep them: a flow's packets separated by less than the flowlet gap
// stay on one member (so they cannot overtake each other), and a burst that starts after a
// longer silence is a new flowlet, free to take another member. Where it goes is the scheme's:
//   dlb      (dynamic load balancing) the least-loaded eligible member;
//   conga    (Alizadeh et al., SIGCOMM 2014) the eligible member with the smallest congestion
//            metric the caller gives (max of the local DRE and the remote leaf's feedback),
//            ties drawn at random;
//   letflow  (Vanini et al., "Let It Flow: Resilient Asymmetric Load Balancing with Flowlet
//            Switching", NSDI 2017) an eligible member drawn uniformly at random: flowlets on a
//            slow or congested path end sooner (its packets space out) and move, so that
//            without measuring anything the traffic settles in proportion to what each path
//            carries.
// The table is indexed by hash & (entries - 1); flows that collide share an entry, and so a
// member, exactly as in hardware.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <rte_prefetch.h>

#include "dataplane/forwarding/bucket_table.h"
#include "dataplane/forwarding/path_load.h"

namespace spraynet {

struct FlowletCounters {
  // Packets that found their entry unused or idle for longer than the gap: new flowlets.
  uint64_t flowlets_started = 0;
  // New flowlets placed on a different member than the entry's previous flowlet.
  uint64_t flowlets_moved = 0;
  // Active flowlets (within the gap) whose member had become ineligible, moved at once.
  uint64_t rerouted_ineligible = 0;
  // Packets for which no member was eligible: select() returned kNoMember.
  uint64_t no_eligible_member = 0;
  // New flowlets on an entry that had been used and aged out (idle longer than the gap): the
  // table's aging. flowlets_started - flowlets_expired entries were first used.
  uint64_t flowlets_expired = 0;
  // Packets that found their entry active for another flow (a different hash in the same entry
  // within the gap) and so follow that flow's member: the table is too small for the flows, as
  // in hardware. Flows whose 32-bit hashes are equal cannot be told apart and are not counted.
  uint64_t collisions = 0;

  // Field by field (a switch sums its lanes' tables).
  FlowletCounters& operator+=(const FlowletCounters& o) {
    flowlets_started += o.flowlets_started;
    flowlets_moved += o.flowlets_moved;
    rerouted_ineligible += o.rerouted_ineligible;
    no_eligible_member += o.no_eligible_member;
    flowlets_expired += o.flowlets_expired;
    collisions += o.collisions;
    static_assert(sizeof(FlowletCounters) == 6 * sizeof(uint64_t),
                  "every FlowletCounters field is summed here");
    return *this;
  }
};

class FlowletTable {
 public:
  static constexpr uint16_t kNoMember = BucketTable::kNoMember;
  static constexpr uint64_t kDefaultGapNs = 100'000;  // 100 us
  static constexpr uint32_t kMaxEntries = 1u << 24;

  // `entries` must be a power of two in [1, 2^24]; throws std::invalid_argument otherwise.
  // `seed` seeds LetFlow's draws (select_random): the same seed and packets, the same members.
  explicit FlowletTable(uint32_t entries, uint64_t gap_ns = kDefaultGapNs, uint64_t seed = 0);

  // The member (index into `members`) for a packet of the flow with this hash at now_ns.
  // An entry whose last packet is at most gap_ns old and whose member is still eligible keeps
  // that member; otherwise the packet starts a flowlet on the eligible member with the fewest
  // queued bytes, ties broken by the hash so that member 0 is not favoured.
  // Every packet refreshes its entry's time. kNoMember when no member is eligible (the entry
  // is left as it was). members.size() must be below kNoMember.
  uint16_t select(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> members);

  // LetFlow: the same, except that a new flowlet (or one whose member became ineligible) goes to
  // an eligible member drawn uniformly at random from this table's seeded generator; one draw
  // per new flowlet, none per packet that follows its flowlet.
  uint16_t select_random(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> members);

  // CONGA: a new flowlet (or one whose member became ineligible) goes to the eligible member
  // with the smallest metrics[i], ties drawn uniformly from this table's generator. metrics has
  // one entry per member.
  uint16_t select_least_congested(uint32_t flow_hash, uint64_t now_ns,
                                  std::span<const PathLoad> members,
                                  std::span<const uint8_t> metrics);

  // Starts loading the entry select() will read for this hash, if its page exists: a caller
  // with a burst of packets prefetches them all before selecting, so that at 100K flows (a
  // table of megabytes) the entries' cache misses overlap instead of coming one by one.
  void prefetch(uint32_t flow_hash) const {
    const uint32_t index = flow_hash & mask_;
    const Entry* page = pages_[index >> kPageBits].get();
    // rte_prefetch0 (an asm volatile), not __builtin_prefetch: g++ 12 finds a function whose
    // only effect is that builtin pure, and deletes the call along with the prefetch.
    if (page != nullptr) rte_prefetch0(&page[index & (kPageEntries - 1)]);
  }

  // Forgets every flowlet (for instance when the group's member list changes meaning).
  void clear();

  uint32_t entries() const { return mask_ + 1; }
  // Heap bytes: the page table and the pages made so far (see below).
  uint64_t heap_bytes() const;
  uint64_t gap_ns() const { return gap_ns_; }
  const FlowletCounters& counters() const { return counters_; }

 private:
  struct Entry {
    uint64_t last_seen_ns = 0;
    uint16_t member = kNoMember;  // kNoMember: never used
    // The last packet's flow, as bits of its hash the index did not use (see flow_tag()): only
    // for counting collisions; the entry's 16 bytes had room for it.
    uint16_t flow_tag = 0;
  };
  static_assert(sizeof(Entry) == 16, "an entry is a quarter of a cache line");
  // Another 16 bits of the hash, mixed from all 32 so that flows sharing an index (its low bits)
  // still differ here unless their hashes are equal.
  static uint16_t flow_tag(uint32_t flow_hash) {
    return static_cast<uint16_t>((flow_hash * 0x85EBCA6Bu) >> 16);
  }

  // The entries live in pages of kPageEntries (fewer for a smaller table), each made when a
  // packet first hashes into it and freed by clear(): a DLB group sized for thousands of flows
  // that sees a few dozen pays for a few dozen pages, not 64 KiB. A page made is what the
  // entries of a whole table would hold, so the answers are the same.
  static constexpr unsigned kPageBits = 4;
  static constexpr uint32_t kPageEntries = 1u << kPageBits;
  Entry& entry(uint32_t index) {
    std::unique_ptr<Entry[]>& page = pages_[index >> kPageBits];
    if (page == nullptr) make_page(page);
    return page[index & (kPageEntries - 1)];
  }
  void make_page(std::unique_ptr<Entry[]>& page);
  // select()'s body: `place` chooses the member of a new flowlet (or kNoMember).
  template <class Place>
  uint16_t select_with(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> members,
                       Place place);
  // The next 32 bits of the generator (splitmix64: 8 bytes of state, every table has one).
  uint32_t next_random();

  std::vector<std::unique_ptr<Entry[]>> pages_;
  size_t pages_made_ = 0;
  uint32_t mask_;
  uint64_t gap_ns_;
  uint64_t random_state_;
  FlowletCounters counters_;
};

// An eligible member drawn uniformly with `draw` (scale_to_range over the eligible count), or
// kNoMember. LetFlow's choice.
uint16_t random_eligible(std::span<const PathLoad> members, uint32_t draw);

// The eligible member with the smallest metric (metrics[i] for members[i]), or kNoMember; among
// k tied members, number scale_to_range(draw, k). CONGA's choice.
uint16_t least_metric_eligible(std::span<const PathLoad> members, std::span<const uint8_t> metrics,
                               uint32_t draw);

// The eligible member with the fewest queued bytes, or kNoMember. Ties are broken by
// `tie_break` (a hash or random value): among the k tied members it picks number
// scale_to_range(tie_break, k), so a uniform tie_break picks each tied member equally often.
// (Scanning from an offset would not: ties between members 2 and 3 of 4 would go to 2 from
// three of the four offsets.) Shared by DLB and by DRILL's fallback.
uint16_t least_loaded_eligible(std::span<const PathLoad> members, uint32_t tie_break);

// Maps a 32-bit value onto [0, n) by multiply-shift (Lemire), without a division.
inline uint32_t scale_to_range(uint32_t x, uint32_t n) {
  return static_cast<uint32_t>((uint64_t{x} * n) >> 32);
}

}  // namespace spraynet
