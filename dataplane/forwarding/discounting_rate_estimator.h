// CONGA's discounting rate estimator (DRE; Alizadeh et al., SIGCOMM 2014, section 3.3): one
// register X per link, X += the bytes of each packet sent, and every T_dre X *= (1 - alpha). X
// then tracks the link's rate times tau = T_dre / alpha, and the congestion metric is X over
// C * tau (C the link's rate), quantised to `bits` bits: 0 for an idle link, 2^bits - 1 at or
// above line rate.
//
// The decay runs on a grid of T_dre (the multiples of T_dre since time 0, as a hardware timer
// would), applied lazily: when the register is next touched, every decay due since it was last
// touched is applied at once, (1 - alpha)^k for k periods. No timer, and the same X as one.
#pragma once

#include <cstdint>
#include <string>

namespace spraynet {

struct DreSettings {
  uint64_t t_dre_ns = 50'000;  // conweave-ns3 network-load-balance.cc: conga_dreTime 50 us
  double alpha = 0.2;          // conga_alpha 0.2
  unsigned bits = 3;           // conga_quantizeBit 3; CONGA's header has 3 bits for CE
};

// Empty when usable, else what is wrong (the key and its range).
std::string check_dre_settings(const DreSettings& s);

class DiscountingRateEstimator {
 public:
  // Throws std::invalid_argument for settings check_dre_settings refuses or rate_gbps <= 0.
  DiscountingRateEstimator(const DreSettings& settings, double rate_gbps);

  // The link's rate changed (the metric's C); X is kept. Throws std::invalid_argument for <= 0.
  void set_rate_gbps(double rate_gbps);

  // A packet of `bytes` sent at now_ns.
  void add(uint32_t bytes, uint64_t now_ns);
  // X at now_ns, after the decays due by then.
  double value(uint64_t now_ns);
  // floor(X / (C * tau) * 2^bits), at most 2^bits - 1.
  uint8_t metric(uint64_t now_ns);

 private:
  void decay_to(uint64_t now_ns);

  double x_ = 0.0;
  uint64_t period_ = 0;  // the T_dre period X was last brought to (now_ns / t_dre)
  uint64_t t_dre_ns_;
  double keep_;      // 1 - alpha
  uint64_t levels_;  // 2^bits
  double alpha_;
  double bytes_per_level_;  // C * tau / 2^bits, in bytes
  uint8_t max_metric_;
};

}  // namespace spraynet
