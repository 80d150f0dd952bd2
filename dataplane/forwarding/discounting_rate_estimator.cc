#include "dataplane/forwarding/discounting_rate_estimator.h"

#include <cmath>
#include <stdexcept>

namespace spraynet {

std::string check_dre_settings(const DreSettings& s) {
  if (s.t_dre_ns < 1 || s.t_dre_ns > 1'000'000'000) {
    return "t_dre: must be microseconds in [0.001, 1000000], got " +
           std::to_string(static_cast<double>(s.t_dre_ns) / 1000.0);
  }
  if (!(s.alpha > 0.0 && s.alpha <= 1.0)) {
    return "alpha: must be a number in (0, 1], got " + std::to_string(s.alpha);
  }
  if (s.bits < 1 || s.bits > 3) {
    return "quantisation_bits: must be a whole number in [1, 3] (CONGA's CE field has 3 bits), "
           "got " +
           std::to_string(s.bits);
  }
  return "";
}

DiscountingRateEstimator::DiscountingRateEstimator(const DreSettings& s, double rate_gbps)
    : t_dre_ns_(s.t_dre_ns),
      keep_(1.0 - s.alpha),
      levels_(uint64_t{1} << s.bits),
      alpha_(s.alpha),
      max_metric_(static_cast<uint8_t>((1u << s.bits) - 1)) {
  if (const std::string why = check_dre_settings(s); !why.empty()) {
    throw std::invalid_argument("DRE: " + why);
  }
  set_rate_gbps(rate_gbps);
}

void DiscountingRateEstimator::set_rate_gbps(double rate_gbps) {
  if (!(rate_gbps > 0.0)) throw std::invalid_argument("DRE: the link rate must be above 0");
  // C * tau in bytes: rate (bit/ns) / 8 * T_dre (ns) / alpha.
  const double c_tau = rate_gbps / 8.0 * static_cast<double>(t_dre_ns_) / alpha_;
  bytes_per_level_ = c_tau / static_cast<double>(levels_);
}

void DiscountingRateEstimator::decay_to(uint64_t now_ns) {
  const uint64_t period = now_ns / t_dre_ns_;
  if (period <= period_) return;  // a clock that steps back decays nothing
  const uint64_t k = period - period_;
  period_ = period;
  if (x_ == 0.0) return;
  x_ *= std::pow(keep_, static_cast<double>(k));
}

void DiscountingRateEstimator::add(uint32_t bytes, uint64_t now_ns) {
  decay_to(now_ns);
  x_ += bytes;
}

double DiscountingRateEstimator::value(uint64_t now_ns) {
  decay_to(now_ns);
  return x_;
}

uint8_t DiscountingRateEstimator::metric(uint64_t now_ns) {
  decay_to(now_ns);
  const double level = std::floor(x_ / bytes_per_level_);
  return level >= max_metric_ ? max_metric_ : static_cast<uint8_t>(level);
}

}  // namespace spraynet
