#include "dataplane/forwarding/route_cache.h"

#include <catch2/catch.hpp>
#include <stdexcept>

using namespace spraynet;

TEST_CASE("route cache sizes: powers of two from 1 to 2^24, nothing else") {
  CHECK_THROWS_AS(RouteCache(0), std::invalid_argument);
  CHECK_THROWS_AS(RouteCache(6), std::invalid_argument);
  CHECK_THROWS_AS(RouteCache((size_t{1} << 24) + 2), std::invalid_argument);
  CHECK(RouteCache(1).entries() == 1);
  CHECK(RouteCache().entries() == RouteCache::kDefaultEntries);
}

TEST_CASE("an answer is found for its destination and version only") {
  RouteCache c(16);
  CHECK(c.find(0, 0x0A000001) == nullptr);  // empty, even at version 0 and address 0-ish
  c.store(3, 0x0A000001, 9);
  REQUIRE(c.find(3, 0x0A000001) != nullptr);
  CHECK(*c.find(3, 0x0A000001) == 9);
  CHECK(c.find(4, 0x0A000001) == nullptr);
  CHECK(c.find(3, 0x0A000002) == nullptr);
  c.store(3, 0x0A000002, 0xFFFFFFFF);  // "no route" is an answer too
  REQUIRE(c.find(3, 0x0A000002) != nullptr);
  CHECK(*c.find(3, 0x0A000002) == 0xFFFFFFFF);
  c.reset(&c);
  CHECK(c.find(3, 0x0A000002) == nullptr);
  CHECK(c.owner() == &c);
}

TEST_CASE("a subnet's hosts spread over the slots") {
  RouteCache c(256);
  for (uint32_t h = 0; h < 256; ++h) c.store(1, 0x0A000100 + h, h);
  uint32_t found = 0;
  for (uint32_t h = 0; h < 256; ++h) found += c.find(1, 0x0A000100 + h) != nullptr;
  // 256 addresses into 256 slots: Fibonacci hashing keeps consecutive keys apart.
  CHECK(found > 200);
}
