#include "dataplane/egress/ecn_marker.h"

#include <rte_ip.h>
#include <rte_mbuf.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

constexpr uint16_t kL3 = 14;  // untagged Ethernet

// A RoCEv2 RDMA WRITE ONLY with the given ECN bits in its TOS (DSCP 26), ICRC written.
rte_mbuf* roce_packet(const TestPool& pool, uint8_t ecn) {
  std::vector<uint8_t> payload(1024, 0x5A);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000102;
  f.ip.tos = static_cast<uint8_t>((26 << 2) | ecn);
  f.udp.src_port = 0xC123;
  f.payload = payload;
  RoceSpec r;
  r.dest_qp = 0x000123;
  r.psn = 77;
  r.dma_length = 1024;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
  if (m == nullptr) throw std::runtime_error("build_roce_mbuf failed");
  return m;
}

uint8_t ecn_of(const rte_mbuf* m) {
  return rte_pktmbuf_mtod_offset(m, const uint8_t*, kL3)[1] & 3;
}

void set_ecn(rte_mbuf* m, uint8_t ecn) {
  // Test-side reset: write the TOS and recompute the checksum from scratch (DPDK's).
  auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, kL3);
  ip->type_of_service = static_cast<uint8_t>((ip->type_of_service & ~3) | ecn);
  ip->hdr_checksum = 0;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
}

EcnMarkerConfig class3(uint64_t kmin, uint64_t kmax, double pmax) {
  EcnMarkerConfig c;
  c.classes[3] = EcnClassConfig{true, kmin, kmax, pmax};
  c.seed = 42;
  return c;
}

}  // namespace

TEST_CASE("ecn: probability is 0 at or below kmin, linear to pmax at kmax, 1 above") {
  const EcnMarker e(class3(100'000, 400'000, 0.2));
  CHECK(e.mark_probability(3, 0) == 0);
  CHECK(e.mark_probability(3, 100'000) == 0);
  CHECK(e.mark_probability(3, 250'000) == Approx(0.1));
  CHECK(e.mark_probability(3, 400'000) == Approx(0.2));
  CHECK(e.mark_probability(3, 400'001) == 1);
  CHECK(e.mark_probability(2, 10'000'000) == 0);  // class off
  CHECK(e.mark_probability(9, 10'000'000) == 0);  // no such class
  // kmin == kmax: a step.
  const EcnMarker step(class3(50'000, 50'000, 1.0));
  CHECK(step.mark_probability(3, 50'000) == 0);
  CHECK(step.mark_probability(3, 50'001) == 1);
}

TEST_CASE("ecn: the marked fraction follows the formula within a binomial 99% interval") {
  TestPool pool;
  EcnMarker e(class3(100'000, 400'000, 0.2));
  rte_mbuf* m = roce_packet(pool, 0x2);  // ECT(0)
  const int n = 4000;
  for (uint64_t q : {100'000ull, 130'000ull, 175'000ull, 250'000ull, 325'000ull, 400'000ull,
                     400'001ull, 2'000'000ull}) {
    const double p = e.mark_probability(3, q);
    int marked = 0;
    for (int i = 0; i < n; ++i) {
      set_ecn(m, 0x2);
      if (e.on_packet(m, kL3, 3, q)) {
        ++marked;
        REQUIRE(ecn_of(m) == 3);
      } else {
        REQUIRE(ecn_of(m) == 2);
      }
    }
    const double mean = n * p;
    const double half = 2.576 * std::sqrt(n * p * (1 - p)) + 1;
    INFO("queue " << q << " bytes, p " << p << ", marked " << marked);
    CHECK(std::abs(marked - mean) <= half);
    if (p == 0) CHECK(marked == 0);
    if (p == 1) CHECK(marked == n);
  }
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("ecn: Not-ECT is never marked, CE stays CE, and each is counted") {
  TestPool pool;
  EcnMarker e(class3(0, 0, 1.0));  // every packet above 0 bytes would be marked
  rte_mbuf* m = roce_packet(pool, 0x0);
  for (int i = 0; i < 100; ++i) CHECK_FALSE(e.on_packet(m, kL3, 3, 1'000'000));
  CHECK(ecn_of(m) == 0);
  CHECK(e.counters(3).not_ect == 100);
  set_ecn(m, 0x3);
  CHECK_FALSE(e.on_packet(m, kL3, 3, 1'000'000));
  CHECK(e.counters(3).already_ce == 1);
  set_ecn(m, 0x1);  // ECT(1) is ECN-capable too
  CHECK(e.on_packet(m, kL3, 3, 1'000'000));
  CHECK(ecn_of(m) == 3);
  CHECK(e.counters(3).marked == 1);
  CHECK(e.total_marked() == 1);
  // Another class, off: untouched, uncounted.
  set_ecn(m, 0x2);
  CHECK_FALSE(e.on_packet(m, kL3, 0, 1'000'000));
  CHECK(ecn_of(m) == 2);
  // Not IPv4 where the caller says (an offset past the data): counted, untouched.
  CHECK_FALSE(e.on_packet(m, 60000, 3, 1'000'000));
  CHECK(e.counters(3).not_ipv4 == 1);
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("ecn: a marked packet's IPv4 checksum and ICRC still verify") {
  TestPool pool;
  EcnMarker e(class3(0, 0, 1.0));
  for (uint8_t ecn : {uint8_t{1}, uint8_t{2}}) {
    rte_mbuf* m = roce_packet(pool, ecn);
    const auto* ip = rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, kL3);
    const uint16_t before = ip->hdr_checksum;
    REQUIRE(e.on_packet(m, kL3, 3, 1));
    CHECK(ip->hdr_checksum != before);
    // The incremental update equals DPDK's checksum from scratch.
    rte_ipv4_hdr copy = *ip;
    copy.hdr_checksum = 0;
    CHECK(rte_ipv4_cksum(&copy) == ip->hdr_checksum);
    // The parser verifies both the IP checksum and the ICRC (which masks the TOS).
    const PacketParser parser(ParseOptions{true, true});
    ParsedPacket p;
    REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
    CHECK(p.kind == PacketKind::kRoce);
    CHECK((p.tos & 3) == 3);
    CHECK(p.dscp() == 26);
    CHECK(verify_icrc(m, kL3, p.l3_length(), nullptr));
    rte_pktmbuf_free(m);
  }
  CHECK(pool.whole());
}

TEST_CASE("ecn: the same seed draws the same marks; another seed others") {
  TestPool pool;
  rte_mbuf* m = roce_packet(pool, 0x2);
  const auto draws = [&](uint64_t seed) {
    EcnMarkerConfig c = class3(100'000, 400'000, 0.5);
    c.seed = seed;
    EcnMarker e(c);
    std::vector<bool> out;
    for (int i = 0; i < 500; ++i) {
      set_ecn(m, 0x2);
      out.push_back(e.on_packet(m, kL3, 3, 250'000));
    }
    return out;
  };
  CHECK(draws(7) == draws(7));
  CHECK(draws(7) != draws(8));
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("ecn: bad configs are refused with the key and the range") {
  EcnMarkerConfig c = class3(400'000, 100'000, 0.2);
  CHECK_THAT(c.check(), Catch::Contains("classes[3].kmin_bytes") && Catch::Contains("<= kmax"));
  CHECK_THROWS_WITH(EcnMarker(c), Catch::Contains("ecn: classes[3].kmin_bytes"));
  c = class3(1, 2, 0);
  CHECK_THAT(c.check(), Catch::Contains("classes[3].pmax: must be in (0, 1]"));
  c = class3(1, 2, 1.5);
  CHECK_FALSE(c.check().empty());
  c = class3(1, 2, 1.0);
  CHECK(c.check().empty());
  c.classes[3].enabled = false;
  c.classes[3].pmax = 7;  // a class that is off is not checked
  CHECK(c.check().empty());
}
