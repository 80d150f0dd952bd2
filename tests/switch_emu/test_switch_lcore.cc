// The switch pipeline on real DPDK ports in-process: net_ring ethdevs made from rte_rings, a
// PollLoop running SwitchLcore on this lcore with TSC time, exactly as switch_emu runs it.
#include "switch_emu/switch_lcore.h"

#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/wire/packet_builder.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ring_switch.h"

using namespace spraynet;

using spraynet::test::RingSwitch;

TEST_CASE("SwitchLcore forwards on net_ring ports under a PollLoop, ECMP over 4 ports") {
  test::TestPool pool(16383);
  {
    RingSwitch sw("swl", 4, pool.get(), 20'000'000);
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;

    // 8,000 packets of 1,000 flows, waiting in the input port's rx ring.
    std::mt19937 rng(11);
    std::vector<uint8_t> payload(100, 0x3C);
    for (int i = 0; i < 8000; ++i) {
      FrameSpec f;
      f.ip.src = 0x0A000000 | (rng() % 1000);
      f.ip.dst = 0x0B000001;
      f.udp.src_port = static_cast<uint16_t>(f.ip.src);
      f.udp.dst_port = 7000;
      f.payload = payload;
      rte_mbuf* m = build_udp_mbuf(pool.get(), f);
      REQUIRE(m != nullptr);
      REQUIRE(rte_ring_enqueue(rings[0].rx, m) == 0);
    }

    std::vector<runtime::RxQueue> rx;
    std::vector<runtime::TxQueue> tx;
    for (auto& p : ports) {
      rx.push_back({&p, 0});
      tx.push_back({&p, 0});
    }
    switch_emu::SwitchLcore lcore(sw.shared, {0, 1, 2, 3, 4});
    runtime::TscClock clock;
    runtime::PollLoop loop(rx, tx, lcore, clock);
    loop.run(sw.stop);

    uint64_t total = 0;
    std::map<uint32_t, std::set<int>> ports_of_flow;
    PacketParser parser;
    for (int i = 1; i <= 4; ++i) {
      rte_mbuf* m;
      int count = 0;
      while (rte_ring_dequeue(rings[i].tx, reinterpret_cast<void**>(&m)) == 0) {
        ParsedPacket p;
        REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
        CHECK(p.ttl == 63);
        ports_of_flow[p.src_ip].insert(i);
        rte_pktmbuf_free(m);
        ++count;
      }
      INFO("port " << i);
      CHECK(count > 8000 / 4 / 2);  // 1,000 flows over 4 ports: far from empty
      total += static_cast<uint64_t>(count);
    }
    CHECK(total == 8000);
    for (const auto& [flow, set] : ports_of_flow) CHECK(set.size() == 1);
    CHECK(node.port_counters(0).rx_packets == 8000);
    CHECK(node.total_drops() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("two lcores: one polls the input, the other the outputs; nothing lost or duplicated") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the two-lcore layout cannot run here");
    return;
  }
  test::TestPool pool(16383);
  {
    RingSwitch sw("mlc", 2, pool.get(), 50'000'000);
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;

    std::vector<uint8_t> payload(200, 0x11);
    for (int i = 0; i < 6000; ++i) {
      FrameSpec f;
      f.ip.src = 0x0A000000 | static_cast<uint32_t>(i % 300);
      f.ip.dst = 0x0B000001;
      f.udp.src_port = static_cast<uint16_t>(i % 300);
      f.udp.dst_port = 7000;
      f.ip.id = static_cast<uint16_t>(i);
      f.payload = payload;
      rte_mbuf* m = build_udp_mbuf(pool.get(), f);
      REQUIRE(m != nullptr);
      REQUIRE(rte_ring_enqueue(rings[0].rx, m) == 0);
    }
    // lcore A polls the input port (its rx; its tx carries nothing); lcore B polls and transmits
    // the two outputs: the node's egress for p1/p2 is released by B only.
    switch_emu::SwitchLcore a(sw.shared, {0}), b(sw.shared, {1, 2});
    runtime::TscClock clock;
    runtime::PollLoop loop_a({{&ports[0], 0}}, {{&ports[0], 0}}, a, clock);
    runtime::PollLoop loop_b({{&ports[1], 0}, {&ports[2], 0}}, {{&ports[1], 0}, {&ports[2], 0}}, b,
                             clock);
    runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
      (index == 0 ? loop_a : loop_b).run(sw.stop);
    });

    std::set<uint16_t> ids;
    uint64_t total = 0;
    for (int i = 1; i <= 2; ++i) {
      rte_mbuf* m;
      while (rte_ring_dequeue(rings[i].tx, reinterpret_cast<void**>(&m)) == 0) {
        ParsedPacket p;
        REQUIRE(PacketParser().parse(m, p) == ParseStatus::kOk);
        ids.insert(rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(m, const rte_be16_t*, 14 + 4)[0]));
        rte_pktmbuf_free(m);
        ++total;
      }
    }
    INFO("rx " << node.port_counters(0).rx_packets << ", loops " << loop_a.counters().loops << "/"
               << loop_b.counters().loops << ", tx dropped " << loop_b.counters().tx_dropped);
    CHECK(total == 6000);
    CHECK(ids.size() == 6000);
    CHECK(node.total_drops() == 0);
  }
  CHECK(pool.whole());
}
