#include "dataplane/forwarding/tcam.h"

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/pfc_frame.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;

namespace {

constexpr uint32_t ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d;
}

constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;

ParsedPacket parse_frame(const std::vector<uint8_t>& frame) {
  ParsedPacket p;
  REQUIRE(PacketParser().parse(frame.data(), frame.size(), p) == ParseStatus::kOk);
  return p;
}

// A plain UDP packet (dst_port must not be 4791: that would need a BTH).
ParsedPacket udp_packet(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) {
  FrameSpec fs;
  fs.ip.src = src;
  fs.ip.dst = dst;
  fs.udp.src_port = sport;
  fs.udp.dst_port = dport;
  std::vector<uint8_t> frame(256);
  frame.resize(build_udp_frame(frame, fs));
  REQUIRE(!frame.empty());
  const ParsedPacket p = parse_frame(frame);
  REQUIRE(p.kind == PacketKind::kUdp);
  return p;
}

ParsedPacket roce_packet(uint32_t src, uint32_t dst, uint16_t sport, uint32_t dest_qp) {
  FrameSpec fs;
  fs.ip.src = src;
  fs.ip.dst = dst;
  fs.udp.src_port = sport;
  RoceSpec rs;
  rs.opcode = opcode::kRcSendOnly;
  rs.dest_qp = dest_qp;
  rs.psn = 7;
  std::vector<uint8_t> frame(256);
  frame.resize(build_roce_frame(frame, fs, rs));
  REQUIRE(!frame.empty());
  const ParsedPacket p = parse_frame(frame);
  REQUIRE(p.kind == PacketKind::kRoce);
  return p;
}

// Any other IP protocol: built as UDP, then given protocol `proto` and a fresh header checksum.
// For TCP the first four payload bytes, the UDP ports, read as the TCP ports.
ParsedPacket ip_packet(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport = 0,
                       uint16_t dport = 0) {
  const std::vector<uint8_t> payload(32, 0);
  FrameSpec fs;
  fs.ip.src = src;
  fs.ip.dst = dst;
  fs.udp.src_port = sport;
  fs.udp.dst_port = dport;
  fs.payload = payload;
  std::vector<uint8_t> frame(256);
  frame.resize(build_udp_frame(frame, fs));
  REQUIRE(!frame.empty());
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(frame.data() + 14);
  ip->next_proto_id = proto;
  ip->hdr_checksum = 0;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  return parse_frame(frame);
}

TcamRule pin_rule(uint32_t id, int32_t priority, uint32_t dst, uint8_t len, uint16_t port) {
  TcamRule r;
  r.id = id;
  r.priority = priority;
  r.dst_ip = dst;
  r.dst_prefix_len = len;
  r.action = TcamAction::kPinPort;
  r.port = port;
  return r;
}

// A spray rule for one QP, as a leaf holds per sprayed QP.
TcamRule spray_rule(uint32_t id, uint32_t qp, std::string partition = "default") {
  TcamRule r;
  r.id = id;
  r.priority = 100;
  r.partition = std::move(partition);
  r.ip_proto = kProtoUdp;
  r.ip_proto_mask = 0xFF;
  r.dst_port_lo = r.dst_port_hi = kRoceV2UdpPort;
  r.dest_qp_lo = r.dest_qp_hi = qp;
  r.action = TcamAction::kSpray;
  return r;
}

TcamMatch classify_one(const Tcam& tcam, const ParsedPacket& p) {
  const ParsedPacket* pkts[] = {&p};
  TcamMatch m;
  tcam.classify(pkts, 1, &m);
  return m;
}

TcamMatch classify_one(const Tcam& tcam, const TcamSnapshot& snapshot, const ParsedPacket& p) {
  const ParsedPacket* pkts[] = {&p};
  TcamMatch m;
  tcam.classify(snapshot, pkts, 1, &m);
  return m;
}

size_t cause(TcamRefusal r) {
  return static_cast<size_t>(r);
}

// A logger writing into a string, to count what the TCAM logs.
struct CapturedLog {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(
      "tcam_test", std::make_shared<spdlog::sinks::ostream_sink_st>(text));

  size_t count(const std::string& needle) const {
    const std::string s = text.str();
    size_t n = 0;
    for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) {
      ++n;
    }
    return n;
  }
};

}  // namespace

TEST_CASE("action and refusal names") {
  for (auto [action, name] :
       {std::pair{TcamAction::kEcmp, "ecmp"}, std::pair{TcamAction::kSpray, "spray"},
        std::pair{TcamAction::kPinPort, "pin"}, std::pair{TcamAction::kDrop, "drop"},
        std::pair{TcamAction::kMirror, "mirror"},
        std::pair{TcamAction::kQuarantine, "quarantine"}}) {
    CHECK(to_string(action) == name);
    CHECK(parse_tcam_action(name) == action);
  }
  CHECK_FALSE(parse_tcam_action("pin_port").has_value());
  CHECK_FALSE(parse_tcam_action("").has_value());
  CHECK(to_string(TcamRefusal::kNone) == "none");
  CHECK(to_string(TcamRefusal::kCapacity) == "capacity");
  CHECK(to_string(TcamRefusal::kPartitionFull) == "partition_full");
  CHECK(to_string(TcamRefusal::kSprayLimit) == "spray_limit");
  CHECK(to_string(TcamRefusal::kUnknownPartition) == "unknown_partition");
  CHECK(to_string(TcamRefusal::kDuplicateId) == "duplicate_id");
  CHECK(to_string(TcamRefusal::kInvalidRule) == "invalid_rule");
}

TEST_CASE("an empty TCAM classifies everything as no match, before and after a commit") {
  Tcam tcam(TcamConfig{});
  const ParsedPacket p = udp_packet(ipv4(10, 0, 0, 1), ipv4(10, 0, 0, 2), 1000, 2000);
  CHECK(tcam.current().generation() == 0);
  TcamMatch m = classify_one(tcam, p);
  CHECK_FALSE(m.matched);
  CHECK_FALSE(m.fallback);
  CHECK(m.action == TcamAction::kEcmp);

  REQUIRE(tcam.commit());
  CHECK(tcam.current().generation() == 1);
  CHECK(tcam.current().admitted_rules() == 0);
  m = classify_one(tcam, p);
  CHECK_FALSE(m.matched);
  CHECK_FALSE(m.fallback);

  // Rules added and all removed again: back to empty.
  REQUIRE(tcam.add(pin_rule(1, 1, ipv4(10, 0, 0, 0), 8, 3)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  CHECK(classify_one(tcam, p).matched);
  REQUIRE(tcam.remove(1));
  REQUIRE(tcam.commit());
  CHECK_FALSE(classify_one(tcam, p).matched);

  const TcamCounters c = tcam.counters();
  CHECK(c.classified_packets == 4);
  CHECK(c.matched_packets == 1);
  CHECK(c.fallback_ecmp_packets == 0);
  CHECK(c.classify_errors == 0);
  CHECK(c.commits == 3);
  CHECK(c.commit_failures == 0);
}

TEST_CASE("packets without an IPv4 header are not looked up") {
  Tcam tcam(TcamConfig{});
  TcamRule any;  // matches every IPv4 packet
  any.id = 1;
  any.action = TcamAction::kDrop;
  REQUIRE(tcam.add(any) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());

  std::vector<uint8_t> pfc(kPfcFrameLength);
  const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
  build_pfc_frame(pfc.data(), mac, PfcFrame{0x01, {100}});
  const ParsedPacket pause = parse_frame(pfc);
  REQUIRE(pause.kind == PacketKind::kMacControl);
  const ParsedPacket ip = ip_packet(ipv4(1, 2, 3, 4), ipv4(5, 6, 7, 8), kProtoIcmp);

  const ParsedPacket* pkts[] = {&pause, &ip, nullptr};
  TcamMatch out[3];
  tcam.classify(pkts, 3, out);
  CHECK_FALSE(out[0].matched);
  CHECK(out[1].matched);
  CHECK(out[1].action == TcamAction::kDrop);
  CHECK_FALSE(out[2].matched);
  CHECK(tcam.counters().not_ipv4_packets == 2);
  CHECK(tcam.counters().classified_packets == 1);
}

TEST_CASE("priorities hold whatever the insertion order") {
  // Nested prefixes whose priorities do not follow their lengths, plus an exact-port rule that
  // overlaps all of them at the top priority.
  const std::vector<TcamRule> rules = {
      pin_rule(1, 10, ipv4(10, 0, 0, 0), 8, 1),
      pin_rule(2, 20, ipv4(10, 1, 0, 0), 16, 2),
      pin_rule(3, 5, ipv4(10, 1, 2, 0), 24, 3),
      [] {
        TcamRule r = pin_rule(4, 30, 0, 0, 4);
        r.dst_port_lo = r.dst_port_hi = 9999;
        return r;
      }(),
  };
  const ParsedPacket to_10_1_2 = udp_packet(ipv4(1, 1, 1, 1), ipv4(10, 1, 2, 3), 5, 80);
  const ParsedPacket to_10_1_9 = udp_packet(ipv4(1, 1, 1, 1), ipv4(10, 1, 9, 9), 5, 80);
  const ParsedPacket to_10_2 = udp_packet(ipv4(1, 1, 1, 1), ipv4(10, 2, 0, 1), 5, 80);
  const ParsedPacket to_11 = udp_packet(ipv4(1, 1, 1, 1), ipv4(11, 0, 0, 1), 5, 80);
  const ParsedPacket to_10_1_2_port = udp_packet(ipv4(1, 1, 1, 1), ipv4(10, 1, 2, 3), 5, 9999);

  std::vector<size_t> order(rules.size());
  std::iota(order.begin(), order.end(), 0);
  int permutations = 0;
  do {
    Tcam tcam(TcamConfig{});
    for (size_t i : order) REQUIRE(tcam.add(rules[i]) == TcamRefusal::kNone);
    REQUIRE(tcam.commit());
    INFO("insertion order " << order[0] << order[1] << order[2] << order[3]);
    CHECK(classify_one(tcam, to_10_1_2).rule_id == 2);  // /16 at 20 beats /24 at 5 and /8 at 10
    CHECK(classify_one(tcam, to_10_1_9).rule_id == 2);
    CHECK(classify_one(tcam, to_10_2).rule_id == 1);
    CHECK_FALSE(classify_one(tcam, to_11).matched);
    CHECK(classify_one(tcam, to_10_1_2_port).rule_id == 4);
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(permutations == 24);
}

TEST_CASE("equal priorities: the lower id wins; extreme priorities rank correctly") {
  for (bool reversed : {false, true}) {
    Tcam tcam(TcamConfig{});
    std::vector<TcamRule> rules = {pin_rule(7, 0, 0, 0, 7), pin_rule(3, 0, 0, 0, 3),
                                   pin_rule(5, 0, 0, 0, 5)};
    if (reversed) std::reverse(rules.begin(), rules.end());
    for (const TcamRule& r : rules) REQUIRE(tcam.add(r) == TcamRefusal::kNone);
    REQUIRE(tcam.commit());
    const ParsedPacket p = udp_packet(1, 2, 3, 4);
    CHECK(classify_one(tcam, p).rule_id == 3);

    REQUIRE(tcam.add(pin_rule(100, INT32_MIN, 0, 0, 100)) == TcamRefusal::kNone);
    REQUIRE(tcam.add(pin_rule(101, -1, 0, 0, 101)) == TcamRefusal::kNone);
    REQUIRE(tcam.commit());
    CHECK(classify_one(tcam, p).rule_id == 3);  // 0 beats negative priorities
    REQUIRE(tcam.add(pin_rule(102, INT32_MAX, 0, 0, 102)) == TcamRefusal::kNone);
    REQUIRE(tcam.commit());
    CHECK(classify_one(tcam, p).rule_id == 102);
  }
}

TEST_CASE("every action comes back with its port") {
  Tcam tcam(TcamConfig{});
  const std::vector<std::pair<TcamAction, uint16_t>> actions = {
      {TcamAction::kEcmp, 0}, {TcamAction::kSpray, 0},  {TcamAction::kPinPort, 5},
      {TcamAction::kDrop, 0}, {TcamAction::kMirror, 7}, {TcamAction::kQuarantine, 3}};
  for (uint32_t i = 0; i < actions.size(); ++i) {
    TcamRule r;
    r.id = 10 + i;
    r.dst_ip = ipv4(192, 168, static_cast<uint8_t>(i), 0);
    r.dst_prefix_len = 24;
    r.action = actions[i].first;
    r.port = actions[i].second;
    r.keep_percent = static_cast<uint8_t>(i);
    REQUIRE(tcam.add(r) == TcamRefusal::kNone);
  }
  REQUIRE(tcam.commit());
  for (uint32_t i = 0; i < actions.size(); ++i) {
    INFO("action " << to_string(actions[i].first));
    const TcamMatch m =
        classify_one(tcam, udp_packet(1, ipv4(192, 168, static_cast<uint8_t>(i), 9), 1, 2));
    CHECK(m.matched);
    CHECK_FALSE(m.fallback);
    CHECK(m.rule_id == 10 + i);
    CHECK(m.action == actions[i].first);
    CHECK(m.port == actions[i].second);
    CHECK(m.keep_percent == i);
    CHECK(tcam.rule_hits(10 + i) == 1);
  }
}

TEST_CASE("a quarantine rule keeping more than 100% is invalid, not kept") {
  Tcam tcam(TcamConfig{});
  TcamRule r;
  r.id = 1;
  r.action = TcamAction::kQuarantine;
  r.keep_percent = 100;
  CHECK(tcam.add(r) == TcamRefusal::kNone);
  r.id = 2;
  r.keep_percent = 101;
  CHECK(tcam.add(r) == TcamRefusal::kInvalidRule);
  CHECK(tcam.refusal_of(2) == std::nullopt);
}

TEST_CASE("each match field: prefixes, protocol under a mask, port ranges, DestQP range") {
  Tcam tcam(TcamConfig{});
  TcamRule src;  // source prefix; host bits in the rule are don't-care
  src.id = 1;
  src.src_ip = ipv4(172, 16, 255, 255);
  src.src_prefix_len = 12;
  src.action = TcamAction::kDrop;
  TcamRule tcp;  // TCP to ports 8000-8080
  tcp.id = 2;
  tcp.ip_proto = kProtoTcp;
  tcp.ip_proto_mask = 0xFF;
  tcp.dst_port_lo = 8000;
  tcp.dst_port_hi = 8080;
  tcp.action = TcamAction::kPinPort;
  tcp.port = 2;
  TcamRule odd_proto;  // 0x01 under mask 0x13: ICMP (0x01), DCCP (0x21); not TCP (0x06), UDP (0x11)
  odd_proto.id = 3;
  odd_proto.priority = -10;
  odd_proto.ip_proto = 0x01;
  odd_proto.ip_proto_mask = 0x13;
  odd_proto.action = TcamAction::kPinPort;
  odd_proto.port = 3;
  TcamRule qps;  // RoCE QPs 0x100-0x1FF from source ports 49152-65535
  qps.id = 4;
  qps.src_port_lo = 49152;
  qps.dest_qp_lo = 0x100;
  qps.dest_qp_hi = 0x1FF;
  qps.action = TcamAction::kSpray;
  TcamRule qp_zero;  // DestQP 0: what every non-RoCE packet carries
  qp_zero.id = 5;
  qp_zero.priority = -20;
  qp_zero.dest_qp_lo = qp_zero.dest_qp_hi = 0;
  qp_zero.action = TcamAction::kMirror;
  qp_zero.port = 9;
  for (const TcamRule& r : {src, tcp, odd_proto, qps, qp_zero}) {
    REQUIRE(tcam.add(r) == TcamRefusal::kNone);
  }
  REQUIRE(tcam.commit());

  auto rule_of = [&](const ParsedPacket& p) -> std::optional<uint32_t> {
    const TcamMatch m = classify_one(tcam, p);
    return m.matched ? std::optional<uint32_t>(m.rule_id) : std::nullopt;
  };
  const uint32_t a = ipv4(10, 0, 0, 1);
  CHECK(rule_of(udp_packet(ipv4(172, 16, 0, 1), a, 1, 2)) == 1u);
  CHECK(rule_of(udp_packet(ipv4(172, 31, 255, 254), a, 1, 2)) == 1u);
  CHECK(rule_of(udp_packet(ipv4(172, 32, 0, 1), a, 1, 2)) == 5u);  // outside /12: QP 0 rule
  CHECK(rule_of(ip_packet(a, a, kProtoTcp, 1, 8000)) == 2u);
  CHECK(rule_of(ip_packet(a, a, kProtoTcp, 1, 8080)) == 2u);
  CHECK(rule_of(ip_packet(a, a, kProtoTcp, 1, 7999)) == 5u);
  CHECK(rule_of(ip_packet(a, a, kProtoTcp, 1, 8081)) == 5u);
  CHECK(rule_of(udp_packet(a, a, 1, 8000)) == 5u);  // UDP is not TCP
  CHECK(rule_of(ip_packet(a, a, kProtoIcmp)) == 3u);
  CHECK(rule_of(ip_packet(a, a, 0x21)) == 3u);
  CHECK(rule_of(ip_packet(a, a, 0x03)) == 5u);
  CHECK(rule_of(roce_packet(a, a, 49152, 0x100)) == 4u);
  CHECK(rule_of(roce_packet(a, a, 65535, 0x1FF)) == 4u);
  CHECK_FALSE(rule_of(roce_packet(a, a, 49151, 0x100)).has_value());
  CHECK_FALSE(rule_of(roce_packet(a, a, 50000, 0x200)).has_value());
  CHECK_FALSE(rule_of(roce_packet(a, a, 50000, 0xFF)).has_value());
  CHECK(rule_of(roce_packet(a, a, 50000, 0)) == 5u);  // a RoCE packet to QP 0
  // UDP from 49152 up without a BTH: DestQP 0, so not the QP rule.
  CHECK(rule_of(udp_packet(a, a, 50000, 1)) == 5u);
}

TEST_CASE("capacity overflow: refused with its cause, counted, logged once, traffic to ECMP") {
  CapturedLog log;
  TcamConfig cfg;
  cfg.capacity = 4;
  cfg.spray_rule_limit = 32768;  // the vendor's figure: above what the TCAM holds
  Tcam tcam(cfg, log.logger);
  for (uint32_t qp = 1; qp <= 4; ++qp) REQUIRE(tcam.add(spray_rule(qp, qp)) == TcamRefusal::kNone);
  CHECK(tcam.add(spray_rule(5, 5)) == TcamRefusal::kCapacity);
  CHECK(tcam.add(spray_rule(6, 6)) == TcamRefusal::kCapacity);
  const TcamRule pin = pin_rule(7, 1, ipv4(10, 9, 0, 0), 16, 1);
  CHECK(tcam.add(pin) == TcamRefusal::kCapacity);  // whatever the action
  CHECK(tcam.admitted_rules() == 4);
  CHECK(tcam.refused_rules() == 3);
  CHECK(tcam.refusal_of(5) == TcamRefusal::kCapacity);
  CHECK(tcam.refusal_of(1) == TcamRefusal::kNone);
  CHECK_FALSE(tcam.refusal_of(99).has_value());
  REQUIRE(tcam.commit());
  CHECK(tcam.current().admitted_rules() == 4);
  CHECK(tcam.current().refused_rules() == 3);

  const uint32_t a = ipv4(10, 0, 0, 1);
  const uint32_t b = ipv4(10, 0, 0, 2);
  const TcamMatch admitted = classify_one(tcam, roce_packet(a, b, 50000, 4));
  CHECK(admitted.matched);
  CHECK(admitted.action == TcamAction::kSpray);
  CHECK(admitted.rule_id == 4);
  for (int i = 0; i < 3; ++i) {
    const TcamMatch refused = classify_one(tcam, roce_packet(a, b, 50000, 6));
    CHECK_FALSE(refused.matched);
    CHECK(refused.fallback);
    CHECK(refused.rule_id == 6);
    CHECK(refused.action == TcamAction::kEcmp);
  }
  const TcamMatch neither = classify_one(tcam, roce_packet(a, b, 50000, 77));
  CHECK_FALSE(neither.matched);
  CHECK_FALSE(neither.fallback);
  // Refused whatever its action: rule 7's traffic falls back too.
  CHECK(classify_one(tcam, udp_packet(a, ipv4(10, 9, 1, 1), 1, 2)).fallback);

  const TcamCounters c = tcam.counters();
  CHECK(c.refused_rules_by_cause[cause(TcamRefusal::kCapacity)] == 3);
  CHECK(c.fallback_ecmp_packets == 4);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kCapacity)] == 4);
  CHECK(c.matched_packets == 1);
  CHECK(tcam.rule_hits(6) == 3);
  CHECK(tcam.rule_hits(4) == 1);
  // Once per cause, naming the rule and the limit.
  CHECK(log.count("refused (capacity)") == 1);
  CHECK(log.count("rule 5 refused (capacity): the TCAM holds 4 rules") == 1);
}

TEST_CASE("partition overflow: refused as partition_full while other partitions have room") {
  CapturedLog log;
  TcamConfig cfg;
  cfg.capacity = 100;
  cfg.partitions = {{"roce", 2}, {"acl", 1}};
  Tcam tcam(cfg, log.logger);
  REQUIRE(tcam.add(spray_rule(1, 1, "roce")) == TcamRefusal::kNone);
  REQUIRE(tcam.add(spray_rule(2, 2, "roce")) == TcamRefusal::kNone);
  CHECK(tcam.add(spray_rule(3, 3, "roce")) == TcamRefusal::kPartitionFull);
  CHECK(tcam.add(spray_rule(4, 4, "roce")) == TcamRefusal::kPartitionFull);
  CHECK(tcam.add(spray_rule(5, 5)) == TcamRefusal::kNone);  // "default": the TCAM's capacity
  TcamRule acl = pin_rule(6, 1, ipv4(192, 0, 2, 0), 24, 1);
  acl.partition = "acl";
  REQUIRE(tcam.add(acl) == TcamRefusal::kNone);
  acl.id = 7;
  CHECK(tcam.add(acl) == TcamRefusal::kPartitionFull);
  CHECK(tcam.partition_used("roce") == 2u);
  CHECK(tcam.partition_used("acl") == 1u);
  CHECK(tcam.partition_used("default") == 1u);
  CHECK_FALSE(tcam.partition_used("nope").has_value());
  REQUIRE(tcam.commit());

  const uint32_t a = ipv4(10, 0, 0, 1);
  CHECK(classify_one(tcam, roce_packet(a, a, 50000, 2)).matched);
  const TcamMatch m = classify_one(tcam, roce_packet(a, a, 50000, 3));
  CHECK_FALSE(m.matched);
  CHECK(m.fallback);
  CHECK(m.rule_id == 3);
  CHECK(classify_one(tcam, roce_packet(a, a, 50000, 5)).matched);

  const TcamCounters c = tcam.counters();
  CHECK(c.refused_rules_by_cause[cause(TcamRefusal::kPartitionFull)] == 3);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kPartitionFull)] == 1);
  CHECK(c.fallback_ecmp_packets == 1);
  CHECK(log.count("refused (partition_full)") == 1);
  CHECK(log.count("partition 'roce' holds 2 rules") == 1);
}

TEST_CASE("spray limit overflow: spray rules refused, other actions still admitted") {
  CapturedLog log;
  TcamConfig cfg;
  cfg.capacity = 10;
  cfg.spray_rule_limit = 2;
  Tcam tcam(cfg, log.logger);
  REQUIRE(tcam.add(spray_rule(1, 1)) == TcamRefusal::kNone);
  REQUIRE(tcam.add(spray_rule(2, 2)) == TcamRefusal::kNone);
  CHECK(tcam.add(spray_rule(3, 3)) == TcamRefusal::kSprayLimit);
  CHECK(tcam.add(pin_rule(4, 1, ipv4(10, 9, 0, 0), 16, 4)) == TcamRefusal::kNone);
  CHECK(tcam.spray_rules() == 2);
  REQUIRE(tcam.commit());

  const uint32_t a = ipv4(10, 0, 0, 1);
  const TcamMatch m = classify_one(tcam, roce_packet(a, a, 50000, 3));
  CHECK_FALSE(m.matched);
  CHECK(m.fallback);
  CHECK(classify_one(tcam, udp_packet(a, ipv4(10, 9, 1, 1), 1, 2)).rule_id == 4);
  const TcamCounters c = tcam.counters();
  CHECK(c.refused_rules_by_cause[cause(TcamRefusal::kSprayLimit)] == 1);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kSprayLimit)] == 1);
  CHECK(log.count("refused (spray_limit)") == 1);
  CHECK(log.count("spray_rule_limit is 2 rules") == 1);
}

TEST_CASE("the capacity refuses first when spray_rule_limit promises more than the TCAM holds") {
  TcamConfig cfg;
  cfg.capacity = 8;
  cfg.spray_rule_limit = 16;
  cfg.partitions = {{"roce", 12}};
  Tcam tcam(cfg);
  for (uint32_t i = 1; i <= 8; ++i) {
    REQUIRE(tcam.add(spray_rule(i, i, "roce")) == TcamRefusal::kNone);
  }
  CHECK(tcam.add(spray_rule(9, 9, "roce")) == TcamRefusal::kCapacity);
}

TEST_CASE("unknown partitions and duplicate ids are refused with their causes") {
  CapturedLog log;
  Tcam tcam(TcamConfig{}, log.logger);
  CHECK(tcam.add(spray_rule(1, 1, "rocee")) == TcamRefusal::kUnknownPartition);
  REQUIRE(tcam.add(spray_rule(2, 2)) == TcamRefusal::kNone);
  CHECK(tcam.add(spray_rule(2, 3)) == TcamRefusal::kDuplicateId);
  CHECK(tcam.add(spray_rule(1, 4)) == TcamRefusal::kDuplicateId);  // refused ids are taken too
  CHECK(tcam.refusal_of(1) == TcamRefusal::kUnknownPartition);
  REQUIRE(tcam.commit());

  const uint32_t a = ipv4(10, 0, 0, 1);
  CHECK(classify_one(tcam, roce_packet(a, a, 50000, 1)).fallback);  // unknown partition: shadow
  CHECK_FALSE(classify_one(tcam, roce_packet(a, a, 50000, 3)).fallback);  // duplicate: not kept
  CHECK(classify_one(tcam, roce_packet(a, a, 50000, 2)).rule_id == 2);    // the original stays
  const TcamCounters c = tcam.counters();
  CHECK(c.refused_rules_by_cause[cause(TcamRefusal::kUnknownPartition)] == 1);
  CHECK(c.refused_rules_by_cause[cause(TcamRefusal::kDuplicateId)] == 2);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kUnknownPartition)] == 1);
  CHECK(log.count("refused (unknown_partition)") == 1);
  CHECK(log.count("no partition 'rocee'") == 1);
  CHECK(log.count("refused (duplicate_id)") == 1);
}

TEST_CASE("invalid rules are refused as invalid_rule and not kept") {
  CapturedLog log;
  Tcam tcam(TcamConfig{}, log.logger);
  std::vector<TcamRule> bad(7);
  bad[0].src_prefix_len = 33;
  bad[1].dst_prefix_len = 40;
  bad[2].src_port_lo = 10;
  bad[2].src_port_hi = 9;
  bad[3].dst_port_lo = 0xFFFF;
  bad[3].dst_port_hi = 0;
  bad[4].dest_qp_hi = 0x1000000;
  bad[5].dest_qp_lo = 0x1000000;
  bad[5].dest_qp_hi = 0x1000000;
  bad[6].dest_qp_lo = 5;
  bad[6].dest_qp_hi = 4;
  for (uint32_t i = 0; i < bad.size(); ++i) {
    bad[i].id = i + 1;
    INFO("bad rule " << i);
    CHECK(tcam.add(bad[i]) == TcamRefusal::kInvalidRule);
    CHECK_FALSE(tcam.refusal_of(i + 1).has_value());
  }
  CHECK(tcam.admitted_rules() == 0);
  CHECK(tcam.refused_rules() == 0);
  REQUIRE(tcam.commit());
  const TcamMatch m = classify_one(tcam, roce_packet(1, 2, 3, 4));
  CHECK_FALSE(m.matched);
  CHECK_FALSE(m.fallback);
  CHECK(tcam.counters().refused_rules_by_cause[cause(TcamRefusal::kInvalidRule)] == 7);
  CHECK(log.count("refused (invalid_rule)") == 1);
  CHECK(log.count("src prefix length 33 > 32") == 1);

  // The edges of every range are valid.
  TcamRule edge;
  edge.id = 100;
  edge.src_prefix_len = 32;
  edge.dst_prefix_len = 32;
  edge.src_port_lo = edge.src_port_hi = 0xFFFF;
  edge.dest_qp_lo = edge.dest_qp_hi = kTcamDestQpMax;
  CHECK(tcam.add(edge) == TcamRefusal::kNone);
}

TEST_CASE("remove, then re-add: room comes back, refused rules are not promoted") {
  TcamConfig cfg;
  cfg.capacity = 1;
  Tcam tcam(cfg);
  const uint32_t a = ipv4(10, 0, 0, 1);
  const ParsedPacket qp1 = roce_packet(a, a, 50000, 1);
  const ParsedPacket qp2 = roce_packet(a, a, 50000, 2);
  REQUIRE(tcam.add(spray_rule(1, 1)) == TcamRefusal::kNone);
  REQUIRE(tcam.add(spray_rule(2, 2)) == TcamRefusal::kCapacity);
  REQUIRE(tcam.commit());
  CHECK(classify_one(tcam, qp1).matched);
  CHECK(classify_one(tcam, qp2).fallback);

  CHECK(tcam.remove(1));
  CHECK_FALSE(tcam.remove(1));
  CHECK_FALSE(tcam.remove(42));
  CHECK(tcam.admitted_rules() == 0);
  CHECK(tcam.spray_rules() == 0);
  CHECK(tcam.partition_used("default") == 0u);
  // Pending until commit: the published snapshot still has rule 1.
  CHECK(classify_one(tcam, qp1).matched);
  REQUIRE(tcam.commit());
  CHECK_FALSE(classify_one(tcam, qp1).matched);
  CHECK_FALSE(classify_one(tcam, qp1).fallback);
  CHECK(classify_one(tcam, qp2).fallback);  // still refused: room does not promote it

  // Re-adding the refused rule takes the freed room.
  CHECK(tcam.remove(2));
  CHECK(tcam.add(spray_rule(2, 2)) == TcamRefusal::kNone);
  CHECK(tcam.add(spray_rule(1, 1)) == TcamRefusal::kCapacity);
  REQUIRE(tcam.commit());
  CHECK(classify_one(tcam, qp2).matched);
  CHECK(classify_one(tcam, qp2).rule_id == 2);
  CHECK(classify_one(tcam, qp1).fallback);
  CHECK(tcam.rule_hits(2) == 2);  // counted afresh since the re-add
}

TEST_CASE("rule hit counts survive commits") {
  Tcam tcam(TcamConfig{});
  REQUIRE(tcam.add(pin_rule(1, 1, ipv4(10, 0, 0, 0), 8, 1)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  const ParsedPacket p = udp_packet(1, ipv4(10, 1, 1, 1), 1, 2);
  classify_one(tcam, p);
  REQUIRE(tcam.add(pin_rule(2, 0, ipv4(11, 0, 0, 0), 8, 2)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  classify_one(tcam, p);
  CHECK(tcam.rule_hits(1) == 2);
  CHECK(tcam.rule_hits(2) == 0);
  CHECK(tcam.rule_hits(3) == 0);
}

TEST_CASE("hit counts added per burst are exact: runs, interleavings, chunks, shadow, cache") {
  // classify() adds a rule's hits to its counter once per run of packets hitting it, not per
  // packet: runs that cross the 64-packet lookup chunks, rules that alternate packet by packet,
  // refused (shadow) rules, packets that miss or have no IPv4 header must all count exactly.
  TcamConfig cfg;
  cfg.capacity = 2;
  Tcam tcam(cfg);
  REQUIRE(tcam.add(pin_rule(1, 10, ipv4(10, 1, 0, 0), 16, 1)) == TcamRefusal::kNone);
  REQUIRE(tcam.add(pin_rule(2, 10, ipv4(10, 2, 0, 0), 16, 2)) == TcamRefusal::kNone);
  REQUIRE(tcam.add(pin_rule(3, 10, ipv4(10, 3, 0, 0), 16, 3)) == TcamRefusal::kCapacity);
  REQUIRE(tcam.commit());

  const ParsedPacket to1 = udp_packet(1, ipv4(10, 1, 0, 1), 1, 2);
  const ParsedPacket to2 = udp_packet(1, ipv4(10, 2, 0, 1), 1, 2);
  const ParsedPacket to3 = udp_packet(1, ipv4(10, 3, 0, 1), 1, 2);  // the refused rule
  const ParsedPacket none = udp_packet(1, ipv4(11, 0, 0, 1), 1, 2);
  ParsedPacket not_ip;  // kUnknown: not looked up
  const ParsedPacket* all[] = {&to1, &to2, &to3, &none, &not_ip};
  std::mt19937 rng(20261203);
  std::vector<const ParsedPacket*> pkts;
  for (int run = 0; run < 400; ++run) {
    // Runs of 1..150 packets of one kind, then stretches where every packet differs.
    const ParsedPacket* p = all[rng() % 5];
    const size_t len = 1 + rng() % 150;
    for (size_t i = 0; i < len; ++i) pkts.push_back(p);
    for (size_t i = rng() % 20; i > 0; --i) pkts.push_back(all[rng() % 5]);
  }
  uint64_t want[6] = {};  // by index into `all`, as classify_one says: the reference
  for (const ParsedPacket* p : pkts) {
    for (size_t k = 0; k < 5; ++k) want[k] += p == all[k];
  }

  TcamDecisionCache cache(16);
  const bool with_cache = GENERATE(false, true);
  INFO("with a cache: " << with_cache);
  std::vector<TcamMatch> out(pkts.size());
  for (size_t base = 0; base < pkts.size();) {
    const size_t n = std::min<size_t>(1 + rng() % 300, pkts.size() - base);  // across chunks
    tcam.classify(pkts.data() + base, static_cast<uint16_t>(n), out.data() + base,
                  with_cache ? &cache : nullptr);
    base += n;
  }
  CHECK(tcam.rule_hits(1) == want[0]);
  CHECK(tcam.rule_hits(2) == want[1]);
  CHECK(tcam.rule_hits(3) == want[2]);
  const TcamCounters c = tcam.counters();
  CHECK(c.matched_packets == want[0] + want[1]);
  CHECK(c.fallback_ecmp_packets == want[2]);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kCapacity)] == want[2]);
  CHECK(c.classified_packets == pkts.size() - want[4]);
  CHECK(c.not_ipv4_packets == want[4]);
  for (size_t i = 0; i < pkts.size(); ++i) {
    const TcamMatch& m = out[i];
    const uint32_t expect_id = pkts[i] == &to1 ? 1 : pkts[i] == &to2 ? 2 : pkts[i] == &to3 ? 3 : 0;
    if (m.rule_id != expect_id || m.matched != (expect_id == 1 || expect_id == 2) ||
        m.fallback != (expect_id == 3)) {
      FAIL("packet " << i << ": rule " << m.rule_id << ", expected " << expect_id);
    }
  }
}

TEST_CASE("a commit leaves the old snapshot readable until reclaim") {
  Tcam tcam(TcamConfig{});
  const ParsedPacket p = udp_packet(1, ipv4(10, 1, 1, 1), 1, 2);
  REQUIRE(tcam.add(pin_rule(1, 1, ipv4(10, 0, 0, 0), 8, 1)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  CHECK(tcam.retired_snapshots() == 1);  // the empty generation 0
  tcam.reclaim_retired();
  CHECK(tcam.retired_snapshots() == 0);

  // A reader takes the snapshot at the start of its burst...
  const TcamSnapshot& in_use = tcam.current();
  CHECK(in_use.generation() == 1);
  // ...while the control thread replaces the rule and publishes twice.
  REQUIRE(tcam.remove(1));
  REQUIRE(tcam.add(pin_rule(2, 1, ipv4(10, 0, 0, 0), 8, 2)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  REQUIRE(tcam.add(pin_rule(3, 9, ipv4(10, 1, 0, 0), 16, 3)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());
  CHECK(tcam.retired_snapshots() == 2);
  CHECK(tcam.current().generation() == 3);

  // The reader's snapshot still answers as generation 1 did (ASan would catch a freed one).
  const TcamMatch old_match = classify_one(tcam, in_use, p);
  CHECK(old_match.rule_id == 1);
  CHECK(old_match.port == 1);
  CHECK(in_use.generation() == 1);
  CHECK(classify_one(tcam, p).rule_id == 3);

  // Readers have quiesced: the owner reclaims; the current snapshot is untouched.
  tcam.reclaim_retired();
  CHECK(tcam.retired_snapshots() == 0);
  CHECK(classify_one(tcam, p).rule_id == 3);
  CHECK(tcam.counters().commits == 3);
}

TEST_CASE("several TCAMs live side by side, each with its own rte_acl contexts") {
  Tcam first(TcamConfig{});
  Tcam second(TcamConfig{});
  REQUIRE(first.add(pin_rule(1, 1, 0, 0, 1)) == TcamRefusal::kNone);
  REQUIRE(second.add(pin_rule(1, 1, 0, 0, 2)) == TcamRefusal::kNone);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(first.commit());
    REQUIRE(second.commit());
  }
  const ParsedPacket p = udp_packet(1, 2, 3, 4);
  CHECK(classify_one(first, p).port == 1);
  CHECK(classify_one(second, p).port == 2);
}

TEST_CASE("bad configs are refused with a clear error") {
  TcamConfig twice;
  twice.partitions = {{"roce", 10}, {"roce", 20}};
  CHECK_THROWS_WITH(Tcam(twice), Catch::Contains("partition 'roce' listed twice"));
  TcamConfig unnamed;
  unnamed.partitions = {{"", 10}};
  CHECK_THROWS_WITH(Tcam(unnamed), Catch::Contains("no name"));
  TcamConfig huge;
  huge.capacity = 1u << 30;
  CHECK_THROWS_AS(Tcam(huge), std::invalid_argument);
  // Listing "default" sets its capacity.
  TcamConfig small_default;
  small_default.partitions = {{"default", 1}};
  Tcam tcam(small_default);
  REQUIRE(tcam.add(pin_rule(1, 1, 0, 0, 1)) == TcamRefusal::kNone);
  CHECK(tcam.add(pin_rule(2, 1, 0, 0, 1)) == TcamRefusal::kPartitionFull);
}

TEST_CASE("classify on parsed mbufs, in one burst larger than a lookup chunk") {
  test::TestPool pool;
  Tcam tcam(TcamConfig{});
  REQUIRE(tcam.add(spray_rule(1, 0x10)) == TcamRefusal::kNone);
  REQUIRE(tcam.commit());

  constexpr uint16_t kBurst = 150;
  std::vector<rte_mbuf*> mbufs;
  std::vector<ParsedPacket> parsed(kBurst);
  std::vector<const ParsedPacket*> pkts;
  for (uint16_t i = 0; i < kBurst; ++i) {
    FrameSpec fs;
    fs.ip.src = ipv4(10, 0, 0, 1);
    fs.ip.dst = ipv4(10, 0, 0, 2);
    fs.udp.src_port = static_cast<uint16_t>(49152 + i);
    RoceSpec rs;
    rs.opcode = opcode::kRcSendOnly;
    rs.dest_qp = (i % 3 == 0) ? 0x10 : 0x11;
    rte_mbuf* m = build_roce_mbuf(pool.get(), fs, rs);
    REQUIRE(m != nullptr);
    mbufs.push_back(m);
    REQUIRE(PacketParser().parse(m, parsed[i]) == ParseStatus::kOk);
    pkts.push_back(&parsed[i]);
  }
  std::vector<TcamMatch> out(kBurst);
  tcam.classify(pkts.data(), kBurst, out.data());
  for (uint16_t i = 0; i < kBurst; ++i) {
    INFO("packet " << i);
    CHECK(out[i].matched == (i % 3 == 0));
  }
  CHECK(tcam.rule_hits(1) == 50);
  for (rte_mbuf* m : mbufs) rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

// ---------------------------------------------------------------------------------------------
// Randomized cross-check against a linear scan written here from the rule definitions.

namespace {

struct ReferenceKey {
  uint32_t src_ip, dst_ip;
  uint8_t proto;
  uint16_t src_port, dst_port;
  uint32_t dest_qp;
};

ReferenceKey reference_key(const ParsedPacket& p) {
  const bool l4 =
      p.kind == PacketKind::kUdp || p.kind == PacketKind::kTcp || p.kind == PacketKind::kRoce;
  return {p.src_ip,
          p.dst_ip,
          p.ip_proto,
          static_cast<uint16_t>(l4 ? p.src_port : 0),
          static_cast<uint16_t>(l4 ? p.dst_port : 0),
          p.kind == PacketKind::kRoce ? p.dest_qp : 0};
}

bool prefix_matches(uint32_t addr, uint32_t rule_addr, unsigned len) {
  if (len == 0) return true;
  return (addr >> (32 - len)) == (rule_addr >> (32 - len));
}

bool reference_matches(const TcamRule& r, const ReferenceKey& k) {
  return prefix_matches(k.src_ip, r.src_ip, r.src_prefix_len) &&
         prefix_matches(k.dst_ip, r.dst_ip, r.dst_prefix_len) &&
         (k.proto & r.ip_proto_mask) == (r.ip_proto & r.ip_proto_mask) &&
         k.src_port >= r.src_port_lo && k.src_port <= r.src_port_hi &&
         k.dst_port >= r.dst_port_lo && k.dst_port <= r.dst_port_hi && k.dest_qp >= r.dest_qp_lo &&
         k.dest_qp <= r.dest_qp_hi;
}

// Highest priority, then lowest id.
const TcamRule* reference_best(const std::vector<TcamRule>& rules, const ReferenceKey& k) {
  const TcamRule* best = nullptr;
  for (const TcamRule& r : rules) {
    if (!reference_matches(r, k)) continue;
    if (best == nullptr || r.priority > best->priority ||
        (r.priority == best->priority && r.id < best->id)) {
      best = &r;
    }
  }
  return best;
}

class RandomRules {
 public:
  explicit RandomRules(uint32_t seed) : rng_(seed) {}

  uint32_t below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  uint32_t any32() { return static_cast<uint32_t>(rng_()); }

  // Addresses from a few /16s so that rules overlap and packets hit them.
  uint32_t address() {
    static constexpr uint32_t kBases[] = {ipv4(10, 0, 0, 0), ipv4(10, 1, 0, 0),
                                          ipv4(192, 168, 0, 0)};
    return below(8) == 0 ? any32() : kBases[below(3)] | (any32() & 0xFFFF);
  }
  uint8_t prefix_len() {
    static constexpr uint8_t kLens[] = {0, 0, 8, 16, 24, 32};
    return below(3) == 0 ? static_cast<uint8_t>(below(33)) : kLens[below(6)];
  }
  template <typename T>
  void range(T& lo, T& hi, uint32_t max, uint32_t special) {
    switch (below(5)) {
      case 0:
      case 1:
        lo = 0, hi = static_cast<T>(max);
        break;
      case 2:
        lo = hi = static_cast<T>(special);
        break;
      case 3:
        lo = hi = static_cast<T>(below(max + 1));
        break;
      default: {
        uint32_t a = below(max + 1), b = below(max + 1);
        if (a > b) std::swap(a, b);
        lo = static_cast<T>(a);
        hi = static_cast<T>(b);
      }
    }
  }

  TcamRule rule(uint32_t id) {
    TcamRule r;
    r.id = id;
    r.priority = static_cast<int32_t>(below(41)) - 20;  // many ties
    r.src_ip = address();
    r.src_prefix_len = prefix_len();
    r.dst_ip = address();
    r.dst_prefix_len = prefix_len();
    static constexpr uint8_t kProtos[] = {kProtoUdp, kProtoUdp, kProtoTcp, kProtoIcmp, 47};
    static constexpr uint8_t kMasks[] = {0, 0, 0xFF, 0xFF, 0x0F};
    r.ip_proto = below(6) == 0 ? static_cast<uint8_t>(below(256)) : kProtos[below(5)];
    r.ip_proto_mask = below(6) == 0 ? static_cast<uint8_t>(below(256)) : kMasks[below(5)];
    range(r.src_port_lo, r.src_port_hi, 0xFFFF, 49152);
    range(r.dst_port_lo, r.dst_port_hi, 0xFFFF, kRoceV2UdpPort);
    range(r.dest_qp_lo, r.dest_qp_hi, kTcamDestQpMax, 0x100 + below(16));
    r.action = static_cast<TcamAction>(below(kTcamActionCount));
    r.port = static_cast<uint16_t>(below(64));
    return r;
  }

  uint32_t in_prefix(uint32_t addr, unsigned len) {
    const uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
    return (addr & mask) | (any32() & ~mask);
  }
  template <typename T>
  T in_range(T lo, T hi) {
    return static_cast<T>(lo + below(uint32_t{hi} - lo + 1));
  }

  // Half the packets are aimed inside a random rule, the rest are random over the same space.
  ParsedPacket packet(const std::vector<TcamRule>& rules) {
    const TcamRule* aim =
        below(2) == 0 ? &rules[below(static_cast<uint32_t>(rules.size()))] : nullptr;
    const uint32_t src = aim ? in_prefix(aim->src_ip, aim->src_prefix_len) : address();
    const uint32_t dst = aim ? in_prefix(aim->dst_ip, aim->dst_prefix_len) : address();
    uint8_t proto;
    if (aim) {
      proto = static_cast<uint8_t>((aim->ip_proto & aim->ip_proto_mask) |
                                   (below(256) & ~aim->ip_proto_mask));
    } else {
      static constexpr uint8_t kProtos[] = {kProtoUdp, kProtoUdp, kProtoTcp, kProtoIcmp, 47};
      proto = kProtos[below(5)];
    }
    const uint16_t sport =
        aim ? in_range(aim->src_port_lo, aim->src_port_hi) : static_cast<uint16_t>(below(0x10000));
    uint16_t dport =
        aim ? in_range(aim->dst_port_lo, aim->dst_port_hi) : static_cast<uint16_t>(below(0x10000));
    if (proto == kProtoUdp && !aim && below(3) == 0) dport = kRoceV2UdpPort;
    if (proto == kProtoUdp && dport == kRoceV2UdpPort) {
      const uint32_t qp = aim ? in_range(aim->dest_qp_lo, aim->dest_qp_hi)
                              : (below(2) ? 0x100 + below(16) : below(kTcamDestQpMax + 1));
      return roce_packet(src, dst, sport, qp);
    }
    if (proto == kProtoUdp) return udp_packet(src, dst, sport, dport);
    return ip_packet(src, dst, proto, sport, dport);
  }

 private:
  std::mt19937 rng_;
};

}  // namespace

TEST_CASE("randomized: 200 rules x 10,000 packets agree with a linear scan") {
  constexpr uint32_t kSeed = 20240611;
  INFO("seed " << kSeed);
  RandomRules random(kSeed);
  // Room for 150 rules and 20 spray rules: about a quarter of the rules end up refused, so the
  // shadow lookup is cross-checked too.
  TcamConfig cfg;
  cfg.capacity = 150;
  cfg.spray_rule_limit = 20;
  Tcam tcam(cfg);

  std::vector<TcamRule> all;
  std::vector<TcamRule> admitted;
  std::vector<TcamRule> refused;
  size_t spray = 0;
  for (uint32_t id = 1; id <= 200; ++id) {
    const TcamRule r = random.rule(id);
    all.push_back(r);
    TcamRefusal expected = TcamRefusal::kNone;
    if (admitted.size() >= cfg.capacity) {
      expected = TcamRefusal::kCapacity;
    } else if (r.action == TcamAction::kSpray && spray >= cfg.spray_rule_limit) {
      expected = TcamRefusal::kSprayLimit;
    }
    REQUIRE(tcam.add(r) == expected);
    if (expected == TcamRefusal::kNone) {
      admitted.push_back(r);
      spray += r.action == TcamAction::kSpray;
    } else {
      refused.push_back(r);
    }
  }
  REQUIRE(admitted.size() == 150);
  REQUIRE(refused.size() == 50);
  REQUIRE(tcam.commit());

  constexpr size_t kPackets = 10000;
  std::vector<ParsedPacket> packets;
  packets.reserve(kPackets);
  for (size_t i = 0; i < kPackets; ++i) packets.push_back(random.packet(all));
  std::vector<const ParsedPacket*> pkts;
  for (const ParsedPacket& p : packets) pkts.push_back(&p);

  std::vector<TcamMatch> out(kPackets);
  constexpr size_t kBurst = 100;  // more than one rte_acl_classify chunk per call
  for (size_t base = 0; base < kPackets; base += kBurst) {
    tcam.classify(pkts.data() + base, static_cast<uint16_t>(std::min(kBurst, kPackets - base)),
                  out.data() + base);
  }

  size_t mismatches = 0;
  size_t expect_matched = 0;
  size_t expect_fallback = 0;
  std::map<uint32_t, uint64_t> expect_hits;
  for (size_t i = 0; i < kPackets; ++i) {
    const ReferenceKey k = reference_key(packets[i]);
    const TcamRule* hit = reference_best(admitted, k);
    const TcamRule* shadow = hit ? nullptr : reference_best(refused, k);
    TcamMatch expected;
    if (hit != nullptr) {
      expected = {true, false, hit->id, hit->action, hit->port};
      ++expect_matched;
      ++expect_hits[hit->id];
    } else if (shadow != nullptr) {
      expected.fallback = true;
      expected.rule_id = shadow->id;
      ++expect_fallback;
      ++expect_hits[shadow->id];
    }
    const TcamMatch& got = out[i];
    const bool same = got.matched == expected.matched && got.fallback == expected.fallback &&
                      got.rule_id == expected.rule_id && got.action == expected.action &&
                      got.port == expected.port;
    if (!same && ++mismatches <= 5) {
      UNSCOPED_INFO("packet " << i << ": expected rule " << expected.rule_id << " (matched "
                              << expected.matched << ", fallback " << expected.fallback
                              << "), got rule " << got.rule_id << " (matched " << got.matched
                              << ", fallback " << got.fallback << ")");
    }
  }
  CHECK(mismatches == 0);
  // The check is not vacuous: plenty of matches, fallbacks and misses.
  CHECK(expect_matched > 2000);
  CHECK(expect_fallback > 50);
  CHECK(kPackets - expect_matched - expect_fallback > 1000);

  const TcamCounters c = tcam.counters();
  CHECK(c.classified_packets == kPackets);
  CHECK(c.matched_packets == expect_matched);
  CHECK(c.fallback_ecmp_packets == expect_fallback);
  CHECK(c.fallback_packets_by_cause[cause(TcamRefusal::kCapacity)] +
            c.fallback_packets_by_cause[cause(TcamRefusal::kSprayLimit)] ==
        expect_fallback);
  size_t hits_wrong = 0;
  for (const TcamRule& r : all) hits_wrong += tcam.rule_hits(r.id) != expect_hits[r.id];
  CHECK(hits_wrong == 0);
}

TEST_CASE("a decision cache changes no decision and no counter, across commits") {
  // Two TCAMs with the same rules, one classifying through a small cache (collisions and
  // evictions) and one without; packets drawn from a pool so that keys repeat. After every
  // pass a commit changes the rules: decisions cached under the old snapshot must not be used.
  constexpr uint32_t kSeed = 20261202;
  INFO("seed " << kSeed);
  RandomRules random(kSeed);
  TcamConfig cfg;
  cfg.capacity = 60;
  cfg.spray_rule_limit = 10;
  Tcam plain(cfg), cached(cfg);
  TcamDecisionCache cache(64);
  std::vector<TcamRule> all;
  for (uint32_t id = 1; id <= 80; ++id) {
    all.push_back(random.rule(id));
    REQUIRE(plain.add(all.back()) == cached.add(all.back()));
  }
  std::vector<ParsedPacket> pool;
  for (int i = 0; i < 300; ++i) pool.push_back(random.packet(all));
  std::mt19937 pick(kSeed);

  uint64_t cache_hits_possible = 0;
  for (uint32_t pass = 0; pass < 4; ++pass) {
    INFO("pass " << pass);
    REQUIRE(plain.commit());
    REQUIRE(cached.commit());
    std::vector<const ParsedPacket*> pkts;
    for (int i = 0; i < 3000; ++i) pkts.push_back(&pool[pick() % pool.size()]);
    std::vector<TcamMatch> a(pkts.size()), b(pkts.size());
    for (size_t base = 0; base < pkts.size(); base += 1 + base % 97) {
      const auto n = static_cast<uint16_t>(std::min<size_t>(1 + base % 97, pkts.size() - base));
      plain.classify(pkts.data() + base, n, a.data() + base);
      cached.classify(pkts.data() + base, n, b.data() + base, &cache);
    }
    size_t differ = 0;
    for (size_t i = 0; i < pkts.size(); ++i) {
      differ += a[i].matched != b[i].matched || a[i].fallback != b[i].fallback ||
                a[i].rule_id != b[i].rule_id || a[i].action != b[i].action ||
                a[i].port != b[i].port || a[i].keep_percent != b[i].keep_percent;
    }
    CHECK(differ == 0);
    const TcamCounters ca = plain.counters(), cb = cached.counters();
    CHECK(ca.classified_packets == cb.classified_packets);
    CHECK(ca.not_ipv4_packets == cb.not_ipv4_packets);
    CHECK(ca.matched_packets == cb.matched_packets);
    CHECK(ca.fallback_ecmp_packets == cb.fallback_ecmp_packets);
    CHECK(ca.fallback_packets_by_cause == cb.fallback_packets_by_cause);
    CHECK(ca.classify_errors == cb.classify_errors);
    size_t hits_differ = 0;
    for (const TcamRule& r : all) hits_differ += plain.rule_hits(r.id) != cached.rule_hits(r.id);
    CHECK(hits_differ == 0);
    // Not vacuous: rules match, and keys repeat far more than the cache has slots.
    CHECK(ca.matched_packets > 100 * (pass + 1));
    cache_hits_possible += pkts.size() - pool.size();

    // The next pass runs on other rules: the first ten removed, ten new ones of high priority.
    for (uint32_t k = 0; k < 10; ++k) {
      const uint32_t gone = all[k].id;
      REQUIRE(plain.remove(gone));
      REQUIRE(cached.remove(gone));
      TcamRule r = random.rule(1000 + pass * 10 + k);
      r.priority = 100;
      all[k] = r;
      REQUIRE(plain.add(r) == cached.add(r));
    }
  }
  CHECK(cache_hits_possible > 10000);
}

TEST_CASE("a decision cache filled by one TCAM is reset by another") {
  Tcam one(TcamConfig{}), other(TcamConfig{});
  TcamRule r;
  r.id = 1;
  r.dst_ip = ipv4(10, 0, 0, 0);
  r.dst_prefix_len = 8;
  r.action = TcamAction::kDrop;
  REQUIRE(one.add(r) == TcamRefusal::kNone);
  r.action = TcamAction::kMirror;
  r.port = 3;
  REQUIRE(other.add(r) == TcamRefusal::kNone);
  REQUIRE(one.commit());
  REQUIRE(other.commit());  // the same generation as one's
  const ParsedPacket p = udp_packet(ipv4(1, 2, 3, 4), ipv4(10, 1, 1, 1), 1000, 2000);
  const ParsedPacket* pkts[] = {&p};
  TcamDecisionCache cache(16);
  TcamMatch m;
  one.classify(pkts, 1, &m, &cache);
  CHECK(m.action == TcamAction::kDrop);
  other.classify(pkts, 1, &m, &cache);
  CHECK(m.action == TcamAction::kMirror);
  CHECK(m.port == 3);
  CHECK(cache.owner() == &other);
}

TEST_CASE("a cached decision is never another key's: keys one field apart share one line") {
  // Admitted spray rules for QPs 1-4, a refused one for QP 6, a pin for TCP to 10.9/16: packets
  // that differ only in DestQP, in protocol or in one port, through a one-line cache (three
  // ways, every key in the same line) in bursts and one by one, twice over (the second time
  // from the cache where it holds them), against the same TCAM without a cache.
  TcamConfig cfg;
  cfg.capacity = 5;
  Tcam tcam(cfg);
  for (uint32_t qp = 1; qp <= 4; ++qp) REQUIRE(tcam.add(spray_rule(qp, qp)) == TcamRefusal::kNone);
  TcamRule pin = pin_rule(5, 50, ipv4(10, 9, 0, 0), 16, 3);
  pin.ip_proto = 6;
  pin.ip_proto_mask = 0xFF;
  REQUIRE(tcam.add(pin) == TcamRefusal::kNone);
  REQUIRE(tcam.add(spray_rule(6, 6)) == TcamRefusal::kCapacity);
  REQUIRE(tcam.commit());
  const uint32_t a = ipv4(10, 0, 0, 1), b = ipv4(10, 9, 0, 2);
  std::vector<ParsedPacket> pool;
  for (uint32_t qp : {4u, 3u, 6u, 77u, 0u, 4u, 6u}) pool.push_back(roce_packet(a, b, 50000, qp));
  pool.push_back(ip_packet(a, b, 6, 1000, 2000));    // TCP: pinned
  pool.push_back(ip_packet(a, b, 17, 1000, 2000));   // UDP, same ports: not
  pool.push_back(ip_packet(a, b, 6, 1000, 2001));    // TCP, another port: pinned
  pool.push_back(ip_packet(a, b, 132, 1000, 2000));  // SCTP: no ports, not pinned
  std::vector<const ParsedPacket*> pkts;
  for (int round = 0; round < 2; ++round) {
    for (const ParsedPacket& p : pool) pkts.push_back(&p);
  }
  std::vector<TcamMatch> plain(pkts.size());
  tcam.classify(pkts.data(), static_cast<uint16_t>(pkts.size()), plain.data());
  const bool burst = GENERATE(false, true);
  INFO("in one burst: " << burst);
  TcamDecisionCache cache(1);
  std::vector<TcamMatch> cached(pkts.size());
  if (burst) {
    tcam.classify(pkts.data(), static_cast<uint16_t>(pkts.size()), cached.data(), &cache);
  } else {
    for (size_t i = 0; i < pkts.size(); ++i) tcam.classify(&pkts[i], 1, &cached[i], &cache);
  }
  for (size_t i = 0; i < pkts.size(); ++i) {
    INFO("packet " << i);
    CHECK(cached[i].matched == plain[i].matched);
    CHECK(cached[i].fallback == plain[i].fallback);
    CHECK(cached[i].rule_id == plain[i].rule_id);
    CHECK(cached[i].action == plain[i].action);
    CHECK(cached[i].port == plain[i].port);
  }
  // The answers themselves: QP 4 sprayed, QP 6 falls back, TCP pinned, UDP and SCTP not.
  CHECK(plain[0].rule_id == 4);
  CHECK(plain[2].fallback);
  CHECK(plain[2].rule_id == 6);
  CHECK_FALSE(plain[3].matched);
  CHECK(plain[7].action == TcamAction::kPinPort);
  CHECK_FALSE(plain[8].matched);
  CHECK(plain[9].action == TcamAction::kPinPort);
  CHECK_FALSE(plain[10].matched);
}

TEST_CASE("a cache that does not pay is set aside, then tried again; no decision changes") {
  // 20,000 flows through a 64-entry cache: almost every lookup misses, so after one window
  // the cache is set aside (rte_acl answers alone); then 8 flows: once the rest is over, the
  // trial window hits and the cache stays in use. Every decision and counter is the plain
  // TCAM's all along.
  Tcam plain(TcamConfig{}), cached(TcamConfig{});
  for (uint32_t k = 0; k < 16; ++k) {
    const TcamRule r = pin_rule(k + 1, static_cast<int32_t>(k), 0x0A000000 + (k << 8), 24,
                                static_cast<uint16_t>(k));
    REQUIRE(plain.add(r) == TcamRefusal::kNone);
    REQUIRE(cached.add(r) == TcamRefusal::kNone);
  }
  REQUIRE(plain.commit());
  REQUIRE(cached.commit());
  TcamDecisionCache cache(64);
  std::vector<ParsedPacket> many, few;
  for (uint32_t i = 0; i < 20000; ++i) {
    many.push_back(udp_packet(0xC0A80000 + i, 0x0A000000 + (i % 4096), 1000, 2000));
  }
  for (uint32_t i = 0; i < 8; ++i) few.push_back(udp_packet(0xC0A90000 + i, 0x0A000000 + i * 256, 1000, 2000));
  size_t differ = 0;
  const auto run = [&](const std::vector<ParsedPacket>& pool, size_t packets) {
    std::vector<const ParsedPacket*> pkts;
    for (size_t i = 0; i < packets; ++i) pkts.push_back(&pool[i % pool.size()]);
    std::vector<TcamMatch> a(pkts.size()), b(pkts.size());
    for (size_t base = 0; base < pkts.size(); base += 32) {
      const auto n = static_cast<uint16_t>(std::min<size_t>(32, pkts.size() - base));
      plain.classify(pkts.data() + base, n, a.data() + base);
      cached.classify(pkts.data() + base, n, b.data() + base, &cache);
    }
    for (size_t i = 0; i < pkts.size(); ++i) {
      differ += a[i].matched != b[i].matched || a[i].rule_id != b[i].rule_id ||
                a[i].port != b[i].port;
    }
  };
  run(many, TcamDecisionCache::kWindow);
  CHECK(cache.set_asides() == 1);
  CHECK(!cache.in_use());
  run(many, TcamDecisionCache::kRestLookups - 32);
  CHECK(!cache.in_use());
  CHECK(cache.set_aside_lookups() == TcamDecisionCache::kRestLookups - 32);
  // The rest ends within the next burst; then a window of the 8 flows hits.
  run(few, 32 + 2 * TcamDecisionCache::kWindow);
  CHECK(cache.in_use());
  CHECK(cache.set_asides() == 1);
  CHECK(differ == 0);
  const TcamCounters ca = plain.counters(), cb = cached.counters();
  CHECK(ca.classified_packets == cb.classified_packets);
  CHECK(ca.matched_packets == cb.matched_packets);
  CHECK(ca.matched_packets > 0);
  for (uint32_t k = 0; k < 16; ++k) CHECK(plain.rule_hits(k + 1) == cached.rule_hits(k + 1));
}
