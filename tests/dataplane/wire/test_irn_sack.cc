// IRN's SACK extension of a NAK (dataplane/wire/irn_sack.h): the wire form byte by byte against
// bytes the test writes out itself, and every malformed shape refused.
#include "dataplane/wire/irn_sack.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

using namespace spraynet;

TEST_CASE("IrnSack: nothing set has no wire form, and an empty payload reads as that") {
  IrnSack s;
  CHECK_FALSE(s.any());
  CHECK(s.bits() == 0);
  CHECK(s.wire_bytes() == 0);
  std::vector<uint8_t> out(64, 0xAA);
  CHECK(s.write(out) == 0);
  s.set(3);
  CHECK(s.read({}));
  CHECK_FALSE(s.any());
}

TEST_CASE("IrnSack: PSNs P+1, P+3 and P+33 give 64 bits, most significant bit first") {
  IrnSack s;
  REQUIRE(s.set(0));
  REQUIRE(s.set(2));
  REQUIRE(s.set(32));
  CHECK(s.highest() == 32);
  CHECK(s.bits() == 64);
  REQUIRE(s.wire_bytes() == 4 + 8);
  std::vector<uint8_t> out(12, 0xAA);
  REQUIRE(s.write(out) == 12);
  const std::vector<uint8_t> want = {0x00, 0x40, 0x00, 0x00,   // 64 bits, reserved 0
                                     0xA0, 0x00, 0x00, 0x00,   // offsets 0 and 2
                                     0x80, 0x00, 0x00, 0x00};  // offset 32
  CHECK(out == want);
  IrnSack r;
  REQUIRE(r.read(out));
  for (uint32_t i = 0; i < 64; ++i) CHECK(r.test(i) == (i == 0 || i == 2 || i == 32));
  CHECK(r.highest() == 32);
  std::vector<uint8_t> small(11);
  CHECK(s.write(small) == 0);
}

TEST_CASE("IrnSack: offsets past kMaxBits are not kept; the highest is 1023") {
  IrnSack s;
  CHECK_FALSE(s.set(IrnSack::kMaxBits));
  CHECK_FALSE(s.any());
  REQUIRE(s.set(IrnSack::kMaxBits - 1));
  CHECK(s.bits() == IrnSack::kMaxBits);
  CHECK(s.wire_bytes() == 4 + 128);
  CHECK_FALSE(s.test(IrnSack::kMaxBits));
}

TEST_CASE("IrnSack: random sets survive the wire") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    IrnSack s;
    std::set<uint32_t> want;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const uint32_t o = rng() % IrnSack::kMaxBits;
      s.set(o);
      want.insert(o);
    }
    std::vector<uint8_t> out(s.wire_bytes());
    REQUIRE(s.write(out) == out.size());
    CHECK(out.size() == 4 + ((*want.rbegin() / 32) + 1) * 4);
    IrnSack r;
    REQUIRE(r.read(out));
    for (uint32_t o = 0; o < IrnSack::kMaxBits; ++o) REQUIRE(r.test(o) == (want.count(o) == 1));
  }
}

TEST_CASE("IrnSack: malformed extensions are refused and leave nothing set") {
  IrnSack s;
  const auto refused = [&](std::vector<uint8_t> p) {
    s.set(5);
    const bool ok = s.read(p);
    return !ok && !s.any();
  };
  CHECK(refused({0x00, 0x20, 0x00}));                          // shorter than the header
  CHECK(refused({0x00, 0x00, 0x00, 0x00}));                    // 0 bits
  CHECK(refused({0x00, 0x10, 0x00, 0x00, 1, 2}));              // 16: not a multiple of 32
  CHECK(refused({0x00, 0x20, 0x01, 0x00, 0x80, 0, 0, 0}));     // reserved not 0
  CHECK(refused({0x00, 0x20, 0x00, 0x00, 0x80, 0, 0}));        // bitmap one byte short
  CHECK(refused({0x00, 0x20, 0x00, 0x00, 0x80, 0, 0, 0, 0}));  // one byte too many
  CHECK(refused({0x04, 0x20, 0x00, 0x00}));                    // 1056 > kMaxBits
  s.set(5);
  CHECK(s.read(std::vector<uint8_t>{0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}));
  CHECK(s.test(31));
  CHECK_FALSE(s.test(5));
}
