#include "dataplane/wire/flow_key.h"

#include <catch2/catch.hpp>

#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "tests/support/ipv4_checksum.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;

TEST_CASE("5-tuple of a RoCE packet, with and without DestQP") {
  const auto f = spraynet::test::roce_vector_frame();
  ParsedPacket p;
  REQUIRE(PacketParser().parse(f.data(), f.size(), p) == ParseStatus::kOk);
  const FlowKey k = make_flow_key(p, false);
  CHECK(k.src_ip == 0x0A000001);
  CHECK(k.dst_ip == 0x0A000002);
  CHECK(k.src_port == 0xC123);
  CHECK(k.dst_port == 4791);
  CHECK(k.proto() == 17);
  CHECK(k.dest_qp() == 0);
  const FlowKey kq = make_flow_key(p, true);
  CHECK(kq.dest_qp() == 0x11);
  CHECK(kq.proto() == 17);
  CHECK_FALSE(k == kq);
}

TEST_CASE("plain UDP has ports but no DestQP; fragments have no ports") {
  std::vector<uint8_t> payload(10, 0xAB);
  FrameSpec fs;
  fs.ip.src = 0xC0A80001;
  fs.ip.dst = 0xC0A80002;
  fs.udp.src_port = 1234;
  fs.udp.dst_port = 5678;
  fs.payload = payload;
  std::vector<uint8_t> f(128);
  f.resize(build_udp_frame(f, fs));
  ParsedPacket p;
  REQUIRE(PacketParser().parse(f.data(), f.size(), p) == ParseStatus::kOk);
  FlowKey k = make_flow_key(p, true);
  CHECK(k.src_port == 1234);
  CHECK(k.dst_port == 5678);
  CHECK(k.dest_qp() == 0);

  // Mark it a non-first fragment (offset 8) and fix the IP checksum.
  f[14 + 6] = 0x00;
  f[14 + 7] = 0x01;
  spraynet::test::fix_ipv4_checksum(f, 14);
  REQUIRE(PacketParser().parse(f.data(), f.size(), p) == ParseStatus::kOk);
  CHECK(p.ip_fragment);
  k = make_flow_key(p, true);
  CHECK(k.src_port == 0);
  CHECK(k.dst_port == 0);
  CHECK(k.src_ip == 0xC0A80001);
}
