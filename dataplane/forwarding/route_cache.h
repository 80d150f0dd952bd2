// The routes one reader looked up lately: destination address -> group (RouteTable::kNoRoute
// included), tagged with the table's version, which every add() and remove() changes. rte_rib
// walks a trie per lookup, node by node through its mempool, several cache misses when a
// process holds hundreds of switches; a switch sees few destinations at a time, so most lookups
// are one it just made. What a DirectMappedCache promises, it promises
// (RouteTable::lookup_burst fills and resets it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/forwarding/direct_mapped_cache.h"

namespace spraynet {

// Fibonacci hashing: the top bits of the product depend on every bit of the address, so the
// hosts of one subnet (which differ in their low bits) spread over every slot.
struct RouteCacheHash {
  uint64_t operator()(uint32_t dst) const { return uint64_t{dst} * 0x9E3779B97F4A7C15ULL; }
};

class RouteCache : public DirectMappedCache<uint32_t, uint32_t, RouteCacheHash> {
 public:
  static constexpr size_t kDefaultEntries = 4096;
  explicit RouteCache(size_t entries = kDefaultEntries)
      : DirectMappedCache(entries, "route cache") {}
};

}  // namespace spraynet
