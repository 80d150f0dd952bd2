// TablePublisher: bucket tables published with RCU while lcores forward.
#include "control/table_publisher.h"

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "dataplane/forwarding/path_selector.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ring_switch.h"

using namespace spraynet;
using control::TablePublisher;

TEST_CASE("without a domain the publisher swaps tables and frees the old ones at once") {
  PathGroupConfig cfg;
  cfg.mode = LbMode::kWeighted;
  cfg.member_ports = {1, 2, 3};
  PathSelector a(cfg), b(cfg);
  std::vector<PathSelector*> groups{&a, &b};
  TablePublisher pub;
  const std::vector<std::vector<uint32_t>> w{{32, 12, 0}, {0, 0, 0}};
  pub.publish(groups, w);
  CHECK(a.bucket_table().buckets_of(0) > a.bucket_table().buckets_of(1));
  CHECK(a.bucket_table().buckets_of(2) == 0);
  CHECK(b.bucket_table().empty());
  CHECK(pub.counters().publications == 1);
  CHECK(pub.counters().tables == 2);
  CHECK(pub.counters().tables_freed == 2);
  CHECK(pub.counters().grace_periods == 0);

  // A bad vector publishes nothing, not even the groups before it.
  const BucketTable* before = &a.bucket_table();
  const std::vector<std::vector<uint32_t>> bad{{1, 1, 1}, {1, 1}};
  CHECK_THROWS_AS(pub.publish(groups, bad), std::invalid_argument);
  CHECK(&a.bucket_table() == before);
  const std::vector<std::vector<uint32_t>> too_few{{1, 1, 1}};
  CHECK_THROWS_AS(pub.publish(groups, too_few), std::invalid_argument);
  CHECK(pub.counters().publications == 1);
}

TEST_CASE("with a domain: one grace period per publication, none when there is no group") {
  runtime::RcuDomain domain(1);  // no reader online: synchronize() returns at once, counted
  PathGroupConfig cfg;
  cfg.mode = LbMode::kWeighted;
  cfg.member_ports = {1, 2};
  PathSelector a(cfg);
  TablePublisher pub(&domain);
  std::vector<PathSelector*> groups{&a};
  pub.publish(groups, std::vector<std::vector<uint32_t>>{{32, 12}});
  CHECK(pub.counters().grace_periods == 1);
  CHECK(domain.grace_periods() == 1);
  // A node without groups (nic_emu's control loop): nothing retired, nothing to wait for; the
  // NIC's on_publish waits out the one grace period its spray weights need.
  pub.publish({}, {});
  CHECK(pub.counters().publications == 2);
  CHECK(pub.counters().grace_periods == 1);
  CHECK(domain.grace_periods() == 1);
}

TEST_CASE("publish_table refuses a table for another member count") {
  PathGroupConfig cfg;
  cfg.member_ports = {1, 2, 3};
  PathSelector s(cfg);
  CHECK_THROWS_AS(s.publish_table(nullptr), std::invalid_argument);
  const std::vector<uint32_t> two{1, 1};
  CHECK_THROWS_AS(s.publish_table(std::make_unique<const BucketTable>(BucketTable::build(two))),
                  std::invalid_argument);
  const std::vector<uint32_t> three{0, 1, 1};
  auto old = s.publish_table(s.make_table(three));
  REQUIRE(old != nullptr);
  CHECK(old->buckets_of(0) > 0);  // the previous (equal) table comes back to the caller
  CHECK(s.bucket_table().buckets_of(0) == 0);
}

// The stress test: two lcores forward on net_ring (one polls the input, the other the
// four outputs) while a control thread publishes 10,000 bucket tables through RCU. Member 3 has
// weight 0 in every table, so a packet on output 3 would be misrouted; every packet sent must
// come out exactly once. Run under ASan (the sanitizer build of the unit tests), a table freed
// before every lcore had quiesced is a reported heap-use-after-free.
TEST_CASE("two lcores forward on net_ring while the control thread publishes 10,000 tables") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the two-lcore stress test cannot run here");
    return;
  }
  constexpr int kTables = 10'000;
  constexpr int kPerTable = 16;  // packets offered between publications
  test::TestPool pool(16383);
  {
    test::RingSwitch sw("rcu", 4, pool.get(), 0, "weighted");
    runtime::RcuDomain domain(2);
    switch_emu::SwitchLcore a(sw.shared, {0}), b(sw.shared, {1, 2, 3, 4});
    runtime::TscClock clock;
    runtime::PollLoopConfig ca, cb;
    ca.rcu = cb.rcu = &domain;
    ca.rcu_reader_id = 0;
    cb.rcu_reader_id = 1;
    auto& ports = sw.ports;
    runtime::PollLoop loop_a({{&ports[0], 0}}, {{&ports[0], 0}}, a, clock, ca);
    std::vector<runtime::RxQueue> rx_b;
    std::vector<runtime::TxQueue> tx_b;
    for (int i = 1; i <= 4; ++i) {
      rx_b.push_back({&ports[i], 0});
      tx_b.push_back({&ports[i], 0});
    }
    runtime::PollLoop loop_b(rx_b, tx_b, b, clock, cb);

    TablePublisher publisher(&domain);
    std::vector<PathSelector*> groups{&sw.node->group(0)};
    uint64_t sent = 0, received = 0, misrouted = 0, unparsable = 0;
    std::array<uint64_t, 5> per_port{};
    bool stalled = false;
    std::vector<uint8_t> payload(64, 0x5A);

    auto drain_outputs = [&] {
      PacketParser parser;
      for (int i = 1; i <= 4; ++i) {
        rte_mbuf* out[64];
        const unsigned n =
            rte_ring_dequeue_burst(sw.rings[i].tx, reinterpret_cast<void**>(out), 64, nullptr);
        for (unsigned k = 0; k < n; ++k) {
          ParsedPacket p;
          if (parser.parse(out[k], p) != ParseStatus::kOk) ++unparsable;
          rte_pktmbuf_free(out[k]);
        }
        received += n;
        per_port[i] += n;
        if (i == 4) misrouted += n;
      }
    };

    // The control thread: publish, offer a few packets, collect what came out; at the end wait
    // for every packet (a bound on no progress only turns a lost packet into a failure, not a
    // hang), then stop the lcores.
    std::thread control([&] {
      std::mt19937 rng(2024);
      for (int t = 0; t < kTables; ++t) {
        auto r = [&] { return static_cast<uint32_t>(rng() % 33); };
        std::vector<std::vector<uint32_t>> w{{r(), r(), r(), 0}};
        if (w[0][0] + w[0][1] + w[0][2] == 0) w[0][t % 3] = 1;
        publisher.publish(groups, w);
        for (int k = 0; k < kPerTable; ++k) {
          FrameSpec f;
          f.ip.src = 0x0A000000 | static_cast<uint32_t>(rng() % 4096);
          f.ip.dst = 0x0B000001;
          f.udp.src_port = static_cast<uint16_t>(rng());
          f.udp.dst_port = 4000;
          f.payload = payload;
          rte_mbuf* m = build_udp_mbuf(pool.get(), f);
          if (m == nullptr) break;  // pool momentarily short: offer fewer this round
          if (rte_ring_enqueue(sw.rings[0].rx, m) != 0) {
            rte_pktmbuf_free(m);
            break;
          }
          ++sent;
        }
        drain_outputs();
      }
      auto last_progress = std::chrono::steady_clock::now();
      uint64_t last_received = received;
      while (received < sent) {
        drain_outputs();
        if (received != last_received) {
          last_received = received;
          last_progress = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(20)) {
          stalled = true;
          break;
        }
        std::this_thread::yield();
      }
      sw.stop.request();
    });
    runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
      (index == 0 ? loop_a : loop_b).run(sw.stop);
    });
    control.join();
    drain_outputs();

    INFO("sent " << sent << " received " << received << " per port " << per_port[1] << "/"
                 << per_port[2] << "/" << per_port[3] << "/" << per_port[4]);
    CHECK_FALSE(stalled);
    CHECK(publisher.counters().publications == kTables);
    CHECK(publisher.counters().tables_freed == kTables);
    CHECK(domain.grace_periods() == kTables);
    CHECK(sent > kTables * kPerTable / 2);
    CHECK(received == sent);
    CHECK(misrouted == 0);
    CHECK(unparsable == 0);
    CHECK(sw.node->total_drops() == 0);
    CHECK(sw.node->group(0).counters().empty_table == 0);
    // Every member with weight got traffic.
    CHECK(per_port[1] > 0);
    CHECK(per_port[2] > 0);
    CHECK(per_port[3] > 0);
  }
  CHECK(pool.whole());
}
