// ConWeave's overlay on the wire (dataplane/wire/conweave_overlay.h), byte by byte against
// offsets and values the test writes out itself, on the RoCEv2 test vector of DESIGN.md.
#include "dataplane/wire/conweave_overlay.h"

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <vector>

#include "dataplane/wire/conga_overlay.h"
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

}  // namespace

TEST_CASE("a data packet: VXLAN I|W, the fields, two timestamps, the inner frame untouched") {
  TestPool pool;
  auto inner = test::roce_vector_frame();
  inner[15] = 0x1A;  // DSCP 6, ECT(0)
  test::fix_ipv4_checksum(inner, test::kVectorL3Offset);
  rte_mbuf* m = pool.make(inner);
  ConweaveTag t;
  t.member = 6;
  t.epoch = 200;
  t.phase = 1;
  t.flag = ConweaveFlag::kTail;
  t.ts_tx = 0x11223344;
  t.ts_tail = 0x55667788;
  REQUIRE(conweave_encapsulate(m, VxlanTunnel{0x0A0000FF, 0x0A0003FF, 0x1234}, t, 9, 0x000102));
  const auto b = bytes_of(m);
  REQUIRE(b.size() == inner.size() + 58);
  CHECK(b[15] == 0x1A);  // outer TOS: the inner's
  CHECK(test::ipv4_checksum_ok(b.data() + 14));
  CHECK(size_t(b[16] << 8 | b[17]) == inner.size() + 44);  // IPv4 length: 20 + 8 + 8 + 8 + inner
  CHECK((b[36] << 8 | b[37]) == 4789);
  CHECK(b[42] == 0x28);                        // I | W
  CHECK(b[43] == (0 << 6 | 3 << 4 | 1 << 3));  // data, TAIL, phase 1
  CHECK(b[44] == 200);
  CHECK(b[45] == 6);
  CHECK(std::vector<uint8_t>(b.begin() + 46, b.begin() + 50) ==
        std::vector<uint8_t>{0x00, 0x01, 0x02, 9});
  CHECK(std::vector<uint8_t>(b.begin() + 50, b.begin() + 58) ==
        std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88});
  CHECK(std::equal(b.begin() + 58, b.end(), inner.begin()));
  // Not CONGA's: the C flag is not set.
  CHECK_FALSE(conga_parse(m).has_value());
  uint32_t dst = 0;
  const auto w = conweave_parse(m, &dst);
  REQUIRE(w.has_value());
  CHECK(dst == 0x0A0003FF);
  CHECK(w->message == ConweaveMessage::kData);
  CHECK(w->tag.flag == ConweaveFlag::kTail);
  CHECK(w->tag.phase == 1);
  CHECK(w->tag.epoch == 200);
  CHECK(w->tag.member == 6);
  CHECK(w->tag.ts_tx == 0x11223344);
  CHECK(w->tag.ts_tail == 0x55667788);
  CHECK(w->leaf == 9);
  CHECK(w->vni == 0x000102);
  // A spine's CE mark on the outer header reaches the inner one; the ICRC masks it.
  rte_pktmbuf_mtod(m, uint8_t*)[15] |= 0x3;
  REQUIRE(conweave_decapsulate(m));
  auto out = bytes_of(m);
  REQUIRE(out.size() == inner.size());
  CHECK((out[15] & 3) == 3);
  CHECK(test::ipv4_checksum_ok(out.data() + 14));
  CHECK(verify_icrc(out.data() + 14, out.size() - 14));
  out[15] = inner[15];
  out[24] = inner[24];
  out[25] = inner[25];
  CHECK(out == inner);
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("control messages: 60-byte frames with the flow key, in the class given") {
  TestPool pool;
  const uint8_t macs[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
  for (const auto kind :
       {ConweaveMessage::kRttReply, ConweaveMessage::kClear, ConweaveMessage::kNotify}) {
    rte_mbuf* m = pool.alloc();
    ConweaveWire w;
    w.message = kind;
    w.tag.epoch = 17;
    w.tag.phase = kind == ConweaveMessage::kClear ? 1 : 0;
    w.tag.member = 11;
    w.leaf = 3;
    w.flow_key = 0x0102030405060708ull;
    REQUIRE(conweave_control(m, macs, VxlanTunnel{0x0A0003FF, 0x0A0000FF, 7}, 48, w));
    const auto b = bytes_of(m);
    REQUIRE(b.size() == 60);
    CHECK(std::equal(b.begin(), b.begin() + 12, macs));
    CHECK(b[15] == 48 << 2);
    CHECK((b[16] << 8 | b[17]) == 44);
    CHECK(test::ipv4_checksum_ok(b.data() + 14));
    CHECK(b[42] == 0x28);
    CHECK(b[43] >> 6 == static_cast<int>(kind));
    CHECK(std::vector<uint8_t>(b.begin() + 50, b.begin() + 58) ==
          std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
    const auto back = conweave_parse(m);
    REQUIRE(back.has_value());
    CHECK(back->message == kind);
    CHECK(back->flow_key == 0x0102030405060708ull);
    CHECK(back->tag.epoch == 17);
    CHECK(back->tag.phase == w.tag.phase);
    CHECK(back->tag.member == 11);
    CHECK(back->leaf == 3);
    CHECK_FALSE(conweave_decapsulate(m));  // nothing inside to give back
    rte_pktmbuf_free(m);
  }
  CHECK(pool.whole());
}

TEST_CASE("frames without ConWeave's overlay are left alone") {
  TestPool pool;
  const auto inner = test::roce_vector_frame();
  rte_mbuf* m = pool.make(inner);
  CHECK_FALSE(conweave_parse(m).has_value());
  CHECK_FALSE(conweave_decapsulate(m));
  // CONGA's overlay is not ConWeave's.
  REQUIRE(conga_encapsulate(m, CongaTunnel{1, 2, 3}, CongaFields{}));
  CHECK_FALSE(conweave_parse(m).has_value());
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}
