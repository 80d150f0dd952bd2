// The switch's counter lists (SPRAYNET_SWITCH_DROP_CAUSES, SPRAYNET_SWITCH_COUNTERS,
// SPRAYNET_SWITCH_PORT_COUNTERS) against the JSON the report and telemetry make from them:
// every counter under its name, the total the sum of every cause, the sets summable.
#include "switch_emu/switch_report.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "control/switch_config.h"
#include "dataplane/wire/packet_builder.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using nlohmann::json;
using spraynet::switch_emu::SwitchCounters;
using spraynet::switch_emu::SwitchDropCounters;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

control::SwitchConfig config_of(const std::string& yaml) {
  return control::parse_switch_config(control::ConfigNode::load_string(yaml, "test.yaml"));
}

// in0, p0, p1; everything routes over p0 and p1.
const char* kTwoPorts = R"(
ports:
  - {name: in0, device: x}
  - {name: p0, device: x}
  - {name: p1, device: x}
groups:
  - {name: g, mode: ecmp, ports: [p0, p1]}
routes:
  - {prefix: 0.0.0.0/0, group: g}
)";

rte_mbuf* udp(const TestPool& pool, uint8_t ttl = 64) {
  FrameSpec fs;
  fs.ip.src = 0x0A000001;
  fs.ip.dst = 0x0A000002;
  fs.ip.ttl = ttl;
  fs.udp.src_port = 1234;
  fs.udp.dst_port = 80;
  rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
  REQUIRE(m != nullptr);
  return m;
}

// Every counter a distinct value (1, 2, 3...); returns their sum.
template <class Counters>
uint64_t number_each(Counters& c) {
  uint64_t next = 0, sum = 0;
  c.for_each([&](std::string_view, uint64_t& v) {
    v = ++next;
    sum += v;
  });
  return sum;
}

}  // namespace

TEST_CASE("switch drops: every cause in the JSON under its name, total the sum of all") {
  SwitchDropCounters d;
  const uint64_t sum = number_each(d);
  const json j = switch_emu::drop_counters_json(d);
  size_t seen = 0;
  d.for_each([&](std::string_view name, uint64_t v) {
    INFO(name);
    REQUIRE(j.contains(std::string(name)));
    CHECK(j.at(std::string(name)) == v);
    ++seen;
  });
  CHECK(seen == SwitchDropCounters::kCounters);
  CHECK(j.size() == seen + 1);  // and "total"
  CHECK(d.total() == sum);
  CHECK(j.at("total") == sum);
  // The names the report and telemetry have always had; mirror_no_mbuf counts in the total.
  for (const char* key :
       {"parse_truncated_ipv4", "parse_bad_ip_checksum", "parse_not_ipv4",
        "parse_truncated_mac_control", "mac_control_not_pfc", "pfc_malformed", "tcam_drop",
        "no_route", "ttl_expired", "no_eligible_port", "pfc_watchdog_ingress", "egress_refused",
        "mirror_no_mbuf", "bad_port", "overlay_no_headroom", "lane_handoff_full",
        "lane_handoff_unsent", "reorder_held_at_exit"}) {
    CHECK(j.contains(key));
  }
  CHECK_FALSE(j.contains("parse_ok"));
  CHECK(SwitchDropCounters::kCounters == kParseStatusCount - 1 + 14);
}

TEST_CASE("switch counter sets add up counter by counter (per-lcore copies)") {
  SwitchDropCounters d;
  const uint64_t sum = number_each(d);
  SwitchDropCounters twice = d;
  twice += d;
  CHECK(twice.total() == 2 * sum);
  CHECK(twice.parse[static_cast<size_t>(ParseStatus::kTruncatedUdp)] ==
        2 * d.parse[static_cast<size_t>(ParseStatus::kTruncatedUdp)]);
  CHECK(twice.mirror_no_mbuf == 2 * d.mirror_no_mbuf);
  CHECK(twice.parse[0] == 0);  // ok is never a drop

  SwitchCounters c;
  number_each(c);
  SwitchCounters c2 = c;
  c2 += c;
  const json j = switch_emu::switch_counters_json(c2);
  CHECK(j.size() == SwitchCounters::kCounters);
  c.for_each([&](std::string_view name, uint64_t v) {
    INFO(name);
    CHECK(j.at(std::string(name)) == 2 * v);
  });
  for (const char* key : {"pfc_received", "pfc_frames_sent", "mirrored", "pinned", "sprayed",
                          "spray_without_ppcid"}) {
    CHECK(j.contains(key));
  }
}

TEST_CASE("switch port JSON: every port counter under its name") {
  TestPool pool(63);
  SwitchNode node(config_of(kTwoPorts), pool.get());
  rte_mbuf* m = udp(pool);
  node.receive(0, &m, 1, 0);
  const json j = switch_emu::port_json(node, 0, 0);
  size_t seen = 0;
  node.port_counters(0).for_each([&](std::string_view name, uint64_t v) {
    INFO(name);
    REQUIRE(j.contains(std::string(name)));
    CHECK(j.at(std::string(name)) == v);
    ++seen;
  });
  CHECK(seen == 6);
  CHECK(j.at("rx_packets") == 1);
  // The drops of what arrived on the port, by cause (bad_port is never a port's).
  REQUIRE(j.contains("drops"));
  CHECK(j.at("drops") == [&] {
    json d = switch_emu::drop_counters_json(node.port_drops(0));
    d.erase("bad_port");
    return d;
  }());
  CHECK_FALSE(j.at("drops").contains("bad_port"));
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("a mirror copy without an mbuf is a counted drop, in the total and the JSON") {
  // One mbuf: the packet itself. Its mirror copy finds the pool empty; the original goes on.
  TestPool pool(1);
  const std::string yaml = std::string(kTwoPorts) + R"(
tcam:
  rules:
    - {id: 1, priority: 10, action: mirror, port: p1, match: {dst: 10.0.0.0/8}}
)";
  SwitchNode node(config_of(yaml), pool.get());
  rte_mbuf* m = udp(pool);
  node.receive(0, &m, 1, 0);
  CHECK(node.drops().mirror_no_mbuf == 1);
  CHECK(node.counters().mirrored == 0);
  CHECK(node.total_drops() == 1);
  CHECK(switch_emu::drops_json(node)["total"] == 1);
  CHECK(switch_emu::drops_json(node)["mirror_no_mbuf"] == 1);
  CHECK(node.port_counters(1).forwarded_packets + node.port_counters(2).forwarded_packets == 1);
  node.free_all();
  CHECK(pool.whole());
}

TEST_CASE("switch port JSON: per-class ECN counters; an ecn block marks ECT packets in a queue") {
  // in0 at 100 Gbit/s into out at 1: the queue builds. Class 0 marks above 0 bytes (kmin =
  // kmax = 0, pmax 1): every packet that leaves another behind it is marked.
  const std::string yaml = R"(
ports:
  - {name: in0, device: x}
  - {name: out, device: x, link: {rate_gbps: 1}}
routes:
  - {prefix: 0.0.0.0/0, port: out}
ecn: {classes: [0], kmin_bytes: 0, kmax_bytes: 0, pmax: 1}
)";
  TestPool pool(63);
  {
    SwitchNode node(config_of(yaml), pool.get());
    REQUIRE(node.egress(1).ecn_marker() != nullptr);
    REQUIRE(node.egress(0).ecn_marker() != nullptr);  // every port's egress marks
    for (uint8_t ecn : {uint8_t{2}, uint8_t{2}, uint8_t{2}, uint8_t{0}, uint8_t{0}}) {
      FrameSpec fs;
      fs.ip.src = 0x0A000001;
      fs.ip.dst = 0x0A000002;
      fs.ip.tos = ecn;  // DSCP 0: class 0
      fs.udp.src_port = 1234;
      fs.udp.dst_port = 80;
      rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
      REQUIRE(m != nullptr);
      node.receive(0, &m, 1, 0);
    }
    // Packet 1 leaves 3 behind, 2 leaves 2: marked; 0 left none; 3 (Not-ECT) leaves 1 behind:
    // counted, not marked; 4 leaves none.
    uint16_t sent = 0, ce = 0;
    rte_mbuf* out[8];
    for (uint64_t t = 0; t <= 1'000'000; t += 10'000) {
      const uint16_t n = node.transmit(1, t, out, 8);
      for (uint16_t i = 0; i < n; ++i) {
        ce += (rte_pktmbuf_mtod_offset(out[i], const uint8_t*, 15)[0] & 3) == 3;
        rte_pktmbuf_free(out[i]);
      }
      sent += n;
    }
    CHECK(sent == 5);
    CHECK(ce == 2);
    const json j = switch_emu::port_json(node, 1, 1'000'000);
    CHECK(j["classes"][0]["ecn_marked"] == 2);
    CHECK(j["classes"][0]["ecn_not_ect"] == 1);
    CHECK(j["classes"][1]["ecn_marked"] == 0);
    CHECK(switch_emu::accounting_json(node)["balanced"] == true);
    node.free_all();
  }
  {
    // Without the block: no marker, the counters 0, and the per-class keys are these.
    SwitchNode node(config_of(kTwoPorts), pool.get());
    CHECK(node.egress(1).ecn_marker() == nullptr);
    const json c = switch_emu::port_json(node, 1, 0)["classes"][3];
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    CHECK(keys == std::set<std::string>{"enqueued", "transmitted_packets", "transmitted_bytes",
                                        "drops_queue_full", "drops_link_down", "drops_watchdog",
                                        "drops_headroom_overflow", "drops_bit_error", "drops_loss",
                                        "drops_delay_line_full", "paused_ns", "ecn_marked",
                                        "ecn_not_ect", "queued_bytes"});
    CHECK(c["ecn_marked"] == 0);
    node.free_all();
  }
  CHECK(pool.whole());
}

TEST_CASE("switch group JSON: a DLB group's flowlet table, its aging and collisions") {
  // One entry and a 1 us gap: every flow shares the entry.
  const std::string yaml = R"(
ports:
  - {name: in0, device: x}
  - {name: p0, device: x}
  - {name: p1, device: x}
groups:
  - {name: g, mode: dlb, flowlet_entries: 1, dlb_gap_ns: 1000, ports: [p0, p1]}
routes:
  - {prefix: 0.0.0.0/0, group: g}
)";
  TestPool pool(63);
  {
    SwitchNode node(config_of(yaml), pool.get());
    auto send = [&](uint16_t src_port, uint64_t now_ns) {
      FrameSpec fs;
      fs.ip.src = 0x0A000001;
      fs.ip.dst = 0x0A000002;
      fs.udp.src_port = src_port;
      fs.udp.dst_port = 80;
      rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
      REQUIRE(m != nullptr);
      node.receive(0, &m, 1, now_ns);
    };
    send(1000, 0);          // the entry's first flowlet
    send(1000, 500);        // the same flowlet
    send(2000, 900);        // another flow inside the gap: a collision, follows flow 1000
    send(1000, 1'000'000);  // idle 999 us: the entry aged, a new flowlet
    const json f = switch_emu::group_json(node, 0)["flowlets"];
    CHECK(f["entries"] == 1);
    CHECK(f["gap_ns"] == 1000);
    CHECK(f["started"] == 2);
    CHECK(f["expired"] == 1);
    CHECK(f["collisions"] == 1);
    CHECK(f["no_eligible_member"] == 0);
    node.free_all();
  }
  {
    // An ECMP group has a table too (unused): all zero.
    SwitchNode node(config_of(kTwoPorts), pool.get());
    rte_mbuf* m = udp(pool);
    node.receive(0, &m, 1, 0);
    const json f = switch_emu::group_json(node, 0)["flowlets"];
    CHECK(f["started"] == 0);
    CHECK(f["collisions"] == 0);
    node.free_all();
  }
  CHECK(pool.whole());
}
