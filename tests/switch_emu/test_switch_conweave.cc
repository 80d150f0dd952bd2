// ConWeave through two leaf SwitchNodes in virtual time (switch_emu/switch_conweave.cc), each
// uplink of one cabled straight to the other's: the test decides when each path delivers, so a
// slow path is one the test holds back. Real RoCEv2 frames, real mbufs; the host must see every
// packet in PSN order, and both leaves' accounting must balance with every mbuf back.
#include <catch2/catch.hpp>

#include <vector>

#include "control/switch_config.h"
#include "dataplane/wire/conweave_overlay.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "switch_emu/switch_node.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLater = 1'000'000'000;

std::string leaf_yaml(int id, int other, uint64_t seed = 1) {
  const std::string me = std::to_string(id), them = std::to_string(other);
  return "name: leaf" + me + "\nseed: " + std::to_string(seed) +
         "\nports:\n"
         "  - {name: h, device: x, link: {rate_gbps: 100, delay_ns: 0}}\n"
         "  - {name: u0, device: x, link: {rate_gbps: 100, delay_ns: 0}}\n"
         "  - {name: u1, device: x, link: {rate_gbps: 100, delay_ns: 0}}\n"
         "groups:\n  - {name: up, mode: conweave, leaf: " +
         them +
         ", ports: [u0, u1]}\n"
         "routes:\n  - {prefix: 10.0." +
         me +
         ".0/24, port: h}\n"
         "  - {prefix: 10.0." +
         them +
         ".0/24, group: up}\n"
         "conweave:\n  leaf: " +
         me + "\n  vtep: 10.0." + me + ".255\n  leaves: [{leaf: " + them + ", vtep: 10.0." + them +
         ".255}]\n";
}

control::SwitchConfig config_of(const std::string& yaml) {
  return control::parse_switch_config(control::ConfigNode::load_string(yaml, "test.yaml"));
}

rte_mbuf* write(const TestPool& pool, uint32_t psn) {
  static const std::vector<uint8_t> payload(256, 0x3C);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000101;
  f.ip.tos = 26 << 2 | 2;
  f.udp.src_port = 0xC001;
  f.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = 0x11;
  r.psn = psn;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
  REQUIRE(m != nullptr);
  return m;
}

std::vector<rte_mbuf*> take(SwitchNode& node, uint16_t port) {
  std::vector<rte_mbuf*> out;
  rte_mbuf* m[64];
  uint16_t n;
  while ((n = node.transmit(port, kLater, m, 64)) > 0) out.insert(out.end(), m, m + n);
  return out;
}

}  // namespace

TEST_CASE("a slow path's flow is rerouted once; the host sees every packet in PSN order") {
  // The new uplink is drawn: with two uplinks both draws take the old one a quarter of the
  // time. Seeds until one moved the flow; every seed's run is checked whole.
  bool moved = false;
  for (uint64_t seed = 1; seed <= 16 && !moved; ++seed) {
    TestPool pool;
    SwitchNode leaf0(config_of(leaf_yaml(0, 1, seed)), pool.get());
    SwitchNode leaf1(config_of(leaf_yaml(1, 0)), pool.get());
    REQUIRE(leaf0.conweave_tx() != nullptr);

    // PSN 0 at t = 0: the epoch's INIT; PSN 1 at 5 us: before the deadline (0 + 4 + 4 us).
    uint32_t psn = 0;
    for (const uint64_t t : {uint64_t{0}, 5 * kUs}) {
      rte_mbuf* m = write(pool, psn++);
      leaf0.receive(0, &m, 1, t);
    }
    auto u0 = take(leaf0, 1), u1 = take(leaf0, 2);
    REQUIRE(u0.size() + u1.size() == 2);
    REQUIRE((u0.empty() || u1.empty()));
    const uint16_t old_port = u0.empty() ? 2 : 1;
    std::vector<rte_mbuf*> old_path = u0.empty() ? u1 : u0;
    CHECK(conweave_parse(old_path[0])->tag.flag == ConweaveFlag::kInit);
    // No RTT reply (the old path holds everything back): at 20 us the next packet is the TAIL,
    // on the old path, and the next ones go on the other uplink (a reroute to the same uplink is
    // possible: repeat until a flow has moved).
    rte_mbuf* tail = write(pool, psn++);
    leaf0.receive(0, &tail, 1, 20 * kUs);
    auto more_old = take(leaf0, old_port);
    REQUIRE(more_old.size() == 1);
    CHECK(conweave_parse(more_old[0])->tag.flag == ConweaveFlag::kTail);
    old_path.push_back(more_old[0]);
    std::vector<rte_mbuf*> new_path;
    for (int i = 0; i < 5; ++i) {
      rte_mbuf* m = write(pool, psn++);
      leaf0.receive(0, &m, 1, (21 + i) * kUs);
    }
    const uint16_t new_port = old_port == 1 ? 2 : 1;
    new_path = take(leaf0, new_port);
    auto stayed = take(leaf0, old_port);
    if (new_path.empty()) {
      // Both draws took the old uplink: the flow stayed; its packets still carry
      // phase 1 and pass in order behind the TAIL.
      REQUIRE(stayed.size() == 5);
      new_path = stayed;
    } else {
      REQUIRE(new_path.size() == 5);
      CHECK(leaf0.conweave_tx()->counters().reroutes == 1);
      moved = true;
    }
    for (rte_mbuf* m : new_path) CHECK(conweave_parse(m)->tag.phase == 1);

    // The new path is fast: its packets reach leaf 1 first and are held.
    leaf1.receive(new_port, new_path.data(), static_cast<uint16_t>(new_path.size()), 30 * kUs);
    // (Phase 1 before the TAIL is held whichever uplink it took.)
    CHECK(take(leaf1, 0).empty());
    CHECK(leaf1.conweave_rx()->held_now() == 5);
    CHECK(leaf1.accounting().balanced());
    // Then the old path's three (INIT, DATA, TAIL): they pass, and the TAIL lets the five out.
    leaf1.receive(old_port, old_path.data(), static_cast<uint16_t>(old_path.size()), 40 * kUs);
    const auto host = take(leaf1, 0);
    REQUIRE(host.size() == psn);
    PacketParser parser;
    for (uint32_t i = 0; i < host.size(); ++i) {
      ParsedPacket p;
      REQUIRE(parser.parse(host[i], p) == ParseStatus::kOk);
      CHECK(p.kind == PacketKind::kRoce);
      CHECK(p.psn == i);
      CHECK_FALSE(conweave_parse(host[i]).has_value());
      rte_pktmbuf_free(host[i]);
    }
    CHECK(leaf1.conweave_rx()->counters().flushes_by_timeout == 0);
    CHECK(leaf1.conweave_rx()->held_now() == 0);

    // Leaf 1 answered the INIT (an RTT reply) and the TAIL (a CLEAR) towards leaf 0.
    std::vector<rte_mbuf*> back;
    for (uint16_t p : {uint16_t{1}, uint16_t{2}}) {
      for (rte_mbuf* m : take(leaf1, p)) back.push_back(m);
    }
    REQUIRE(back.size() == 2);
    leaf0.receive(1, back.data(), 2, 45 * kUs);
    CHECK(leaf0.conweave_tx()->counters().clears == 1);
    CHECK(leaf0.conweave_tx()->counters().late_replies == 1);  // the INIT's reply, after the TAIL
    CHECK(leaf0.counters().conweave_control_consumed == 2);
    CHECK(leaf1.counters().conweave_control_sent == 2);

    CHECK(leaf0.total_drops() == 0);
    CHECK(leaf1.total_drops() == 0);
    CHECK(leaf0.accounting().balanced());
    CHECK(leaf1.accounting().balanced());
    leaf0.free_all();
    leaf1.free_all();
    CHECK(pool.whole());
  }
  CHECK(moved);
}

TEST_CASE("what a queue still holds when the switch stops is counted and freed") {
  TestPool pool;
  SwitchNode leaf0(config_of(leaf_yaml(0, 1)), pool.get());
  SwitchNode leaf1(config_of(leaf_yaml(1, 0)), pool.get());
  for (uint32_t psn = 0; psn < 8; ++psn) {
    rte_mbuf* m = write(pool, psn);
    leaf0.receive(0, &m, 1, psn < 2 ? psn * kUs : (20 + psn) * kUs);
  }
  // Deliver only phase-1 packets (those after the TAIL) to leaf 1: held.
  std::vector<rte_mbuf*> phase1, other;
  for (uint16_t p : {uint16_t{1}, uint16_t{2}}) {
    for (rte_mbuf* m : take(leaf0, p))
      (conweave_parse(m)->tag.phase == 1 ? phase1 : other).push_back(m);
  }
  REQUIRE(phase1.size() == 5);
  leaf1.receive(1, phase1.data(), static_cast<uint16_t>(phase1.size()), 30 * kUs);
  const uint64_t held = leaf1.conweave_rx()->held_now();
  CHECK(held == 5);
  CHECK(leaf1.accounting().balanced());
  CHECK(leaf1.next_event_ns(30 * kUs) <= 30 * kUs + 216 * kUs);
  leaf1.free_all();
  CHECK(leaf1.drops().reorder_held_at_exit == held);
  CHECK(leaf1.accounting().balanced());
  for (rte_mbuf* m : other) rte_pktmbuf_free(m);
  leaf0.free_all();
  CHECK(pool.whole());
}
