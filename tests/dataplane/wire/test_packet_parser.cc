#include "dataplane/wire/packet_parser.h"

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/int_header.h"
#include "dataplane/wire/packet_builder.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ipv4_checksum.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;
using spraynet::test::roce_vector_frame;
using spraynet::test::TestPool;

namespace {

constexpr size_t kL3 = 14;

void fix_ip_checksum(std::vector<uint8_t>& f, size_t l3 = kL3) {
  spraynet::test::fix_ipv4_checksum(f, l3);
}

// Parses from a heap block of exactly `len` bytes, so that AddressSanitizer catches any read
// past the end of the data.
ParseStatus parse_exact(const std::vector<uint8_t>& f, size_t len, ParsedPacket& out,
                        ParseOptions opt = {}) {
  auto block = std::make_unique<uint8_t[]>(len == 0 ? 1 : len);
  std::copy(f.begin(), f.begin() + static_cast<long>(len), block.get());
  return PacketParser(opt).parse(block.get(), len, out);
}

ParseStatus parse(const std::vector<uint8_t>& f, ParseOptions opt = {}) {
  ParsedPacket p;
  return parse_exact(f, f.size(), p, opt);
}

std::vector<uint8_t> vlan_roce_frame() {
  std::vector<uint8_t> payload(300);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  FrameSpec fs;
  fs.eth.vlan = true;
  fs.eth.pcp = 3;
  fs.eth.vlan_id = 100;
  fs.ip.src = 0x0A000101;
  fs.ip.dst = 0x0A000202;
  fs.ip.tos = (26 << 2) | 2;  // DSCP 26, ECT(0)
  fs.udp.src_port = 0xD00D;
  fs.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteFirst;
  r.dest_qp = 0xABCDEF;
  r.psn = 0xFFFFFE;
  r.virtual_address = 0x1000;
  r.rkey = 7;
  r.dma_length = 4096;
  std::vector<uint8_t> f(1024);
  f.resize(build_roce_frame(f, fs, r));
  return f;
}

}  // namespace

TEST_CASE("a well-formed tagged RoCE packet parses into every field") {
  const auto f = vlan_roce_frame();
  ParsedPacket p;
  REQUIRE(parse_exact(f, f.size(), p, {.verify_ip_checksum = true, .verify_icrc = true}) ==
          ParseStatus::kOk);
  CHECK(p.kind == PacketKind::kRoce);
  CHECK(p.vlan_tags == 1);
  CHECK(p.pcp == 3);
  CHECK(p.vlan_id == 100);
  CHECK(p.l3_offset == 18);
  CHECK(p.l4_offset == 38);
  CHECK(p.bth_offset == 46);
  CHECK(p.payload_offset == 46 + 12 + 16);
  CHECK(p.payload_length == 300);
  CHECK(p.dscp() == 26);
  CHECK(p.ttl == 64);
  CHECK(p.src_ip == 0x0A000101);
  CHECK(p.dst_ip == 0x0A000202);
  CHECK(p.src_port == 0xD00D);
  CHECK(p.dst_port == 4791);
  CHECK(p.udp_checksum == 0);
  CHECK(p.bth_opcode == opcode::kRcWriteFirst);
  CHECK(p.dest_qp == 0xABCDEF);
  CHECK(p.psn == 0xFFFFFE);
  CHECK_FALSE(p.ack_req);
}

TEST_CASE("RoCE behind INT parses as RoCE with the shim's offset; other shapes are UDP") {
  const auto plain = vlan_roce_frame();
  // 18 bytes of Ethernet and tag, 20 of IPv4, 8 of UDP: the shim at 46; the INT-MD header (12)
  // and two records (24 each) after it put the BTH at 46 + 4 + 12 + 48 = 110.
  for (const uint16_t port : {kIntUdpPort, kIntEchoUdpPort}) {
    auto f = plain;
    REQUIRE(int_insert(f, 5, port));
    IntHopRecord h;
    h.line_rate_mbps = 100'000;
    REQUIRE(int_push_hop(f, h, port) == IntPushResult::kPushed);
    REQUIRE(int_push_hop(f, h, port) == IntPushResult::kPushed);
    ParsedPacket p;
    // The ICRC does not hold until the INT is stripped: asking for it changes nothing here.
    REQUIRE(parse_exact(f, f.size(), p, {.verify_ip_checksum = true, .verify_icrc = true}) ==
            ParseStatus::kOk);
    CHECK(p.kind == PacketKind::kRoce);
    CHECK(p.int_offset == 46);
    CHECK(p.bth_offset == 110);
    CHECK(p.payload_offset == 110 + 12 + 16);
    CHECK(p.payload_length == 300);
    CHECK(p.dst_port == 4791);
    CHECK(p.udp_length == 8 + 64 + 12 + 16 + 300 + 4);
    CHECK(p.dest_qp == 0xABCDEF);
    CHECK(p.psn == 0xFFFFFE);
    CHECK(static_cast<uint16_t>(f[38 + 2] << 8 | f[38 + 3]) == port);  // the wire's port

    // Not INT-MD, not NPT 1, another original port, or a Length past the payload: plain UDP,
    // its port the wire's.
    for (const auto& [at, value] : std::vector<std::pair<size_t, uint8_t>>{
             {46, 0x24}, {46, 0x18}, {49, 0xB8}, {47, 0xF0}}) {
      auto g = f;
      g[at] = value;
      ParsedPacket q;
      REQUIRE(parse_exact(g, g.size(), q) == ParseStatus::kOk);
      CHECK(q.kind == PacketKind::kUdp);
      CHECK(q.int_offset == 0);
      CHECK(q.dst_port == port);
    }
    // Cut anywhere: never Ok as RoCE past the data (AddressSanitizer watches the reads).
    for (size_t len = 0; len < f.size(); ++len) {
      ParsedPacket q;
      if (parse_exact(f, len, q) == ParseStatus::kOk) CHECK(q.kind != PacketKind::kRoce);
    }
  }
  // The plain frame says no INT.
  ParsedPacket p;
  REQUIRE(parse_exact(plain, plain.size(), p) == ParseStatus::kOk);
  CHECK(p.int_offset == 0);
}

TEST_CASE("truncated at any byte: never Ok, never a read past the data") {
  for (const auto& f : {roce_vector_frame(), vlan_roce_frame()}) {
    for (size_t len = 0; len < f.size(); ++len) {
      ParsedPacket p;
      const ParseStatus s = parse_exact(f, len, p);
      INFO("length " << len << " of " << f.size() << ": " << to_string(s));
      CHECK(s != ParseStatus::kOk);
    }
  }
  ParsedPacket p;
  CHECK(parse_exact(roce_vector_frame(), 13, p) == ParseStatus::kTruncatedEthernet);
  CHECK(parse_exact(vlan_roce_frame(), 17, p) == ParseStatus::kTruncatedVlan);
  CHECK(parse_exact(roce_vector_frame(), 14 + 19, p) == ParseStatus::kTruncatedIpv4);
  CHECK(parse_exact(roce_vector_frame(), 14 + 40, p) == ParseStatus::kBadTotalLength);
}

TEST_CASE("Ethernet padding after the datagram is accepted and ignored") {
  auto f = roce_vector_frame();
  f.insert(f.end(), 10, 0x00);
  ParsedPacket p;
  REQUIRE(parse_exact(f, f.size(), p, {.verify_ip_checksum = true, .verify_icrc = true}) ==
          ParseStatus::kOk);
  CHECK(p.ip_total_length == 92);
}

TEST_CASE("non-IPv4 frames and a wrong IP version") {
  auto f = roce_vector_frame();
  f[12] = 0x86;
  f[13] = 0xDD;  // IPv6
  CHECK(parse(f) == ParseStatus::kNotIpv4);
  f[12] = 0x08;
  f[13] = 0x06;  // ARP
  CHECK(parse(f) == ParseStatus::kNotIpv4);
  auto v = roce_vector_frame();
  v[kL3] = 0x65;  // version 6 under EtherType IPv4
  CHECK(parse(v) == ParseStatus::kBadIpVersion);
}

TEST_CASE("bad IHL and bad total length") {
  auto f = roce_vector_frame();
  f[kL3] = 0x44;  // IHL 4: shorter than the fixed header
  CHECK(parse(f) == ParseStatus::kBadIhl);
  auto g = roce_vector_frame();
  g.resize(14 + 40);
  g[kL3] = 0x4F;  // IHL 15: 60 bytes of header in a 40-byte packet
  CHECK(parse(g) == ParseStatus::kBadIhl);

  auto t = roce_vector_frame();
  t[kL3 + 2] = 0x00;
  t[kL3 + 3] = 0x10;  // total length 16 < IHL*4
  fix_ip_checksum(t);
  CHECK(parse(t) == ParseStatus::kBadTotalLength);
  t[kL3 + 3] = 0xFF;  // 255: longer than the frame
  fix_ip_checksum(t);
  CHECK(parse(t) == ParseStatus::kBadTotalLength);
}

TEST_CASE("bad IPv4 header checksum") {
  auto f = roce_vector_frame();
  f[kL3 + 10] ^= 0x01;
  CHECK(parse(f) == ParseStatus::kBadIpChecksum);
  CHECK(parse(f, {.verify_ip_checksum = false}) == ParseStatus::kOk);
}

TEST_CASE("IPv4 header checksum: the parser's verdict is rte_ipv4_cksum's, options included") {
  // Random headers of every IHL, half with their checksum made right, half left random (and
  // a few with one bit flipped after): the parser must agree with DPDK's checksum on each.
  std::mt19937 rng(20261201);
  int good = 0, bad = 0;
  for (int i = 0; i < 20000; ++i) {
    const size_t ihl = 20 + 4 * (rng() % 11);
    std::vector<uint8_t> f(kL3 + ihl + 8, 0);
    f[12] = 0x08;
    f[13] = 0x00;
    for (size_t b = 0; b < ihl + 8; ++b) f[kL3 + b] = static_cast<uint8_t>(rng());
    f[kL3] = static_cast<uint8_t>(0x40 | (ihl / 4));
    const uint16_t total = static_cast<uint16_t>(ihl + 8);
    f[kL3 + 2] = static_cast<uint8_t>(total >> 8);
    f[kL3 + 3] = static_cast<uint8_t>(total);
    f[kL3 + 9] = 1;  // ICMP: nothing parsed past the IPv4 header
    if (rng() % 2 == 0) {
      fix_ip_checksum(f);
      if (rng() % 8 == 0) f[kL3 + 12 + rng() % 8] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    const bool dpdk_ok =
        rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(f.data() + kL3)) == 0;
    const ParseStatus st = parse(f);
    INFO("ihl " << ihl << ", header " << i);
    REQUIRE((st != ParseStatus::kBadIpChecksum) == dpdk_ok);
    (dpdk_ok ? good : bad)++;
  }
  CHECK(good > 5000);
  CHECK(bad > 5000);
}

TEST_CASE("UDP length that disagrees with the IP length") {
  for (uint16_t udp_len : {0, 7, 71, 73, 0xFFFF}) {
    auto f = roce_vector_frame();
    f[kL3 + 20 + 4] = static_cast<uint8_t>(udp_len >> 8);
    f[kL3 + 20 + 5] = static_cast<uint8_t>(udp_len);
    INFO("UDP length " << udp_len);
    CHECK(parse(f) == ParseStatus::kUdpLengthMismatch);
  }
}

TEST_CASE("short UDP and TCP headers inside a consistent IP datagram") {
  auto f = roce_vector_frame();
  f.resize(14 + 20 + 4);
  f[kL3 + 2] = 0;
  f[kL3 + 3] = 24;  // a 4-byte UDP "header"
  fix_ip_checksum(f);
  CHECK(parse(f) == ParseStatus::kTruncatedUdp);
  f[kL3 + 9] = 6;  // TCP
  fix_ip_checksum(f);
  CHECK(parse(f) == ParseStatus::kTruncatedTcp);
}

TEST_CASE("RoCE: short BTH, unknown opcode, extension headers that do not fit") {
  // UDP 4791 carrying only 15 bytes: less than BTH + ICRC.
  std::vector<uint8_t> small(15, 0);
  FrameSpec fs;
  fs.udp.dst_port = 4791;
  fs.payload = small;
  std::vector<uint8_t> f(128);
  f.resize(build_udp_frame(f, fs));
  CHECK(parse(f) == ParseStatus::kTruncatedBth);

  auto u = roce_vector_frame();
  u[kL3 + 28] = 0x1F;  // reserved RC opcode
  CHECK(parse(u) == ParseStatus::kUnknownRoceOpcode);

  // WRITE ONLY needs a 16-byte RETH; give it BTH + 8 bytes + ICRC only.
  std::vector<uint8_t> stub(12 + 8 + 4, 0);
  stub[0] = opcode::kRcWriteOnly;
  fs.payload = stub;
  std::vector<uint8_t> g(128);
  g.resize(build_udp_frame(g, fs));
  CHECK(parse(g) == ParseStatus::kTruncatedRoce);

  // A pad count larger than what follows the headers.
  std::vector<uint8_t> padded(12 + 4 + 4 + 2, 0);
  padded[0] = opcode::kRcAck;
  padded[1] = 0x30;  // pad count 3, but only 2 bytes between AETH and ICRC
  fs.payload = padded;
  std::vector<uint8_t> h(128);
  h.resize(build_udp_frame(h, fs));
  CHECK(parse(h) == ParseStatus::kTruncatedRoce);
}

TEST_CASE("bad ICRC is caught when asked for; masked fields never make it bad") {
  const ParseOptions icrc{.verify_ip_checksum = true, .verify_icrc = true};
  auto f = roce_vector_frame();
  CHECK(parse(f, icrc) == ParseStatus::kOk);
  f[f.size() - 10] ^= 0x80;  // a payload bit
  CHECK(parse(f, icrc) == ParseStatus::kBadIcrc);
  CHECK(parse(f) == ParseStatus::kOk);  // switches do not check it by default

  auto g = roce_vector_frame();
  g[kL3 + 8] = 1;     // TTL
  g[kL3 + 1] = 0xB8;  // TOS
  fix_ip_checksum(g);
  g[kL3 + 26] = 0x12;  // UDP checksum (a PPCID)
  g[kL3 + 27] = 0x34;
  CHECK(parse(g, icrc) == ParseStatus::kOk);
}

TEST_CASE("multi-segment and single-segment mbufs") {
  TestPool pool(63);
  const auto f = roce_vector_frame();
  ParsedPacket p;
  rte_mbuf* m = pool.make(f);
  CHECK(PacketParser().parse(m, p) == ParseStatus::kOk);
  CHECK(p.kind == PacketKind::kRoce);

  const ParsedPacket whole = p;

  // Split inside the UDP header: the parser refuses rather than reading across segments.
  rte_mbuf* head = pool.make(std::vector<uint8_t>(f.begin(), f.begin() + 40));
  rte_mbuf* tail = pool.make(std::vector<uint8_t>(f.begin() + 40, f.end()));
  REQUIRE(rte_pktmbuf_chain(head, tail) == 0);
  CHECK(PacketParser().parse(head, p) == ParseStatus::kMultiSegment);
  CHECK(p.kind == PacketKind::kUnknown);

  // Split after the headers (three segments, as a chained payload makes): parsed from the first,
  // lengths checked against the whole chain, the ICRC verified across the segments.
  const size_t cut = whole.payload_offset;
  rte_mbuf* h = pool.make(std::vector<uint8_t>(f.begin(), f.begin() + static_cast<long>(cut)));
  rte_mbuf* mid = pool.make(std::vector<uint8_t>(f.begin() + static_cast<long>(cut), f.end() - 3));
  rte_mbuf* end = pool.make(std::vector<uint8_t>(f.end() - 3, f.end()));
  REQUIRE(rte_pktmbuf_chain(h, mid) == 0);
  REQUIRE(rte_pktmbuf_chain(h, end) == 0);
  ParseOptions verify;
  verify.verify_icrc = true;
  REQUIRE(PacketParser(verify).parse(h, p) == ParseStatus::kOk);
  CHECK(p.kind == PacketKind::kRoce);
  CHECK(p.payload_offset == whole.payload_offset);
  CHECK(p.payload_length == whole.payload_length);
  CHECK(p.psn == whole.psn);
  CHECK(p.ip_total_length == whole.ip_total_length);
  // A bit flipped in the middle segment fails the ICRC; the datagram cut short fails its length.
  rte_pktmbuf_mtod(mid, uint8_t*)[0] ^= 1;
  CHECK(PacketParser(verify).parse(h, p) == ParseStatus::kBadIcrc);
  rte_pktmbuf_mtod(mid, uint8_t*)[0] ^= 1;
  rte_pktmbuf_trim(h, 2);
  CHECK(PacketParser().parse(h, p) == ParseStatus::kBadTotalLength);

  rte_pktmbuf_free(m);
  rte_pktmbuf_free(head);
  rte_pktmbuf_free(h);
  CHECK(pool.whole());
}

TEST_CASE("parse_at: a frame inside a frame, over a chain, offsets from its own first byte") {
  TestPool pool(63);
  const auto f = roce_vector_frame();
  ParsedPacket alone;
  REQUIRE(PacketParser().parse(f.data(), f.size(), alone) == ParseStatus::kOk);
  // 50 bytes of something in front (a tunnel's outer headers), the payload in a second segment.
  std::vector<uint8_t> front(50 + alone.payload_offset, 0xEE);
  std::copy_n(f.begin(), alone.payload_offset, front.begin() + 50);
  rte_mbuf* h = pool.make(front);
  rte_mbuf* rest =
      pool.make(std::vector<uint8_t>(f.begin() + static_cast<long>(alone.payload_offset), f.end()));
  REQUIRE(rte_pktmbuf_chain(h, rest) == 0);
  ParsedPacket p;
  ParseOptions verify;
  verify.verify_icrc = true;  // not done at an offset: the inner frame parses all the same
  REQUIRE(PacketParser(verify).parse_at(h, 50, p) == ParseStatus::kOk);
  CHECK(p.kind == PacketKind::kRoce);
  CHECK(p.l3_offset == alone.l3_offset);
  CHECK(p.payload_offset == alone.payload_offset);
  CHECK(p.payload_length == alone.payload_length);
  CHECK(p.psn == alone.psn);
  // The lengths are checked against the rest of the chain; an offset past the first segment is
  // refused without a read.
  rte_pktmbuf_trim(h, 2);
  CHECK(PacketParser().parse_at(h, 50, p) == ParseStatus::kBadTotalLength);
  CHECK(PacketParser().parse_at(h, rte_pktmbuf_data_len(h) + 1, p) == ParseStatus::kMultiSegment);
  CHECK(p.kind == PacketKind::kUnknown);
  rte_pktmbuf_free(h);
  CHECK(pool.whole());
}

TEST_CASE("random bytes and random mutations never crash and never read out of bounds") {
  std::mt19937 rng(12345);
  const auto base = vlan_roce_frame();
  int ok = 0;
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> f;
    if (i % 2 == 0) {
      f.resize(rng() % 200);
      for (auto& b : f) b = static_cast<uint8_t>(rng());
      if (f.size() > 13 && (rng() & 1)) {  // steer half towards deeper layers
        f[12] = 0x08;
        f[13] = 0x00;
      }
    } else {
      f = base;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) f[rng() % f.size()] = static_cast<uint8_t>(rng());
      f.resize(rng() % (f.size() + 1));
    }
    ParsedPacket p;
    const ParseStatus s =
        parse_exact(f, f.size(), p, {.verify_ip_checksum = false, .verify_icrc = (i % 3) == 0});
    if (s == ParseStatus::kOk) {
      ++ok;
      // Whatever was accepted lies within the data.
      if (p.kind == PacketKind::kRoce) {
        REQUIRE(p.payload_offset + p.payload_length <= f.size());
      }
      if (p.kind == PacketKind::kIpv4 || p.kind == PacketKind::kUdp ||
          p.kind == PacketKind::kRoce) {
        REQUIRE(p.l3_offset + p.ip_total_length <= f.size());
      }
    }
  }
  CHECK(ok > 0);
}

TEST_CASE("every status has a name") {
  for (int s = 0; s < static_cast<int>(ParseStatus::kCount); ++s) {
    CHECK(to_string(static_cast<ParseStatus>(s)) != "invalid");
  }
}

TEST_CASE("status names are unique and the counter names are parse_<name>") {
  std::set<std::string_view> names;
  for (size_t s = 0; s < kParseStatusCount; ++s) {
    const auto status = static_cast<ParseStatus>(s);
    CHECK(names.insert(to_string(status)).second);
    CHECK(counter_name(status) == "parse_" + std::string(to_string(status)));
  }
  // The names the nodes' JSON and telemetry have always used.
  CHECK(to_string(ParseStatus::kOk) == "ok");
  CHECK(to_string(ParseStatus::kTruncatedEthernet) == "truncated_ethernet");
  CHECK(to_string(ParseStatus::kUdpLengthMismatch) == "udp_length_mismatch");
  CHECK(to_string(ParseStatus::kTruncatedMacControl) == "truncated_mac_control");
  CHECK(to_string(ParseStatus::kCount) == "invalid");
  CHECK(counter_name(ParseStatus::kBadIcrc) == "parse_bad_icrc");
}
