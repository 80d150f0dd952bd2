#include "dataplane/wire/ppcid.h"

#include <catch2/catch.hpp>

#include <random>

using namespace spraynet;

TEST_CASE("check nibble is the XOR fold of DestQP ^ PSN") {
  CHECK(ppcid_check_nibble(0, 0) == 0);
  CHECK(ppcid_check_nibble(0x000001, 0) == 0x1);
  CHECK(ppcid_check_nibble(0x123456, 0) == (0x1 ^ 0x2 ^ 0x3 ^ 0x4 ^ 0x5 ^ 0x6));
  CHECK(ppcid_check_nibble(0x11, 0x100) == (0x1 ^ 0x1 ^ 0x1));
  CHECK(ppcid_check_nibble(0xFF000000, 0) == 0);  // bits above 24 are not part of either
}

TEST_CASE("layouts put the fields where DESIGN.md says") {
  // ts-high: ts 15-8, path 7-4, check 3-0
  const uint8_t check = ppcid_check_nibble(0x11, 0x100);
  CHECK(ppcid_encode(PpcidLayout::kTsHigh, 0x5, 0xA7, 0x11, 0x100) == (0xA750 | check));
  // path-high: path 15-8, ts 7-4, check 3-0
  CHECK(ppcid_encode(PpcidLayout::kPathHigh, 0x5, 0x7, 0x11, 0x100) == (0x0570 | check));
  CHECK(parse_ppcid_layout("ts-high") == PpcidLayout::kTsHigh);
  CHECK(parse_ppcid_layout("path-high") == PpcidLayout::kPathHigh);
  CHECK_FALSE(parse_ppcid_layout("ts_high").has_value());
  CHECK(to_string(PpcidLayout::kPathHigh) == "path-high");
}

TEST_CASE("PPCID round trip for both layouts, never 0x0000") {
  std::mt19937 rng(7);
  for (PpcidLayout layout : {PpcidLayout::kTsHigh, PpcidLayout::kPathHigh}) {
    const unsigned max_path = max_path_id(layout);
    for (int i = 0; i < 20000; ++i) {
      const uint32_t qp = rng() & 0xFFFFFF, psn = rng() & 0xFFFFFF;
      const uint8_t path = static_cast<uint8_t>(rng() % (max_path + 1));
      const uint8_t ts = ppcid_timestamp_hash(rng(), layout == PpcidLayout::kTsHigh ? 8 : 4);
      const uint16_t v = ppcid_encode(layout, path, ts, qp, psn);
      REQUIRE(v != 0);
      const PpcidFields f = ppcid_decode(v, layout);
      CHECK(f.path_id == path);
      CHECK(f.check == ppcid_check_nibble(qp, psn));
      PathIdSet known;
      known.set(path);
      CHECK(ppcid_read(v, layout, qp, psn, known).verdict == PpcidVerdict::kOk);
      CHECK(ppcid_read(v, layout, qp, psn, known).path_id == path);
    }
  }
  // The one all-zero encoding is moved off zero and still decodes to path 0 with its check.
  for (PpcidLayout layout : {PpcidLayout::kTsHigh, PpcidLayout::kPathHigh}) {
    const uint16_t v = ppcid_encode(layout, 0, 0, 0x11, 0x11);
    CHECK(v != 0);
    CHECK(ppcid_decode(v, layout).path_id == 0);
    PathIdSet known;
    known.set(0);
    CHECK(ppcid_read(v, layout, 0x11, 0x11, known).verdict == PpcidVerdict::kOk);
  }
}

TEST_CASE("a receiver reading the other layout detects the mismatch") {
  // Sender path-high, receiver ts-high, paths 1..4 known: the sender's path id lands where the
  // receiver expects the timestamp, and the receiver's path nibble holds the sender's timestamp.
  PathIdSet known;
  for (int p = 1; p <= 4; ++p) known.set(p);
  int mismatches = 0, wrong_ok = 0;
  std::mt19937 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t qp = rng() & 0xFFFFFF, psn = rng() & 0xFFFFFF;
    const uint8_t path = static_cast<uint8_t>(1 + i % 4);
    const uint8_t ts = static_cast<uint8_t>(0x8 | (rng() & 0x7));  // timestamps not a known path
    const uint16_t v = ppcid_encode(PpcidLayout::kPathHigh, path, ts, qp, psn);
    const PpcidReading r = ppcid_read(v, PpcidLayout::kTsHigh, qp, psn, known);
    if (r.verdict == PpcidVerdict::kLayoutMismatch) {
      ++mismatches;
      CHECK(r.path_id == path);
    }
    if (r.verdict == PpcidVerdict::kOk) ++wrong_ok;
  }
  CHECK(mismatches == 1000);
  CHECK(wrong_ok == 0);
}

TEST_CASE("absent, bad check and unknown path are told apart") {
  PathIdSet known;
  known.set(3);
  CHECK(ppcid_read(0, PpcidLayout::kTsHigh, 1, 2, known).verdict == PpcidVerdict::kAbsent);
  const uint16_t v = ppcid_encode(PpcidLayout::kTsHigh, 3, 0x42, 0x11, 0x200);
  CHECK(ppcid_read(v ^ 0x1, PpcidLayout::kTsHigh, 0x11, 0x200, known).verdict ==
        PpcidVerdict::kBadCheck);
  CHECK(ppcid_read(v, PpcidLayout::kTsHigh, 0x11, 0x201, known).verdict == PpcidVerdict::kBadCheck);
  const uint16_t other = ppcid_encode(PpcidLayout::kTsHigh, 9, 0xF0, 0x11, 0x200);
  CHECK(ppcid_read(other, PpcidLayout::kTsHigh, 0x11, 0x200, known).verdict ==
        PpcidVerdict::kUnknownPath);
}

TEST_CASE("timestamp hash folds 10 ns units") {
  CHECK(ppcid_timestamp_hash(0, 8) == 0);
  CHECK(ppcid_timestamp_hash(10, 8) == 1);
  CHECK(ppcid_timestamp_hash(2550, 8) == 255);
  CHECK(ppcid_timestamp_hash(2560, 8) == 1);  // 256 -> 0x01 ^ 0x00
  CHECK(ppcid_timestamp_hash(150, 4) == 15);
  CHECK(ppcid_timestamp_hash(160, 4) == 1);  // 16 -> 0x1 ^ 0x0
}
