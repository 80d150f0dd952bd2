// A weighted ECMP group as a power-of-two array of member indices, as VPP's load_balance does
// (src/vnet/dpo/load_balance.c): a member with weight share s owns about s of the buckets, and a
// flow's member is buckets[hash & (size - 1)] — one mask, one load, no division.
//
// The size is the smallest power of two at which every member's bucket count is within 2% of
// its weight share (relative: |buckets - size * share| <= 0.02 * size * share), capped at 65536.
// Counts are apportioned by largest remainder (ties to the lower member index), so each is
// within one bucket of size * share: 8 equal members need 8 buckets, 3 equal members or 32:12
// need 128 (in general about 50 buckets for the smallest share unless it divides evenly). At
// the cap a member whose share is below 1/65536 may get no bucket at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spraynet {

class BucketTable {
 public:
  static constexpr uint16_t kNoMember = 0xFFFF;
  static constexpr uint32_t kMaxSize = 65536;
  static constexpr size_t kMaxMembers = kNoMember;  // member indices are 0..65534
  static constexpr double kShareTolerance = 0.02;

  // An empty table: select() answers kNoMember.
  BucketTable() = default;

  // weights[i] is member i's weight; weight 0 gets no bucket; all zero (or no members) gives an
  // empty table. Throws std::invalid_argument for more than kMaxMembers members.
  static BucketTable build(std::span<const uint32_t> weights);

  // A table for `weights` laid out so that as few buckets as possible change member relative to
  // `previous` (flows in unchanged buckets keep their path): each member keeps its old buckets
  // up to its new count and only the surplus moves. The size is the smallest power of two
  // >= previous.size() that meets the 2% rule: never smaller, since halving would remap half
  // of all flows. Members are matched by index; buckets of members beyond the new weights'
  // size, or now at weight 0, are reassigned.
  static BucketTable rebuild(const BucketTable& previous, std::span<const uint32_t> weights);

  // The size build() picks for these weights (0 when every weight is 0).
  static uint32_t required_size(std::span<const uint32_t> weights);

  uint16_t select(uint32_t hash) const {
    return buckets_.empty() ? kNoMember : buckets_[hash & mask_];
  }
  uint32_t size() const { return static_cast<uint32_t>(buckets_.size()); }
  bool empty() const { return buckets_.empty(); }
  // Number of members the table was built for (including those with weight 0).
  size_t member_count() const { return counts_.size(); }
  uint32_t buckets_of(uint16_t member) const {
    return member < counts_.size() ? counts_[member] : 0;
  }
  std::span<const uint16_t> buckets() const { return buckets_; }
  // Heap bytes of the table (its buckets and per-member counts).
  uint64_t heap_bytes() const {
    return buckets_.capacity() * sizeof(uint16_t) + counts_.capacity() * sizeof(uint32_t);
  }

 private:
  BucketTable(std::vector<uint16_t> buckets, std::vector<uint32_t> counts);

  std::vector<uint16_t> buckets_;
  std::vector<uint32_t> counts_;  // buckets per member
  uint32_t mask_ = 0;
};

}  // namespace spraynet
