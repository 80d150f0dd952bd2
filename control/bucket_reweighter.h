// Bucket reweighting (DESIGN.md "Bucket reweighting"): each path owns B = 32 buckets at idle; a
// path at utilisation u keeps
//
//     round(B * min(1, (1 - u) / (1 - u_target)))      u_target = 0.6
//
// so a path at 85% keeps 12 of 32, one at or below the target keeps all 32, and one at 100%
// keeps none. Down paths keep 0. A path with a class in PFC-watchdog drop mode keeps its
// buckets: the watchdog is per (port, class), and the table is shared by every class, so the
// stormed class is kept off the link at selection instead (SwitchNode gives each lossless class
// its own eligibility view: the bucket's member is ineligible for that class only and its
// packets are rehashed over the members it may use), while lossy traffic and the other classes
// keep the link's share. The counts are weights handed to
// PathSelector::set_weights, which lays them out in a power-of-two BucketTable: what matters is
// each path's share of the group's total, not the absolute number.
//
// When every member of a group gets 0 (all down, dropping, or at or above 100%), the table is
// empty and PathSelector spreads the hash over the members that are still eligible (counted in
// its empty_table counter); with none eligible it answers kNoPort and the switch drops the packet
// as no_eligible_port. So an all-zero result never blackholes traffic that has somewhere to go.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "control/link_state_table.h"

namespace spraynet::control {

struct ReweightConfig {
  uint32_t idle_buckets = 32;       // B: what a path at or below the target keeps
  double target_utilisation = 0.6;  // u_target, in [0, 1)

  // Empty when valid, else "key: reason".
  std::string check() const;
};

// The formula, pure. u is clamped to [0, 1] first (a counter glitch can read slightly above 1 or,
// after a rate change, below 0); NaN counts as 1, so an unreadable path takes no new flows.
// `usable` false (down) gives 0.
uint32_t reweighted_buckets(double utilisation, bool usable, const ReweightConfig& config);

class BucketReweighter {
 public:
  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  explicit BucketReweighter(const ReweightConfig& config = {});

  // The buckets one link keeps: its utilisation EWMA, 0 when down (not for watchdog drop mode,
  // which is per class: see above).
  uint32_t buckets(const LinkState& link) const;
  // One weight per member of a group, in member order; `member_ports` index `links`. A member
  // port beyond the table gets 0 (it cannot be measured, so it is not trusted with flows).
  std::vector<uint32_t> weights(std::span<const LinkState> links,
                                std::span<const uint16_t> member_ports) const;

  const ReweightConfig& config() const { return config_; }

 private:
  ReweightConfig config_;
};

}  // namespace spraynet::control
