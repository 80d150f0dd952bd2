// CONGA through SwitchNodes in virtual time (switch_emu/switch_conga.cc): a source leaf, a spine
// and a destination leaf handing frames on by hand. The test works out every CE, LBTag and
// feedback value from the DRE formula and the bytes it sends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/wire/conga_overlay.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "switch_emu/switch_node.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

control::SwitchConfig config_of(const std::string& yaml) {
  return control::parse_switch_config(control::ConfigNode::load_string(yaml, "test.yaml"));
}

// T_dre 50 us, alpha 0.2: tau 250 us. At 1 Gbit/s C * tau = 31250 bytes, a level 3906.25.
const std::string kConga =
    "  t_dre_us: 50\n  alpha: 0.2\n  quantisation_bits: 3\n  aging_us: 500\n";

std::string leaf_yaml(int id, int other) {
  const std::string me = std::to_string(id), them = std::to_string(other);
  return "name: leaf" + me +
         "\nports:\n"
         "  - {name: h, device: x, link: {rate_gbps: 1, delay_ns: 0}}\n"
         "  - {name: u0, device: x, link: {rate_gbps: 1, delay_ns: 0}}\n"
         "  - {name: u1, device: x, link: {rate_gbps: 1, delay_ns: 0}}\n"
         "groups:\n  - {name: up, mode: conga, leaf: " +
         them +
         ", ports: [u0, u1]}\n"
         "routes:\n  - {prefix: 10.0." +
         me +
         ".1/32, port: h}\n"
         "  - {prefix: 10.0." +
         them +
         ".0/24, group: up}\n"
         "conga:\n  leaf: " +
         me + "\n  vtep: 10.0." + me + ".255\n  leaves: [{leaf: " + them + ", vtep: 10.0." + them +
         ".255}]\n" + kConga;
}

// The spine: to leaf 1 at 0.5 Gbit/s (a level of 1953.125 bytes), to leaf 0 at 1.
std::string spine_yaml() {
  return "name: spine\nports:\n"
         "  - {name: l0, device: x, link: {rate_gbps: 1, delay_ns: 0}}\n"
         "  - {name: l1, device: x, link: {rate_gbps: 0.5, delay_ns: 0}}\n"
         "routes:\n  - {prefix: 10.0.0.0/24, port: l0}\n  - {prefix: 10.0.1.0/24, port: l1}\n"
         "conga:\n" +
         kConga;
}

// A 1000-byte UDP frame (the overlay makes it 1050).
rte_mbuf* frame(const TestPool& pool, uint32_t src, uint32_t dst, uint16_t sport) {
  static const std::vector<uint8_t> payload(958, 0x5A);
  FrameSpec fs;
  fs.ip.src = src;
  fs.ip.dst = dst;
  fs.ip.tos = 0x1A;  // DSCP 6, ECT(0)
  fs.udp.src_port = sport;
  fs.udp.dst_port = 5000;
  fs.payload = payload;
  rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
  REQUIRE(m != nullptr);
  REQUIRE(rte_pktmbuf_pkt_len(m) == 1000);
  return m;
}

// Everything `port` releases by now_ns.
std::vector<rte_mbuf*> take(SwitchNode& node, uint16_t port, uint64_t now_ns) {
  std::vector<rte_mbuf*> out;
  rte_mbuf* m[64];
  uint16_t n;
  while ((n = node.transmit(port, now_ns, m, 64)) > 0) out.insert(out.end(), m, m + n);
  return out;
}

uint8_t level(double bytes, double per_level) {
  return static_cast<uint8_t>(std::min(7.0, std::floor(bytes / per_level)));
}

constexpr uint32_t kH0 = 0x0A000001, kH1 = 0x0A000101;
constexpr uint64_t kLater = 1'000'000'000;  // every link has sent everything by then

}  // namespace

TEST_CASE("CONGA across two hops: LBTag, CE, decapsulation and the feedback loop") {
  TestPool pool;
  SwitchNode leaf0(config_of(leaf_yaml(0, 1)), pool.get());
  SwitchNode spine(config_of(spine_yaml()), pool.get());
  SwitchNode leaf1(config_of(leaf_yaml(1, 0)), pool.get());
  REQUIRE(leaf0.conga_tables() != nullptr);
  REQUIRE(spine.conga_enabled());
  REQUIRE(spine.conga_tables() == nullptr);

  // Ten packets of one flow at t = 0: one flowlet, one uplink.
  for (int i = 0; i < 10; ++i) {
    rte_mbuf* m = frame(pool, kH0, kH1, 7000);
    leaf0.receive(0, &m, 1, 0);
  }
  auto u0 = take(leaf0, 1, kLater), u1 = take(leaf0, 2, kLater);
  REQUIRE(u0.size() + u1.size() == 10);
  REQUIRE((u0.empty() || u1.empty()));
  const uint8_t lbtag = u0.empty() ? 1 : 0;
  const auto& up = u0.empty() ? u1 : u0;
  // Leaf 0's uplink raised CE to its DRE: after packet i, X = 1050 i bytes.
  for (size_t i = 0; i < up.size(); ++i) {
    uint32_t dst = 0;
    const auto f = conga_parse(up[i], &dst);
    REQUIRE(f.has_value());
    CHECK(dst == 0x0A0001FF);
    CHECK(f->src_leaf == 0);
    CHECK(f->lbtag == lbtag);
    CHECK(f->ce == level(1050.0 * double(i + 1), 3906.25));
    CHECK_FALSE(f->fb_valid);  // leaf 0 has heard nothing from leaf 1 yet
    CHECK(rte_pktmbuf_pkt_len(up[i]) == 1050);
  }
  CHECK(leaf0.conga_counters().encapsulated == 10);

  // The spine's port to leaf 1 runs at half the rate: its metric is floor(1050 j / 1953.125),
  // and the CE leaving it is the larger of the two.
  std::vector<rte_mbuf*> in(up.begin(), up.end());
  spine.receive(0, in.data(), static_cast<uint16_t>(in.size()), 0);
  auto down = take(spine, 1, kLater);
  REQUIRE(down.size() == 10);
  uint8_t last_ce = 0;
  for (size_t j = 0; j < down.size(); ++j) {
    const auto f = conga_parse(down[j]);
    REQUIRE(f.has_value());
    const uint8_t expect =
        std::max(level(1050.0 * double(j + 1), 3906.25), level(1050.0 * double(j + 1), 1953.125));
    CHECK(f->ce == expect);
    last_ce = f->ce;
  }
  CHECK(last_ce == 5);  // 10500 / 1953.125 = 5.4
  CHECK(spine.conga_counters().transit == 10);
  CHECK(spine.conga_counters().ce_raised > 0);

  // Leaf 1 takes the overlay off: its host gets the frames as leaf 0's host sent them (TTL one
  // less at each leaf: the inner header is routed there, the spine routes the outer).
  leaf1.receive(1, down.data(), static_cast<uint16_t>(down.size()), 0);
  auto host = take(leaf1, 0, kLater);
  REQUIRE(host.size() == 10);
  PacketParser parser;
  for (rte_mbuf* m : host) {
    ParsedPacket p;
    REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
    CHECK(rte_pktmbuf_pkt_len(m) == 1000);
    CHECK(p.dst_ip == kH1);
    CHECK(p.dst_port == 5000);
    CHECK(p.ttl == 62);
    CHECK(p.tos == 0x1A);
    CHECK_FALSE(conga_parse(m).has_value());
    rte_pktmbuf_free(m);
  }
  CHECK(leaf1.conga_counters().decapsulated == 10);
  CHECK(leaf1.conga_tables()->from_leaf_metric(0, lbtag, 0) == last_ce);

  // A packet back from leaf 1's host carries the feedback for leaf 0: (lbtag, last CE).
  rte_mbuf* back = frame(pool, kH1, kH0, 9000);
  leaf1.receive(0, &back, 1, 1000);
  auto b0 = take(leaf1, 1, kLater), b1 = take(leaf1, 2, kLater);
  REQUIRE(b0.size() + b1.size() == 1);
  rte_mbuf* fb = b0.empty() ? b1[0] : b0[0];
  const auto ff = conga_parse(fb);
  REQUIRE(ff.has_value());
  CHECK(ff->src_leaf == 1);
  CHECK(ff->fb_valid);
  CHECK(ff->fb_lbtag == lbtag);
  CHECK(ff->fb_metric == last_ce);
  CHECK(leaf1.conga_counters().feedback_carried == 1);
  // Straight to leaf 0 (as if through a spine): it records Congestion-To-Leaf[1][lbtag].
  leaf0.receive(1, &fb, 1, 2000);
  CHECK(leaf0.conga_tables()->remote_metric(1, lbtag, 2000) == last_ce);
  for (rte_mbuf* m : take(leaf0, 0, kLater)) rte_pktmbuf_free(m);

  // A new flow from leaf 0 takes the uplink with the least max(local DRE, remote): the other
  // one (both its metrics are 0 while lbtag's local DRE is at level 2 and its remote at 5).
  const uint8_t local_used = leaf0.conga_port_metric(static_cast<uint16_t>(1 + lbtag), 3000);
  CHECK(local_used == level(10500.0, 3906.25));  // no T_dre has passed since t = 0
  rte_mbuf* fresh = frame(pool, kH0, kH1, 7001);
  leaf0.receive(0, &fresh, 1, 3000);
  auto n0 = take(leaf0, 1, kLater), n1 = take(leaf0, 2, kLater);
  REQUIRE(n0.size() + n1.size() == 1);
  CHECK((n0.empty() ? 1 : 0) == 1 - lbtag);
  for (auto* v : {&n0, &n1}) {
    for (rte_mbuf* m : *v) rte_pktmbuf_free(m);
  }

  CHECK(leaf0.total_drops() == 0);
  CHECK(spine.total_drops() == 0);
  CHECK(leaf1.total_drops() == 0);
  CHECK_THROWS_WITH(leaf0.add_lane(std::vector<uint16_t>{1}), Catch::Contains("one lane"));
  leaf0.free_all();
  spine.free_all();
  leaf1.free_all();
  CHECK(pool.whole());
}

TEST_CASE("a CONGA leaf without headroom for the overlay drops and counts") {
  TestPool pool;
  SwitchNode leaf0(config_of(leaf_yaml(0, 1)), pool.get());
  // The same frame with 8 bytes of headroom.
  rte_mbuf* built = frame(pool, kH0, kH1, 7000);
  rte_mbuf* m = pool.alloc();
  m->data_off = 8;
  std::memcpy(rte_pktmbuf_append(m, 1000), rte_pktmbuf_mtod(built, const void*), 1000);
  rte_pktmbuf_free(built);
  leaf0.receive(0, &m, 1, 0);
  CHECK(leaf0.drops().overlay_no_headroom == 1);
  CHECK(leaf0.accounting().balanced());
  leaf0.free_all();
  CHECK(pool.whole());
}
