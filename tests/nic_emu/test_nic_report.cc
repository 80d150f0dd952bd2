// The NIC's counter lists (SPRAYNET_NIC_DROP_CAUSES, SPRAYNET_NIC_COUNTERS,
// SPRAYNET_PPCID_COUNTERS, SPRAYNET_NIC_PORT_COUNTERS) against the JSON the report and telemetry
// make from them: every counter under its name, the total the sum of every cause, the sets
// summable; and what a delivery that fails counts.
#include "nic_emu/nic_report.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/nic_config.h"
#include "dataplane/wire/packet_builder.h"
#include "nic_emu/nic_telemetry.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using nic_emu::NicCounters;
using nic_emu::NicDropCounters;
using nic_emu::NicNode;
using nic_emu::PpcidCounters;
using nlohmann::json;

namespace {

control::NicConfig load(const std::string& yaml) {
  return control::parse_nic_config(control::ConfigNode::load_string(yaml, "nic.yaml"));
}

// No host port: the RC traffic engine (defaults) plays the host.
const char* kRcYaml = R"(
nic:
  name: r
  uplinks:
    - {name: up0, device: x, path_id: 1}
    - {name: up1, device: x, path_id: 2}
)";

template <class Counters>
uint64_t number_each(Counters& c) {
  uint64_t next = 0, sum = 0;
  c.for_each([&](std::string_view, uint64_t& v) {
    v = ++next;
    sum += v;
  });
  return sum;
}

// Every counter of `c` is in `j` under its name with its value; returns how many there were.
template <class Counters>
size_t check_all_in(const Counters& c, const json& j) {
  size_t seen = 0;
  c.for_each([&](std::string_view name, uint64_t v) {
    INFO(name);
    REQUIRE(j.contains(std::string(name)));
    CHECK(j.at(std::string(name)) == v);
    ++seen;
  });
  return seen;
}

}  // namespace

TEST_CASE("NIC drops: every cause in the JSON under its name, total the sum of all") {
  NicDropCounters d;
  const uint64_t sum = number_each(d);
  const json j = nic_emu::drop_counters_json(d);
  const size_t seen = check_all_in(d, j);
  CHECK(seen == NicDropCounters::kCounters);
  CHECK(j.size() == seen + 1);  // and "total"
  CHECK(d.total() == sum);
  CHECK(j.at("total") == sum);
  // The names the report and telemetry have always had, and no_host, which was missing.
  for (const char* key :
       {"parse_truncated_ipv4", "parse_not_ipv4", "no_uplink", "egress_refused", "bad_port",
        "mac_control_not_pfc", "pfc_malformed", "host_checksum_filter", "no_host"}) {
    CHECK(j.contains(key));
  }
  CHECK_FALSE(j.contains("parse_ok"));

  NicDropCounters twice = d;
  twice += d;
  CHECK(twice.total() == 2 * sum);
  CHECK(twice.no_host == 2 * d.no_host);
}

TEST_CASE("NIC counters, PPCID counters and port counters: every one in the report JSON") {
  test::TestPool pool(255);
  {
    NicNode nic(load(kRcYaml), pool.get());
    const json report = nic_emu::report_json(nic);
    CHECK(check_all_in(nic.counters(), report.at("counters")) == NicCounters::kCounters);
    CHECK(report.at("counters").size() == NicCounters::kCounters);
    CHECK(check_all_in(nic.ppcid_counters(), report.at("ppcid")) == PpcidCounters::kCounters);
    for (uint16_t p = 0; p < nic.port_count(); ++p) {
      CHECK(check_all_in(nic.port_counters(p), report.at("ports")[p]) == 4);
    }
    CHECK(check_all_in(nic.drops(), report.at("drops")) == NicDropCounters::kCounters);
    // Kept where they always were.
    CHECK(report.contains("delivered"));
    CHECK(report.at("spray").contains("sprayed"));
    CHECK(report.at("ppcid").contains("checksum_restored"));

    NicCounters c;
    number_each(c);
    NicCounters c2 = c;
    c2 += c;
    const json j = nic_emu::nic_counters_json(c2);
    c.for_each([&](std::string_view name, uint64_t v) {
      INFO(name);
      CHECK(j.at(std::string(name)) == 2 * v);
    });
  }
  CHECK(pool.whole());
}

TEST_CASE("a packet the RC engine cannot take is a parse drop, not also delivered") {
  test::TestPool pool(255);
  {
    NicNode nic(load(kRcYaml), pool.get());
    // An ARP frame from the fabric: RX passes non-IPv4 on towards the host, and the RC engine,
    // which plays the host, takes only IPv4.
    FrameSpec fs;
    fs.ip.src = 0x0A000002;
    fs.ip.dst = 0x0A000001;
    rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
    REQUIRE(m != nullptr);
    rte_pktmbuf_mtod(m, uint8_t*)[12] = 0x08;
    rte_pktmbuf_mtod(m, uint8_t*)[13] = 0x06;
    nic.receive(0, &m, 1, 0);
    CHECK(nic.drops().parse[static_cast<size_t>(ParseStatus::kNotIpv4)] == 1);
    CHECK(nic.counters().delivered == 0);
    CHECK(nic.total_drops() == 1);
    // Every packet in is delivered or dropped, once.
    CHECK(nic.counters().delivered + nic.total_drops() == nic.port_counters(0).rx_packets);
    nic.free_all();
  }
  CHECK(pool.whole());
}

TEST_CASE("/spraynet/spray waits for a publication of the spray weights under the control lock") {
  test::TestPool pool(255);
  {
    NicNode nic(load(R"(
nic:
  name: h
  host: {name: host, device: x}
  uplinks:
    - {name: up0, device: x, path_id: 1}
    - {name: up1, device: x, path_id: 2}
  spray: {mode: weighted}
)"),
                pool.get());
    nic_emu::NicShared s;
    s.node = &nic;
    json seen;
    std::atomic<bool> started{false}, done{false};
    std::thread telemetry;
    {
      // The control thread, mid-publication: it holds the control lock while the old weights
      // are replaced and freed (nic_emu's on_publish, after its grace period).
      std::lock_guard<std::mutex> control(s.control_lock);
      telemetry = std::thread([&] {
        started = true;
        seen = nic_emu::spray_telemetry(s);
        done = true;
      });
      while (!started) std::this_thread::yield();
      // Give the telemetry thread every chance to read now (no clock: a bounded number of
      // yields); it must not get past the control lock.
      for (int i = 0; i < 20'000 && !done; ++i) std::this_thread::yield();
      CHECK_FALSE(done);
      auto next = std::make_unique<SprayWeights>();
      next->weights = {7, 3};
      next->updated_ns = 5;
      std::unique_ptr<const SprayWeights> old = nic.spray().publish_weights(std::move(next));
      old.reset();  // freed: a reader still holding it would read freed memory
    }
    telemetry.join();
    CHECK(seen["weights"] == json::array({7, 3}));
  }
  CHECK(pool.whole());
}
