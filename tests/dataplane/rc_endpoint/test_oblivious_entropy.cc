// ObliviousEntropy: every value once per round, in an order that changes between rounds and
// QPs, the QP's own port bits above them; and a requester that writes them into genuine packets.
#include "dataplane/rc_endpoint/oblivious_entropy.h"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

std::vector<uint16_t> round_of(ObliviousEntropy& e) {
  std::vector<uint16_t> out;
  for (uint32_t i = 0; i < e.values(); ++i) out.push_back(e.next());
  return out;
}

}  // namespace

TEST_CASE("oblivious entropy: each round uses every value once, with the QP's upper port bits") {
  const uint16_t base = 0xC000 | 0x2A5F;  // an rxe port
  ObliviousEntropy e(256, base, 7);
  std::vector<std::vector<uint16_t>> rounds;
  for (int r = 0; r < 8; ++r) rounds.push_back(round_of(e));
  for (const auto& round : rounds) {
    const std::set<uint16_t> distinct(round.begin(), round.end());
    CHECK(distinct.size() == 256);  // a permutation of the 256 values
    for (uint16_t port : round) {
      CHECK((port & ~0xFFu) == (base & ~0xFFu));  // the QP's bits above the permuted ones
    }
    // Each round is the identity XOR one mask: consecutive packets differ in the low bits as
    // k ^ m does, so the mask is round[0]'s low byte and round[k] = k ^ mask.
    const uint16_t mask = round[0] & 0xFF;
    for (uint32_t k = 0; k < 256; ++k) CHECK((round[k] & 0xFF) == (k ^ mask));
  }
  // The order changes between rounds (8 masks of 256 cannot all be equal but by 1 in 256^7).
  std::set<uint16_t> masks;
  for (const auto& round : rounds) masks.insert(round[0] & 0xFF);
  CHECK(masks.size() > 1);
  // The same seed gives the same ports; another seed other orders.
  ObliviousEntropy same(256, base, 7), other(256, base, 8);
  CHECK(round_of(same) == rounds[0]);
  std::vector<std::vector<uint16_t>> other_rounds;
  for (int r = 0; r < 8; ++r) other_rounds.push_back(round_of(other));
  CHECK(other_rounds != rounds);
}

TEST_CASE("oblivious entropy: one value keeps the QP's port; bad counts are refused") {
  ObliviousEntropy one(1, 0xC123, 1);
  for (int i = 0; i < 10; ++i) CHECK(one.next() == 0xC123);
  ObliviousEntropy all(16384, 0xC123, 1);
  std::set<uint16_t> ports;
  for (int i = 0; i < 16384; ++i) ports.insert(all.next());
  CHECK(ports.size() == 16384);
  CHECK(*ports.begin() == 0xC000);  // every 14-bit value under rxe's 0xC000
  CHECK(*ports.rbegin() == 0xFFFF);
  CHECK_THROWS_WITH(ObliviousEntropy(0, 0xC000, 1), Catch::Contains("power of two"));
  CHECK_THROWS_WITH(ObliviousEntropy(100, 0xC000, 1), Catch::Contains("100"));
  CHECK_THROWS_AS(ObliviousEntropy(32768, 0xC000, 1), std::invalid_argument);
}
