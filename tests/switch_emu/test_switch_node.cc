// The switch pipeline in-process, in virtual time: packets built with the packet builder go into
// SwitchNode::receive on a port, and what its egress releases is read back per port.
#include "switch_emu/switch_node.h"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "control/switch_config.h"
#include "dataplane/wire/flow_key.h"
#include "dataplane/wire/pfc_frame.h"
#include "dataplane/egress/egress_memory.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/reference_crc.h"

using namespace spraynet;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

control::SwitchConfig config_of(const std::string& yaml) {
  return control::parse_switch_config(control::ConfigNode::load_string(yaml, "test.yaml"));
}

// Ports in0, p0..p(n-1); every destination routes to group g over p0..p(n-1). The ports'
// links are emulated (these tests time frames on them) unless port_extra says otherwise.
std::string fanout_yaml(int n, const std::string& mode, const std::string& extra = "",
                        std::string port_extra = "") {
  if (port_extra.find("link:") == std::string::npos) port_extra += ", link: emulated";
  std::string y = "ports:\n  - {name: in0, device: x" + port_extra + "}\n";
  for (int i = 0; i < n; ++i) {
    y += "  - {name: p" + std::to_string(i) + ", device: x, queue_bytes: 67108864" + port_extra + "}\n";
  }
  y += "groups:\n  - {name: g, mode: " + mode + ", ports: [";
  for (int i = 0; i < n; ++i) y += (i ? ", p" : "p") + std::to_string(i);
  y += "]}\nroutes:\n  - {prefix: 0.0.0.0/0, group: g}\nhash: {algorithm: crc32c, seed: 0x1234}\n";
  return y + extra;
}

struct Flow {
  uint32_t src, dst;
  uint16_t sport, dport;
};

uint32_t flow_crc(const Flow& f, uint32_t seed) {
  const uint8_t k[13] = {uint8_t(f.src >> 24), uint8_t(f.src >> 16), uint8_t(f.src >> 8),
                         uint8_t(f.src),       uint8_t(f.dst >> 24), uint8_t(f.dst >> 16),
                         uint8_t(f.dst >> 8),  uint8_t(f.dst),       uint8_t(f.sport >> 8),
                         uint8_t(f.sport),     uint8_t(f.dport >> 8), uint8_t(f.dport), 17};
  // The 5-tuple in network order through an independent CRC32C (see reference_crc.h).
  return test::reference_crc32c_dpdk(k, seed);
}

rte_mbuf* udp(const TestPool& pool, const Flow& f, uint8_t dscp = 0, size_t payload = 64,
              uint8_t ttl = 64) {
  std::vector<uint8_t> data(payload, 0xA5);
  FrameSpec fs;
  fs.ip.src = f.src;
  fs.ip.dst = f.dst;
  fs.ip.tos = static_cast<uint8_t>(dscp << 2);
  fs.ip.ttl = ttl;
  fs.udp.src_port = f.sport;
  fs.udp.dst_port = f.dport;
  fs.payload = data;
  rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
  REQUIRE(m != nullptr);
  return m;
}

// Reads everything each port releases by now_ns; returns (port, parsed) pairs and frees mbufs.
std::vector<std::pair<uint16_t, ParsedPacket>> drain(SwitchNode& node, uint64_t now_ns) {
  std::vector<std::pair<uint16_t, ParsedPacket>> out;
  rte_mbuf* m[64];
  PacketParser parser;
  for (uint16_t p = 0; p < node.port_count(); ++p) {
    uint16_t n;
    while ((n = node.transmit(p, now_ns, m, 64)) > 0) {
      for (uint16_t i = 0; i < n; ++i) {
        ParsedPacket pp;
        parser.parse(m[i], pp);  // PFC frames parse as kMacControl
        out.emplace_back(p, pp);
        rte_pktmbuf_free(m[i]);
      }
    }
  }
  return out;
}

std::vector<Flow> random_flows(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Flow> flows(n);
  for (auto& f : flows) {
    f = {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
         static_cast<uint16_t>(rng())};
    // UDP 4791 is RoCEv2: these payloads are not BTHs, and the parser would rightly drop them.
    if (f.dport == 4791) f.dport = 4792;
  }
  return flows;
}

}  // namespace

TEST_CASE("ECMP: 100,000 random 5-tuples over 8 ports, even within 3%, hash % 8") {
  TestPool pool(8191);
  const auto cfg = config_of(fanout_yaml(8, "ecmp"));
  SwitchNode node(cfg, pool.get());
  const auto flows = random_flows(100000, 42);
  std::vector<uint64_t> per_port(9, 0);
  uint64_t now = 0, mismatches = 0, seen = 0;
  for (size_t base = 0; base < flows.size(); base += 32) {
    rte_mbuf* burst[32];
    const uint16_t n = static_cast<uint16_t>(std::min<size_t>(32, flows.size() - base));
    for (uint16_t i = 0; i < n; ++i) burst[i] = udp(pool, flows[base + i]);
    node.receive(0, burst, n, now);
    now += 10'000;
    for (const auto& [port, p] : drain(node, now)) {
      const Flow f{p.src_ip, p.dst_ip, p.src_port, p.dst_port};
      const uint16_t expected = 1 + flow_crc(f, 0x1234) % 8;
      mismatches += (port != expected);
      per_port[port]++;
      ++seen;
    }
  }
  for (const auto& [port, p] : drain(node, now + 1'000'000'000)) per_port[port]++, ++seen;
  CHECK(seen == flows.size());
  CHECK(mismatches == 0);
  CHECK(per_port[0] == 0);
  for (int p = 1; p <= 8; ++p) {
    INFO("port p" << p - 1 << ": " << per_port[p]);
    CHECK(std::abs(static_cast<double>(per_port[p]) - 12500.0) <= 0.03 * 12500);
  }
  CHECK(node.total_drops() == 0);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("ECMP keeps every packet of a flow on one port; a down link rehashes to 7") {
  TestPool pool(4095);
  const auto cfg = config_of(fanout_yaml(8, "ecmp"));
  SwitchNode node(cfg, pool.get());
  const auto flows = random_flows(500, 7);
  std::map<std::pair<uint32_t, uint16_t>, std::set<uint16_t>> ports_of;
  uint64_t now = 0;
  for (int round = 0; round < 4; ++round) {
    for (const auto& f : flows) {
      rte_mbuf* m = udp(pool, f);
      node.receive(0, &m, 1, now);
      now += 100;
    }
    for (const auto& [port, p] : drain(node, now + 10'000'000)) {
      ports_of[{p.src_ip, p.src_port}].insert(port);
    }
    now += 10'000'000;
  }
  CHECK(ports_of.size() == flows.size());
  for (const auto& [k, ports] : ports_of) CHECK(ports.size() == 1);

  node.set_link_up(3, false, now);  // p2 down: hash % 7 over p0, p1, p3..p7
  std::vector<uint64_t> per_port(9, 0);
  uint64_t mismatches = 0;
  for (const auto& f : flows) {
    rte_mbuf* m = udp(pool, f);
    node.receive(0, &m, 1, now);
  }
  for (const auto& [port, p] : drain(node, now + 10'000'000)) {
    const uint32_t k = flow_crc({p.src_ip, p.dst_ip, p.src_port, p.dst_port}, 0x1234) % 7;
    const uint16_t expected = static_cast<uint16_t>(1 + (k < 2 ? k : k + 1));
    mismatches += (port != expected);
    per_port[port]++;
  }
  CHECK(per_port[3] == 0);
  CHECK(mismatches == 0);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("weighted buckets follow their weights within 2%") {
  TestPool pool(8191);
  // 32:12:32:20 buckets, as the reweighting formula gives paths at 0%, 85%, 0% and 75%.
  auto cfg = config_of(fanout_yaml(4, "weighted"));
  cfg.groups[0].weights = {32, 12, 32, 20};
  SwitchNode node(cfg, pool.get());
  const auto flows = random_flows(200000, 99);
  std::vector<uint64_t> per_port(5, 0);
  uint64_t now = 0;
  for (size_t base = 0; base < flows.size(); base += 32) {
    rte_mbuf* burst[32];
    for (int i = 0; i < 32; ++i) burst[i] = udp(pool, flows[base + i]);
    node.receive(0, burst, 32, now);
    now += 10'000;
    for (const auto& [port, p] : drain(node, now)) per_port[port]++;
  }
  for (const auto& [port, p] : drain(node, now + 1'000'000'000)) per_port[port]++;
  const double total = 200000, weights[4] = {32, 12, 32, 20};
  for (int m = 0; m < 4; ++m) {
    const double expected = total * weights[m] / 96.0;
    INFO("member " << m << ": " << per_port[m + 1] << " expected " << expected);
    CHECK(std::abs(per_port[m + 1] - expected) <= 0.02 * expected);
  }
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("DLB sends new flowlets away from a congested port") {
  TestPool pool(16383);
  // p1's link is 1 Gbit/s, the others 100: what is sent to p1 queues up there.
  auto cfg = config_of(fanout_yaml(4, "dlb"));
  cfg.ports[2].link.rate_gbps = 1.0;
  // Big enough that no fresh flow shares a flowlet entry with a busy one (entries are shared
  // on hash collisions, as in hardware).
  cfg.groups[0].flowlet_entries = 1u << 20;
  SwitchNode node(cfg, pool.get());
  // Phase 1: one long flow pinned by DLB to whatever port its first flowlet chose; find a flow
  // that lands on p1 and keep it busy within the gap so that its flowlet stays there.
  uint64_t now = 0;
  const auto flows = random_flows(64, 5);
  std::map<std::pair<uint32_t, uint16_t>, uint16_t> first_port;
  for (const auto& f : flows) {
    rte_mbuf* m = udp(pool, f, 0, 1000);
    node.receive(0, &m, 1, now);
  }
  // Drain p0, p2, p3 (fast) but leave p1 congested: at 1 Gbit/s its 1 kB frames take 8 us each.
  now += 1000;
  CHECK(node.egress(2).queued_bytes() > 0);
  const uint64_t congested = node.egress(2).queued_bytes();
  // Phase 2: 200 new flows, one packet each, arriving while p1 is still backed up: DLB puts
  // their flowlets on the least-loaded ports, never on p1.
  const auto fresh = random_flows(200, 6);
  std::vector<uint64_t> per_port(5, 0);
  for (const auto& f : fresh) {
    rte_mbuf* m = udp(pool, f, 0, 64);
    node.receive(0, &m, 1, now);
    now += 10;
  }
  CHECK(node.egress(2).queued_bytes() >= congested - 2000);  // p1 drained at most a frame or two
  const auto out = drain(node, now + 1'000'000'000);
  for (const auto& [port, p] : out) {
    if (p.payload_length == 0 && p.udp_length == 8 + 64) per_port[port]++;
  }
  CHECK(per_port[2] == 0);
  CHECK(per_port[1] + per_port[3] + per_port[4] == fresh.size());
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("TCAM: priorities hold; a rule that does not fit falls back to ECMP, counted") {
  TestPool pool(4095);
  const std::string tcam = R"(
tcam:
  capacity: 2
  rules:
    - {id: 1, priority: 10, action: drop, match: {dst: 10.9.0.0/16}}
    - {id: 2, priority: 20, action: pin, port: p3, match: {dst: 10.9.9.0/24}}
    - {id: 3, priority: 30, action: drop, match: {dst: 10.8.0.0/16}}
)";
  SwitchNode node(config_of(fanout_yaml(4, "ecmp", tcam)), pool.get());
  REQUIRE(node.tcam().refusal_of(3) == TcamRefusal::kCapacity);
  uint64_t now = 0;
  // 10.9.9.x: both 1 and 2 match; 2 has the higher priority: pinned to p3.
  for (int i = 0; i < 10; ++i) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A090901, static_cast<uint16_t>(1000 + i), 80});
    node.receive(0, &m, 1, now);
  }
  // 10.9.1.x: only rule 1: dropped.
  for (int i = 0; i < 7; ++i) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A090101, static_cast<uint16_t>(1000 + i), 80});
    node.receive(0, &m, 1, now);
  }
  // 10.8.x.x: rule 3 was refused: its traffic goes by ECMP, and the fallback counter says so.
  for (int i = 0; i < 5; ++i) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A080101, static_cast<uint16_t>(1000 + i), 80});
    node.receive(0, &m, 1, now);
  }
  std::vector<uint64_t> per_port(5, 0);
  for (const auto& [port, p] : drain(node, now + 1'000'000)) per_port[port]++;
  CHECK(per_port[4] >= 10);
  CHECK(node.drops().tcam_drop == 7);
  CHECK(node.counters().pinned == 10);
  CHECK(per_port[1] + per_port[2] + per_port[3] + per_port[4] == 15);
  const auto c = node.tcam().counters();
  CHECK(c.fallback_ecmp_packets == 5);
  CHECK(c.fallback_packets_by_cause[static_cast<size_t>(TcamRefusal::kCapacity)] == 5);
  CHECK(node.tcam().rule_hits(2) == 10);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("malformed, unroutable and expiring packets are counted and never forwarded") {
  TestPool pool(1023);
  auto yaml = fanout_yaml(2, "ecmp");
  yaml.replace(yaml.find("prefix: 0.0.0.0/0"), 17, "prefix: 10.0.0.0/8");
  SwitchNode node(config_of(yaml), pool.get());
  uint64_t now = 0;
  const Flow good{0x0A000001, 0x0A000002, 1234, 80};
  auto send = [&](rte_mbuf* m) { node.receive(0, &m, 1, now); };

  rte_mbuf* trunc = udp(pool, good);
  rte_pktmbuf_trim(trunc, rte_pktmbuf_data_len(trunc) - 30);  // cut inside the IPv4 header
  send(trunc);
  rte_mbuf* badsum = udp(pool, good);
  rte_pktmbuf_mtod(badsum, uint8_t*)[14 + 10] ^= 0xFF;
  send(badsum);
  rte_mbuf* arp = udp(pool, good);
  rte_pktmbuf_mtod(arp, uint8_t*)[12] = 0x08;
  rte_pktmbuf_mtod(arp, uint8_t*)[13] = 0x06;
  send(arp);
  send(udp(pool, {0x0A000001, 0xC0A80001, 1, 2}));  // 192.168.0.1: no route
  send(udp(pool, good, 0, 64, 1));                  // TTL 1: expires here
  send(udp(pool, good));                            // the one good packet

  const auto out = drain(node, now + 1'000'000);
  REQUIRE(out.size() == 1);
  CHECK(out[0].second.ttl == 63);
  const auto& d = node.drops();
  CHECK(d.parse[static_cast<size_t>(ParseStatus::kTruncatedIpv4)] +
            d.parse[static_cast<size_t>(ParseStatus::kBadTotalLength)] ==
        1);
  CHECK(d.parse[static_cast<size_t>(ParseStatus::kBadIpChecksum)] == 1);
  CHECK(d.parse[static_cast<size_t>(ParseStatus::kNotIpv4)] == 1);
  CHECK(d.no_route == 1);
  CHECK(d.ttl_expired == 1);
  CHECK(node.total_drops() == 5);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("drops by ingress port: each cause counted on the port the frame arrived on") {
  TestPool pool(1023);
  auto yaml = fanout_yaml(2, "ecmp");
  yaml.replace(yaml.find("prefix: 0.0.0.0/0"), 17, "prefix: 10.0.0.0/8");
  SwitchNode node(config_of(yaml), pool.get());
  const Flow good{0x0A000001, 0x0A000002, 1234, 80};
  auto send = [&](uint16_t port, rte_mbuf* m) { node.receive(port, &m, 1, 0); };
  for (int i = 0; i < 3; ++i) {  // in0: not IPv4
    rte_mbuf* arp = udp(pool, good);
    rte_pktmbuf_mtod(arp, uint8_t*)[12] = 0x08;
    rte_pktmbuf_mtod(arp, uint8_t*)[13] = 0x06;
    send(0, arp);
  }
  send(1, udp(pool, {0x0A000001, 0xC0A80001, 1, 2}));  // p0: no route, twice
  send(1, udp(pool, {0x0A000001, 0xC0A80002, 1, 2}));
  send(2, udp(pool, good, 0, 64, 1));  // p1: TTL 1
  send(2, udp(pool, good));            // p1: forwarded
  rte_mbuf* nowhere = udp(pool, good);
  node.receive(9, &nowhere, 1, 0);  // no such port: switch-wide only

  const auto not_ipv4 = static_cast<size_t>(ParseStatus::kNotIpv4);
  CHECK(node.port_drops(0).parse[not_ipv4] == 3);
  CHECK(node.port_drops(0).total() == 3);
  CHECK(node.port_drops(1).no_route == 2);
  CHECK(node.port_drops(1).total() == 2);
  CHECK(node.port_drops(2).ttl_expired == 1);
  CHECK(node.port_drops(2).total() == 1);
  // The switch-wide counters are the ports' plus what arrived on no port.
  const auto d = node.drops();
  CHECK(d.parse[not_ipv4] == 3);
  CHECK(d.no_route == 2);
  CHECK(d.ttl_expired == 1);
  CHECK(d.bad_port == 1);
  CHECK(d.total() == node.port_drops(0).total() + node.port_drops(1).total() +
                         node.port_drops(2).total() + d.bad_port);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC: XOFF is sent upstream when the threshold is crossed; a PAUSE holds the queue") {
  TestPool pool(8191);
  // in0 -> p0 at 1 Gbit/s: lossless priority 3 traffic (DSCP 26 -> class 3) backs up at p0 and
  // fills in0's priority group in the shared buffer (a static threshold of 52,428 bytes).
  auto cfg = config_of(fanout_yaml(1, "ecmp", R"(
pfc: {priorities: [3], static_threshold_bytes: 52428}
)"));
  cfg.ports[1].link.rate_gbps = 1.0;
  SwitchNode node(cfg, pool.get());
  uint64_t now = 0;
  int sent = 0;
  while (node.pfc()->buffered_bytes(0, 3) < 52429 && sent < 200) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A000002, 5000, 6000}, 26, 1000);
    node.receive(0, &m, 1, now);
    ++sent;
  }
  CHECK(node.pfc()->xoff_asserted(0, 3));
  node.poll(now);
  // The XOFF leaves on in0 (towards the sender) ahead of everything else.
  rte_mbuf* m[8];
  const uint16_t n = node.transmit(0, now + 1'000'000, m, 8);
  REQUIRE(n >= 1);
  PfcFrame f;
  REQUIRE(parse_pfc_frame(rte_pktmbuf_mtod(m[0], const uint8_t*), rte_pktmbuf_data_len(m[0]), f) ==
          PfcParseStatus::kOk);
  CHECK(f.enabled(3));
  CHECK(f.quanta[3] == 0xFFFF);
  CHECK(node.counters().pfc_frames_sent >= 1);
  for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(m[i]);

  // Now pause p0's class 3 from downstream: 1000 quanta at 1 Gbit/s = 512,000 ns.
  drain(node, now + 2'000'000'000);  // empty everything first
  now += 2'000'000'000;
  PfcFrame pause;
  pause.class_enable = 1 << 3;
  pause.quanta[3] = 1000;
  rte_mbuf* pm = pool.alloc();
  const uint8_t src[6] = {2, 0, 0, 0, 0, 9};
  REQUIRE(build_pfc_frame(pm, src, pause));
  node.receive(1, &pm, 1, now);
  rte_mbuf* d = udp(pool, {0x0A000001, 0x0A000002, 5000, 6000}, 26, 100);
  node.receive(0, &d, 1, now);
  // Serialisation of 170 B at 1 Gbit/s plus the 1 us delay would finish well before 512 us.
  CHECK(drain(node, now + 511'999).empty());
  const auto after = drain(node, now + 512'000 + 2'000 + 1'000);
  CHECK(after.size() == 1);
  node.free_all();
  CHECK(pool.whole());
}

namespace {

// One frame of a pause storm: the downstream on `port` pauses class 3 for 0xFFFF quanta.
void storm_pause(SwitchNode& node, const TestPool& pool, uint16_t port, uint64_t now) {
  static const uint8_t src[6] = {2, 0, 0, 0, 0, 9};
  PfcFrame pause;
  pause.class_enable = 1 << 3;
  pause.quanta[3] = 0xFFFF;
  rte_mbuf* pm = pool.alloc();
  REQUIRE(build_pfc_frame(pm, src, pause));
  node.receive(port, &pm, 1, now);
}

}  // namespace

TEST_CASE("fast feedback: around a paused member; with every member paused, queued, not dropped") {
  TestPool pool(4095);
  auto cfg = config_of(fanout_yaml(2, "ecmp", R"(
pfc: {priorities: [3], fast_feedback: true, watchdog: {enabled: false}}
)"));
  SwitchNode node(cfg, pool.get());
  uint64_t now = 0;
  storm_pause(node, pool, 1, now);  // p0 paused: lossless flows go to p1
  for (uint16_t sport = 1000; sport < 1016; ++sport) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A000002, sport, 6000}, 26, 100);
    node.receive(0, &m, 1, now);
  }
  CHECK(node.egress(1).queued_bytes() == 0);
  CHECK(node.egress(2).queued_bytes() > 0);
  storm_pause(node, pool, 2, now);  // both paused: nowhere to steer
  const uint64_t before = node.egress(1).queued_bytes() + node.egress(2).queued_bytes();
  for (uint16_t sport = 2000; sport < 2016; ++sport) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A000002, sport, 6000}, 26, 100);
    node.receive(0, &m, 1, now);
  }
  CHECK(node.drops().no_eligible_port == 0);
  CHECK(node.egress(1).queued_bytes() + node.egress(2).queued_bytes() >= before + 16 * 100);
  drain(node, now + 10'000'000);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC watchdog: a queue paused too long goes to drop mode, counted") {
  TestPool pool(4095);
  auto cfg = config_of(fanout_yaml(1, "ecmp", R"(
pfc: {priorities: [3], watchdog: {enabled: true, detect_ms: 200, restore_ms: 200}}
)"));
  SwitchNode node(cfg, pool.get());
  uint64_t now = 0;
  rte_mbuf* d = udp(pool, {0x0A000001, 0x0A000002, 5000, 6000}, 26, 100);
  // A storm: the downstream keeps p0's class 3 paused (0xFFFF quanta at 100G = 335 us), for
  // 300 ms of virtual time.
  for (int i = 0; i < 1000; ++i) {
    storm_pause(node, pool, 1, now);
    if (i == 0) node.receive(0, &d, 1, now);
    node.poll(now);
    now += 300'000;
  }
  CHECK(node.pfc()->watchdog_dropping(1, 3));
  CHECK(node.pfc()->counters(1).priority[3].watchdog_storms_detected == 1);
  CHECK(node.egress(1).counters(3, now).drops_watchdog >= 1);
  drain(node, now);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC watchdog: a storm on the lossless class leaves the port to lossy traffic") {
  // Before: a class in drop mode made the whole port ineligible, so lossy flows hashed to it
  // moved away (or, with one member, were dropped as no_eligible_port).
  TestPool pool(8191);
  auto cfg = config_of(fanout_yaml(2, "ecmp", R"(
pfc: {priorities: [3], watchdog: {enabled: true, detect_ms: 200, restore_ms: 200}}
)"));
  SwitchNode node(cfg, pool.get());
  uint64_t now = 0;
  // A lossless flow that ECMP puts on p0 (member 0: hash % 2 == 0), so that its packet waits.
  Flow stuck{0x0A000001, 0x0A000002, 5000, 6000};
  while (flow_crc(stuck, 0x1234) % 2 != 0) ++stuck.sport;
  rte_mbuf* d = udp(pool, stuck, 26, 100);
  bool queued = false;
  // A storm on p0 (node port 1), class 3, for 300 ms, with a lossless packet stuck behind it.
  for (int i = 0; i < 1000; ++i) {
    storm_pause(node, pool, 1, now);
    if (!queued) {
      node.receive(0, &d, 1, now);
      queued = true;
    }
    node.poll(now);
    drain(node, now);
    now += 300'000;
  }
  REQUIRE(node.pfc()->watchdog_dropping(1, 3));
  // Now 2,000 lossy flows (DSCP 0) and 2,000 lossless ones (DSCP 26) over the group.
  std::array<int, 3> lossy{}, lossless{};
  for (uint32_t i = 0; i < 2000; ++i) {
    for (const uint8_t dscp : {uint8_t{0}, uint8_t{26}}) {
      rte_mbuf* m = udp(pool, {0x0A000001 + i, 0x0A000002, static_cast<uint16_t>(1000 + i), 6000},
                        dscp, 64);
      node.receive(0, &m, 1, now);
      now += 1000;
      for (const auto& [port, pp] : drain(node, now + 100'000)) {
        if (pp.kind == PacketKind::kMacControl) continue;
        (dscp == 0 ? lossy : lossless)[port]++;
      }
    }
  }
  INFO("lossy p0 " << lossy[1] << " p1 " << lossy[2] << "; lossless p0 " << lossless[1] << " p1 "
                   << lossless[2]);
  CHECK(lossy[1] > 800);  // p0 still carries its share of the lossy flows
  CHECK(lossy[2] > 800);
  CHECK(lossless[1] == 0);  // the storming class's traffic goes around p0
  CHECK(lossless[2] > 1900);
  CHECK(node.drops().no_eligible_port == 0);
  drain(node, now + 1'000'000);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC watchdog, weighted: a stormed class loses the link, lossy keeps its buckets") {
  // Issue 11. The control loop's link-state table used to mark the whole link unusable when any
  // class was in drop mode, so the reweighter gave it 0 buckets and every class, lossy traffic
  // included, left it. The watchdog is per (port, class): now the link keeps its buckets and only
  // the stormed class avoids it, through its own eligibility view at selection.
  TestPool pool(8191);
  auto cfg = config_of(fanout_yaml(2, "weighted", R"(
pfc: {priorities: [3], watchdog: {enabled: true, detect_ms: 200, restore_ms: 200}}
)"));
  SwitchNode node(cfg, pool.get());
  control::ControlLoopConfig cc;
  cc.period_ns = 10'000'000;  // 10 ms: several ticks during the storm
  control::ControlLoop loop(control::control_target_of(node), 0, cc);
  uint64_t now = 0;
  // A storm on p0 (node port 1), class 3, for 300 ms; the loop ticks as it goes.
  for (int i = 0; i < 1000; ++i) {
    storm_pause(node, pool, 1, now);
    node.poll(now);
    drain(node, now);
    if (loop.next_event_ns() <= now) loop.tick(now);
    now += 300'000;
  }
  REQUIRE(node.pfc()->watchdog_dropping(1, 3));
  now = loop.next_event_ns();
  node.poll(now);
  REQUIRE(loop.tick(now));
  const control::LinkState& p0 = loop.table().at(1);
  CHECK(p0.watchdog_dropping);
  CHECK(p0.watchdog_classes == (1u << 3));
  CHECK(p0.health > 0);
  // Both members keep their buckets: the published weights and the dataplane's table.
  REQUIRE(loop.current() != nullptr);
  const std::vector<uint32_t>& w = loop.current()->group_weights.at(0);
  INFO("weights p0 " << w[0] << " p1 " << w[1]);
  CHECK(w[0] > 0);
  CHECK(w[0] == w[1]);
  CHECK(node.group(0).bucket_table().buckets_of(0) > 0);
  std::array<int, 3> lossy{}, lossless{};
  for (uint32_t i = 0; i < 2000; ++i) {
    for (const uint8_t dscp : {uint8_t{0}, uint8_t{26}}) {
      rte_mbuf* m =
          udp(pool, {0x0A000001 + i, 0x0A000002, static_cast<uint16_t>(1000 + i), 6000}, dscp, 64);
      node.receive(0, &m, 1, now);
      now += 1000;
      for (const auto& [port, pp] : drain(node, now + 100'000)) {
        if (pp.kind == PacketKind::kMacControl) continue;
        (dscp == 0 ? lossy : lossless)[port]++;
      }
    }
  }
  INFO("lossy p0 " << lossy[1] << " p1 " << lossy[2] << "; lossless p0 " << lossless[1] << " p1 "
                   << lossless[2]);
  CHECK(lossy[1] > 800);  // lossy flows still hash to p0's buckets
  CHECK(lossy[2] > 800);
  CHECK(lossless[1] == 0);  // the stormed class goes around p0
  CHECK(lossless[2] > 1900);
  CHECK(node.drops().no_eligible_port == 0);
  drain(node, now + 1'000'000);
  node.free_all();
  CHECK(pool.whole());
}

namespace {

constexpr uint64_t kStormStep = 300'000;  // a fresh 0xFFFF pause (335 us at 100G) every 300 us

// Pauses `port`'s class 3 from `from` for `steps` storm steps, polling and draining as it goes;
// returns the time of the last pause frame. PFC frames leaving `port` are added to *pfc_out.
uint64_t storm(SwitchNode& node, const TestPool& pool, uint16_t port, uint64_t from, int steps,
               size_t* pfc_out) {
  uint64_t now = from;
  for (int i = 0; i < steps; ++i, now += kStormStep) {
    storm_pause(node, pool, port, now);
    node.poll(now);
    for (const auto& [p, pp] : drain(node, now)) {
      if (p == port && pp.kind == PacketKind::kMacControl) ++*pfc_out;
    }
  }
  return now - kStormStep;
}

// n packets of `bytes` payload from `port`, one receive, flows varied by source port.
void burst(SwitchNode& node, const TestPool& pool, uint16_t port, uint8_t dscp, int n, uint64_t now,
           uint16_t sport0 = 1000, size_t bytes = 1000) {
  std::vector<rte_mbuf*> pkts;
  for (int i = 0; i < n; ++i) {
    pkts.push_back(
        udp(pool, {0x0A000001, 0x0A000002, static_cast<uint16_t>(sport0 + i), 6000}, dscp, bytes));
  }
  node.receive(port, pkts.data(), static_cast<uint16_t>(n), now);
}

// An incast in virtual time: `senders` hosts, each on its own ingress port at line rate, all to
// one egress port `out` of the same rate. Each sender is a 100G MAC that honours PFC: it starts
// a frame whenever its link is free and it is not paused; a frame reaches the switch after its
// serialisation and the cable's delay; a PFC frame the switch sends it pauses it from the moment
// it arrives (the frame in progress finishes), and an XON resumes it.
struct IncastResult {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t max_lossy_queue = 0;  // the most `out`'s class 0 held
};

IncastResult run_incast(SwitchNode& node, const TestPool& pool, int senders, uint8_t dscp,
                        uint64_t send_until_ns) {
  constexpr double kGbps = 100.0;
  constexpr uint64_t kDelay = 1000;  // the config's default cable
  constexpr size_t kPayload = 1000;
  const uint16_t out = static_cast<uint16_t>(senders);
  struct Sender {
    uint64_t link_free = 0;
    uint64_t paused_until = 0;
    std::deque<uint64_t> arrivals;  // at the switch, in order
    uint16_t sport;
  };
  std::vector<Sender> s(senders);
  for (int i = 0; i < senders; ++i) s[i].sport = static_cast<uint16_t>(5000 + i);
  // Every frame is the same size: one serialisation time.
  rte_mbuf* probe = udp(pool, {0x0A000001, 0x0A000002, 5000, 6000}, dscp, kPayload);
  const uint32_t frame_bytes = rte_pktmbuf_pkt_len(probe);
  rte_pktmbuf_free(probe);
  const auto wire_ns = static_cast<uint64_t>(
      std::ceil(static_cast<double>(LinkEmulator::wire_bits(frame_bytes)) / kGbps));
  const uint64_t quantum_ps = static_cast<uint64_t>(512'000.0 / kGbps);  // 5.12 ns at 100G

  IncastResult r;
  PacketParser parser;
  rte_mbuf* burst[64];
  uint64_t now = 0;
  for (;;) {
    // Senders start what they may at `now`; frames reaching the switch by now go in.
    for (int i = 0; i < senders; ++i) {
      Sender& x = s[i];
      while (now < send_until_ns && x.link_free <= now && x.paused_until <= now) {
        x.arrivals.push_back(now + wire_ns + kDelay);
        x.link_free = now + wire_ns;
        ++r.sent;
      }
      while (!x.arrivals.empty() && x.arrivals.front() <= now) {
        rte_mbuf* m = udp(pool, {0x0A000001u + i, 0x0A000002, x.sport, 6000}, dscp, kPayload);
        node.receive(static_cast<uint16_t>(i), &m, 1, now);
        x.arrivals.pop_front();
      }
    }
    node.poll(now);
    for (uint16_t p = 0; p < node.port_count(); ++p) {
      uint16_t n;
      while ((n = node.transmit(p, now, burst, 64)) > 0) {
        for (uint16_t k = 0; k < n; ++k) {
          if (p == out) {
            ++r.delivered;
          } else {
            ParsedPacket pp;
            PfcFrame f;
            REQUIRE(parser.parse(burst[k], pp) == ParseStatus::kOk);
            REQUIRE(parse_pfc_frame(rte_pktmbuf_mtod(burst[k], const uint8_t*),
                                    rte_pktmbuf_data_len(burst[k]), f) == PfcParseStatus::kOk);
            s[p].paused_until = now + f.quanta[3] * quantum_ps / 1000;
          }
          rte_pktmbuf_free(burst[k]);
        }
      }
    }
    r.max_lossy_queue = std::max(r.max_lossy_queue, node.egress(out).queued_bytes(0));
    // The next event: a sender free to start, a frame reaching the switch, the switch's own.
    uint64_t next = node.next_event_ns(now);
    for (const Sender& x : s) {
      if (now < send_until_ns) {
        const uint64_t start = std::max(x.link_free, x.paused_until);
        if (start < send_until_ns) next = std::min(next, start);
      }
      if (!x.arrivals.empty()) next = std::min(next, x.arrivals.front());
    }
    if (next == EgressPort::kNever) break;
    now = std::max(next, now + 1);
  }
  return r;
}

std::string incast_yaml(int senders, const std::string& pfc) {
  std::string y = "ports:\n";
  // Emulated links: the incast is the 8 senders' line rate into one port's.
  for (int i = 0; i < senders; ++i) {
    y += "  - {name: in" + std::to_string(i) + ", device: x, link: emulated}\n";
  }
  y += "  - {name: out, device: x, queue_bytes: 262144, link: emulated}\n";
  y += "routes:\n  - {prefix: 0.0.0.0/0, port: out}\n";
  return y + pfc;
}

}  // namespace

TEST_CASE("PFC watchdog: a storm on one lossless class leaves the port to the other classes") {
  TestPool pool(8191);
  auto cfg = config_of(fanout_yaml(2, "ecmp", R"(
pfc: {priorities: [3, 4], watchdog: {enabled: true, detect_ms: 200, restore_ms: 200}}
)"));
  SwitchNode node(cfg, pool.get());
  // A storm on p0 (node port 1), class 3, for 300 ms; nothing is queued there (an empty
  // paused queue is a storm too).
  size_t pfc_frames = 0;
  uint64_t now = storm(node, pool, 1, 0, 1000, &pfc_frames) + 1000;
  REQUIRE(node.pfc()->watchdog_dropping(1, 3));
  CHECK_FALSE(node.pfc()->watchdog_storming(1, 4));
  // 2,000 flows each of class 0 (lossy), 3 (stormed) and 4 (lossless, not stormed).
  std::map<uint8_t, std::array<int, 3>> per_port;
  for (uint32_t i = 0; i < 2000; ++i) {
    for (const uint8_t dscp : {uint8_t{0}, uint8_t{26}, uint8_t{34}}) {
      rte_mbuf* m =
          udp(pool, {0x0A000001 + i, 0x0A000002, static_cast<uint16_t>(1000 + i), 6000}, dscp, 64);
      node.receive(0, &m, 1, now);
      now += 1000;
      for (const auto& [port, pp] : drain(node, now + 100'000)) {
        if (pp.kind != PacketKind::kMacControl) per_port[dscp][port]++;
      }
    }
  }
  std::string shares;
  for (const auto& [dscp, n] : per_port) {
    shares += "dscp " + std::to_string(dscp) + ": p0 " + std::to_string(n[1]) + " p1 " +
              std::to_string(n[2]) + "; ";
  }
  INFO(shares);
  CHECK(per_port[0][1] > 800);  // lossy traffic keeps its share of p0
  CHECK(per_port[0][2] > 800);
  CHECK(per_port[34][1] > 800);  // so does the other lossless class
  CHECK(per_port[34][2] > 800);
  CHECK(per_port[26][1] == 0);  // the stormed class goes around p0
  CHECK(per_port[26][2] == 2000);
  CHECK(node.drops().no_eligible_port == 0);
  CHECK(node.total_drops() == 0);
  drain(node, now + 1'000'000);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("Incast, lossless: 8 ports at line rate into one, no drop, the pool never over") {
  TestPool pool(8191);
  // A 2 MiB pool (for the test's mempool; the default is 32 MiB), dynamic threshold alpha 1,
  // auto headroom.
  const auto cfg = config_of(incast_yaml(8, "pfc: {priorities: [3], pool_bytes: 2097152}\n"));
  SwitchNode node(cfg, pool.get());
  const IncastResult r = run_incast(node, pool, 8, 26, 2'000'000);  // 2 ms of 8 x 100G
  const PfcState& pfc = *node.pfc();
  const SharedBuffer& b = pfc.buffer();
  INFO("sent " << r.sent << " delivered " << r.delivered << " pool peak " << b.pool_peak_bytes());
  CHECK(r.sent > 20'000);  // the senders were paused: 8 x 2 ms at 100G would be ~190,000
  CHECK(r.delivered == r.sent);
  CHECK(node.total_drops() == 0);
  const EgressClassCounters c = node.egress(8).counters(3, 0);
  CHECK(c.drops_queue_full == 0);
  CHECK(c.drops_headroom_overflow == 0);
  CHECK(b.headroom_overflows() == 0);
  CHECK(node.counters().pfc_frames_sent > 0);
  CHECK(b.pool_peak_bytes() <= b.pool_bytes());
  // The dynamic threshold let the 8 PGs fill the pool to about 8 x B / (1 + 8).
  CHECK(static_cast<double>(b.pool_peak_bytes()) > 0.85 * 8.0 / 9.0 * 2097152);
  for (uint16_t p = 0; p < 8; ++p) {
    INFO("port " << p << ": headroom peak " << b.peak_headroom_used_bytes(p, 3) << " of "
                 << b.headroom_bytes(p));
    CHECK(pfc.counters(p).priority[3].xoff_sent > 0);
    CHECK(b.peak_headroom_used_bytes(p, 3) > 0);  // what was in flight after XOFF went there
    CHECK(b.peak_headroom_used_bytes(p, 3) < b.headroom_bytes(p));
    CHECK(pfc.buffered_bytes(p, 3) == 0);
  }
  CHECK(b.pool_used_bytes() == 0);
  CHECK(pfc.accounting_underflows() == 0);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC watchdog drop: the storming port's priority dropped at ingress, sent no PFC") {
  TestPool pool(8191);
  // A static threshold: XOFF at 52,429 bytes per (ingress port, priority).
  auto cfg = config_of(fanout_yaml(2, "ecmp", R"(
pfc: {priorities: [3], static_threshold_bytes: 52429, watchdog: {action: drop}}
)"));
  SwitchNode node(cfg, pool.get());
  size_t pfc_to_neighbour = 0;
  const uint64_t last_pause = storm(node, pool, 1, 0, 1000, &pfc_to_neighbour);
  REQUIRE(node.pfc()->watchdog_dropping(1, 3));
  uint64_t now = last_pause + 1000;

  // 100 kB of class 3 from the storming neighbour, in one burst: without drop mode it would
  // cross XOFF and pause the neighbour; here it is dropped at ingress, each packet counted.
  burst(node, pool, 1, 26, 100, now);
  CHECK(node.drops().pfc_watchdog_ingress == 100);
  CHECK(node.pfc()->counters(1).priority[3].watchdog_ingress_drops == 100);
  CHECK(node.pfc()->buffered_bytes(1, 3) == 0);
  CHECK_FALSE(node.pfc()->xoff_asserted(1, 3));
  // Its lossy traffic, and class 3 from another port, are forwarded.
  burst(node, pool, 1, 0, 50, now, 3000, 64);
  burst(node, pool, 0, 26, 50, now, 5000, 64);
  std::array<int, 3> lossy{}, lossless{};
  node.poll(now);
  for (const auto& [port, pp] : drain(node, now + 100'000)) {
    if (pp.kind == PacketKind::kMacControl) {
      if (port == 1) ++pfc_to_neighbour;
      continue;
    }
    (pp.src_port >= 5000 ? lossless : lossy)[port]++;  // class 3 from in0: ports 5000..
  }
  CHECK(lossy[1] + lossy[2] == 50);
  CHECK(lossless[1] == 0);  // p0 is not eligible for class 3
  CHECK(lossless[2] == 50);
  CHECK(node.total_drops() == 100);

  // Restoration exactly restore_ms after the last pause frame.
  const uint64_t restore_at = last_pause + 200'000'000;
  node.poll(restore_at - 1);
  CHECK(node.pfc()->watchdog_dropping(1, 3));
  CHECK(node.next_event_ns(restore_at - 1) == restore_at);
  node.poll(restore_at);
  CHECK_FALSE(node.pfc()->watchdog_storming(1, 3));
  CHECK(node.pfc()->counters(1).priority[3].watchdog_restorations == 1);
  CHECK(pfc_to_neighbour == 0);  // nothing went to the neighbour during the whole storm

  // Ingress admission and PFC generation are back: the same burst is forwarded, crosses XOFF
  // and pauses the neighbour.
  now = restore_at;
  burst(node, pool, 1, 26, 100, now);
  CHECK(node.drops().pfc_watchdog_ingress == 100);
  CHECK(node.pfc()->xoff_asserted(1, 3));
  node.poll(now);
  size_t forwarded = 0;
  for (const auto& [port, pp] : drain(node, now + 1'000'000)) {
    if (pp.kind == PacketKind::kMacControl) {
      if (port == 1) ++pfc_to_neighbour;
    } else {
      ++forwarded;
    }
  }
  CHECK(forwarded == 100);
  CHECK(pfc_to_neighbour >= 1);
  CHECK(node.pfc()->counters(1).priority[3].xoff_sent >= 1);
  CHECK(node.total_drops() == 100);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("PFC watchdog forward: the stormed queue sends, nothing dropped, no PFC above XOFF") {
  TestPool pool(8191);
  auto cfg = config_of(fanout_yaml(1, "ecmp", R"(
pfc: {priorities: [3], static_threshold_bytes: 52429, watchdog: {action: forward}}
)"));
  SwitchNode node(cfg, pool.get());
  size_t pfc_to_neighbour = 0;
  // Ten class 3 packets for p0 (node port 1) arrive as its storm begins: they are held.
  storm_pause(node, pool, 1, 0);
  burst(node, pool, 0, 26, 10, 0);
  CHECK(node.egress(1).queued_packets(3) == 10);
  size_t held_delivered = 0;
  uint64_t now = 0;
  for (int i = 0; i < 1000; ++i, now += kStormStep) {
    storm_pause(node, pool, 1, now);
    node.poll(now);
    for (const auto& [port, pp] : drain(node, now)) {
      if (pp.kind == PacketKind::kMacControl) {
        if (port == 1) ++pfc_to_neighbour;
      } else if (port == 1) {
        if (now < 200'000'000) FAIL("a packet left the paused queue before detection");
        ++held_delivered;
      }
    }
    if (i == 700) {
      // In forward mode: 100 kB of class 3 from the neighbour, hairpinned back to it, in one
      // burst. Its ingress buffer crosses XOFF; PFC is off for it, so no XOFF goes out.
      burst(node, pool, 1, 26, 100, now, 2000);
      CHECK(node.pfc()->xoff_asserted(1, 3));
    }
  }
  CHECK(node.pfc()->watchdog_storming(1, 3));
  CHECK_FALSE(node.pfc()->watchdog_dropping(1, 3));
  CHECK(held_delivered == 110);
  CHECK(pfc_to_neighbour == 0);
  CHECK(node.pfc()->counters(1).priority[3].watchdog_frames_suppressed >= 1);
  CHECK(node.pfc()->counters(1).priority[3].xoff_sent == 0);
  CHECK(node.egress(1).counters(3, now).drops_watchdog == 0);
  CHECK(node.drops().pfc_watchdog_ingress == 0);
  CHECK(node.total_drops() == 0);
  drain(node, now + 1'000'000);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("Incast, lossy: the same load on a lossy class is tail-dropped at its egress limit") {
  TestPool pool(8191);
  const auto cfg = config_of(incast_yaml(8, "pfc: {priorities: [3], pool_bytes: 2097152}\n"));
  SwitchNode node(cfg, pool.get());
  const IncastResult r = run_incast(node, pool, 8, 0, 200'000);  // DSCP 0: class 0, lossy
  const EgressClassCounters c = node.egress(8).counters(0, 0);
  INFO("sent " << r.sent << " delivered " << r.delivered << " dropped " << c.drops_queue_full);
  CHECK(c.drops_queue_full > 0);
  CHECK(r.delivered + c.drops_queue_full == r.sent);
  // Nearly 7 of every 8 once the 256 KiB queue is full.
  CHECK(static_cast<double>(c.drops_queue_full) > 0.75 * static_cast<double>(r.sent));
  CHECK(r.max_lossy_queue <= 262144);
  CHECK(r.max_lossy_queue > 262144 - 2000);
  CHECK(node.counters().pfc_frames_sent == 0);  // not PFC's to pause
  CHECK(node.pfc()->buffer().pool_peak_bytes() == 0);
  CHECK(c.drops_headroom_overflow == 0);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("TTL-expired packets are dropped before path selection: no flowlet, no member count") {
  TestPool pool(1023);
  SwitchNode node(config_of(fanout_yaml(4, "dlb")), pool.get());
  const auto flows = random_flows(50, 11);
  uint64_t now = 0;
  for (const auto& f : flows) {
    rte_mbuf* m = udp(pool, f, 0, 64, 1);  // TTL 1: expires here
    node.receive(0, &m, 1, now);
    now += 1000;
  }
  CHECK(node.drops().ttl_expired == flows.size());
  const PathSelector& g = node.group(0);
  CHECK(g.counters().selected == 0);
  CHECK(g.flowlet_table().counters().flowlets_started == 0);
  for (uint64_t v : g.member_packets()) CHECK(v == 0);
  for (uint16_t p = 0; p < node.port_count(); ++p) CHECK(node.egress(p).queued_bytes() == 0);
  // A live packet of the same kind does take a path (the counters above can move).
  rte_mbuf* m = udp(pool, flows[0]);
  node.receive(0, &m, 1, now);
  CHECK(g.counters().selected == 1);
  CHECK(g.flowlet_table().counters().flowlets_started == 1);
  const auto out = drain(node, now + 1'000'000);
  REQUIRE(out.size() == 1);
  CHECK(out[0].second.ttl == 63);
  CHECK(node.total_drops() == flows.size());
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("accounting: every frame received or made is consumed, dropped or at egress, at any "
          "moment") {
  // Everything at once on 4 outputs: lossless and lossy classes with PFC and a small pool, a
  // mirror rule, a drop rule, a port losing frames on the wire, small queues that tail-drop,
  // garbage, PFC frames arriving, links going down and up. After every single call into the
  // node the identity must hold.
  TestPool pool(16383);
  auto cfg = config_of(fanout_yaml(4, "dlb", R"(
pfc: {priorities: [3], pool_bytes: 262144}
tcam:
  rules:
    - {id: 1, priority: 10, action: mirror, port: p3, match: {dst: 10.9.0.0/16}}
    - {id: 2, priority: 9, action: drop, match: {dst: 10.8.0.0/16}}
)"));
  cfg.ports[1].link.rate_gbps = 1.0;  // p0 backs up: XOFF, tail drops on the lossy class
  cfg.ports[1].queue_bytes = 20000;
  cfg.ports[2].link.loss = 0.05;
  cfg.ports[3].link.ber = 1e-5;
  std::mt19937 rng(7);
  uint64_t steps = 0;
  {
    SwitchNode node(cfg, pool.get());
    uint64_t now = 0;
    auto check = [&](const char* what) {
      const switch_emu::SwitchAccounting a = node.accounting();
      INFO(what << " at step " << steps << ": received " << a.received << " generated "
                << a.generated << " consumed " << a.consumed << " dropped " << a.pipeline_dropped
                << " offered " << a.egress.offered << " | refused " << a.egress.refused
                << " dequeued " << a.egress.dequeued << " lost " << a.egress.lost << " queued "
                << a.egress.queued << " in flight " << a.egress.in_flight);
      REQUIRE(a.node_balanced());
      REQUIRE(a.egress.balanced());
      ++steps;
    };
    const uint8_t src_mac[6] = {2, 0, 0, 0, 0, 9};
    for (int step = 0; step < 6000; ++step) {
      now += rng() % 3000;
      const unsigned action = rng() % 16;
      if (action < 9) {  // a burst of mixed traffic on a random port
        rte_mbuf* burst[32];
        const uint16_t n = static_cast<uint16_t>(1 + rng() % 32);
        for (uint16_t i = 0; i < n; ++i) {
          const unsigned kind = rng() % 10;
          const uint32_t dst = kind == 0   ? 0x0A090001   // mirrored
                               : kind == 1 ? 0x0A080001   // TCAM drop
                                           : 0x0B000000 | (rng() % 4096);
          burst[i] = udp(pool, {static_cast<uint32_t>(0x0A000000 | (rng() % 64)), dst, static_cast<uint16_t>(rng()), 7000},
                         rng() % 2 ? 26 : 0, 64 + rng() % 1200, kind == 2 ? 1 : 64);
          if (kind == 3) {  // garbage: a cut-short IPv4 header
            rte_pktmbuf_trim(burst[i], rte_pktmbuf_pkt_len(burst[i]) - 20);
          } else if (kind == 4) {  // a PFC frame, honoured or malformed
            rte_pktmbuf_reset(burst[i]);
            PfcFrame f;
            f.class_enable = 0x08;
            f.quanta[3] = static_cast<uint16_t>(rng());
            REQUIRE(build_pfc_frame(burst[i], src_mac, f));
            // The vector's reserved upper byte set: malformed.
            if (rng() % 4 == 0) rte_pktmbuf_mtod(burst[i], uint8_t*)[16] = 0xFF;
          }
        }
        const uint16_t port = static_cast<uint16_t>(rng() % (rng() % 50 == 0 ? 9 : 5));
        node.receive(port, burst, n, now);
        check("receive");
      } else if (action < 12) {
        node.poll(now);
        check("poll");
      } else if (action < 15) {
        rte_mbuf* out[8];
        const uint16_t p = static_cast<uint16_t>(rng() % 5);
        const uint16_t k = node.transmit(p, now, out, static_cast<uint16_t>(1 + rng() % 8));
        rte_pktmbuf_free_bulk(out, k);
        check("transmit");
      } else {
        const uint16_t p = static_cast<uint16_t>(1 + rng() % 4);
        node.set_link_up(p, !node.egress(p).link_up(), now);
        check("link toggle");
      }
    }
    const switch_emu::SwitchAccounting a = node.accounting();
    INFO("pipeline drops " << a.pipeline_dropped << ", lost " << a.egress.lost << ", refused "
                           << a.egress.refused << ", consumed " << a.consumed);
    // The scenario reached every term.
    CHECK(a.generated > 0);
    CHECK(a.consumed > 0);
    CHECK(a.pipeline_dropped > 0);
    CHECK(a.egress.refused > 0);
    CHECK(a.egress.lost > 0);
    CHECK(a.egress.dequeued > 0);
    CHECK(a.egress.queued + a.egress.in_flight > 0);
    node.free_all();
    check("free_all");
    CHECK(node.accounting().egress.freed_at_shutdown > 0);
  }
  CHECK(steps > 6000);
  CHECK(pool.whole());
}

TEST_CASE("TCAM quarantine: one QP split 95/5 by PSN over 10,000 packets, others untouched") {
  TestPool pool(8191);
  const std::string yaml = R"(
ports:
  - {name: in0, device: x}
  - {name: p0, device: x, queue_bytes: 67108864}
  - {name: honeypot, device: x, queue_bytes: 67108864}
groups:
  - {name: g, mode: ecmp, ports: [p0]}
routes:
  - {prefix: 0.0.0.0/0, group: g}
tcam:
  rules:
    - {id: 900, match: {dst: 10.0.0.2, dest_qp: 17}, action: quarantine, port: honeypot}
    - {id: 901, match: {dst: 10.0.0.3}, action: quarantine, port: honeypot, keep_percent: 50}
)";
  const auto cfg = config_of(yaml);
  REQUIRE(cfg.tcam.rules[0].keep_percent == 5);  // the default
  SwitchNode node(cfg, pool.get());
  auto roce = [&](uint32_t dst, uint32_t qp, uint32_t psn) {
    FrameSpec f;
    f.ip.src = 0x0A000001;
    f.ip.dst = dst;
    f.udp.src_port = 0xC000;
    f.udp.dst_port = 4791;
    RoceSpec r;
    r.opcode = opcode::kRcSendOnly;
    r.dest_qp = qp;
    r.psn = psn;
    rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
    REQUIRE(m != nullptr);
    return m;
  };
  // Per (port, QP): packets out; and every honeypot PSN must be one the split sends there.
  std::map<std::pair<uint16_t, uint32_t>, uint64_t> out;
  uint64_t wrong_side = 0, udp_to_honeypot = 0;
  uint64_t now = 0;
  auto collect = [&] {
    now += 1'000'000;
    for (const auto& [port, p] : drain(node, now)) {
      if (p.kind != PacketKind::kRoce) {
        if (port == 2) ++udp_to_honeypot;
        continue;
      }
      ++out[{port, p.dest_qp}];
      const bool kept = p.psn % 100 < 5;
      if (p.dest_qp == 17 && (port == 2) == kept) ++wrong_side;
    }
  };
  const uint32_t first_psn = 123'400;
  for (uint32_t i = 0; i < 10'000; i += 25) {
    rte_mbuf* burst[32];
    uint16_t n = 0;
    for (uint32_t k = 0; k < 25; ++k) burst[n++] = roce(0x0A000002, 17, first_psn + i + k);
    burst[n++] = roce(0x0A000002, 18, i);  // another QP to the same host: not matched
    burst[n++] = udp(pool, {0x0A000001, 0x0A000002, 1000, 80});  // not RoCE: DestQP 0
    node.receive(0, burst, n, now);
    collect();
  }
  // Non-RoCE traffic a quarantine rule matches has no PSN to split on: all to the honeypot.
  for (int i = 0; i < 10; ++i) {
    rte_mbuf* m = udp(pool, {0x0A000001, 0x0A000003, static_cast<uint16_t>(2000 + i), 80});
    node.receive(0, &m, 1, now);
  }
  collect();
  const uint64_t honeypot = out[{2, 17}], normal = out[{1, 17}];
  CHECK(honeypot + normal == 10'000);
  CHECK(std::abs(double(honeypot) - 9500.0) <= 100.0);
  CHECK(std::abs(double(normal) - 500.0) <= 100.0);
  CHECK(honeypot == 9500);  // deterministic by PSN: exact
  CHECK(normal == 500);
  CHECK(wrong_side == 0);
  CHECK(out[{1, 18}] == 400);
  CHECK(out[{2, 18}] == 0);
  CHECK(udp_to_honeypot == 10);
  CHECK(node.counters().quarantined == 9500 + 10);
  CHECK(node.counters().quarantine_kept == 500);
  CHECK(node.counters().pinned == 0);
  CHECK(node.total_drops() == 0);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE(
    "lanes: the owner of each egress port takes what the other lane hands it; the same "
    "ports as one lane, accounting balanced after every call") {
  // Node `one` runs one lane; node `two` has a second lane owning p2 and p3's egress. Both get
  // the same packets at the same times on lane 0 (and some on lane 1): every packet must leave
  // by the same port in both, whichever lane forwarded it, with nothing lost on the way.
  TestPool pool(16383);
  const auto cfg = config_of(fanout_yaml(4, "ecmp"));
  std::map<uint16_t, std::multiset<uint16_t>> ids_one, ids_two;  // port -> IP ids
  {
    SwitchNode one(cfg, pool.get()), two(cfg, pool.get());
    const uint16_t owned[] = {3, 4};  // p2, p3
    REQUIRE(two.add_lane(owned) == 1);
    CHECK(two.lane_count() == 2);
    CHECK(two.lane_of_port(3) == 1);
    CHECK(two.lane_of_port(1) == 0);
    CHECK(two.lanes_run_in_parallel());
    CHECK_THROWS_AS(two.add_lane(std::vector<uint16_t>{9}), std::invalid_argument);

    auto check = [&](const char* what) {
      const switch_emu::SwitchAccounting a = two.accounting();
      INFO(what << ": received " << a.received << " in handoff " << a.in_lane_handoff << " offered "
                << a.egress.offered);
      REQUIRE(a.balanced());
    };
    const auto flows = random_flows(3008, 11);
    // The flow's packet, its IP id the packet's number.
    auto packet = [&](size_t k) {
      std::vector<uint8_t> data(64, 0xA5);
      FrameSpec fs;
      fs.ip.src = flows[k].src;
      fs.ip.dst = flows[k].dst;
      fs.ip.id = static_cast<uint16_t>(k);
      fs.udp.src_port = flows[k].sport;
      fs.udp.dst_port = flows[k].dport;
      fs.payload = data;
      rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
      REQUIRE(m != nullptr);
      return m;
    };
    uint64_t now = 1000;
    rte_mbuf* burst_one[16];
    rte_mbuf* burst_two[16];
    for (size_t base = 0; base < flows.size(); base += 16) {
      const unsigned lane = (base / 16) % 3 == 2 ? 1 : 0;  // every third burst through lane 1
      for (uint16_t i = 0; i < 16; ++i) {
        burst_one[i] = packet(base + i);
        burst_two[i] = packet(base + i);
      }
      one.receive(0, burst_one, 16, now);
      two.receive(lane, 0, burst_two, 16, now);
      check("receive");
      CHECK_FALSE(two.idle(1 - lane));  // something waits in the other lane's ring, at least
      two.poll(1 - lane, now);          // the other lane takes what it was handed
      check("poll");
      now += 2000;
    }
    const auto c = two.counters();
    CHECK(c.lane_handoffs > 0);
    CHECK(c.lane_handoffs == c.lane_handoffs_taken);
    CHECK(two.total_drops() == 0);
    CHECK(two.port_counters(0).rx_packets == flows.size());
    now += 1'000'000;
    for (auto [node, ids] : {std::pair{&one, &ids_one}, std::pair{&two, &ids_two}}) {
      rte_mbuf* m[64];
      for (uint16_t p = 1; p < node->port_count(); ++p) {
        uint16_t n;
        while ((n = node->transmit(p, now, m, 64)) > 0) {
          for (uint16_t i = 0; i < n; ++i) {
            (*ids)[p].insert(rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(m[i], rte_be16_t*, 18)[0]));
            rte_pktmbuf_free(m[i]);
          }
        }
      }
    }
    CHECK(two.idle());
    check("drained");
    // Summed counters: the group's member packets over both lanes add up to every packet.
    uint64_t members = 0;
    for (uint64_t v : two.group_member_packets(0)) members += v;
    CHECK(members == flows.size());
    CHECK(two.group_counters(0).selected == flows.size());
  }
  CHECK(ids_one == ids_two);
  size_t total = 0;
  for (const auto& [p, ids] : ids_two) total += ids.size();
  CHECK(total == 3008);
  CHECK(pool.whole());
}

TEST_CASE(
    "lanes: replicas follow lane 0's bucket table and mode; frames left between lanes are "
    "counted and freed") {
  TestPool pool(4095);
  {
    const auto cfg = config_of(fanout_yaml(4, "ecmp"));
    SwitchNode node(cfg, pool.get());
    const uint16_t owned[] = {1, 2};  // p0, p1
    node.add_lane(owned);
    // Weighted, every bucket on member 3 (p3, lane 0's): published to lane 0's selector only.
    node.group(0).set_mode(LbMode::kWeighted);
    node.group(0).set_weights(std::vector<uint32_t>{0, 0, 0, 1});
    const auto flows = random_flows(200, 5);
    for (const Flow& f : flows) {
      rte_mbuf* m = udp(pool, f);
      node.receive(1, 0, &m, 1, 100);  // lane 1 forwards; lane 0 owns p3
    }
    CHECK(node.counters().lane_handoffs == flows.size());
    CHECK(node.accounting().in_lane_handoff == flows.size());
    CHECK(node.accounting().balanced());
    CHECK_FALSE(node.idle(0));
    CHECK(node.idle(1));
    // Lane 0 never takes them: freeing the node counts them.
    node.free_all();
    const auto a = node.accounting();
    CHECK(a.balanced());
    CHECK(a.in_lane_handoff == 0);
    CHECK(node.drops().lane_handoff_unsent == flows.size());
    CHECK(node.port_drops(0).lane_handoff_unsent == flows.size());  // all arrived on in0
    CHECK(node.group_member_packets(0)[3] == flows.size());
  }
  CHECK(pool.whole());
}

TEST_CASE("lanes: a switch with PFC keeps one shared buffer, so its lanes are serialised") {
  TestPool pool(1023);
  const auto cfg = config_of(fanout_yaml(2, "ecmp", "pfc: {priorities: [3]}\n"));
  SwitchNode node(cfg, pool.get());
  node.add_lane(std::vector<uint16_t>{2});
  CHECK_FALSE(node.lanes_run_in_parallel());
  // Serialised lanes touch every port directly: nothing is handed over.
  rte_mbuf* m = udp(pool, {0x0A000001, 0x0B000001, 1000, 2000});
  node.receive(1, 0, &m, 1, 0);
  CHECK(node.counters().lane_handoffs == 0);
  CHECK(node.accounting().egress.offered == 1);
  node.free_all();
  CHECK(pool.whole());
}

namespace {

// n ports p0..p(n-1) in one DLB group; `routes` /24 routes and `rules` TCAM drop rules.
std::string sized_yaml(int n, int routes, int rules) {
  std::string y = "ports:\n";
  for (int i = 0; i < n; ++i) y += "  - {name: p" + std::to_string(i) + ", device: x}\n";
  y += "groups:\n  - {name: g, mode: dlb, flowlet_entries: 4096, ports: [";
  for (int i = 0; i < n; ++i) y += (i ? ", p" : "p") + std::to_string(i);
  y += "]}\nroutes:\n  - {prefix: 0.0.0.0/0, group: g}\n";
  for (int r = 0; r < routes; ++r) {
    y += "  - {prefix: 10." + std::to_string(r / 256) + "." + std::to_string(r % 256) +
         ".0/24, group: g}\n";
  }
  if (rules > 0) y += "tcam:\n  rules:\n";
  for (int r = 0; r < rules; ++r) {
    y += "    - {id: " + std::to_string(r) + ", priority: 10, action: drop, match: {dst: 11." +
         std::to_string(r / 256) + "." + std::to_string(r % 256) + ".0/24}}\n";
  }
  return y + "route_table: rib\n";
}

}  // namespace

TEST_CASE("memory_usage: every part of a switch counted, growing with what it holds") {
  TestPool pool(4095);
  SwitchNode small(config_of(sized_yaml(2, 0, 0)), pool.get());
  const MemoryUsage a = small.memory_usage();
  CHECK(a.tcam > 0);    // the TCAM object and the lane's decision cache
  CHECK(a.routes > 0);  // the rib's node pool, the route cache, the group
  CHECK(a.queues > 0);  // the egress ports
  CHECK(a.other >= sizeof(SwitchNode));
  CHECK(a.rc == 0);
  CHECK(a.reorder == 0);
  CHECK(a.total() == a.tcam + a.routes + a.queues + a.other);

  // More rules: rte_acl contexts (estimated per rule) and the rules themselves.
  SwitchNode ruled(config_of(sized_yaml(2, 0, 300)), pool.get());
  CHECK(ruled.memory_usage().tcam > a.tcam + 300 * (100 + 392));
  // More routes: the rib's node pool (two nodes a route, each with its mempool header).
  SwitchNode routed(config_of(sized_yaml(2, 1000, 0)), pool.get());
  CHECK(routed.memory_usage().routes > a.routes + 1000 * 2 * 40);
  // More ports: more egress.
  SwitchNode wide(config_of(sized_yaml(16, 0, 0)), pool.get());
  CHECK(wide.memory_usage().queues >= a.queues + 14 * sizeof(EgressPort));

  // Use: DLB flowlets are made as flows arrive (pages of the 4096-entry table).
  const uint64_t routes_before = small.memory_usage().routes;
  std::vector<Flow> flows = random_flows(200, 7);
  for (const Flow& f : flows) {
    rte_mbuf* m = udp(pool, f);
    small.receive(0, &m, 1, 0);
  }
  const MemoryUsage used = small.memory_usage();
  CHECK(used.routes > routes_before);
  CHECK(used.routes < routes_before + 4096 * 16);  // the table is not all made
  if constexpr (kEgressPortCountsRings<>) {
    CHECK(used.queues > a.queues);  // the queue that holds them grew its ring
  }
  small.free_all();
  CHECK(pool.whole());
}
