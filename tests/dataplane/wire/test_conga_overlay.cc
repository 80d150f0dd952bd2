// CONGA's overlay on the wire (dataplane/wire/conga_overlay.h), checked byte by byte against
// offsets and values the test writes out itself, on the RoCEv2 test vector of DESIGN.md.
#include "dataplane/wire/conga_overlay.h"

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "dataplane/wire/icrc.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ipv4_checksum.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

std::vector<uint8_t> bytes_of(const rte_mbuf* m) {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  return {p, p + rte_pktmbuf_data_len(m)};
}

uint16_t be16(const std::vector<uint8_t>& b, size_t at) {
  return uint16_t(b[at] << 8 | b[at + 1]);
}

}  // namespace

TEST_CASE("encapsulation: VXLAN with the CONGA fields, inner frame untouched") {
  TestPool pool;
  auto inner = test::roce_vector_frame();
  inner[15] = 0x1A;  // DSCP 6, ECT(0): the outer header copies both
  rte_mbuf* m = pool.make(inner);
  CongaFields f;
  f.lbtag = 5;
  f.ce = 3;
  f.fb_valid = true;
  f.fb_lbtag = 9;
  f.fb_metric = 6;
  f.src_leaf = 2;
  f.vni = 0xABCDEF;
  const CongaTunnel t{0x0A0000FF, 0x0A0001FF, 0x12345678};
  REQUIRE(conga_encapsulate(m, t, f));
  const auto b = bytes_of(m);
  REQUIRE(b.size() == inner.size() + 50);
  // Outer Ethernet: the inner MACs, IPv4.
  CHECK(std::equal(b.begin(), b.begin() + 12, inner.begin()));
  CHECK(be16(b, 12) == 0x0800);
  // Outer IPv4.
  CHECK(b[14] == 0x45);
  CHECK(b[15] == 0x1A);
  CHECK(be16(b, 16) == inner.size() + 36);
  CHECK(be16(b, 20) == 0x4000);
  CHECK(b[22] == 64);
  CHECK(b[23] == 17);
  CHECK(std::vector<uint8_t>(b.begin() + 26, b.begin() + 34) ==
        std::vector<uint8_t>{10, 0, 0, 0xFF, 10, 0, 1, 0xFF});
  CHECK(test::ipv4_checksum_ok(b.data() + 14));
  // UDP: 0xC000 | the hash's low 14 bits (0x5678 & 0x3FFF = 0x1678), to 4789, checksum 0.
  CHECK(be16(b, 34) == (0xC000 | 0x1678));
  CHECK(be16(b, 36) == 4789);
  CHECK(be16(b, 38) == inner.size() + 16);
  CHECK(be16(b, 40) == 0);
  // VXLAN: flags I|C, LBTag 5 CE 3 FB 1 = 0101 011 1, FB_LBTag 9 FB_Metric 6 = 1001 110 0.
  CHECK(b[42] == 0x48);
  CHECK(b[43] == 0x57);
  CHECK(b[44] == 0x9C);
  CHECK(b[45] == 0);
  CHECK(b[46] == 0xAB);
  CHECK(b[47] == 0xCD);
  CHECK(b[48] == 0xEF);
  CHECK(b[49] == 2);
  CHECK(std::equal(b.begin() + 50, b.end(), inner.begin()));

  uint32_t dst = 0;
  const auto back = conga_parse(m, &dst);
  REQUIRE(back.has_value());
  CHECK(dst == 0x0A0001FF);
  CHECK(back->lbtag == 5);
  CHECK(back->ce == 3);
  CHECK(back->fb_valid);
  CHECK(back->fb_lbtag == 9);
  CHECK(back->fb_metric == 6);
  CHECK(back->src_leaf == 2);
  CHECK(back->vni == 0xABCDEF);
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("CE is raised to the largest metric, never lowered, capped at 7") {
  TestPool pool;
  rte_mbuf* m = pool.make(test::roce_vector_frame());
  CongaFields f;
  f.lbtag = 15;
  REQUIRE(conga_encapsulate(m, CongaTunnel{1, 2, 0}, f));
  CHECK(conga_parse(m)->ce == 0);
  // Two hops: 3 then 2 leaves 3; then 6; then 9 caps at 7. LBTag and FB valid are untouched.
  CHECK(conga_raise_ce(m, 3));
  CHECK(conga_raise_ce(m, 2));
  CHECK(conga_parse(m)->ce == 3);
  CHECK(conga_raise_ce(m, 6));
  CHECK(conga_parse(m)->ce == 6);
  CHECK(conga_raise_ce(m, 9));
  CHECK(conga_parse(m)->ce == 7);
  CHECK(conga_parse(m)->lbtag == 15);
  CHECK_FALSE(conga_parse(m)->fb_valid);
  CHECK(bytes_of(m)[43] == (15 << 4 | 7 << 1));
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("decapsulation gives back the inner frame, its ICRC valid, CE carried in") {
  TestPool pool;
  const auto inner = test::roce_vector_frame();
  auto ect = inner;
  ect[15] = 0x02;  // ECT(0)
  test::fix_ipv4_checksum(ect, test::kVectorL3Offset);
  for (const bool marked : {false, true}) {
    rte_mbuf* m = pool.make(ect);
    REQUIRE(conga_encapsulate(m, CongaTunnel{1, 2, 3}, CongaFields{}));
    if (marked) rte_pktmbuf_mtod(m, uint8_t*)[15] |= 0x3;  // a spine marked the outer header
    REQUIRE(conga_decapsulate(m));
    auto b = bytes_of(m);
    REQUIRE(b.size() == ect.size());
    CHECK((b[15] & 0x3) == (marked ? 0x3 : 0x2));
    CHECK(test::ipv4_checksum_ok(b.data() + 14));
    // Only the ECN bits differ, and the ICRC masks them.
    b[15] = ect[15];
    b[24] = ect[24];
    b[25] = ect[25];
    CHECK(b == ect);
    CHECK(verify_icrc(rte_pktmbuf_mtod(m, const uint8_t*) + test::kVectorL3Offset,
                      ect.size() - test::kVectorL3Offset));
    rte_pktmbuf_free(m);
  }
  // A non-ECT inner packet keeps its ECN bits (RFC 6040 would drop it; it never happens here,
  // the outer header copies the inner's).
  rte_mbuf* m = pool.make(inner);
  REQUIRE(conga_encapsulate(m, CongaTunnel{1, 2, 3}, CongaFields{}));
  rte_pktmbuf_mtod(m, uint8_t*)[15] |= 0x3;
  REQUIRE(conga_decapsulate(m));
  CHECK(bytes_of(m) == inner);
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("frames without the overlay are left alone") {
  TestPool pool;
  const auto inner = test::roce_vector_frame();
  rte_mbuf* m = pool.make(inner);
  CHECK_FALSE(conga_parse(m).has_value());
  CHECK_FALSE(conga_raise_ce(m, 5));
  CHECK_FALSE(conga_decapsulate(m));
  CHECK(bytes_of(m) == inner);
  // Plain VXLAN (flags I only): not CONGA's.
  REQUIRE(conga_encapsulate(m, CongaTunnel{1, 2, 3}, CongaFields{}));
  rte_pktmbuf_mtod(m, uint8_t*)[42] = 0x08;
  CHECK_FALSE(conga_parse(m).has_value());
  CHECK_FALSE(conga_decapsulate(m));
  rte_pktmbuf_free(m);
  // Truncated: an overlay header without a whole inner Ethernet header after it.
  std::vector<uint8_t> short_frame(60, 0);
  rte_mbuf* s = pool.make(short_frame);
  CHECK_FALSE(conga_parse(s).has_value());
  rte_pktmbuf_free(s);
  // Not IPv4 inside: refused, unchanged.
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  rte_mbuf* a = pool.make(arp);
  CHECK_FALSE(conga_encapsulate(a, CongaTunnel{1, 2, 3}, CongaFields{}));
  CHECK(bytes_of(a) == arp);
  // No headroom: refused, unchanged.
  rte_mbuf* h = pool.alloc();
  h->data_off = 10;
  std::memcpy(rte_pktmbuf_append(h, static_cast<uint16_t>(inner.size())), inner.data(),
              inner.size());
  const auto before = bytes_of(h);
  REQUIRE(before == inner);
  CHECK_FALSE(conga_encapsulate(h, CongaTunnel{1, 2, 3}, CongaFields{}));
  CHECK(bytes_of(h) == before);
  rte_pktmbuf_free(a);
  rte_pktmbuf_free(h);
  CHECK(pool.whole());
}
