// RepsEntropy against sequences worked out here: what it reuses, what it never reuses, and its
// freeze and explore rules (htsim's UecMpReps, csg-htsim sim/uec_mp.cpp).
#include "dataplane/rc_endpoint/reps_entropy.h"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint16_t kBase = 0xC000 | 0x1234;  // an rxe port; with 256 values its upper bits 0xD200
constexpr uint16_t port(uint16_t value) {
  return static_cast<uint16_t>((kBase & ~0xFF) | value);
}

}  // namespace

TEST_CASE("REPS: an unmarked acknowledged value is reused, oldest first, once, before a new draw") {
  RepsEntropy r(256, kBase, 1);
  // Nothing learnt yet: every packet a new random value, with the QP's upper bits.
  for (int i = 0; i < 4; ++i) CHECK((r.next() & ~0xFF) == (kBase & ~0xFF));
  CHECK(r.counters().drawn == 4);
  r.on_ack(port(7), 10);
  r.on_ack(port(42), 11);
  r.on_ack(port(9), 12);
  CHECK(r.fresh() == 3);
  CHECK(r.next() == port(7));  // the oldest ACKed first
  CHECK(r.next() == port(42));
  CHECK(r.next() == port(9));
  CHECK(r.counters().reused == 3);
  CHECK(r.fresh() == 0);
  r.next();  // each only once: now a draw again
  CHECK(r.counters().drawn == 5);
  // The ring holds 8: the ninth ACK overwrites the oldest, and eight come back, in order.
  for (uint16_t v = 100; v < 109; ++v) r.on_ack(port(v), 20);
  std::vector<uint16_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(r.next());
  std::vector<uint16_t> want;
  for (uint16_t v = 101; v < 109; ++v) want.push_back(port(v));
  CHECK(got == want);
  // An ACK echoing another QP's port (other upper bits) teaches nothing.
  r.on_ack(static_cast<uint16_t>(port(5) ^ 0x0100), 30);
  CHECK(r.fresh() == 0);
}

TEST_CASE("REPS: a value a CNP marked is never reused, not even when its ACK follows") {
  RepsEntropy r(256, kBase, 2);
  r.on_ack(port(1), 1);
  r.on_ack(port(2), 2);
  r.on_mark(port(1));  // marked after it entered the ring: taken out
  r.on_mark(port(3));  // marked before its ACK: the ACK must not put it in
  r.on_ack(port(3), 3);
  r.on_ack(port(4), 4);
  CHECK(r.counters().marked == 2);
  CHECK(r.counters().marked_not_recycled == 1);
  CHECK(r.next() == port(2));
  CHECK(r.next() == port(4));
  // Whatever is drawn next is random; neither 1 nor 3 comes from the ring.
  CHECK(r.fresh() == 0);
  // A later ACK of 3 without a new mark: a good path again.
  r.on_ack(port(3), 5);
  CHECK(r.next() == port(3));
}

TEST_CASE("REPS: a timeout freezes the ring; after the freeze an ACK starts 16 explorations") {
  RepsEntropy r(256, kBase, 3, /*exit_freeze_ns=*/1000);
  r.on_ack(port(10), 0);
  r.on_ack(port(11), 0);
  r.on_ack(port(12), 0);
  CHECK(r.next() == port(10));  // normal: used once
  r.on_timeout(100);
  CHECK(r.frozen());
  CHECK(r.counters().freezes == 1);
  // Frozen: the ring's values in turn, used or not, and no new draws.
  const uint64_t drawn = r.counters().drawn;
  std::vector<uint16_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(r.next());
  CHECK(got == std::vector<uint16_t>{port(10), port(11), port(12), port(10), port(11), port(12)});
  CHECK(r.counters().drawn == drawn);
  // ACKs during the freeze still enter the ring (and so the cycle).
  r.on_ack(port(13), 500);
  got.clear();
  for (int i = 0; i < 4; ++i) got.push_back(r.next());
  CHECK(std::set<uint16_t>(got.begin(), got.end()) ==
        std::set<uint16_t>{port(10), port(11), port(12), port(13)});
  // A second timeout while frozen changes nothing.
  r.on_timeout(600);
  CHECK(r.counters().freezes == 1);
  // Past exit_freeze_ns, the next ACK ends the freeze, empties the ring, and explores.
  r.on_ack(port(20), 1101);
  CHECK_FALSE(r.frozen());
  CHECK(r.explore_left() == RepsEntropy::kExploreAfterFreeze);
  CHECK(r.fresh() == 1);  // the ACK that ended it, after the reset
  for (uint32_t i = 0; i < RepsEntropy::kExploreAfterFreeze; ++i) r.next();
  CHECK(r.counters().explored == RepsEntropy::kExploreAfterFreeze);
  // No freeze while exploring; then the ring again.
  RepsEntropy e(256, kBase, 4, 0);
  e.on_timeout(1);
  e.on_ack(port(1), 2);  // ends it at once (exit after 0 ns)
  CHECK(e.explore_left() == 16);
  e.on_timeout(3);
  CHECK_FALSE(e.frozen());
  for (int i = 0; i < 16; ++i) e.next();
  CHECK(e.next() == port(1));
}

TEST_CASE("REPS: bad value counts are refused") {
  CHECK_THROWS_WITH(RepsEntropy(0, kBase, 1), Catch::Contains("power of two"));
  CHECK_THROWS_AS(RepsEntropy(300, kBase, 1), std::invalid_argument);
}
