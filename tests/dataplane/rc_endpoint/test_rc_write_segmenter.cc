#include "dataplane/rc_endpoint/rc_write_segmenter.h"

#include <catch2/catch.hpp>

#include "dataplane/wire/roce_headers.h"

using namespace spraynet;

TEST_CASE("a message that fits one MTU is one WRITE ONLY with AckReq") {
  RcWriteSegmenter s(1024, 1024);
  REQUIRE(s.packets() == 1);
  const auto p = s.packet(0, 0x42);
  CHECK(p.opcode == opcode::kRcWriteOnly);
  CHECK(p.psn == 0x42);
  CHECK(p.length == 1024);
  CHECK(p.has_reth);
  CHECK(p.ack_req);
  RcWriteSegmenter empty(0, 4096);
  CHECK(empty.packets() == 1);
  CHECK(empty.packet(0, 0).length == 0);
  CHECK(empty.packet(0, 0).opcode == opcode::kRcWriteOnly);
}

TEST_CASE("FIRST, MIDDLE..., LAST with consecutive PSNs across the 2^24 wrap") {
  RcWriteSegmenter s(10000, 4096);
  REQUIRE(s.packets() == 3);
  const uint32_t first = 0xFFFFFF;
  const auto a = s.packet(0, first), b = s.packet(1, first), c = s.packet(2, first);
  CHECK(a.opcode == opcode::kRcWriteFirst);
  CHECK(b.opcode == opcode::kRcWriteMiddle);
  CHECK(c.opcode == opcode::kRcWriteLast);
  CHECK(a.psn == 0xFFFFFF);
  CHECK(b.psn == 0x000000);
  CHECK(c.psn == 0x000001);
  CHECK(a.length + b.length + c.length == 10000);
  CHECK(c.length == 10000 - 2 * 4096);
  CHECK(c.offset == 8192);
  CHECK(a.has_reth);
  CHECK_FALSE(b.has_reth);
  CHECK_FALSE(a.ack_req);
  CHECK_FALSE(b.ack_req);
  CHECK(c.ack_req);
}

TEST_CASE("exact multiples of the MTU end with a full LAST packet") {
  RcWriteSegmenter s(2048, 1024);
  REQUIRE(s.packets() == 2);
  CHECK(s.packet(1, 0).length == 1024);
  CHECK(s.packet(1, 0).opcode == opcode::kRcWriteLast);
}

TEST_CASE("only IB path MTUs are accepted") {
  CHECK_THROWS_AS(RcWriteSegmenter(100, 1500), std::invalid_argument);
  CHECK_THROWS_AS(RcWriteSegmenter(100, 0), std::invalid_argument);
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) CHECK(valid_path_mtu(mtu));
}

TEST_CASE("PSN serial arithmetic") {
  CHECK(psn_add(0xFFFFFF, 1) == 0);
  CHECK(psn_diff(0xFFFFFE, 0x000001) == 3);
  CHECK(psn_diff(0x000001, 0xFFFFFE) == -3);
  CHECK(psn_before(0xFFFFF0, 0x10));
  CHECK_FALSE(psn_before(0x10, 0xFFFFF0));
  CHECK_FALSE(psn_before(5, 5));
}
