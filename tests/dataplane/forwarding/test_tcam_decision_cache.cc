#include "dataplane/forwarding/tcam_decision_cache.h"

#include <catch2/catch.hpp>
#include <random>
#include <stdexcept>

using namespace spraynet;

namespace {
TcamDecisionCache::Key key(uint32_t a, uint32_t b = 0) {
  return {uint64_t{a} << 32 | b, 0x0000000700000008ull};
}
constexpr uint32_t kMiss = TcamDecisionCache::kMiss;
}  // namespace

TEST_CASE("sizes: 1 to 2^24 entries, rounded up to whole lines") {
  CHECK_THROWS_AS(TcamDecisionCache(0), std::invalid_argument);
  CHECK_THROWS_AS(TcamDecisionCache((size_t{1} << 24) + 1), std::invalid_argument);
  CHECK(TcamDecisionCache(1).entries() == TcamDecisionCache::kWays);
  CHECK(TcamDecisionCache(3).entries() == 3);
  CHECK(TcamDecisionCache(256).entries() == 258);
  CHECK(TcamDecisionCache(256).heap_bytes() == 86 * 64);
  // The default takes the bytes of the direct-mapped cache it replaced (1,024 slots of 40).
  CHECK(TcamDecisionCache().heap_bytes() == 1024 * 40);
}

TEST_CASE("a stored decision is found for its key, under its binding only") {
  TcamDecisionCache c(64);
  int owner = 0, other = 0;
  c.bind(&owner, 1);
  CHECK(c.find(key(1)) == kMiss);
  c.store(key(1), 5);
  CHECK(c.find(key(1)) == 5);
  CHECK(c.find(key(2)) == kMiss);     // another key
  CHECK(c.find(key(1, 1)) == kMiss);  // another key: one bit in the low half
  c.store(key(2), 0);                 // "no rule" is a decision too
  CHECK(c.find(key(2)) == 0);
  c.bind(&owner, 1);  // the same binding: nothing forgotten
  CHECK(c.find(key(1)) == 5);
  c.bind(&owner, 2);  // a commit since
  CHECK(c.find(key(1)) == kMiss);
  CHECK(c.find(key(2)) == kMiss);
  c.store(key(1), 6);
  c.bind(&owner, 1);  // back to an older generation: forgotten too, never mixed
  CHECK(c.find(key(1)) == kMiss);
  c.store(key(1), 7);
  c.bind(&other, 1);  // another table
  CHECK(c.find(key(1)) == kMiss);
  CHECK(c.owner() == &other);
  CHECK(c.generation() == 1);
}

TEST_CASE("the whole key is compared: keys differing in one bit anywhere never share a decision") {
  TcamDecisionCache c(16);
  c.bind(&c, 1);
  const TcamDecisionCache::Key base{0x0A0000010A010203ull, 0x11000000C0001389ull};
  c.store(base, 9);
  for (int bit = 0; bit < 128; ++bit) {
    TcamDecisionCache::Key k = base;
    if (bit < 64) {
      k.lo ^= uint64_t{1} << bit;
    } else {
      k.hi ^= uint64_t{1} << (bit - 64);
    }
    INFO("bit " << bit);
    CHECK(c.find(k) == kMiss);
  }
  CHECK(c.find(base) == 9);
  // The all-zero key is a key like any other (an empty way is not a zero key).
  CHECK(c.find(TcamDecisionCache::Key{}) == kMiss);
  c.store(TcamDecisionCache::Key{}, 3);
  CHECK(c.find(TcamDecisionCache::Key{}) == 3);
}

TEST_CASE("a one-line cache keeps at most its ways: evictions cost lookups, never a wrong answer") {
  TcamDecisionCache c(1);
  c.bind(&c, 3);
  for (uint32_t i = 0; i < 10; ++i) c.store(key(i), 100 + i);
  size_t held = 0;
  for (uint32_t i = 0; i < 10; ++i) {
    const uint32_t d = c.find(key(i));
    if (d == kMiss) continue;
    ++held;
    CHECK(d == 100 + i);
  }
  CHECK(held == TcamDecisionCache::kWays);
  // Storing a key it holds again updates it in place: it takes no second way.
  c.store(key(10), 1);
  c.store(key(10), 2);
  c.store(key(10), 2);
  CHECK(c.find(key(10)) == 2);
  held = 0;
  for (uint32_t i = 0; i < 10; ++i) held += c.find(key(i)) != kMiss;
  CHECK(held == TcamDecisionCache::kWays - 1);
}

TEST_CASE("values above kMaxValue are refused") {
  TcamDecisionCache c(4);
  c.bind(&c, 1);
  CHECK_THROWS_AS(c.store(key(1), TcamDecisionCache::kMaxValue + 1), std::invalid_argument);
  CHECK(c.find(key(1)) == kMiss);
  c.store(key(1), TcamDecisionCache::kMaxValue);
  CHECK(c.find(key(1)) == TcamDecisionCache::kMaxValue);
}

TEST_CASE("a working set well below the entries stays whole, seen in turn") {
  // 1,024 flows of one pair of hosts (source ports differ) seen round and round: the pattern
  // that leaves a direct-mapped cache about a third of its keys.
  TcamDecisionCache c;  // 1,920 entries
  c.bind(&c, 1);
  // A few rounds to settle: a key evicted early comes back where there is room.
  for (int round = 0; round < 10; ++round) {
    for (uint32_t port = 0; port < 1024; ++port) {
      const auto k = key(0x0A000001, 0xC0000000 | port);
      if (c.find(k) == kMiss) c.store(k, port);
    }
  }
  size_t found = 0;
  for (uint32_t port = 0; port < 1024; ++port) {
    found += c.find(key(0x0A000001, 0xC0000000 | port)) == port;
  }
  CHECK(found >= 1020);
}

TEST_CASE("more keys than entries: most entries used, every answer right") {
  TcamDecisionCache c(1024);
  c.bind(&c, 1);
  std::mt19937_64 rng(7);
  std::vector<TcamDecisionCache::Key> keys(4096);
  for (auto& k : keys) k = {rng(), rng()};
  for (uint32_t i = 0; i < keys.size(); ++i) c.store(keys[i], i);
  size_t found = 0;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    const uint32_t d = c.find(keys[i]);
    if (d == kMiss) continue;
    ++found;
    CHECK(d == i);
  }
  CHECK(found > 950);
  CHECK(found <= c.entries());
}
