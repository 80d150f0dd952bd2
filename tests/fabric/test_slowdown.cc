// fabric/slowdown.h: the ideal FCT over a given path (packet by packet through store-and-forward
// hops of their own rates and lanes, delays and the ACK back), --slowdown-bins parsing, the
// nearest-rank percentile with censored entries, edge and ventile bins, the bootstrap interval.
#include "fabric/slowdown.h"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

namespace sf = spraynet::fabric;
using sf::PathHop;
using sf::SlowdownSample;

namespace {

// Wire times at 100 Gbit/s (frame + 24 bytes of preamble, FCS and gap): a 4096-byte first
// packet (with the RETH) 335.52 ns, a 4096-byte last one 334.24 ns, the ACK 6.88 ns.
constexpr double kFirst = 335.52, kMiddle = 334.24, kAck = 6.88;

}  // namespace

TEST_CASE("ideal FCT of one packet: serialised on each hop, delays and the ACK back") {
  const std::vector<PathHop> path = {{100, 1000}, {100, 1000}};
  // 1000 bytes: a 1074-byte frame, 87.84 ns a hop.
  CHECK(sf::ideal_fct_ns(1000, 4096, path) == Approx(2 * 87.84 + 4 * 1000 + 2 * kAck));
}

TEST_CASE("ideal FCT with equal rates: the message once plus its largest packet per other hop") {
  const std::vector<PathHop> path = {{100, 0}, {100, 0}};
  CHECK(sf::ideal_fct_ns(8192, 4096, path) == Approx(kFirst + kMiddle + kFirst + 2 * kAck));
  const std::vector<PathHop> four = {{100, 500}, {100, 700}, {100, 700}, {100, 500}};
  CHECK(sf::ideal_fct_ns(3 * 4096, 4096, four) ==
        Approx(kFirst + 2 * kMiddle + 3 * kFirst + 2 * 2400 + 4 * kAck));
}

TEST_CASE("ideal FCT with a slower hop: the whole message at its rate") {
  const std::vector<PathHop> path = {{100, 0}, {25, 0}, {100, 0}};
  // Hop 2 takes 4x as long; the last packet one more of its times on hop 3.
  CHECK(sf::ideal_fct_ns(8192, 4096, path) ==
        Approx(kFirst + 4 * kFirst + 4 * kMiddle + kMiddle + kAck * (1 + 4 + 1)));
}

TEST_CASE("ideal FCT over lanes: packets take turns on parallel links and may overtake") {
  std::vector<PathHop> path = {{100, 0}, {25, 0, 2}, {100, 0}};
  // Two full packets: the second on the other lane, then behind the first on hop 3.
  CHECK(sf::ideal_fct_ns(8192, 4096, path) ==
        Approx(2 * kFirst + kMiddle + 4 * kFirst + kAck * 6).margin(1e-6));
  // A 1-byte last packet overtakes the first on the slow hop: the first arrives last.
  CHECK(sf::ideal_fct_ns(4097, 4096, path) == Approx(kFirst + 4 * kFirst + kFirst + kAck * 6));
  // One lane: it stays behind the first (its 62-byte frame takes 6.88 ns, as long as an ACK).
  path[1].lanes = 1;
  CHECK(sf::ideal_fct_ns(4097, 4096, path) ==
        Approx(kFirst + 4 * kFirst + kFirst + kAck + kAck * 6));
}

TEST_CASE("--slowdown-bins: the names, an increasing list, anything else refused") {
  CHECK(sf::parse_slowdown_bins("deciles").kind == sf::SlowdownBinning::kDeciles);
  CHECK(sf::parse_slowdown_bins("ventiles").kind == sf::SlowdownBinning::kVentiles);
  CHECK(sf::parse_slowdown_bins("bdp").kind == sf::SlowdownBinning::kBdp);
  const sf::SlowdownBinSpec l = sf::parse_slowdown_bins("1000,100000,2147483648");
  CHECK(l.kind == sf::SlowdownBinning::kList);
  CHECK(l.edges == std::vector<uint64_t>{1000, 100000, 2147483648ull});
  for (const char* bad :
       {"", "Deciles", "100,100", "200,100", "0", "1,,2", "1,", "-5", "1e6", "2147483649"}) {
    INFO(bad);
    CHECK_THROWS_WITH(sf::parse_slowdown_bins(bad), Catch::Contains("ventiles"));
  }
}

TEST_CASE("nearest-rank percentiles: censored when an entry at or below the rank is") {
  std::vector<SlowdownSample> s;
  for (int i = 1; i <= 100; ++i) s.push_back({static_cast<double>(i), 1000, 0});
  CHECK(sf::censored_percentile(s, 0.5).value == 50);
  CHECK(sf::censored_percentile(s, 0.99).value == 99);
  CHECK(sf::censored_percentile(s, 0.0).value == 1);
  CHECK_FALSE(sf::censored_percentile(s, 0.99).censored);
  s[99].censored = 1;  // the largest: p99 (rank 99) is still exact
  CHECK_FALSE(sf::censored_percentile(s, 0.99).censored);
  s[60].censored = 1;  // rank 61: p99 and p95 are lower bounds now, p50 is not
  CHECK(sf::censored_percentile(s, 0.99).censored);
  CHECK(sf::censored_percentile(s, 0.95).censored);
  CHECK_FALSE(sf::censored_percentile(s, 0.5).censored);
  const sf::SlowdownBin b = sf::bin_stats(s, 0, 1000);
  CHECK(b.count == 100);
  CHECK(b.unfinished == 2);
  CHECK(b.mean.value == Approx(50.5));
  CHECK(b.mean.censored);
  CHECK(b.p50.value == 50);
  CHECK(b.p99.censored);
  CHECK(sf::censored_percentile({}, 0.5).value == 0);
}

TEST_CASE("bins: (lo, hi] by edges, or HPCC's 20 rank chunks by size") {
  std::vector<SlowdownSample> s;
  for (uint32_t i = 1; i <= 40; ++i) s.push_back({1.0 + i / 100.0, i * 100, 0});
  const auto by_edges = sf::bin_slowdowns(s, sf::SlowdownBinning::kList, {1000, 2147483648ull});
  REQUIRE(by_edges.size() == 2);
  CHECK(by_edges[0].count == 10);  // 100..1000
  CHECK(by_edges[1].count == 30);
  CHECK(by_edges[1].lo_bytes == 1000);
  const auto ventiles = sf::bin_slowdowns(s, sf::SlowdownBinning::kVentiles, {});
  REQUIRE(ventiles.size() == 20);
  for (size_t k = 0; k < 20; ++k) {
    CHECK(ventiles[k].count == 2);
    CHECK(ventiles[k].lo_bytes == (2 * k + 1) * 100);
    CHECK(ventiles[k].hi_bytes == (2 * k + 2) * 100);
  }
  // Fewer than 20: some chunks are empty, none is lost.
  s.resize(7);
  uint64_t n = 0;
  for (const sf::SlowdownBin& b : sf::bin_slowdowns(s, sf::SlowdownBinning::kVentiles, {})) {
    n += b.count;
  }
  CHECK(n == 7);
}

TEST_CASE("bootstrap interval: around the value, the same for the same seed") {
  std::vector<SlowdownSample> same(50, SlowdownSample{2.0, 1000, 0});
  const sf::BootstrapCi c = sf::bootstrap_ci(same, 100, 7);
  CHECK(c.mean_lo == Approx(2.0));
  CHECK(c.p99_hi == Approx(2.0));
  std::vector<SlowdownSample> s;
  for (int i = 0; i < 200; ++i) s.push_back({1.0 + (i % 17) / 10.0, 1000, 0});
  const sf::BootstrapCi a = sf::bootstrap_ci(s, 200, 3), b = sf::bootstrap_ci(s, 200, 3);
  CHECK(a.mean_lo == b.mean_lo);
  CHECK(a.mean_lo < a.mean_hi);
  CHECK(sf::t95(3) == Approx(4.303));
  CHECK(sf::t95(100) == Approx(1.96));
}
