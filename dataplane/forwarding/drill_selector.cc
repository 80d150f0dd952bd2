#include "dataplane/forwarding/drill_selector.h"

#include "dataplane/forwarding/flowlet_table.h"

namespace spraynet {

uint16_t DrillSelector::select(std::span<const PathLoad> members) {
  const uint32_t n = static_cast<uint32_t>(members.size());
  if (n == 0) {
    ++counters_.no_eligible_member;
    return kNoMember;
  }
  // One 64-bit draw gives both samples; the second is drawn among the other n - 1 members so
  // that the two are distinct.
  const uint64_t r = rng()();
  const uint32_t first = scale_to_range(static_cast<uint32_t>(r), n);
  uint32_t second = first;
  if (n > 1) {
    second = scale_to_range(static_cast<uint32_t>(r >> 32), n - 1);
    if (second >= first) ++second;
  }

  uint16_t best = kNoMember;
  uint64_t best_bytes = 0;
  auto consider = [&](uint32_t i) {
    if (i >= n || !members[i].eligible) return;
    if (best == kNoMember || members[i].queued_bytes < best_bytes) {
      best = static_cast<uint16_t>(i);
      best_bytes = members[i].queued_bytes;
    }
  };
  consider(remembered_);  // first, so that it wins ties
  consider(first);
  consider(second);

  if (best == kNoMember) {
    ++counters_.full_scans;
    best = least_loaded_eligible(members, static_cast<uint32_t>(rng()()));
    if (best == kNoMember) {
      ++counters_.no_eligible_member;
      return kNoMember;
    }
  }
  ++counters_.decisions;
  if (best == remembered_) ++counters_.remembered_kept;
  remembered_ = best;
  return best;
}

}  // namespace spraynet
