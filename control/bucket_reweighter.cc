#include "control/bucket_reweighter.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace spraynet::control {

std::string ReweightConfig::check() const {
  if (idle_buckets == 0) return "idle_buckets: must be > 0";
  // Weights are summed over up to BucketTable::kMaxMembers members in 32 bits.
  if (idle_buckets > 65536) return "idle_buckets: must be <= 65536";
  // u_target = 1 would divide by zero; above it the formula would reward load.
  if (!(target_utilisation >= 0.0 && target_utilisation < 1.0)) {
    return "target_utilisation: must be in [0, 1)";
  }
  return {};
}

uint32_t reweighted_buckets(double utilisation, bool usable, const ReweightConfig& config) {
  if (!usable) return 0;
  const double u = std::isnan(utilisation) ? 1.0 : std::clamp(utilisation, 0.0, 1.0);
  const double keep = std::min(1.0, (1.0 - u) / (1.0 - config.target_utilisation));
  // std::lround: halves away from zero, the usual "round". keep is in [0, 1], so the result is in
  // [0, idle_buckets].
  return static_cast<uint32_t>(std::lround(config.idle_buckets * keep));
}

BucketReweighter::BucketReweighter(const ReweightConfig& config) : config_(config) {
  if (const std::string reason = config_.check(); !reason.empty()) {
    throw std::invalid_argument("reweight: " + reason);
  }
}

uint32_t BucketReweighter::buckets(const LinkState& link) const {
  // Watchdog drop mode is per class and excluded at selection (see the header).
  return reweighted_buckets(link.utilisation, link.up, config_);
}

std::vector<uint32_t> BucketReweighter::weights(std::span<const LinkState> links,
                                                std::span<const uint16_t> member_ports) const {
  std::vector<uint32_t> w;
  w.reserve(member_ports.size());
  for (uint16_t port : member_ports) w.push_back(port < links.size() ? buckets(links[port]) : 0);
  return w;
}

}  // namespace spraynet::control
