// What one TCAM decided for the keys it saw lately, for one reader. rte_acl's answer is a pure
// function of the lookup key and the snapshot, so a key seen again under the same snapshot needs
// no second trie walk: a flow's packets all carry one key (addresses, protocol, ports, DestQP).
// Bursts of one packet, as fabric_emu delivers them, run rte_acl's scalar path, several hundred
// instructions a packet; a hit here costs a hash, a cache line and two compares.
//
// The key is the 16-byte flow key the TCAM looks up (FlowKey with DestQP: addresses, ports,
// protocol and the 24-bit DestQP, every bit of rte_acl's input), compared whole: a hit never
// answers for another key.
//
// Two-choice, three-way set-associative: a key may live in any of the three ways of two lines
// (64 bytes each: three keys and their decisions), picked by two hashes of the key. A key is
// stored where there is room, in the emptier of its two lines; when both are full one of their
// keys moves to its own other line if that has room, and only when none can is one evicted. So
// a working set well below the entries stays whole where a direct-mapped cache of the same
// bytes keeps about 1/e of its keys (1,024 flows seen in turn in 1,024 direct-mapped slots: a
// third of the lookups hit).
//
// Bound to one (table, generation): bind() forgets every decision when either changes, so a
// commit makes every cached decision stale at once, and a cache passed to another table is
// emptied first. The table is known by its address, so keep the cache beside the table it serves
// (both members of one node), where no other table takes that address while the cache lives.
// Not thread-safe: one reader (one lcore, or fabric_emu's single thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>

namespace spraynet {

class TcamDecisionCache {
 public:
  // Trivial (no member initialisers): the TCAM fills it with one copy of its flow key.
  struct Key {
    uint64_t lo;
    uint64_t hi;
    bool operator==(const Key&) const = default;
  };
  // Decisions are the TCAM's own encoding, below kMaxValue.
  static constexpr uint32_t kMaxValue = (1u << 31) - 1;
  static constexpr uint32_t kMiss = UINT32_MAX;  // find()'s answer for a key it does not hold
  static constexpr size_t kWays = 3;             // keys per line
  // 640 lines, 40 KB: what 1,024 direct-mapped slots of the cache this one replaced took.
  static constexpr size_t kDefaultEntries = 1920;

  // Room for at least `entries` keys (1..2^24, rounded up to whole lines of kWays); otherwise
  // std::invalid_argument.
  explicit TcamDecisionCache(size_t entries = kDefaultEntries) {
    if (entries == 0 || entries > (size_t{1} << 24)) {
      throw std::invalid_argument("tcam decision cache: entries must be 1..2^24");
    }
    lines_count_ = static_cast<uint32_t>((entries + kWays - 1) / kWays);
    lines_ = std::make_unique<Line[]>(lines_count_);  // value-initialised: every way empty
  }

  // Where a key may be: its two lines. Made once per key and packet, for prefetch, find, store.
  struct Probe {
    Key key;
    uint32_t line[2];
  };
  Probe probe(const Key& k) const {
    // Multiply-shift of each half, then one 64x64->128 multiply: every bit of the high half
    // depends on every key bit; its two 32-bit halves pick the two lines (multiply-high, so any
    // line count works).
    const uint64_t x = k.lo * 0x9E3779B97F4A7C15ULL ^ k.hi * 0xC2B2AE3D27D4EB4FULL;
    const uint64_t h =
        static_cast<uint64_t>((static_cast<unsigned __int128>(x) * 0x165667B19E3779F9ULL) >> 64);
    return Probe{k,
                 {static_cast<uint32_t>(((h >> 32) * lines_count_) >> 32),
                  static_cast<uint32_t>(((h & 0xFFFFFFFFu) * lines_count_) >> 32)}};
  }
  void prefetch(const Probe& p) const { __builtin_prefetch(&lines_[p.line[0]]); }

  // The value stored for the key, or kMiss.
  uint32_t find(const Probe& p) const {
    for (const uint32_t l : p.line) {
      const Line& line = lines_[l];
      for (size_t w = 0; w < kWays; ++w) {
        // Both halves with plain loads and one branch: no memcmp call.
        if (((line.key[w].lo ^ p.key.lo) | (line.key[w].hi ^ p.key.hi)) == 0 &&
            line.value[w] != 0) {
          return line.value[w] & kMaxValue;
        }
      }
    }
    return kMiss;
  }
  // value <= kMaxValue (std::invalid_argument otherwise: nothing stored).
  void store(const Probe& p, uint32_t value) {
    if (value > kMaxValue) throw std::invalid_argument("tcam decision cache: value too large");
    Line* const l[2] = {&lines_[p.line[0]], &lines_[p.line[1]]};
    // The key itself first (a burst may ask rte_acl about one key twice), then the emptier line.
    int free_way[2] = {-1, -1};
    unsigned free_count[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      for (size_t w = kWays; w-- > 0;) {
        if (l[i]->value[w] == 0) {
          free_way[i] = static_cast<int>(w);
          ++free_count[i];
        } else if (l[i]->key[w] == p.key) {
          l[i]->value[w] = value | kValid;
          return;
        }
      }
    }
    const int pick = free_count[1] > free_count[0] ? 1 : 0;
    if (free_way[pick] >= 0) {
      put(*l[pick], static_cast<size_t>(free_way[pick]), p.key, value);
      return;
    }
    // Both lines full: one of their keys moves to its other line if that has room (a cuckoo
    // step, one deep), else one is evicted, in turn over the six ways.
    for (int i = 0; i < 2; ++i) {
      for (size_t w = 0; w < kWays; ++w) {
        const Probe q = probe(l[i]->key[w]);
        const uint32_t other = q.line[0] == p.line[i] ? q.line[1] : q.line[0];
        Line& o = lines_[other];
        for (size_t v = 0; v < kWays; ++v) {
          if (o.value[v] != 0) continue;
          o.key[v] = l[i]->key[w];
          o.value[v] = l[i]->value[w];
          put(*l[i], w, p.key, value);
          return;
        }
      }
    }
    const uint32_t victim = evict_next_;
    evict_next_ = victim + 1 == 2 * kWays ? 0 : victim + 1;
    put(*l[victim / kWays], victim % kWays, p.key, value);
  }
  uint32_t find(const Key& k) const { return find(probe(k)); }
  void store(const Key& k, uint32_t value) { store(probe(k), value); }

  // Binds the cache to `owner`'s decisions under `generation`: when either differs from what it
  // was bound to, every decision is forgotten first.
  void bind(const void* owner, uint64_t generation) {
    if (owner == owner_ && generation == generation_) return;
    for (uint32_t i = 0; i < lines_count_; ++i) {
      for (uint32_t& v : lines_[i].value) v = 0;
    }
    owner_ = owner;
    generation_ = generation;
  }
  const void* owner() const { return owner_; }
  uint64_t generation() const { return generation_; }

  // A cache that pays only when it hits: with more flows than entries (a leaf with 100,000
  // QPs) nearly every lookup misses, and each miss costs its probe and a store (a cuckoo step
  // over six lines) on top of rte_acl. So the reader reports each burst's lookups and hits;
  // over every window of kWindow lookups, a hit rate below kMinHitPercent sets the cache aside
  // for the next kRestLookups lookups (rte_acl answers them alone, nothing is stored), after
  // which it is tried again for a window with what it holds. Decisions never depend on it.
  static constexpr uint32_t kWindow = 4096;
  static constexpr uint32_t kMinHitPercent = 50;
  static constexpr uint32_t kRestLookups = 1u << 20;  // about 0.1 s at 10 Mpps
  bool in_use() const { return rest_ == 0; }
  void account(uint32_t lookups, uint32_t hits) {
    if (rest_ != 0) {
      rest_ = lookups >= rest_ ? 0 : rest_ - lookups;
      set_aside_lookups_ += lookups;
      return;
    }
    window_lookups_ += lookups;
    window_hits_ += hits;
    if (window_lookups_ < kWindow) return;
    if (uint64_t{window_hits_} * 100 < uint64_t{window_lookups_} * kMinHitPercent) {
      rest_ = kRestLookups;
      ++set_asides_;
    }
    window_lookups_ = window_hits_ = 0;
  }
  // Times the cache was set aside, and the lookups made without it.
  uint64_t set_asides() const { return set_asides_; }
  uint64_t set_aside_lookups() const { return set_aside_lookups_; }
  size_t entries() const { return size_t{lines_count_} * kWays; }
  // Heap bytes: the lines.
  uint64_t heap_bytes() const { return uint64_t{lines_count_} * sizeof(Line); }

 private:
  static constexpr uint32_t kValid = 1u << 31;  // in a way's value: the way holds a key
  struct alignas(64) Line {
    Key key[kWays];
    uint32_t value[kWays] = {};  // the decision | kValid; 0: the way is empty
  };
  static_assert(sizeof(Line) == 64, "one line, one cache line");

  static void put(Line& line, size_t way, const Key& key, uint32_t value) {
    line.key[way] = key;
    line.value[way] = value | kValid;
  }

  std::unique_ptr<Line[]> lines_;
  uint32_t lines_count_ = 0;
  uint32_t evict_next_ = 0;  // the next of the six ways a full pair of lines gives up
  const void* owner_ = nullptr;
  uint64_t generation_ = 0;
  uint32_t window_lookups_ = 0, window_hits_ = 0;
  uint32_t rest_ = 0;  // lookups left before the cache is tried again
  uint64_t set_asides_ = 0, set_aside_lookups_ = 0;
};

}  // namespace spraynet
