// SwitchCounterSnapshot: the copy of the switch's counters the lcores publish and read-only
// telemetry reads without the node lock. A copy says what the node said when it was published,
// its accounting identity holds, and the JSON made from it is the JSON made from the node.
#include "switch_emu/switch_counter_snapshot.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/wire/packet_builder.h"
#include "switch_emu/switch_report.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::switch_emu::SwitchCounterSnapshot;
using spraynet::switch_emu::SwitchCounterView;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

// in0, p0 (a 1 Gbit/s link: packets stay queued), p1; everything routes over p0 and p1; DSCP
// 26 (class 3) is lossless, with a small static threshold so that a burst asserts XOFF.
const char* kConfig = R"(
ports:
  - {name: in0, device: x}
  - {name: p0, device: x, link: {rate_gbps: 1}}
  - {name: p1, device: x}
groups:
  - {name: g, mode: ecmp, ports: [p0, p1]}
routes:
  - {prefix: 10.0.0.0/8, group: g}
pfc: {priorities: [3], static_threshold_bytes: 2048}
)";

SwitchNode make_node(const TestPool& pool) {
  return SwitchNode(
      control::parse_switch_config(control::ConfigNode::load_string(kConfig, "t.yaml")),
      pool.get());
}

rte_mbuf* udp(const TestPool& pool, uint32_t dst, uint16_t sport, uint8_t ttl = 64,
              uint8_t tos = 0) {
  FrameSpec fs;
  fs.ip.tos = tos;
  fs.ip.src = 0x0A000001;
  fs.ip.dst = dst;
  fs.ip.ttl = ttl;
  fs.udp.src_port = sport;
  fs.udp.dst_port = 80;
  static const std::vector<uint8_t> payload(100, 0x5A);
  fs.payload = payload;
  rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
  REQUIRE(m != nullptr);
  return m;
}

}  // namespace

TEST_CASE("SwitchCounterSnapshot: nothing before the first publication") {
  TestPool pool(255);
  {
    SwitchNode node = make_node(pool);
    const SwitchCounterSnapshot s(node);
    CHECK(s.publications() == 0);
    CHECK_FALSE(s.read().has_value());
  }
  CHECK(pool.whole());
}

TEST_CASE("SwitchCounterSnapshot: a copy is the node's counters when it was published") {
  TestPool pool(1023);
  {
    SwitchNode node = make_node(pool);
    SwitchCounterSnapshot snap(node);
    // Forwarded (many flows over both members), no route, TTL expired, bad port.
    std::vector<rte_mbuf*> burst;
    // Lossless (DSCP 26, class 3): past the 2,048-byte threshold, in0 asserts XOFF.
    for (uint16_t i = 0; i < 20; ++i) {
      burst.push_back(udp(pool, 0x0A000002, static_cast<uint16_t>(1000 + i), 64, 26 << 2));
    }
    burst.push_back(udp(pool, 0xC0A80001, 7));
    burst.push_back(udp(pool, 0x0A000002, 8, 1));
    node.receive(0, burst.data(), static_cast<uint16_t>(burst.size()), 1'000);
    rte_mbuf* stray = udp(pool, 0x0A000002, 9);
    node.receive(7, &stray, 1, 1'000);
    rte_mbuf* out[32];
    const uint16_t sent = node.transmit(2, 2'000, out, 32);  // p1: a 100G default link
    for (uint16_t i = 0; i < sent; ++i) rte_pktmbuf_free(out[i]);

    snap.publish(node, 2'000);
    // Later changes are not in the copy until it is published again.
    rte_mbuf* late = udp(pool, 0x0A000002, 10);
    node.receive(0, &late, 1, 3'000);

    const auto v = snap.read();
    REQUIRE(v.has_value());
    CHECK(snap.publications() == 1);
    CHECK(v->published_ns == 2'000);
    CHECK(v->drops.no_route == 1);
    CHECK(v->drops.ttl_expired == 1);
    CHECK(v->drops.bad_port == 1);
    // By ingress port: what arrived on in0 (bad_port arrived on no port of the node).
    CHECK(v->ports[0].drops.no_route == 1);
    CHECK(v->ports[0].drops.ttl_expired == 1);
    CHECK(v->ports[0].drops.total() == v->drops.total() - v->drops.bad_port);
    CHECK(v->ports[1].drops.total() == 0);
    CHECK(v->ports[0].counters.rx_packets == 22);
    CHECK(v->ports[2].counters.tx_packets == sent);
    CHECK(v->ports[1].queued_bytes > 0);  // p0's slow link still holds some
    CHECK(v->ports[1].link_up == 1);
    CHECK(v->ports[1].rate_gbps == 1.0);
    const switch_emu::SwitchAccounting a = v->accounting();
    CHECK(a.received == 23);
    CHECK(a.balanced());
    CHECK(node.accounting().received == 24);
    CHECK(v->groups.at(0).counters.selected == 20);
    CHECK(v->groups[0].member_packets.size() == 2);
    CHECK(v->groups[0].member_packets[0] + v->groups[0].member_packets[1] == 20);
    REQUIRE(v->pfc.size() == 3);
    CHECK(v->pfc[0].priority[3].xoff_asserted == 1);
    CHECK(v->pfc[0].priority[3].buffered_bytes > 0);  // the late packet (class 0) adds none
    CHECK(v->pfc[0].priority[3].buffered_bytes == node.pfc()->buffered_bytes(0, 3));
    CHECK(v->pfc_buffer.xoff_asserted == 1);

    // Published again: the same JSON as from the node itself.
    snap.publish(node, 3'000);
    const auto w = snap.read();
    REQUIRE(w.has_value());
    CHECK(switch_emu::accounting_json(node.config(), *w) == switch_emu::accounting_json(node));
    CHECK(switch_emu::drop_counters_json(w->drops) == switch_emu::drops_json(node));
    CHECK(switch_emu::switch_counters_json(w->counters) == switch_emu::counters_json(node));
    for (uint16_t p = 0; p < node.port_count(); ++p) {
      INFO("port " << p);
      CHECK(switch_emu::port_json(node.config().ports[p].name, w->ports[p]) ==
            switch_emu::port_json(node, p, 3'000));
      CHECK(switch_emu::pfc_json(node, p, w->pfc[p]) == switch_emu::pfc_json(node, p));
    }
    CHECK(switch_emu::group_json(node, 0, w->groups[0]) == switch_emu::group_json(node, 0));
    CHECK(switch_emu::pfc_buffer_json(*node.pfc(), w->pfc_buffer) ==
          switch_emu::pfc_buffer_json(*node.pfc()));
    node.free_all();
  }
  CHECK(pool.whole());
}
