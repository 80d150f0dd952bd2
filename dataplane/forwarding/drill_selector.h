// DRILL (Ghorbani et al., "DRILL: Micro Load Balancing for Low-latency Data Center Networks",
// SIGCOMM 2017): per packet, look at d = 2 members drawn at random plus the m = 1 member that
// won last time, send to the one with the fewest queued bytes, and remember it. The memory
// makes a lightly loaded member sticky without scanning all of them; the random samples keep
// discovering better ones. Per-packet choice reorders within a flow: meant for sprayed traffic
// whose receiver reorders.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>

#include "dataplane/forwarding/bucket_table.h"
#include "dataplane/forwarding/path_load.h"

namespace spraynet {

struct DrillCounters {
  uint64_t decisions = 0;           // packets given a member
  uint64_t remembered_kept = 0;     // ... whose member was the remembered one
  uint64_t full_scans = 0;          // none of the three candidates was eligible: scanned all
  uint64_t no_eligible_member = 0;  // no member eligible at all: kNoMember returned
};

class DrillSelector {
 public:
  static constexpr uint16_t kNoMember = BucketTable::kNoMember;
  static constexpr int kSamples = 2;  // d

  // The random samples come from this object's own generator: the same seed and the same
  // sequence of loads give the same choices.
  explicit DrillSelector(uint64_t seed) : seed_(seed) {}

  // The member (index into `members`) for the next packet. Candidates are the remembered member
  // and two distinct random members; the eligible one with the fewest queued bytes wins, ties
  // to the remembered one (fewer changes of path, less reordering). When none of them is
  // eligible, every member is scanned: an ineligible member is never chosen while an eligible
  // one exists. kNoMember when none is eligible. members.size() must be below kNoMember.
  uint16_t select(std::span<const PathLoad> members);

  uint16_t remembered() const { return remembered_; }
  const DrillCounters& counters() const { return counters_; }
  // Heap bytes: the generator, once the first packet has made it.
  uint64_t heap_bytes() const { return rng_ != nullptr ? sizeof(std::mt19937_64) : 0; }

 private:
  // The generator (2.5 KB of state) is made, seeded, at the first select(): every group of a
  // switch has a selector, and only DRILL groups draw from it. The draws are the same.
  std::mt19937_64& rng() {
    if (rng_ == nullptr) rng_ = std::make_unique<std::mt19937_64>(seed_);
    return *rng_;
  }

  uint64_t seed_;
  std::unique_ptr<std::mt19937_64> rng_;
  uint16_t remembered_ = kNoMember;
  DrillCounters counters_;
};

}  // namespace spraynet
