#include "dataplane/forwarding/traffic_class_map.h"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"

using namespace spraynet;

namespace {

// A real frame through the real parser, so that the test exercises the fields as parsed.
ParsedPacket parsed_udp(uint8_t tos, bool vlan, uint8_t pcp, bool roce = false) {
  FrameSpec f;
  f.eth.vlan = vlan;
  f.eth.pcp = pcp;
  f.eth.vlan_id = 100;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.ip.tos = tos;
  f.udp.src_port = 0xC000;
  f.udp.dst_port = 5000;
  std::vector<uint8_t> frame(256);
  const size_t len = roce ? build_roce_frame(frame, f, RoceSpec{}) : build_udp_frame(frame, f);
  REQUIRE(len > 0);
  ParsedPacket p;
  REQUIRE(PacketParser().parse(frame.data(), len, p) == ParseStatus::kOk);
  return p;
}

// ARP, tagged or not (non-IP: parse stops at kNotIpv4, but the L2 fields are filled).
ParsedPacket parsed_arp(bool vlan, uint8_t pcp) {
  std::vector<uint8_t> frame = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1};
  if (vlan) {
    frame.insert(frame.end(), {0x81, 0x00, uint8_t(pcp << 5), 100});
  }
  frame.insert(frame.end(), {0x08, 0x06});
  frame.resize(60, 0);
  ParsedPacket p;
  CHECK(PacketParser().parse(frame.data(), frame.size(), p) == ParseStatus::kNotIpv4);
  return p;
}

}  // namespace

TEST_CASE("trust mode names parse and print") {
  CHECK(parse_trust_mode("dscp") == TrustMode::kDscp);
  CHECK(parse_trust_mode("pcp") == TrustMode::kPcp);
  CHECK_FALSE(parse_trust_mode("DSCP").has_value());
  CHECK_FALSE(parse_trust_mode("cos").has_value());
  CHECK(to_string(TrustMode::kPcp) == "pcp");
  CHECK(to_string(TrustMode::kDscp) == "dscp");
}

TEST_CASE("default maps: DSCP >> 3, PCP identity") {
  const TrafficClassMap m;
  CHECK(m.trust() == TrustMode::kDscp);
  for (uint8_t d = 0; d < 64; ++d) CHECK(m.dscp_class(d) == d >> 3);
  for (uint8_t p = 0; p < 8; ++p) CHECK(m.pcp_class(p) == p);
  // DSCP 26 (AF31, the usual RoCE marking) is TOS 0x68: class 3. ECN bits do not matter.
  CHECK(m.classify(parsed_udp(0x68, false, 0)) == 3);
  CHECK(m.classify(parsed_udp(0x6B, false, 0)) == 3);
  CHECK(m.classify(parsed_udp(0xB8, false, 0, true)) == 5);  // EF, RoCE
}

TEST_CASE("classification follows the trust mode, with the fallbacks") {
  TrafficClassMap m(TrustMode::kDscp);
  // dscp trust: a tagged IP packet still classifies by DSCP.
  CHECK(m.classify(parsed_udp(46 << 2, true, 1)) == 5);
  // Non-IP: the PCP when tagged, else 0.
  CHECK(m.classify(parsed_arp(true, 6)) == 6);
  CHECK(m.classify(parsed_arp(false, 0)) == 0);

  m.set_trust(TrustMode::kPcp);
  CHECK(m.classify(parsed_udp(46 << 2, true, 1)) == 1);        // tagged: PCP
  CHECK(m.classify(parsed_udp(46 << 2, false, 0)) == 5);       // untagged: DSCP
  CHECK(m.classify(parsed_udp(26 << 2, true, 3, true)) == 3);  // RoCE, tagged
  CHECK(m.classify(parsed_arp(true, 6)) == 6);
  CHECK(m.classify(parsed_arp(false, 0)) == 0);
  // A packet the parser gave up on early has no trusted field: class 0.
  CHECK(m.classify(ParsedPacket{}) == 0);
}

TEST_CASE("overrides change one entry and validate their input") {
  TrafficClassMap m;
  m.set_dscp(26, 5);  // steer RoCE (AF31) to class 5
  m.set_pcp(3, 0);
  CHECK(m.dscp_class(26) == 5);
  CHECK(m.dscp_class(27) == 3);  // neighbours untouched
  CHECK(m.classify(parsed_udp(26 << 2, false, 0)) == 5);
  CHECK(m.pcp_class(3) == 0);
  m.set_trust(TrustMode::kPcp);
  CHECK(m.classify(parsed_udp(26 << 2, true, 3)) == 0);

  CHECK_THROWS_WITH(m.set_dscp(64, 1), Catch::Contains("DSCP 64"));
  CHECK_THROWS_WITH(m.set_dscp(10, 8), Catch::Contains("class 8"));
  CHECK_THROWS_WITH(m.set_pcp(8, 1), Catch::Contains("PCP 8"));
  CHECK_THROWS_AS(m.set_pcp(2, 200), std::invalid_argument);
  CHECK(m.dscp_class(10) == 1);  // refused overrides change nothing
  CHECK(m.pcp_class(2) == 2);
}
