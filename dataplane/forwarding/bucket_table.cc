#include "dataplane/forwarding/bucket_table.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spraynet {

namespace {

void check_member_count(std::span<const uint32_t> weights) {
  if (weights.size() > BucketTable::kMaxMembers) {
    throw std::invalid_argument("bucket table: " + std::to_string(weights.size()) +
                                " members, at most " + std::to_string(BucketTable::kMaxMembers));
  }
}

uint64_t total_weight(std::span<const uint32_t> weights) {
  return std::accumulate(weights.begin(), weights.end(), uint64_t{0});
}

// Largest-remainder (Hamilton) apportionment of `size` buckets by weight. total > 0.
std::vector<uint32_t> apportion(uint32_t size, std::span<const uint32_t> weights, uint64_t total) {
  std::vector<uint32_t> counts(weights.size());
  std::vector<uint64_t> remainders(weights.size());
  uint64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const uint64_t scaled = uint64_t{size} * weights[i];  // < 2^16 * 2^32: no overflow
    counts[i] = static_cast<uint32_t>(scaled / total);
    remainders[i] = scaled % total;
    given += counts[i];
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainders[a] > remainders[b]; });
  // A remainder is non-zero only for a non-zero weight, so weight 0 never gets a bucket.
  for (size_t k = 0; given < size; ++k, ++given) ++counts[order[k]];
  return counts;
}

bool within_tolerance(uint32_t size, std::span<const uint32_t> weights, uint64_t total,
                      const std::vector<uint32_t>& counts) {
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0) continue;
    const double ideal = static_cast<double>(size) * weights[i] / static_cast<double>(total);
    if (std::fabs(counts[i] - ideal) > BucketTable::kShareTolerance * ideal) return false;
  }
  return true;
}

// The smallest power of two >= min_size that meets the tolerance (largest remainder is not
// monotone in the size: a size can fail although a smaller one passed), capped at kMaxSize.
uint32_t smallest_size_from(std::span<const uint32_t> weights, uint32_t min_size) {
  check_member_count(weights);
  const uint64_t total = total_weight(weights);
  if (total == 0) return 0;
  const auto nonzero = std::count_if(weights.begin(), weights.end(), [](uint32_t w) { return w; });
  uint32_t size = 1;
  while (size < std::max(static_cast<uint32_t>(nonzero), min_size)) size <<= 1;
  for (; size < BucketTable::kMaxSize; size <<= 1) {
    if (within_tolerance(size, weights, total, apportion(size, weights, total))) return size;
  }
  return BucketTable::kMaxSize;
}

}  // namespace

BucketTable::BucketTable(std::vector<uint16_t> buckets, std::vector<uint32_t> counts)
    : buckets_(std::move(buckets)),
      counts_(std::move(counts)),
      mask_(buckets_.empty() ? 0 : static_cast<uint32_t>(buckets_.size() - 1)) {}

uint32_t BucketTable::required_size(std::span<const uint32_t> weights) {
  return smallest_size_from(weights, 1);
}

BucketTable BucketTable::build(std::span<const uint32_t> weights) {
  const uint32_t size = required_size(weights);
  if (size == 0) return BucketTable({}, std::vector<uint32_t>(weights.size(), 0));
  std::vector<uint32_t> counts = apportion(size, weights, total_weight(weights));
  // Contiguous runs, member 0 first, as VPP lays them out; the hash spreads flows uniformly over
  // bucket indices, so the layout does not bias the split.
  std::vector<uint16_t> buckets;
  buckets.reserve(size);
  for (size_t m = 0; m < counts.size(); ++m) buckets.insert(buckets.end(), counts[m], uint16_t(m));
  return BucketTable(std::move(buckets), std::move(counts));
}

BucketTable BucketTable::rebuild(const BucketTable& previous, std::span<const uint32_t> weights) {
  if (previous.empty()) return build(weights);
  const uint32_t size = smallest_size_from(weights, previous.size());
  if (size == 0) return BucketTable({}, std::vector<uint32_t>(weights.size(), 0));
  const std::vector<uint32_t> target = apportion(size, weights, total_weight(weights));

  // Growing a power-of-two table by tiling it keeps every hash on its member:
  // hash & (size - 1) & (old - 1) == hash & (old - 1).
  std::vector<uint16_t> buckets(size);
  for (uint32_t j = 0; j < size; ++j) buckets[j] = previous.buckets_[j & previous.mask_];

  // Keep each member's buckets up to its target; free the rest (members gone or over target).
  std::vector<uint32_t> kept(weights.size(), 0);
  for (uint16_t& b : buckets) {
    if (b < weights.size() && kept[b] < target[b]) {
      ++kept[b];
    } else {
      b = kNoMember;
    }
  }
  // Hand the freed buckets to the members still short of their target, in member order.
  size_t member = 0;
  for (uint16_t& b : buckets) {
    if (b != kNoMember) continue;
    while (kept[member] == target[member]) ++member;
    b = static_cast<uint16_t>(member);
    ++kept[member];
  }
  return BucketTable(std::move(buckets), target);
}

}  // namespace spraynet
