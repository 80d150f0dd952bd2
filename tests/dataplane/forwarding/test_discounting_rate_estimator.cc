#include "dataplane/forwarding/discounting_rate_estimator.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

using namespace spraynet;

namespace {

constexpr uint64_t kUs = 1000;

// The register as the paper writes it, stepped by hand: X += bytes per packet, X *= 1 - alpha
// at every multiple of T_dre.
struct HandDre {
  double x = 0;
  uint64_t period = 0;
  uint64_t t_dre;
  double alpha;
  void to(uint64_t now) {
    while (period < now / t_dre) {
      ++period;
      x *= 1 - alpha;
    }
  }
};

}  // namespace

TEST_CASE("DRE after a known byte sequence: X += bytes, X *= 1 - alpha every T_dre") {
  const DreSettings s{20 * kUs, 0.1, 3};
  DiscountingRateEstimator dre(s, 10.0);
  HandDre hand{0, 0, 20 * kUs, 0.1};
  // 1500-byte packets every 1.2 us (10 Gbit/s) for 300 us, then 200 us of silence.
  uint64_t now = 0;
  for (int i = 0; i < 250; ++i, now += 1200) {
    dre.add(1500, now);
    hand.to(now);
    hand.x += 1500;
    REQUIRE(dre.value(now) == Approx(hand.x).epsilon(1e-12));
  }
  for (uint64_t t = now; t <= now + 200 * kUs; t += 7 * kUs) {
    hand.to(t);
    REQUIRE(dre.value(t) == Approx(hand.x).epsilon(1e-12));
  }
  // At line rate the register settles near C * tau = 1.25 B/ns * 200 us = 250000 bytes (less
  // the decay within one period): the metric is then at its top level, 7.
  DiscountingRateEstimator busy(s, 10.0);
  for (uint64_t t = 0; t < 2000 * kUs; t += 1200) busy.add(1500, t);
  const double settled = busy.value(2000 * kUs - 1200);
  CHECK(settled > 0.85 * 250000.0);
  CHECK(settled < 1.0 * 250000.0 + 25000.0);
  CHECK(busy.metric(2000 * kUs - 1200) >= 6);
}

TEST_CASE("DRE metric: floor(X / (C * tau) * 2^bits), capped at 2^bits - 1") {
  const DreSettings s{50 * kUs, 0.2, 3};
  // 100 Gbit/s: C * tau = 12.5 B/ns * 250 us = 3125000 bytes; a level is 390625 bytes.
  DiscountingRateEstimator dre(s, 100.0);
  CHECK(dre.metric(0) == 0);
  dre.add(390624, 0);
  CHECK(dre.metric(0) == 0);
  dre.add(1, 0);
  CHECK(dre.metric(0) == 1);
  dre.add(3 * 390625, 0);
  CHECK(dre.metric(0) == 4);
  dre.add(10'000'000, 0);
  CHECK(dre.metric(0) == 7);
  // One period later X is 0.8 of itself; many periods later it is gone.
  const double x = dre.value(0);
  CHECK(dre.value(50 * kUs) == Approx(0.8 * x));
  CHECK(dre.metric(100'000 * kUs) == 0);

  // Two bits: four levels of 781250 bytes.
  DiscountingRateEstimator two(DreSettings{50 * kUs, 0.2, 2}, 100.0);
  two.add(781250 * 2, 0);
  CHECK(two.metric(0) == 2);
  two.add(10'000'000, 0);
  CHECK(two.metric(0) == 3);

  // A link slowed to 25 Gbit/s: the same bytes are four times the metric.
  DiscountingRateEstimator slow(s, 100.0);
  slow.add(390625, 0);
  CHECK(slow.metric(0) == 1);
  slow.set_rate_gbps(25.0);
  CHECK(slow.metric(0) == 4);
}

TEST_CASE("DRE refuses settings outside their ranges, naming the key") {
  CHECK_THROWS_WITH(DiscountingRateEstimator(DreSettings{0, 0.2, 3}, 100),
                    Catch::Contains("t_dre"));
  CHECK_THROWS_WITH(DiscountingRateEstimator(DreSettings{50 * kUs, 0.0, 3}, 100),
                    Catch::Contains("alpha: must be a number in (0, 1]"));
  CHECK_THROWS_WITH(DiscountingRateEstimator(DreSettings{50 * kUs, 1.5, 3}, 100),
                    Catch::Contains("alpha"));
  CHECK_THROWS_WITH(DiscountingRateEstimator(DreSettings{50 * kUs, 0.2, 4}, 100),
                    Catch::Contains("quantisation_bits: must be a whole number in [1, 3]"));
  CHECK_THROWS_AS(DiscountingRateEstimator(DreSettings{}, 0.0), std::invalid_argument);
  DiscountingRateEstimator ok(DreSettings{}, 100);
  CHECK_THROWS_AS(ok.set_rate_gbps(-1), std::invalid_argument);
}

TEST_CASE("DRE: a clock that steps back decays nothing") {
  DiscountingRateEstimator dre(DreSettings{10 * kUs, 0.5, 3}, 100);
  dre.add(1000, 100 * kUs);
  dre.add(1000, 50 * kUs);
  CHECK(dre.value(50 * kUs) == 2000);
  CHECK(dre.value(110 * kUs) == 1000);
}
