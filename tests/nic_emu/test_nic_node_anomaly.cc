// PPCID anomaly detection in the NIC node: a sending NIC sprays 8 QPs over 4 paths of different
// delays (reordering), through a link flap and a reweight, to a receiving NIC whose detector is
// on; then forged RoCEv2 packets (built with the PacketBuilder) go into sprayed QPs on an uplink.
// Virtual time throughout.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "control/nic_config.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/ppcid.h"
#include "nic_emu/nic_node.h"
#include "nic_emu/nic_report.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using nic_emu::NicNode;

namespace {

// Both NICs: a host port and 4 uplinks with the path ids 1..4 (both ends of a cable carry the
// same id); the sender's links take 2, 4, 6, 8 us, so consecutive packets overtake one another.
std::string nic_yaml(const std::string& name, const std::string& extra) {
  std::string y = "nic:\n  name: " + name + "\n  host: {name: host, device: x}\n  uplinks:\n";
  for (int i = 0; i < 4; ++i) {
    y += "    - {name: up" + std::to_string(i) + ", device: x, path_id: " + std::to_string(i + 1) +
         ", link: {rate_gbps: 100, delay_ns: " + std::to_string(2000 * (i + 1)) + "}}\n";
  }
  return y + "  spray: {mode: weighted}\n" + extra;
}

control::NicConfig load(const std::string& yaml) {
  return control::parse_nic_config(control::ConfigNode::load_string(yaml, "nic.yaml"));
}

constexpr uint32_t kFirstQp = 0x100;
constexpr int kQps = 8;

rte_mbuf* roce(const test::TestPool& pool, uint32_t qp, uint32_t psn, uint16_t udp_checksum = 0) {
  static const std::vector<uint8_t> payload(128, 0x42);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.udp.src_port = static_cast<uint16_t>(0xC000 | qp);
  f.udp.checksum = udp_checksum;
  f.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = qp;
  r.psn = psn;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
  REQUIRE(m != nullptr);
  return m;
}

// A sends from its host, the uplinks carry what A's egress releases to B's same uplink, B's
// host port output is freed.
struct Pair {
  const test::TestPool& pool;
  NicNode a;
  NicNode b;
  uint64_t now = 1'000'000;
  std::vector<uint32_t> psn = std::vector<uint32_t>(kQps, 0);
  std::vector<std::unique_ptr<const SprayWeights>> old_weights;  // no lcore: kept, not freed
  uint64_t sent = 0;

  Pair(const test::TestPool& p, const std::string& b_extra)
      : pool(p), a(load(nic_yaml("a", "")), p.get()), b(load(nic_yaml("b", b_extra)), p.get()) {}

  void carry(uint64_t until) {
    rte_mbuf* buf[64];
    for (; now <= until; now += 500) {
      for (uint16_t u = 0; u < 4; ++u) {
        uint16_t n;
        while ((n = a.transmit(u, now, buf, 64)) > 0) b.receive(u, buf, n, now);
      }
      b.poll(now);
      uint16_t n;
      while ((n = b.transmit(b.host_port(), now, buf, 64)) > 0) {
        for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(buf[i]);
      }
    }
  }

  // `rounds` packets of every QP, one round (8 packets) per microsecond.
  void send(int rounds) {
    for (int r = 0; r < rounds; ++r) {
      rte_mbuf* burst[kQps];
      for (int q = 0; q < kQps; ++q) burst[q] = roce(pool, kFirstQp + q, psn[q]++);
      a.receive(a.host_port(), burst, kQps, now);
      sent += kQps;
      carry(now + 1000);
    }
  }

  void reweight(std::vector<uint32_t> w) {
    old_weights.push_back(a.spray().publish_weights(
        std::make_unique<const SprayWeights>(SprayWeights{std::move(w), now})));
  }

  void finish() {
    carry(now + 1'000'000);
    b.flush(now);
    carry(now + 1'000'000);
    a.free_all();
    b.free_all();
  }
};

}  // namespace

TEST_CASE("NIC: clean sprayed QPs raise no flag; forged packets flag their QP within 3") {
  test::TestPool pool(16383);
  {
    Pair p(pool, "  anomaly: {enabled: true}\n");
    REQUIRE(p.b.anomaly() != nullptr);
    REQUIRE(p.a.anomaly() == nullptr);  // off by default
    p.send(300);
    // A link flap at the sender: uplink 2 goes down (what it held is lost) and comes back.
    p.a.set_link_up(2, false, p.now);
    p.send(200);
    p.a.set_link_up(2, true, p.now);
    p.send(200);
    // Reweights: the path mix changes and the PPCID timestamp restarts at each.
    p.reweight({8, 1, 4, 0});
    p.send(300);
    p.reweight({1, 1, 1, 5});
    p.send(300);
    p.carry(p.now + 100'000);
    const PpcidAnomalyDetector& d = *p.b.anomaly();
    CHECK(p.b.ppcid_counters().ok > 8000);
    CHECK(d.counters().packets == p.b.ppcid_counters().ok);
    CHECK(d.counters().qps_flagged == 0);
    CHECK(d.flagged_count() == 0);
    CHECK(d.qps_tracked() == kQps);
    CHECK(p.b.reorder()->counters().released_after_hold > 0);  // it was reordered

    // Forged: a guessed PPCID (check nibble wrong) into sprayed QP 0x103 on uplink 0.
    const uint32_t victim = kFirstQp + 3;
    auto forge = [&](uint32_t qp, uint16_t checksum_or_0) {
      const uint32_t psn = p.psn[qp - kFirstQp] + 50;
      uint16_t v = checksum_or_0;
      if (v != 0)
        v = static_cast<uint16_t>((v & 0xFFF0) | ((ppcid_check_nibble(qp, psn) + 3) & 0xF));
      rte_mbuf* m = roce(pool, qp, psn, v);
      p.b.receive(0, &m, 1, p.now);
      p.now += 100;
    };
    forge(victim, 0x7A30);
    p.send(20);  // clean packets between the forged ones
    forge(victim, 0x1150);
    CHECK(d.counters().qps_flagged == 0);
    forge(victim, 0xE190);
    REQUIRE(d.counters().qps_flagged == 1);
    CHECK(d.flagged(0).dest_qp == victim);
    CHECK(d.flagged(0).reason == AnomalyReason::bad_check);
    CHECK(d.flagged(0).uplink == 0);
    CHECK(d.flagged(0).evidence == 3);
    REQUIRE(p.b.anomaly_flags().size() == 1);
    CHECK(p.b.anomaly_flags()[0].dest_qp == victim);
    CHECK(p.b.anomaly_flags()[0].dst_ip == 0x0A000002);

    // Forged without any PPCID (a plain RoCE injector) into another sprayed QP.
    const uint32_t second = kFirstQp + 6;
    forge(second, 0);
    forge(second, 0);
    CHECK(d.counters().qps_flagged == 1);
    forge(second, 0);
    REQUIRE(d.counters().qps_flagged == 2);
    CHECK(d.flagged(1).dest_qp == second);
    CHECK(d.flagged(1).reason == AnomalyReason::ppcid_missing);
    CHECK(d.counters().anomalous_bad_check == 3);
    CHECK(d.counters().anomalous_ppcid_missing == 3);

    // The clean QPs stay clean, before and after.
    p.send(50);
    for (int q = 0; q < kQps; ++q) {
      const AnomalyQp* s = d.find(kFirstQp + q);
      REQUIRE(s != nullptr);
      CHECK(s->flagged == (kFirstQp + q == victim || kFirstQp + q == second));
      if (!s->flagged) CHECK(s->evidence == 0);
    }
    const auto j = nic_emu::anomaly_json(p.b);
    CHECK(j["qps_flagged"] == 2);
    CHECK(j["flagged"][0]["dest_qp"] == victim);
    CHECK(j["flagged"][0]["reason"] == "bad_check");
    CHECK(j["flagged"][0]["uplink"] == "up0");
    CHECK(j["flagged"][0]["dst_ip"] == "10.0.0.2");
    CHECK(j["flagged"][1]["reason"] == "ppcid_missing");
    CHECK(nic_emu::report_json(p.b)["anomaly"]["enabled"] == true);
    CHECK(nic_emu::report_json(p.a)["anomaly"] == nlohmann::json{{"enabled", false}});
    p.finish();
  }
  CHECK(pool.whole());
}

TEST_CASE("NIC anomaly config: every key validated, with the file and key in the error") {
  auto error_of = [](const std::string& extra) {
    try {
      load(nic_yaml("b", extra));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of("  anomaly: {enabled: true, threshold: 4}\n").find("nic.anomaly.threshold") !=
        std::string::npos);
  CHECK(error_of("  anomaly: {qp_table_size: 0}\n").find("nic.anomaly.qp_table_size") !=
        std::string::npos);
  CHECK(error_of("  anomaly: {timestamp: 1}\n").find("timestamp") != std::string::npos);
  CHECK(error_of("  anomaly: {quarantine: {enabled: true, switch_socket: /s, honeypot_port: h}}\n")
            .find("nic.anomaly.enabled") != std::string::npos);
  CHECK(error_of("  anomaly: {enabled: true, quarantine: {enabled: true, honeypot_port: h}}\n")
            .find("switch_socket") != std::string::npos);
  CHECK(error_of("  anomaly: {enabled: true, quarantine: {enabled: true, switch_socket: /s}}\n")
            .find("honeypot_port") != std::string::npos);
  CHECK(error_of("  anomaly: {enabled: true, quarantine: {keep_percent: 101}}\n")
            .find("keep_percent") != std::string::npos);
  const auto c = load(nic_yaml(
      "b",
      "  anomaly: {enabled: true, qp_table_size: 16, threshold: 2, quarantine: {enabled: true, "
      "switch_socket: /run/x.v2, honeypot_port: hp, keep_percent: 7, rule_id_base: 50}}\n"));
  CHECK(c.anomaly.enabled);
  CHECK(c.anomaly.qp_table_size == 16);
  CHECK(c.anomaly.threshold == 2);
  CHECK(c.anomaly.quarantine.keep_percent == 7);
  CHECK(c.anomaly.quarantine.rule_id_base == 50);
  CHECK(control::anomaly_config(c).uplink_path_ids == std::vector<uint8_t>{1, 2, 3, 4});
  CHECK(control::nic_config_help().find("qp_table_size") != std::string::npos);
  CHECK(control::nic_config_help().find("honeypot_port") != std::string::npos);
}
