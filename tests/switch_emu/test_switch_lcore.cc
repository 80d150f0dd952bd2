// The switch pipeline on real DPDK ports in-process: net_ring ethdevs made from rte_rings, a
// PollLoop running SwitchLcore on this lcore with TSC time, exactly as switch_emu runs it.
#include "switch_emu/switch_lcore.h"

#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "control/control_loop.h"
#include "control/control_thread.h"
#include "control/switch_config.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/wire/packet_builder.h"
#include "switch_emu/switch_report.h"
#include "switch_emu/switch_telemetry.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ring_switch.h"

using namespace spraynet;

using spraynet::test::RingSwitch;

namespace {

// Packet `i` of a numbered run: UDP from 10.0.0.(i % flows), source port sport_base + i % flows,
// to 11.0.0.1:7000, its IP id `i` (the number the outputs are counted by), DSCP from `tos`.
rte_mbuf* numbered_udp(rte_mempool* pool, int i, int flows, uint16_t sport_base,
                       const std::vector<uint8_t>& payload, uint8_t tos = 0) {
  FrameSpec f;
  f.ip.src = 0x0A000000 | static_cast<uint32_t>(i % flows);
  f.ip.dst = 0x0B000001;
  f.ip.tos = tos;
  f.udp.src_port = static_cast<uint16_t>(sport_base + i % flows);
  f.udp.dst_port = 7000;
  f.ip.id = static_cast<uint16_t>(i);
  f.payload = payload;
  rte_mbuf* m = build_udp_mbuf(pool, f);
  REQUIRE(m != nullptr);
  return m;
}

// Takes every frame the outputs (rings 1 and 2) sent, checks each parses, and counts how often
// each IP id (the packet's number, below `packets`) came out; `total` gets the frames taken.
std::vector<int> take_outputs(std::vector<test::RingPort>& rings, int packets, uint64_t& total) {
  std::vector<int> seen(packets, 0);
  for (int i = 1; i <= 2; ++i) {
    rte_mbuf* m;
    while (rte_ring_dequeue(rings[i].tx, reinterpret_cast<void**>(&m)) == 0) {
      ParsedPacket p;
      REQUIRE(PacketParser().parse(m, p) == ParseStatus::kOk);
      const uint16_t id = rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(m, const rte_be16_t*, 14 + 4)[0]);
      REQUIRE(id < packets);
      ++seen[id];
      rte_pktmbuf_free(m);
      ++total;
    }
  }
  return seen;
}

}  // namespace

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
      REQUIRE(rte_ring_enqueue(rings[0].rx, numbered_udp(pool.get(), i, 300, 0, payload)) == 0);
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

TEST_CASE(
    "two lcores on ports with two queues each: each polls one rx queue and sends on its own tx "
    "queue of every output, nothing handed over, every packet exactly once") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the two-lcore layout cannot run here");
    return;
  }
  test::TestPool pool(16383);
  {
    RingSwitch sw("mq", 2, pool.get(), 50'000'000, "ecmp", "", "", 16384, 2);
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;
    // As RSS would spread them: the input's two rx queues get half the packets each.
    constexpr int kPackets = 8000;
    std::vector<uint8_t> payload(200, 0x33);
    for (int i = 0; i < kPackets; ++i) {
      REQUIRE(rte_ring_enqueue(rings[0].rxq[i % 2], numbered_udp(pool.get(), i, 700, 0, payload)) ==
              0);
    }
    // Lane 0 owns the input and output 0, lane 1 output 1; with a tx queue per lane on every
    // wire port, each lane sends on its own queue of both outputs.
    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2});
    REQUIRE(node.lanes_run_in_parallel());
    for (uint16_t p = 0; p < 3; ++p) CHECK(node.port_per_lane(p));
    using Pairs = std::vector<std::pair<uint16_t, uint16_t>>;
    CHECK(a.tx_queues() == Pairs{{0, 0}, {1, 0}, {2, 0}});
    CHECK(b.tx_queues() == Pairs{{0, 1}, {1, 1}, {2, 1}});
    runtime::TscClock clock;
    std::vector<runtime::TxQueue> tx_a, tx_b;
    for (const auto& [p, q] : a.tx_queues()) tx_a.push_back({&ports[p], q});
    for (const auto& [p, q] : b.tx_queues()) tx_b.push_back({&ports[p], q});
    runtime::PollLoop loop_a({{&ports[0], 0}, {&ports[1], 0}, {&ports[2], 0}}, tx_a, a, clock);
    runtime::PollLoop loop_b({{&ports[0], 1}, {&ports[1], 1}, {&ports[2], 1}}, tx_b, b, clock);
    sw.shared.lcores = 2;
    runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
      (index == 0 ? loop_a : loop_b).run(sw.stop);
    });

    std::vector<int> seen(kPackets, 0);
    uint64_t total = 0;
    std::array<std::array<uint64_t, 2>, 3> by_queue{};
    for (int o = 1; o <= 2; ++o) {
      for (int q = 0; q < 2; ++q) {
        rte_mbuf* m;
        while (rte_ring_dequeue(rings[o].txq[q], reinterpret_cast<void**>(&m)) == 0) {
          const uint16_t id =
              rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(m, const rte_be16_t*, 14 + 4)[0]);
          REQUIRE(id < kPackets);
          ++seen[id];
          ++by_queue[o][q];
          rte_pktmbuf_free(m);
          ++total;
        }
      }
    }
    INFO("out0 q0/q1 " << by_queue[1][0] << "/" << by_queue[1][1] << ", out1 q0/q1 "
                       << by_queue[2][0] << "/" << by_queue[2][1]);
    CHECK(total == kPackets);
    CHECK(std::count(seen.begin(), seen.end(), 1) == kPackets);
    CHECK(node.total_drops() == 0);
    CHECK(node.counters().lane_handoffs == 0);
    // Each lane sent what it received, on its own queues: queue q of the outputs carries exactly
    // the packets that arrived on rx queue q.
    CHECK(by_queue[1][0] + by_queue[2][0] == kPackets / 2);
    CHECK(by_queue[1][1] + by_queue[2][1] == kPackets / 2);
    CHECK(node.lane_port_counters(1, 1).tx_packets + node.lane_port_counters(1, 2).tx_packets ==
          kPackets / 2);
    // The ethdev's own per-queue counters say the same.
    const nlohmann::json e = switch_emu::ethdev_json(ports[1].id());
    REQUIRE(e["tx_queues"].size() == 2);
    CHECK(e["tx_queues"][1]["packets"].get<uint64_t>() == by_queue[1][1]);
    const nlohmann::json r = switch_emu::report_json(node, clock.now_ns());
    CHECK(r["ports"][1]["tx_queue_per_lane"].get<bool>());
    CHECK(r["ports"][1]["node_tx_queues"][1]["tx_packets"].get<uint64_t>() == by_queue[1][1]);
    CHECK(node.accounting().balanced());
    // What telemetry reads: the lanes' published copies add up to the port's counters, its
    // link's state and rate once (not once per lane).
    sw.shared.counters->publish(node, clock.now_ns());
    const auto view = sw.shared.counters->read();
    REQUIRE(view);
    CHECK(view->ports[1].counters.tx_packets == by_queue[1][0] + by_queue[1][1]);
    CHECK(view->ports[1].egress.dequeued == by_queue[1][0] + by_queue[1][1]);
    CHECK(view->ports[1].link_up == 1);
    CHECK(view->ports[1].rate_gbps == node.egress(1).link().rate_gbps());
    CHECK(view->accounting().balanced());
    // The control loop samples every queue of the port (its utilisation is the lanes' sum).
    const control::ControlTarget target = control::control_target_of(node);
    REQUIRE(target.more_queues);
    const auto more = target.more_queues(1);
    REQUIRE(more.size() == 1);
    CHECK(more[0] == &node.egress(1u, uint16_t{1}));
    CHECK(control::sample_port(*target.ports[1], 0, clock.now_ns()).tx_packets +
              control::sample_port(*more[0], 0, clock.now_ns()).tx_packets ==
          by_queue[1][0] + by_queue[1][1]);
  }
  CHECK(pool.whole());
}

TEST_CASE("a port with fewer tx queues than lanes, or PFC on, keeps one egress and the handoff") {
  test::TestPool pool(4095);
  {
    RingSwitch sw("mqa", 2, pool.get(), 0, "ecmp", "", "", 16384, 2);
    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2}), c(sw.shared, {});
    for (uint16_t p = 0; p < 3; ++p) CHECK_FALSE(sw.node->port_per_lane(p));  // 2 queues, 3 lanes
    CHECK(c.tx_queues().empty());
  }
  {
    RingSwitch sw("mqp", 2, pool.get(), 0, "ecmp", "pfc: {priorities: [3]}\n", "", 16384, 2);
    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2});
    CHECK_FALSE(sw.node->lanes_run_in_parallel());
    for (uint16_t p = 0; p < 3; ++p) CHECK_FALSE(sw.node->port_per_lane(p));
  }
  {
    RingSwitch sw("mqe", 2, pool.get(), 0, "ecmp", "", "emulated", 16384, 2);
    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2});
    for (uint16_t p = 0; p < 3; ++p) CHECK_FALSE(sw.node->port_per_lane(p));  // emulated links
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "two lcores under telemetry queried in a loop and the control thread: every packet "
    "comes out exactly once") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the two-lcore layout cannot run here");
    return;
  }
  test::TestPool pool(16383);
  {
    // As switch_emu runs it: lcore A polls the input and output 0 (and releases output 0's
    // egress), lcore B polls and releases output 1, the control thread ticks the 200 ms loop
    // (here every 1 ms) and publishes through RCU, and a telemetry client reads every
    // read-only command as fast as it can.
    RingSwitch sw("tlc", 2, pool.get(), 50'000'000);
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;
    constexpr int kPackets = 10000;
    std::vector<uint8_t> payload(200, 0x22);
    for (int i = 0; i < kPackets; ++i) {
      REQUIRE(rte_ring_enqueue(rings[0].rx, numbered_udp(pool.get(), i, 500, 1000, payload)) == 0);
    }
    runtime::TscClock clock;
    runtime::RcuDomain rcu(2);
    sw.shared.rcu = &rcu;
    control::ControlTarget target = control::control_target_of(node);
    target.rcu = &rcu;
    target.node_lock = &sw.shared.lock;
    control::ControlLoopConfig loop_config;
    loop_config.period_ns = 1'000'000;
    control::ControlLoop control_loop(target, clock.now_ns(), loop_config);
    sw.shared.control = &control_loop;
    switch_emu::register_switch_telemetry(sw.shared, clock, false);

    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2});
    runtime::PollLoopConfig cfg_a, cfg_b;
    cfg_a.rcu = cfg_b.rcu = &rcu;
    cfg_a.rcu_reader_id = 0;
    cfg_b.rcu_reader_id = 1;
    runtime::PollLoop loop_a({{&ports[0], 0}, {&ports[1], 0}}, {{&ports[0], 0}, {&ports[1], 0}}, a,
                             clock, cfg_a);
    runtime::PollLoop loop_b({{&ports[2], 0}}, {{&ports[2], 0}}, b, clock, cfg_b);

    std::atomic<bool> running{true};
    uint64_t replies = 0, errors = 0;
    std::string last_error;
    std::thread client([&] {
      // One read: a reply, and an error when it is one (or, for accounting, not balanced).
      auto ask = [&](const char* command, std::string_view params) {
        const nlohmann::json j = control::TelemetryCommands::call(command, params);
        ++replies;
        return j;
      };
      auto failed = [&](const char* command, const nlohmann::json& j) {
        ++errors;
        last_error = std::string(command) + ": " + j.dump();
      };
      auto read = [&](const char* command, std::string_view params) {
        const nlohmann::json j = ask(command, params);
        if (j.is_object() && j.contains("error")) failed(command, j);
      };
      const char* commands[] = {"/spraynet/ports",  "/spraynet/drops",      "/spraynet/counters",
                                "/spraynet/groups", "/spraynet/link_state", "/spraynet/tcam"};
      while (running.load()) {
        for (const char* c : commands) read(c, "");
        // The accounting identity holds whenever it is read, lcores running or not.
        const nlohmann::json acc = ask("/spraynet/accounting", "");
        if (!acc.value("balanced", false)) failed("/spraynet/accounting", acc);
        // Parameterised reads too.
        for (const char* c : {"/spraynet/port", "/spraynet/pfc"}) {
          for (const char* p : {"0", "1", "2"}) read(c, p);
        }
        for (const char* c : {"/spraynet/group", "/spraynet/buckets"}) read(c, "g");
      }
    });
    {
      control::ControlThread control_thread(control_loop, sw.shared.control_lock,
                                            [&clock] { return clock.now_ns(); });
      runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
        (index == 0 ? loop_a : loop_b).run(sw.stop);
      });
    }
    running = false;
    client.join();
    control::TelemetryCommands::clear();

    uint64_t total = 0;
    const std::vector<int> seen = take_outputs(rings, kPackets, total);
    INFO("replies " << replies << " (errors " << errors << ": " << last_error << "), loops "
                    << loop_a.counters().loops << "/" << loop_b.counters().loops
                    << ", control ticks " << control_loop.counters().ticks);
    CHECK(replies > 0);
    CHECK(errors == 0);
    CHECK(total == kPackets);
    CHECK(std::count(seen.begin(), seen.end(), 1) == kPackets);  // each exactly once
    CHECK(node.total_drops() == 0);
    CHECK(loop_a.counters().tx_dropped + loop_b.counters().tx_dropped == 0);
    // The readers read the lcores' publications (many during the run, one more on each stop),
    // and the last one is the node as it ended.
    CHECK(sw.shared.counters->publications() > 2);
    const auto last = sw.shared.counters->read();
    REQUIRE(last.has_value());
    CHECK(switch_emu::accounting_json(node.config(), *last) == switch_emu::accounting_json(node));
  }
  CHECK(pool.whole());
}

TEST_CASE("two lanes at once, both receiving and each handing packets to the other: every packet "
          "comes out exactly once, with PFC off (parallel lanes) and on (serialised lanes)") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the two-lcore layout cannot run here");
    return;
  }
  const bool pfc = GENERATE(false, true);
  INFO((pfc ? "PFC on" : "PFC off"));
  test::TestPool pool(16383);
  {
    // Lane A polls the input and owns out0; lane B polls out1 (which receives too) and owns it.
    // Packets from either input go to both outputs: half of each lane's cross to the other.
    RingSwitch sw(pfc ? "pla" : "lla", 2, pool.get(), 50'000'000, "ecmp",
                  pfc ? "pfc: {priorities: [3]}\n" : "");
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;
    constexpr int kPackets = 8000;
    std::vector<uint8_t> payload(100, 0x44);
    const uint8_t tos = pfc ? 26 << 2 : 0;  // lossless class 3 with PFC on
    for (int i = 0; i < kPackets; ++i) {
      rte_mbuf* m = numbered_udp(pool.get(), i, 400, 3000, payload, tos);
      REQUIRE(rte_ring_enqueue(rings[i % 2 == 0 ? 0 : 2].rx, m) == 0);
    }
    switch_emu::SwitchLcore a(sw.shared, {0, 1}), b(sw.shared, {2});
    REQUIRE(node.lane_count() == 2);
    CHECK(node.lanes_run_in_parallel() == !pfc);
    runtime::TscClock clock;
    runtime::PollLoop loop_a({{&ports[0], 0}, {&ports[1], 0}}, {{&ports[0], 0}, {&ports[1], 0}}, a,
                             clock);
    runtime::PollLoop loop_b({{&ports[2], 0}}, {{&ports[2], 0}}, b, clock);
    sw.shared.lcores = 2;
    runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
      (index == 0 ? loop_a : loop_b).run(sw.stop);
    });

    uint64_t total = 0;
    const std::vector<int> seen = take_outputs(rings, kPackets, total);
    const auto c = node.counters();
    INFO("handoffs " << c.lane_handoffs << ", drops " << node.total_drops() << ", loops "
                     << loop_a.counters().loops << "/" << loop_b.counters().loops);
    CHECK(total == kPackets);
    CHECK(std::count(seen.begin(), seen.end(), 1) == kPackets);
    CHECK(node.total_drops() == 0);
    CHECK(node.port_counters(0).rx_packets + node.port_counters(2).rx_packets == kPackets);
    if (pfc) {
      CHECK(c.lane_handoffs == 0);  // serialised lanes enqueue on any port themselves
    } else {
      CHECK(c.lane_handoffs > kPackets / 4);
      CHECK(c.lane_handoffs == c.lane_handoffs_taken);
    }
    CHECK(node.idle());
    CHECK(node.accounting().balanced());
    // The lanes' last published copies add up to the node as it ended.
    const auto last = sw.shared.counters->read();
    REQUIRE(last.has_value());
    CHECK(switch_emu::accounting_json(node.config(), *last) == switch_emu::accounting_json(node));
    CHECK(last->drops.total() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("read-only telemetry answers while another thread holds the node lock") {
  // What an lcore holds per burst must not be what a reader waits for: with the node lock held
  // here, the counter reads still answer (from the published copy).
  test::TestPool pool(4095);
  {
    RingSwitch sw("nlk", 2, pool.get(), 0);
    runtime::TscClock clock;
    switch_emu::register_switch_telemetry(sw.shared, clock, false);
    std::unique_lock<runtime::NodeGate> held(sw.shared.lock);
    auto replies = std::async(std::launch::async, [] {
      std::vector<nlohmann::json> out;
      for (const char* c : {"/spraynet/drops", "/spraynet/counters", "/spraynet/accounting",
                            "/spraynet/tcam", "/spraynet/pfc_buffer"}) {
        out.push_back(control::TelemetryCommands::call(c, ""));
      }
      out.push_back(control::TelemetryCommands::call("/spraynet/port", "1"));
      out.push_back(control::TelemetryCommands::call("/spraynet/pfc", "1"));
      out.push_back(control::TelemetryCommands::call("/spraynet/group", "g"));
      return out;
    });
    const bool answered = replies.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    held.unlock();  // a reader that did wait for it finishes now
    const std::vector<nlohmann::json> out = replies.get();
    control::TelemetryCommands::clear();
    REQUIRE(answered);
    for (const auto& j : out) {
      INFO(j.dump());
      CHECK_FALSE(j.contains("error"));
    }
    CHECK(out[2].value("balanced", false));
    CHECK(out[5].value("name", "") == "nlk_out0");
    CHECK(out[7].value("name", "") == "g");
  }
  CHECK(pool.whole());
}

TEST_CASE("on stop, an lcore drains its ports only once every lcore has stopped receiving") {
  // Lcore b owns the outputs and stops first; lcore a's last burst, forwarded onto b's ports
  // after that, must still leave by b's drain (not stay queued until the node frees it).
  test::TestPool pool(4095);
  {
    RingSwitch sw("stb", 2, pool.get(), 0);
    auto& node = *sw.node;
    sw.shared.lcores = 2;
    switch_emu::SwitchLcore a(sw.shared, {0}), b(sw.shared, {1, 2});
    runtime::TscClock clock;
    std::thread b_stops([&] {
      runtime::TxSink tx;  // routes nowhere: frees what it is given (the node counts it sent)
      b.on_stop(clock.now_ns(), tx);
    });
    // b is waiting for a (bounded polling: b has arrived once the count says so).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sw.shared.stopped_lcores.load() < 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    REQUIRE(sw.shared.stopped_lcores.load() == 1);
    std::vector<uint8_t> payload(64, 0x33);
    std::vector<rte_mbuf*> burst;
    for (uint16_t i = 0; i < 32; ++i) {
      FrameSpec f;
      f.ip.src = 0x0A000000 | i;
      f.ip.dst = 0x0B000001;
      f.udp.src_port = static_cast<uint16_t>(2000 + i);
      f.udp.dst_port = 7000;
      f.payload = payload;
      burst.push_back(build_udp_mbuf(pool.get(), f));
      REQUIRE(burst.back() != nullptr);
    }
    runtime::TxSink tx_a;
    a.on_rx(sw.shared.dpdk_port[0], 0, burst.data(), 32, clock.now_ns(), tx_a);
    a.on_stop(clock.now_ns(), tx_a);
    b_stops.join();
    CHECK(node.port_counters(1).tx_packets + node.port_counters(2).tx_packets == 32);
    CHECK(node.idle());
    CHECK(node.accounting().egress.dequeued == 32);
  }
  CHECK(pool.whole());
}

TEST_CASE("wire ports on net_ring: a full tx ring holds frames in the port, none lost or doubled") {
  // Outputs whose tx rings hold 255 frames, read by a consumer that starts only once both are
  // full: the PMD refuses most bursts for a while, and the frames wait in the egress port (its
  // classes, and what the PMD refused first in line) instead of being dropped.
  test::TestPool pool(16383);
  constexpr int kPackets = 6000;
  {
    RingSwitch sw("wir", 2, pool.get(), 20'000'000, "ecmp", "", "", 256);
    auto& rings = sw.rings;
    auto& ports = sw.ports;
    auto& node = *sw.node;
    REQUIRE(node.egress(1).wire());
    REQUIRE(node.egress(2).wire());

    std::vector<uint8_t> payload(100, 0x5A);
    for (int i = 0; i < kPackets; ++i) {
      REQUIRE(rte_ring_enqueue(rings[0].rx, numbered_udp(pool.get(), i, 500, 0, payload)) == 0);
    }
    std::vector<int> seen(kPackets, 0);
    uint64_t total = 0;
    std::atomic<bool> both_full{false};
    std::atomic<bool> done{false};
    std::thread consumer([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!(rte_ring_full(rings[1].tx) && rte_ring_full(rings[2].tx)) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      both_full = rte_ring_full(rings[1].tx) && rte_ring_full(rings[2].tx);
      while (!done.load()) {
        uint64_t n = 0;
        const std::vector<int> s = take_outputs(rings, kPackets, n);
        for (int i = 0; i < kPackets; ++i) seen[i] += s[i];
        total += n;
        if (n == 0) std::this_thread::yield();
      }
    });

    std::vector<runtime::RxQueue> rx;
    std::vector<runtime::TxQueue> tx;
    for (auto& p : ports) {
      rx.push_back({&p, 0});
      tx.push_back({&p, 0});
    }
    switch_emu::SwitchLcore lcore(sw.shared, {0, 1, 2});
    runtime::TscClock clock;
    runtime::PollLoop loop(rx, tx, lcore, clock);
    loop.run(sw.stop);
    done = true;
    consumer.join();
    uint64_t rest = 0;
    const std::vector<int> s = take_outputs(rings, kPackets, rest);
    for (int i = 0; i < kPackets; ++i) seen[i] += s[i];
    total += rest;

    INFO("tx dropped " << loop.counters().tx_dropped << ", drops " << node.total_drops());
    CHECK(both_full.load());
    CHECK(total == kPackets);
    CHECK(std::count(seen.begin(), seen.end(), 1) == kPackets);
    CHECK(node.total_drops() == 0);
    CHECK(loop.counters().tx_dropped == 0);
    CHECK(node.port_counters(1).tx_packets + node.port_counters(2).tx_packets == kPackets);
    const switch_emu::SwitchAccounting a = node.accounting();
    CHECK(a.balanced());
    CHECK(a.egress.dequeued == kPackets);
    CHECK(node.idle());
  }
  CHECK(pool.whole());
}
