#include "dataplane/forwarding/route_table.h"

#include "dataplane/forwarding/route_cache.h"

#include <rte_malloc.h>
#include <rte_memzone.h>
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

RouteTableBackend any_backend() {
  return GENERATE(RouteTableBackend::kLpm, RouteTableBackend::kRib, RouteTableBackend::kHash);
}

}  // namespace

TEST_CASE("longest prefix wins") {
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_longest", 64, backend);
  CHECK(t.backend() == backend);
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
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_default", 16, backend);
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
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_hosts", 1024, backend);
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
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_burst", 512, backend);
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
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_bad", 4, backend);
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
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  CHECK_THROWS_WITH(RouteTable("", 4, backend), Catch::Contains("name"));
  CHECK_THROWS_WITH(RouteTable(std::string(40, 'x'), 4, backend), Catch::Contains("characters"));
  // The longest name each backend takes really is taken, and one more is refused up front.
  const size_t longest = backend == RouteTableBackend::kRib ? RouteTable::kMaxRibNameLength
                                                            : RouteTable::kMaxLpmNameLength;
  CHECK_NOTHROW(RouteTable(std::string(longest, 'n'), 4, backend));
  CHECK_THROWS_AS(RouteTable(std::string(longest + 1, 'n'), 4, backend), std::invalid_argument);
  CHECK_THROWS_WITH(RouteTable("rt_zero", 0, backend), Catch::Contains("max_routes"));
  RouteTable a("rt_unique", 8, backend);
  // DPDK keeps the names of its tables; the hash backend has no registry to clash in.
  if (backend != RouteTableBackend::kHash) {
    CHECK_THROWS_WITH(RouteTable("rt_unique", 8, backend), Catch::Contains("rt_unique"));
  }
  a.add(ip(1, 2, 3, 0), 24, 3);
  RouteTable b = std::move(a);
  CHECK(b.lookup(ip(1, 2, 3, 4)) == 3u);
  CHECK(b.name() == "rt_unique");
  RouteTable c("rt_other", 8, backend);
  c = std::move(b);
  CHECK(c.lookup(ip(1, 2, 3, 4)) == 3u);
  // rt_other was freed by the assignment, so its name can be taken again.
  RouteTable d("rt_other", 8, backend);
  CHECK(ipv4_to_string(ip(192, 168, 1, 254)) == "192.168.1.254");
}

TEST_CASE("backend names parse and print") {
  CHECK(to_string(RouteTableBackend::kLpm) == "lpm");
  CHECK(to_string(RouteTableBackend::kRib) == "rib");
  CHECK(parse_route_table_backend("lpm") == RouteTableBackend::kLpm);
  CHECK(parse_route_table_backend("rib") == RouteTableBackend::kRib);
  CHECK(to_string(RouteTableBackend::kHash) == "hash");
  CHECK(parse_route_table_backend("hash") == RouteTableBackend::kHash);
  CHECK_FALSE(parse_route_table_backend("fib").has_value());
  CHECK_FALSE(parse_route_table_backend("").has_value());
  RouteTable t("rt_default_backend", 4);
  CHECK(t.backend() == RouteTableBackend::kLpm);
}

TEST_CASE("10,000 random routes: lpm, rib, hash and a linear reference agree") {
  constexpr uint32_t kRoutes = 10'000;
  RouteTable lpm("rt_rand_lpm", kRoutes, RouteTableBackend::kLpm);
  RouteTable rib("rt_rand_rib", kRoutes, RouteTableBackend::kRib);
  RouteTable hash("rt_rand_hash", kRoutes, RouteTableBackend::kHash);
  std::mt19937 rng(2024);
  std::vector<Route> routes;
  const auto add_route = [&](uint32_t prefix, uint8_t depth, uint32_t group) {
    lpm.add(prefix, depth, group);
    rib.add(prefix, depth, group);
    hash.add(prefix, depth, group);
    std::erase_if(routes, [&](const Route& r) { return r.prefix == prefix && r.depth == depth; });
    routes.push_back({prefix, depth, group});
  };
  for (uint32_t i = 0; i < kRoutes; ++i) {
    const uint8_t depth = static_cast<uint8_t>(rng() % 33);  // 0..32, the default route too
    // Half anywhere, half under 10/8 so that prefixes nest and replace one another.
    uint32_t prefix = rng();
    if (i % 2 == 0) prefix = (prefix & 0x00FFFFFF) | ip(10, 0, 0, 0);
    prefix &= depth == 0 ? 0 : ~uint32_t{0} << (32 - depth);
    add_route(prefix, depth, rng() % (RouteTable::kMaxGroup + 1));
  }
  REQUIRE(lpm.route_count() == routes.size());
  REQUIRE(rib.route_count() == routes.size());
  REQUIRE(hash.route_count() == routes.size());

  const auto compare = [&](int lookups) {
    std::vector<uint32_t> dst(static_cast<size_t>(lookups));
    for (auto& d : dst) {
      switch (rng() % 3) {
        case 0:  // anywhere
          d = rng();
          break;
        case 1:  // under 10/8
          d = (rng() & 0x00FFFFFF) | ip(10, 0, 0, 0);
          break;
        default: {  // inside some route, so that long prefixes are hit too
          const Route& r = routes[rng() % routes.size()];
          const uint32_t host = r.depth == 32 ? 0 : rng() & (~uint32_t{0} >> r.depth);
          d = r.prefix | host;
        }
      }
    }
    std::vector<uint32_t> from_lpm(dst.size()), from_rib(dst.size()), from_hash(dst.size());
    const unsigned lpm_hits = lpm.lookup_burst(dst, from_lpm);
    const unsigned rib_hits = rib.lookup_burst(dst, from_rib);
    const unsigned hash_hits = hash.lookup_burst(dst, from_hash);
    unsigned want_hits = 0;
    for (size_t i = 0; i < dst.size(); ++i) {
      INFO("destination " << ipv4_to_string(dst[i]));
      const auto want = reference_lookup(routes, dst[i]);
      REQUIRE(lpm.lookup(dst[i]) == want);
      REQUIRE(rib.lookup(dst[i]) == want);
      REQUIRE(from_lpm[i] == want.value_or(RouteTable::kNoRoute));
      REQUIRE(from_rib[i] == want.value_or(RouteTable::kNoRoute));
      REQUIRE(hash.lookup(dst[i]) == want);
      REQUIRE(from_hash[i] == want.value_or(RouteTable::kNoRoute));
      want_hits += want.has_value();
    }
    CHECK(lpm_hits == want_hits);
    CHECK(rib_hits == want_hits);
    CHECK(hash_hits == want_hits);
  };
  compare(10'000);

  // Remove a third of the routes (the default route among them if it was drawn) and compare
  // again: removals must uncover the same shorter prefixes in both backends.
  std::shuffle(routes.begin(), routes.end(), rng);
  const size_t keep = routes.size() - routes.size() / 3;
  for (size_t i = keep; i < routes.size(); ++i) {
    REQUIRE(lpm.remove(routes[i].prefix, routes[i].depth));
    REQUIRE(rib.remove(routes[i].prefix, routes[i].depth));
    REQUIRE_FALSE(rib.remove(routes[i].prefix, routes[i].depth));
    REQUIRE(hash.remove(routes[i].prefix, routes[i].depth));
    REQUIRE_FALSE(hash.remove(routes[i].prefix, routes[i].depth));
  }
  routes.resize(keep);
  CHECK(lpm.route_count() == routes.size());
  CHECK(rib.route_count() == routes.size());
  CHECK(hash.route_count() == routes.size());
  compare(5'000);
}

namespace {

size_t heap_bytes_in_use() {
  size_t total = 0;
  for (unsigned i = 0; i < rte_socket_count(); ++i) {
    rte_malloc_socket_stats stats{};
    if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &stats) == 0) {
      total += stats.heap_allocsz_bytes;
    }
  }
  return total;
}

unsigned memzone_count() {
  unsigned count = 0;
  rte_memzone_walk([](const rte_memzone*, void* arg) { ++*static_cast<unsigned*>(arg); }, &count);
  return count;
}

}  // namespace

TEST_CASE("200 rib tables fit where 200 lpm tables would need 12.8 GB, and free cleanly") {
  // The test EAL has 512 MB (-m 512, --no-huge): one lpm table takes an eighth of it.
  const size_t heap_before = heap_bytes_in_use();
  const unsigned memzones_before = memzone_count();
  size_t lpm_bytes = 0;
  {
    RouteTable lpm("rt_one_lpm", 256, RouteTableBackend::kLpm);
    lpm_bytes = heap_bytes_in_use() - heap_before;
  }
  CHECK(lpm_bytes >= 64u << 20);
  CHECK(heap_bytes_in_use() == heap_before);

  constexpr int kTables = 200;
  constexpr uint32_t kRoutesPerTable = 256;
  {
    std::vector<RouteTable> tables;
    tables.reserve(kTables);
    for (int i = 0; i < kTables; ++i) {
      tables.emplace_back("rt_many_" + std::to_string(i), kRoutesPerTable, RouteTableBackend::kRib);
      RouteTable& t = tables.back();
      t.add(0, 0, 1000 + static_cast<uint32_t>(i));
      for (uint32_t r = 0; r + 1 < kRoutesPerTable; ++r) t.add(ip(10, r, i, 0), 24, r);
      REQUIRE(t.route_count() == kRoutesPerTable);
    }
    const size_t rib_bytes = (heap_bytes_in_use() - heap_before) / kTables;
    INFO("lpm table: " << lpm_bytes << " bytes; rib table of " << kRoutesPerTable
                       << " routes: " << rib_bytes << " bytes");
    CHECK(rib_bytes < 256u << 10);  // well under a MiB each
    CHECK(rib_bytes * 100 < lpm_bytes);
    for (int i = 0; i < kTables; ++i) {
      REQUIRE(tables[i].lookup(ip(10, 7, i, 9)) == 7u);
      REQUIRE(tables[i].lookup(ip(11, 0, 0, 1)) == 1000u + i);
    }
  }
  // Every node pool, ring and table went back to the heap; the names can be taken again.
  CHECK(heap_bytes_in_use() == heap_before);
  CHECK(memzone_count() == memzones_before);
  RouteTable again("rt_many_0", 4, RouteTableBackend::kRib);
  CHECK(again.route_count() == 0);
}

TEST_CASE("hash tables take no EAL memzone: more of them than RTE_MAX_MEMZONE allows ribs") {
  // An rte_rib takes three memzones of DPDK 22.11's 2560; fabric_emu's 1280-switch three-tier
  // fabric needs a table per switch.
  const unsigned before = memzone_count();
  std::vector<RouteTable> tables;
  for (int i = 0; i < 3000; ++i) {
    tables.emplace_back("rt_many_" + std::to_string(i), 300, RouteTableBackend::kHash);
    tables.back().add(ip(10, 1, 0, 0), 16, 1);
  }
  CHECK(memzone_count() == before);
  CHECK(tables[2999].lookup(ip(10, 1, 2, 3)) == 1u);
  CHECK(tables[0].memory_bytes() > sizeof(RouteTable));
}

TEST_CASE("lookups through a cache agree with the table through adds, removes and moves") {
  const RouteTableBackend backend = any_backend();
  INFO("backend " << to_string(backend));
  RouteTable t("rt_cached", 512, backend);
  RouteCache cache(64);  // far fewer slots than destinations: collisions and evictions
  std::mt19937 rng(7);
  std::vector<Route> routes;
  std::vector<uint32_t> pool;  // destinations that repeat, as a switch's flows do
  for (int i = 0; i < 400; ++i) pool.push_back((rng() & 0x00FFFFFF) | ip(10, 0, 0, 0));
  size_t checked = 0;
  for (int round = 0; round < 40; ++round) {
    // A change every round: an add (some replace), a remove, or the default route.
    const uint8_t depth = static_cast<uint8_t>(8 + rng() % 25);
    const uint32_t prefix =
        ((rng() & 0x00FFFFFF) | ip(10, 0, 0, 0)) & (~uint32_t{0} << (32 - depth));
    if (round % 5 == 4 && !routes.empty()) {
      const Route r = routes[rng() % routes.size()];
      REQUIRE(t.remove(r.prefix, r.depth));
      std::erase_if(routes,
                    [&](const Route& x) { return x.prefix == r.prefix && x.depth == r.depth; });
    } else if (round == 20) {
      t.add(0, 0, 77);
      routes.push_back({0, 0, 77});
    } else {
      const uint32_t group = rng() % 1000;
      t.add(prefix, depth, group);
      std::erase_if(routes, [&](const Route& r) { return r.prefix == prefix && r.depth == depth; });
      routes.push_back({prefix, depth, group});
    }
    for (int burst = 0; burst < 10; ++burst) {
      std::vector<uint32_t> dst(1 + rng() % 40), groups(dst.size() + 2, 0xABCDEF);
      for (auto& d : dst) d = pool[rng() % pool.size()];
      const unsigned hits = t.lookup_burst(dst, groups, cache);
      unsigned expected_hits = 0;
      for (size_t i = 0; i < dst.size(); ++i) {
        const auto want = reference_lookup(routes, dst[i]);
        REQUIRE(groups[i] == want.value_or(RouteTable::kNoRoute));
        expected_hits += want.has_value();
        ++checked;
      }
      CHECK(hits == expected_hits);
      CHECK(groups[dst.size()] == RouteTable::kNoRoute);
    }
  }
  CHECK(checked > 5000);

  // Another table moved into this one's place: the cache must not answer with the old routes.
  RouteTable other("rt_cached_other", 16, backend);
  other.add(ip(10, 0, 0, 0), 8, 4242);
  t = std::move(other);
  std::vector<uint32_t> dst(pool.begin(), pool.begin() + 30), groups(30);
  t.lookup_burst(dst, groups, cache);
  for (uint32_t g : groups) CHECK(g == 4242);
}
