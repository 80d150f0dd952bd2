#include "nic_emu/qp_heat_map.h"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

using spraynet::nic_emu::QpArrivals;
using spraynet::nic_emu::QpHeatMap;

TEST_CASE("heat map: counts per QP and uplink, as a map of maps would") {
  QpHeatMap heat(3, 1000);
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> expect;
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t ip = 0x0A000000 + rng() % 5;
    const uint32_t qp = 0x100 + rng() % 40;
    const auto up = static_cast<uint16_t>(rng() % 3);
    REQUIRE(heat.count(ip, qp, up));
    auto& v = expect[{ip, qp}];
    v.resize(3);
    ++v[up];
  }
  REQUIRE(heat.size() == expect.size());
  CHECK(heat.counts().size() == heat.size() * 3);
  for (const auto& [k, v] : expect) {
    const auto i = heat.find(k.first, k.second);
    REQUIRE(i);
    CHECK(heat.entries()[*i].src_ip == k.first);
    CHECK(heat.entries()[*i].dest_qp == k.second);
    const auto got = heat.per_uplink(*i);
    CHECK(std::vector<uint64_t>(got.begin(), got.end()) == v);
  }
  CHECK_FALSE(heat.find(0x0A000009, 0x100));
  CHECK_THROWS_AS(heat.count(1, 1, 3), std::out_of_range);
}

TEST_CASE("heat map: a full map counts nothing new, keeps counting what it holds") {
  QpHeatMap heat(1, 2);
  CHECK(heat.count(1, 10, 0));
  CHECK(heat.count(1, 11, 0));
  CHECK_FALSE(heat.count(1, 12, 0));
  CHECK(heat.count(1, 10, 0));
  CHECK(heat.size() == 2);
  CHECK(heat.per_uplink(*heat.find(1, 10))[0] == 2);
  CHECK_FALSE(heat.find(1, 12));
}

TEST_CASE("heat map: one uplink costs 16 bytes a QP plus the index, not a 16-uplink array") {
  QpHeatMap heat(1, 1'000'000);
  for (uint32_t q = 0; q < 100'000; ++q) heat.count(0x0A000001, q, 0);
  CHECK(heat.counts().size() == 100'000);
  // entries (8 B) and counts (8 B) with vector slack under 2x, the index's nodes and buckets.
  CHECK(heat.memory_bytes() < 100'000 * (2 * 16 + 8 + 8 + 8 + 16));
}

TEST_CASE("heat map: rebuilt from its entries and counts; bad shapes refused") {
  QpHeatMap heat(2, 10);
  heat.count(5, 6, 1);
  heat.count(7, 8, 0);
  const QpHeatMap copy(2, heat.entries(), heat.counts());
  CHECK(copy.size() == 2);
  CHECK(copy.per_uplink(*copy.find(5, 6))[1] == 1);
  CHECK(copy.per_uplink(*copy.find(7, 8))[0] == 1);
  CHECK_THROWS_AS(QpHeatMap(2, heat.entries(), {1, 2, 3}), std::invalid_argument);
  CHECK_THROWS_AS(QpHeatMap(2, {QpArrivals{1, 2}, QpArrivals{1, 2}}, {0, 0, 0, 0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(QpHeatMap(0, 10), std::invalid_argument);
  CHECK_THROWS_AS(QpHeatMap(17, 10), std::invalid_argument);
}
