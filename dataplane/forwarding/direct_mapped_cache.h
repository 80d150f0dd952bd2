// A reader's cache of answers a table gives, for the node that owns it (one lcore, or
// fabric_emu's single thread): Key -> Value, each answer tagged with what it was true for (a
// TCAM snapshot's generation, a route table's version), so that a change to the table makes
// every cached answer stale at once without touching the cache.
//
// Direct-mapped: a key evicts whatever shared its slot, which costs a lookup, never a wrong
// answer. Not thread-safe. One table per cache: the table resets a cache bound to another
// (reset(owner)); it is known by its address, so keep the cache beside the table it serves
// (both members of one node), where no other table takes that address while the cache lives.
//
// Hash maps a key to 64 bits whose top bits are well mixed: they pick the slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spraynet {

template <class Key, class Value, class Hash>
class DirectMappedCache {
 public:
  // `entries`: a power of two, 1..2^24; otherwise std::invalid_argument, `what` naming the
  // cache.
  DirectMappedCache(size_t entries, const char* what) {
    if (entries == 0 || entries > (size_t{1} << 24) || (entries & (entries - 1)) != 0) {
      throw std::invalid_argument(std::string(what) + ": entries must be a power of two, 1..2^24");
    }
    slots_.resize(entries);
    for (size_t e = entries; e > 1; e >>= 1) --shift_;
  }

  // The answer stored for this key under this tag, or null.
  const Value* find(uint64_t tag, const Key& key) const {
    const Slot& s = slots_[index(key)];
    return s.tag == tag && s.key == key ? &s.value : nullptr;
  }
  void store(uint64_t tag, const Key& key, const Value& value) {
    slots_[index(key)] = Slot{tag, key, value};
  }

  // Forgets every answer and binds the cache to `owner` (the table that fills it).
  void reset(const void* owner) {
    for (Slot& s : slots_) s.tag = kEmpty;
    owner_ = owner;
  }
  const void* owner() const { return owner_; }
  size_t entries() const { return slots_.size(); }
  // Heap bytes: the slots.
  uint64_t heap_bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // no table reaches this tag
  struct Slot {
    uint64_t tag = kEmpty;
    Key key{};
    Value value{};
  };

  size_t index(const Key& key) const {
    return shift_ == 64 ? 0 : static_cast<size_t>(Hash{}(key) >> shift_);
  }

  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  const void* owner_ = nullptr;
};

}  // namespace spraynet
