#include "dataplane/route_table.h"

#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint32_t ip(unsigned a, unsigned b, unsigned c, unsigned d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// Longest-prefix match by linear scan: the reference the LPM is checked against.
struct Route {
  uint32_t prefix;
  uint8_t depth;
  uint32_t group;
};
std::optional<uint32_t> reference_lookup(const std::vector<Route>& routes, uint32_t addr) {
  int best_depth = -1;
  std::optional<uint32_t> best;
  for (const Route& r : routes) {
    const uint32_t mask = r.depth == 0 ? 0 : ~uint32_t{0} << (32 - r.depth);
    if ((addr & mask) == r.prefix && r.depth > best_depth) {
      best_depth = r.depth;
      best = r.group;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("longest prefix wins") {
  RouteTable t("rt_lpm", 64);
  t.add(ip(10, 0, 0, 0), 8, 1);
  t.add(ip(10, 1, 0, 0), 16, 2);
  t.add(ip(10, 1, 2, 0), 24, 3);
  t.add(ip(10, 1, 2, 128), 25, 4);
  t.add(ip(10, 1, 2, 200), 32, 5);
  CHECK(t.route_count() == 5);
  CHECK(t.lookup(ip(10, 9, 9, 9)) == 1u);
  CHECK(t.lookup(ip(10, 1, 9, 9)) == 2u);
  CHECK(t.lookup(ip(10, 1, 2, 1)) == 3u);
  CHECK(t.lookup(ip(10, 1, 2, 127)) == 3u);
  CHECK(t.lookup(ip(10, 1, 2, 128)) == 4u);
  CHECK(t.lookup(ip(10, 1, 2, 199)) == 4u);
  CHECK(t.lookup(ip(10, 1, 2, 200)) == 5u);
  CHECK(t.lookup(ip(10, 1, 2, 201)) == 4u);
  CHECK_FALSE(t.lookup(ip(11, 0, 0, 1)).has_value());  // no default route yet

  // Removing a more specific route uncovers the next one.
  CHECK(t.remove(ip(10, 1, 2, 128), 25));
  CHECK(t.lookup(ip(10, 1, 2, 130)) == 3u);
  CHECK_FALSE(t.remove(ip(10, 1, 2, 128), 25));
  CHECK(t.route_count() == 4);
}

TEST_CASE("the default route answers what nothing else matches") {
  RouteTable t("rt_default", 16);
  t.add(ip(192, 168, 0, 0), 16, 7);
  CHECK_FALSE(t.lookup(ip(8, 8, 8, 8)).has_value());
  t.add(0, 0, 42);
  CHECK(t.route_count() == 2);
  CHECK(t.lookup(ip(8, 8, 8, 8)) == 42u);
  CHECK(t.lookup(ip(0, 0, 0, 0)) == 42u);
  CHECK(t.lookup(ip(255, 255, 255, 255)) == 42u);
  CHECK(t.lookup(ip(192, 168, 3, 4)) == 7u);
  t.add(0, 0, 43);  // replaces
  CHECK(t.route_count() == 2);
  CHECK(t.lookup(ip(8, 8, 8, 8)) == 43u);
  CHECK(t.remove(0, 0));
  CHECK_FALSE(t.lookup(ip(8, 8, 8, 8)).has_value());
}

TEST_CASE("/32 host routes in many /24s, each its own answer") {
  RouteTable t("rt_hosts", 1024);
  t.add(ip(10, 0, 0, 0), 8, 0);
  for (uint32_t i = 0; i < 300; ++i) t.add(ip(10, i % 200, i / 200, 1), 32, 100 + i);
  CHECK(t.route_count() == 301);
  for (uint32_t i = 0; i < 300; ++i) {
    REQUIRE(t.lookup(ip(10, i % 200, i / 200, 1)) == 100 + i);
    REQUIRE(t.lookup(ip(10, i % 200, i / 200, 2)) == 0u);  // neighbour falls to the /8
  }
  t.add(ip(10, 5, 0, 1), 32, 9999);  // replacing a /32 keeps the count
  CHECK(t.route_count() == 301);
  CHECK(t.lookup(ip(10, 5, 0, 1)) == 9999u);
}

TEST_CASE("burst lookup agrees with single lookups and a linear reference") {
  RouteTable t("rt_burst", 512);
  std::mt19937 rng(99);
  std::vector<Route> routes;
  for (int i = 0; i < 200; ++i) {
    const uint8_t depth = static_cast<uint8_t>(1 + rng() % 32);
    const uint32_t mask = ~uint32_t{0} << (32 - depth);
    // Cluster prefixes under 10/8 so that they nest and overlap.
    const uint32_t prefix = ((rng() & 0x00FFFFFF) | ip(10, 0, 0, 0)) & mask;
    const uint32_t group = rng() % (RouteTable::kMaxGroup + 1);
    t.add(prefix, depth, group);
    // A repeated prefix replaces the earlier group, in the reference too.
    std::erase_if(routes, [&](const Route& r) { return r.prefix == prefix && r.depth == depth; });
    routes.push_back({prefix, depth, group});
  }
  CHECK(t.route_count() == routes.size());

  for (bool with_default : {false, true}) {
    if (with_default) {
      t.add(0, 0, 5);
      routes.push_back({0, 0, 5});
    }
    std::vector<uint32_t> dst(1000), groups(1000, 0xABCDEF);
    for (auto& d : dst) d = (rng() % 4 == 0) ? rng() : ((rng() & 0x00FFFFFF) | ip(10, 0, 0, 0));
    const unsigned hits = t.lookup_burst(dst, groups);
    unsigned expected_hits = 0;
    for (size_t i = 0; i < dst.size(); ++i) {
      const auto want = reference_lookup(routes, dst[i]);
      REQUIRE(t.lookup(dst[i]) == want);
      REQUIRE(groups[i] == want.value_or(RouteTable::kNoRoute));
      expected_hits += want.has_value();
    }
    CHECK(hits == expected_hits);
    if (!with_default) CHECK(hits < dst.size());
    if (with_default) CHECK(hits == dst.size());
  }

  // Odd sizes and empty bursts; extra output entries say "no route".
  std::vector<uint32_t> three = {ip(10, 0, 0, 1), ip(11, 0, 0, 1), ip(12, 0, 0, 1)};
  std::vector<uint32_t> out(5, 0);
  t.lookup_burst(three, out);
  CHECK(out[0] == t.lookup(three[0]));
  CHECK(out[3] == RouteTable::kNoRoute);
  CHECK(out[4] == RouteTable::kNoRoute);
  CHECK(t.lookup_burst({}, {}) == 0);
}

TEST_CASE("bad routes are refused with a message that says why") {
  RouteTable t("rt_bad", 4);
  CHECK_THROWS_WITH(t.add(ip(10, 0, 0, 1), 8, 1), Catch::Contains("10.0.0.1/8 has host bits set") &&
                                                      Catch::Contains("10.0.0.0/8"));
  CHECK_THROWS_AS(t.add(ip(10, 0, 0, 0), 33, 1), std::invalid_argument);
  CHECK_THROWS_WITH(t.add(ip(10, 0, 0, 0), 33, 1), Catch::Contains("33"));
  CHECK_THROWS_WITH(t.add(1, 0, 1), Catch::Contains("host bits"));
  CHECK_THROWS_WITH(t.add(ip(10, 0, 0, 0), 8, RouteTable::kMaxGroup + 1),
                    Catch::Contains("group 16777216"));
  CHECK(t.route_count() == 0);
  CHECK_FALSE(t.lookup(ip(10, 0, 0, 1)).has_value());

  // Full: rte_lpm holds max_routes rules (the default route lives outside it).
  for (unsigned i = 0; i < 4; ++i) t.add(ip(20, i, 0, 0), 16, i);
  t.add(0, 0, 9);
  CHECK_THROWS_WITH(t.add(ip(30, 0, 0, 0), 16, 1), Catch::Contains("30.0.0.0/16"));
  CHECK(t.route_count() == 5);
}

TEST_CASE("construction errors are clear; names are unique; tables move") {
  CHECK_THROWS_WITH(RouteTable("", 4), Catch::Contains("name"));
  CHECK_THROWS_WITH(RouteTable(std::string(40, 'x'), 4), Catch::Contains("characters"));
  CHECK_THROWS_WITH(RouteTable("rt_zero", 0), Catch::Contains("max_routes"));
  RouteTable a("rt_unique", 8);
  CHECK_THROWS_WITH(RouteTable("rt_unique", 8), Catch::Contains("rt_unique"));
  a.add(ip(1, 2, 3, 0), 24, 3);
  RouteTable b = std::move(a);
  CHECK(b.lookup(ip(1, 2, 3, 4)) == 3u);
  CHECK(b.name() == "rt_unique");
  RouteTable c("rt_other", 8);
  c = std::move(b);
  CHECK(c.lookup(ip(1, 2, 3, 4)) == 3u);
  // rt_other was freed by the assignment, so its name can be taken again.
  RouteTable d("rt_other", 8);
  CHECK(ipv4_to_string(ip(192, 168, 1, 254)) == "192.168.1.254");
}
