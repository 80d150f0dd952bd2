// What one TCAM decided for the keys it saw lately, for one reader: the switch node that owns
// it (one lcore, or fabric_emu's single thread). rte_acl's answer is a pure function of the
// lookup key and the snapshot, so a key seen again under the same snapshot needs no second
// trie walk: a flow's packets all carry one key (addresses, protocol, ports, DestQP), and a
// switch sees few flows at a time. Bursts of one packet, as fabric_emu delivers them, run
// rte_acl's scalar path, several hundred instructions a packet; a hit here costs a hash and
// a compare. Decisions are tagged with the snapshot's generation: a commit makes every cached
// decision stale at once, without touching the table.
//
// Direct-mapped: a key evicts whatever shared its slot, so a table smaller than the working set
// only costs lookups, never a wrong decision. Not thread-safe: one cache per reading thread,
// and one TCAM per cache (Tcam::classify resets a cache that another TCAM filled).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace spraynet {

class TcamDecisionCache {
 public:
  static constexpr size_t kKeyWords = 5;  // the 20-byte rte_acl key, as words
  using Key = std::array<uint32_t, kKeyWords>;
  // rte_acl's results for the key: the admitted rules' and, when those had no match, the
  // refused (shadow) rules'; 0 is no match.
  // (No member initialisers: classify() keeps a stack array of these per chunk, written before
  // it is read, and zeroing it on every call cost more than the lookup it saves.)
  struct Decision {
    uint32_t admitted;
    uint32_t shadow;
  };
  static constexpr size_t kDefaultEntries = 1024;

  // `entries`: a power of two, 1..2^24. Throws std::invalid_argument otherwise.
  explicit TcamDecisionCache(size_t entries = kDefaultEntries) {
    if (entries == 0 || entries > (size_t{1} << 24) || (entries & (entries - 1)) != 0) {
      throw std::invalid_argument("tcam decision cache: entries must be a power of two, 1..2^24");
    }
    slots_.resize(entries);
    shift_ = 64;
    for (size_t e = entries; e > 1; e >>= 1) --shift_;
  }

  // The decision stored for this key under this generation, or null.
  const Decision* find(uint64_t generation, const Key& key) const {
    const Slot& s = slots_[index(key)];
    return s.generation == generation && s.key == key ? &s.decision : nullptr;
  }
  void store(uint64_t generation, const Key& key, Decision decision) {
    slots_[index(key)] = Slot{generation, key, decision};
  }

  // Forgets every decision and binds the cache to `owner` (the TCAM that fills it).
  void reset(const void* owner) {
    for (Slot& s : slots_) s.generation = kEmpty;
    owner_ = owner;
  }
  const void* owner() const { return owner_; }
  size_t entries() const { return slots_.size(); }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // no snapshot has this generation
  struct Slot {
    uint64_t generation = kEmpty;
    Key key{};
    Decision decision{};
  };

  // Multiply-shift over the key's words: the top bits of the mixed products pick the slot.
  size_t index(const Key& k) const {
    const uint64_t a = (uint64_t{k[0]} << 32 | k[1]) * 0x9E3779B97F4A7C15ULL;
    const uint64_t b = (uint64_t{k[2]} << 32 | k[3]) * 0xC2B2AE3D27D4EB4FULL;
    const uint64_t c = (uint64_t{k[4]} + 1) * 0x165667B19E3779F9ULL;
    const uint64_t h = a ^ (b >> 7 | b << 57) ^ (c >> 13 | c << 51);
    return shift_ == 64 ? 0 : static_cast<size_t>(h >> shift_);
  }

  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  const void* owner_ = nullptr;
};

}  // namespace spraynet
