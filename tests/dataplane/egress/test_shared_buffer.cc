#include "dataplane/egress/shared_buffer.h"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint8_t kPg = 3;

SharedBufferConfig config(size_t ports, uint64_t pool_bytes, uint64_t headroom_bytes) {
  SharedBufferConfig c;
  c.pool_bytes = pool_bytes;
  c.port_headroom_bytes.assign(ports, headroom_bytes);
  return c;
}

}  // namespace

TEST_CASE("Shared buffer config: defaults are valid, nonsense is refused by key") {
  SharedBufferConfig c = config(2, SharedBufferConfig::kDefaultPoolBytes, 60'000);
  CHECK(c.check().empty());
  CHECK(c.pool_bytes == 32u << 20);
  CHECK(c.alpha == 1.0);
  CHECK(c.static_threshold_bytes == 0);
  CHECK(c.xoff_offset_bytes == 0);
  CHECK(c.xon_offset_bytes == 16384);

  SharedBufferConfig bad = c;
  bad.alpha = 0;
  CHECK(bad.check() == "alpha: must be in [1/128, 128] (SONiC dynamic_th -7..7)");
  bad.static_threshold_bytes = 4096;  // a static threshold makes alpha irrelevant
  CHECK(bad.check().empty());
  bad.static_threshold_bytes = c.pool_bytes + 1;
  CHECK(bad.check() == "static_threshold_bytes: must not exceed pool_bytes (33554432)");
  bad = c;
  bad.pool_bytes = 1000;
  CHECK(bad.check() == "pool_bytes: must be at least 65536");
  bad = c;
  bad.xon_offset_bytes = c.pool_bytes;
  CHECK(bad.check() == "xon_offset_bytes: must be below pool_bytes");
  bad = c;
  bad.port_headroom_bytes[1] = 0;
  CHECK(bad.check() == "port_headroom_bytes[1]: must be > 0");
  CHECK_THROWS_AS(SharedBuffer(bad), std::invalid_argument);
}

TEST_CASE("Auto headroom: 2 x rate x delay + 2 x MTU + the XOFF frame + the peer's reaction") {
  // 100G = 12.5 B/ns: 12.5 x (2 x 1000 + 2100) = 51,250; + 2 x 4352 + 84.
  CHECK(SharedBuffer::auto_headroom_bytes(100.0, 1000, 4352) == 60'038);
  // 400G, the same cable: four times the bytes in flight.
  CHECK(SharedBuffer::auto_headroom_bytes(400.0, 1000, 4352) == 205'000 + 8704 + 84);
  // 100 m more fibre (~500 ns) at 100G adds 2 x 12.5 x 500 bytes.
  CHECK(SharedBuffer::auto_headroom_bytes(100.0, 1500, 4352) -
            SharedBuffer::auto_headroom_bytes(100.0, 1000, 4352) ==
        12'500);
}

TEST_CASE("Dynamic threshold: n congested PGs settle at alpha x B / (1 + alpha x n) each") {
  const double alpha = GENERATE(0.25, 1.0, 2.0, 8.0);
  const size_t n = GENERATE(1, 2, 5, 8);
  constexpr uint64_t kPool = 4'000'000;
  constexpr uint32_t kPacket = 100;
  SharedBufferConfig c = config(n, kPool, 1'000'000);
  c.alpha = alpha;
  c.xon_offset_bytes = 0;
  SharedBuffer b(c);
  CHECK(b.dynamic());
  CHECK(b.threshold_bytes() == static_cast<uint64_t>(alpha * kPool));

  // Every PG's sender keeps sending, round robin, until every one has been told to stop.
  size_t asserted = 0;
  for (int round = 0; asserted < n && round < 1'000'000; ++round) {
    for (uint16_t port = 0; port < n; ++port) {
      if (b.xoff(port, kPg)) continue;
      REQUIRE(b.admit(port, kPg, kPacket));
      if (b.add(port, kPg, kPacket)) ++asserted;
    }
  }
  REQUIRE(asserted == n);
  CHECK(b.xoff_asserted() == n);
  const double expected = alpha * kPool / (1.0 + alpha * static_cast<double>(n));
  INFO("alpha " << alpha << ", " << n << " PGs: expected " << expected << " each");
  for (uint16_t port = 0; port < n; ++port) {
    CHECK(static_cast<double>(b.shared_bytes(port, kPg)) == Approx(expected).epsilon(0.01));
    // At most the one packet that found the (meanwhile lower) threshold passed.
    CHECK(b.headroom_used_bytes(port, kPg) <= kPacket);
  }
  CHECK(b.pool_used_bytes() <= kPool);
  CHECK(b.pool_peak_bytes() == b.pool_used_bytes());

  // After XOFF, arrivals go to the headroom, not the pool.
  const uint64_t headroom = b.headroom_used_bytes(0, kPg);
  const uint64_t pool_used = b.pool_used_bytes();
  REQUIRE(b.admit(0, kPg, kPacket));
  CHECK_FALSE(b.add(0, kPg, kPacket));  // already asserted
  CHECK(b.headroom_used_bytes(0, kPg) == headroom + kPacket);
  CHECK(b.pool_used_bytes() == pool_used);
  CHECK(b.occupancy_bytes(0, kPg) == b.shared_bytes(0, kPg) + headroom + kPacket);
}

TEST_CASE("Static threshold: XOFF at threshold - xoff_offset, XON at threshold - xon_offset") {
  SharedBufferConfig c = config(2, 1'000'000, 10'000);
  c.static_threshold_bytes = 50'000;
  c.xoff_offset_bytes = 5'000;
  c.xon_offset_bytes = 20'000;
  SharedBuffer b(c);
  CHECK_FALSE(b.dynamic());
  for (int i = 1; i < 45; ++i) REQUIRE_FALSE(b.add(0, kPg, 1000));
  CHECK(b.shared_bytes(0, kPg) == 44'000);
  CHECK(b.add(0, kPg, 1000));  // 45,000 = 50,000 - 5,000: XOFF
  CHECK(b.xoff(0, kPg));
  CHECK_FALSE(b.xoff(1, kPg));
  CHECK(b.threshold_bytes() == 50'000);  // static: other PGs' bytes do not move it

  // What arrives after XOFF (the bytes in flight) fills the headroom; then it refuses.
  for (int i = 0; i < 10; ++i) {
    REQUIRE(b.admit(0, kPg, 1000));
    b.add(0, kPg, 1000);
  }
  CHECK(b.headroom_used_bytes(0, kPg) == 10'000);
  CHECK(b.shared_bytes(0, kPg) == 45'000);
  CHECK_FALSE(b.admit(0, kPg, 1));
  CHECK(b.headroom_overflows(0, kPg) == 1);
  CHECK(b.headroom_overflows() == 1);
  CHECK(b.admit(1, kPg, 1000));  // another PG is not affected
  CHECK(b.headroom_overflows(1, kPg) == 0);
  CHECK(b.peak_headroom_used_bytes(0, kPg) == 10'000);

  // Draining frees the headroom first; XON once the headroom is empty and the shared bytes are
  // down to 30,000 (50,000 - 20,000), inclusive.
  CHECK_FALSE(b.release(0, kPg, 10'000));
  CHECK(b.headroom_used_bytes(0, kPg) == 0);
  CHECK(b.shared_bytes(0, kPg) == 45'000);
  for (int i = 0; i < 14; ++i) REQUIRE_FALSE(b.release(0, kPg, 1000));
  CHECK(b.shared_bytes(0, kPg) == 31'000);
  CHECK(b.release(0, kPg, 1000));
  CHECK_FALSE(b.xoff(0, kPg));
  CHECK(b.xoff_asserted() == 0);
  CHECK(b.peak_headroom_used_bytes(0, kPg) == 10'000);  // the peak stays
}

TEST_CASE("Pool full: a packet the pool cannot take goes to the headroom with XOFF") {
  SharedBufferConfig c = config(3, 65'536, 8'192);
  c.static_threshold_bytes = 40'000;  // two PGs at their threshold would need 80,000
  SharedBuffer b(c);
  for (int i = 0; i < 39; ++i) b.add(0, kPg, 1000);
  CHECK_FALSE(b.xoff(0, kPg));
  for (int i = 0; i < 26; ++i) REQUIRE_FALSE(b.add(1, kPg, 1000));
  CHECK(b.pool_used_bytes() == 65'000);
  CHECK(b.add(1, kPg, 1000));  // 66,000 > 65,536
  CHECK(b.shared_bytes(1, kPg) == 26'000);
  CHECK(b.headroom_used_bytes(1, kPg) == 1000);
  CHECK(b.pool_peak_bytes() == 65'000);
  CHECK(b.pool_peak_bytes() <= b.pool_bytes());
}

TEST_CASE(
    "XON re-evaluation: a PG asserted under a low dynamic threshold is let go as others "
    "drain, without releasing a byte itself") {
  SharedBufferConfig c = config(2, 1'000'000, 100'000);
  c.alpha = 1.0;
  c.xon_offset_bytes = 16'384;
  SharedBuffer b(c);
  // PG 1 alone: XOFF at half the pool.
  while (!b.add(1, kPg, 1000)) {
  }
  CHECK(b.shared_bytes(1, kPg) == 500'000);
  // PG 0 next: T = 1,000,000 - 500,000 - s0, XOFF at s0 = 250,000.
  while (!b.add(0, kPg, 1000)) {
  }
  CHECK(b.shared_bytes(0, kPg) == 250'000);
  CHECK(b.threshold_bytes() == 250'000);

  // PG 1 drains. PG 0 is due XON once T >= 250,000 + 16,384, i.e. s1 <= 483,616; PG 1's own
  // XON needs s1 + 16,384 <= 750,000 - s1, i.e. s1 <= 366,808: PG 0 goes first.
  std::vector<uint16_t> xons;
  uint64_t s1_at_xon = 0;
  while (b.xoff(1, kPg)) {
    const bool own = b.release(1, kPg, 1000);
    b.release_due_xoffs([&](uint16_t port, uint8_t pg) {
      CHECK(pg == kPg);
      xons.push_back(port);
      s1_at_xon = b.shared_bytes(1, kPg);
    });
    if (own) xons.push_back(1);
  }
  REQUIRE(xons == std::vector<uint16_t>{0, 1});
  CHECK(s1_at_xon == 483'000);               // the first 1000-byte step at or below 483,616
  CHECK(b.shared_bytes(0, kPg) == 250'000);  // PG 0 did not move
  CHECK(b.shared_bytes(1, kPg) == 366'000);
  CHECK(b.xoff_asserted() == 0);
}

TEST_CASE("A static threshold does not move: an asserted PG waits for its own bytes to leave") {
  SharedBufferConfig c = config(2, 1'000'000, 100'000);
  c.static_threshold_bytes = 300'000;
  c.xon_offset_bytes = 10'000;
  SharedBuffer b(c);
  while (!b.add(0, kPg, 1000)) {
  }
  while (!b.add(1, kPg, 1000)) {
  }
  CHECK(b.shared_bytes(0, kPg) == 300'000);
  int own_xons = 0;
  for (int i = 0; i < 299; ++i) own_xons += b.release(1, kPg, 1000) ? 1 : 0;
  CHECK(own_xons == 1);  // at 290,000
  int calls = 0;
  b.release_due_xoffs([&](uint16_t, uint8_t) { ++calls; });
  CHECK(calls == 0);
  CHECK(b.xoff(0, kPg));
  CHECK_FALSE(b.release(0, kPg, 9'000));
  CHECK(b.release(0, kPg, 1'000));  // 290,000 = 300,000 - 10,000
}

TEST_CASE("Releases beyond what is held are counted and clamp; unknown PGs are ignored") {
  SharedBuffer b(config(1, 65'536, 8'192));
  b.add(0, kPg, 1000);
  b.release(0, kPg, 1500);
  CHECK(b.accounting_underflows() == 1);
  CHECK(b.occupancy_bytes(0, kPg) == 0);
  CHECK(b.pool_used_bytes() == 0);
  CHECK(b.admit(5, kPg, 1'000'000));  // unknown port: not the buffer's to refuse
  CHECK_FALSE(b.add(5, kPg, 1000));
  CHECK_FALSE(b.release(0, 9, 1000));
  CHECK(b.accounting_underflows() == 1);
  CHECK(b.pool_used_bytes() == 0);
}
