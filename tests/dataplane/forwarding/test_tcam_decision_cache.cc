#include "dataplane/forwarding/tcam_decision_cache.h"

#include <catch2/catch.hpp>
#include <random>
#include <stdexcept>

using namespace spraynet;

namespace {
TcamDecisionCache::Key key(uint32_t a, uint32_t b = 0) {
  return {a, b, 7, 8, 9};
}
}  // namespace

TEST_CASE("sizes: powers of two from 1 to 2^24, nothing else") {
  CHECK_THROWS_AS(TcamDecisionCache(0), std::invalid_argument);
  CHECK_THROWS_AS(TcamDecisionCache(3), std::invalid_argument);
  CHECK_THROWS_AS(TcamDecisionCache((size_t{1} << 24) + 1), std::invalid_argument);
  CHECK(TcamDecisionCache(1).entries() == 1);
  CHECK(TcamDecisionCache(256).entries() == 256);
}

TEST_CASE("a stored decision is found under its generation only") {
  TcamDecisionCache c(64);
  CHECK(c.find(1, key(1)) == nullptr);
  c.store(1, key(1), {5, 0});
  const auto* d = c.find(1, key(1));
  REQUIRE(d != nullptr);
  CHECK(d->admitted == 5);
  CHECK(d->shadow == 0);
  CHECK(c.find(2, key(1)) == nullptr);  // a commit since
  CHECK(c.find(1, key(2)) == nullptr);  // another key
  c.reset(&c);
  CHECK(c.find(1, key(1)) == nullptr);
  CHECK(c.owner() == &c);
}

TEST_CASE("a one-slot cache keeps the last key: evictions cost lookups, never a wrong answer") {
  TcamDecisionCache c(1);
  c.store(3, key(1), {1, 0});
  c.store(3, key(2), {0, 4});
  CHECK(c.find(3, key(1)) == nullptr);
  REQUIRE(c.find(3, key(2)) != nullptr);
  CHECK(c.find(3, key(2))->shadow == 4);
}

TEST_CASE("keys spread over the slots") {
  // 4096 flows of one pair of hosts (source ports differ) into 1024 slots: most slots used.
  TcamDecisionCache c(1024);
  for (uint32_t port = 0; port < 4096; ++port)
    c.store(1, key(0x0A000001, 0xC0000000 | port), {1, 0});
  size_t found = 0;
  for (uint32_t port = 0; port < 4096; ++port)
    found += c.find(1, key(0x0A000001, 0xC0000000 | port)) != nullptr;
  // A perfect spread keeps 1024; a random one about 1024 x (1 - 1/e^4) = 1005.
  CHECK(found > 950);
  CHECK(found <= 1024);
}
