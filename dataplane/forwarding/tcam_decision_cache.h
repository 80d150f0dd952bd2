// What one TCAM decided for the keys it saw lately, for one reader. rte_acl's answer is a pure
// function of the lookup key and the snapshot, so a key seen again under the same snapshot needs
// no second trie walk: a flow's packets all carry one key (addresses, protocol, ports, DestQP),
// and a switch sees few flows at a time. Bursts of one packet, as fabric_emu delivers them, run
// rte_acl's scalar path, several hundred instructions a packet; a hit here costs a hash and a
// compare. Decisions are tagged with the snapshot's generation: a commit makes every cached
// decision stale at once. What a DirectMappedCache promises, it promises (Tcam::classify fills
// and resets it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "dataplane/forwarding/direct_mapped_cache.h"

namespace spraynet {

namespace tcam_cache {
inline constexpr size_t kKeyWords = 5;  // the 20-byte rte_acl key, as words
using Key = std::array<uint32_t, kKeyWords>;
// rte_acl's results for the key: the admitted rules' and, when those had no match, the refused
// (shadow) rules'; 0 is no match.
// (No member initialisers: a Decision is always written whole, from the lookup's results.)
struct Decision {
  uint32_t admitted;
  uint32_t shadow;
};
// Multiply-shift over the key's words: the top bits of the mixed products pick the slot.
struct KeyHash {
  uint64_t operator()(const Key& k) const {
    const uint64_t a = (uint64_t{k[0]} << 32 | k[1]) * 0x9E3779B97F4A7C15ULL;
    const uint64_t b = (uint64_t{k[2]} << 32 | k[3]) * 0xC2B2AE3D27D4EB4FULL;
    const uint64_t c = (uint64_t{k[4]} + 1) * 0x165667B19E3779F9ULL;
    return a ^ (b >> 7 | b << 57) ^ (c >> 13 | c << 51);
  }
};
}  // namespace tcam_cache

class TcamDecisionCache
    : public DirectMappedCache<tcam_cache::Key, tcam_cache::Decision, tcam_cache::KeyHash> {
 public:
  using Key = tcam_cache::Key;
  using Decision = tcam_cache::Decision;
  static constexpr size_t kKeyWords = tcam_cache::kKeyWords;
  static constexpr size_t kDefaultEntries = 1024;
  explicit TcamDecisionCache(size_t entries = kDefaultEntries)
      : DirectMappedCache(entries, "tcam decision cache") {}
};

}  // namespace spraynet
