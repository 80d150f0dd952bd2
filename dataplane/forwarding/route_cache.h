// The routes one reader looked up lately: destination address -> group, for the switch node
// that owns it (one lcore, or fabric_emu's single thread). rte_rib walks a trie per lookup,
// node by node through its mempool, several cache misses when a process holds hundreds of
// switches; a switch sees few destinations at a time, so most lookups are one it just made.
// Answers are tagged with the table's version, which every add() and remove() changes: a
// route change makes every cached answer stale at once.
//
// Direct-mapped: a destination evicts whatever shared its slot, which costs a lookup, never a
// wrong answer. Not thread-safe: one cache per reading thread, one table per cache
// (RouteTable::lookup_burst resets a cache another table filled). The table is known by its
// address: keep the cache beside the table it serves (both members of one node), so that no
// other table takes that address while the cache lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace spraynet {

class RouteCache {
 public:
  static constexpr size_t kDefaultEntries = 4096;

  // `entries`: a power of two, 1..2^24. Throws std::invalid_argument otherwise.
  explicit RouteCache(size_t entries = kDefaultEntries) {
    if (entries == 0 || entries > (size_t{1} << 24) || (entries & (entries - 1)) != 0) {
      throw std::invalid_argument("route cache: entries must be a power of two, 1..2^24");
    }
    slots_.resize(entries);
    for (size_t e = entries; e > 1; e >>= 1) --shift_;
  }

  // The group stored for dst under this version (RouteTable::kNoRoute included), or false.
  bool find(uint64_t version, uint32_t dst, uint32_t& group) const {
    const Slot& s = slots_[index(dst)];
    if (s.version != version || s.dst != dst) return false;
    group = s.group;
    return true;
  }
  void store(uint64_t version, uint32_t dst, uint32_t group) {
    slots_[index(dst)] = Slot{version, dst, group};
  }

  // Forgets every answer and binds the cache to `owner` (the table that fills it).
  void reset(const void* owner) {
    for (Slot& s : slots_) s.version = kEmpty;
    owner_ = owner;
  }
  const void* owner() const { return owner_; }
  size_t entries() const { return slots_.size(); }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // no table reaches this version
  struct Slot {
    uint64_t version = kEmpty;
    uint32_t dst = 0;
    uint32_t group = 0;
  };

  // Fibonacci hashing: the top bits of the product depend on every bit of the address, so
  // the hosts of one subnet (which differ in their low bits) spread over every slot.
  size_t index(uint32_t dst) const {
    return shift_ == 64 ? 0
                        : static_cast<size_t>((uint64_t{dst} * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  const void* owner_ = nullptr;
};

}  // namespace spraynet
