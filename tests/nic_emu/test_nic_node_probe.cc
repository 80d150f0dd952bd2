// The NIC node's latency probe in virtual time: one uplink looped back onto itself (what leaves
// its emulated link at t arrives at t), the RC engine's WRITEs as the load. With the clock in
// the test's hands the latencies are exact: a lone probe takes the link's propagation delay plus
// its own serialisation, a probe behind load takes longer, and the same run twice gives the same
// report. Probes are consumed (the RC engine never sees one), and nothing is lost on a loopback.
#include <catch2/catch.hpp>

#include <string>

#include "control/nic_config.h"
#include "dataplane/wire/packet_parser.h"
#include "nic_emu/nic_node.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using nic_emu::NicNode;

namespace {

constexpr uint64_t kDelayNs = 2000;
constexpr double kGbps = 10;
constexpr uint64_t kProbeEveryNs = 10'000;  // 100,000 probes per second

control::NicConfig config(uint64_t messages) {
  const std::string yaml =
      "nic:\n  uplinks:\n    - {name: up0, device: x, link: {rate_gbps: " + std::to_string(kGbps) +
      ", delay_ns: " + std::to_string(kDelayNs) +
      "}}\n  spray: {mode: flow}\n"
      "  rc_engine: {qps: 2, role: both, messages: " +
      std::to_string(messages) +
      ", message_bytes: 16384}\n"
      "  probe: {rate_pps: 100000, change_threshold_us: 0.5}\n";
  return control::parse_nic_config(control::ConfigNode::load_string(yaml, "nic.yaml"));
}

struct Run {
  LatencyReport report;
  std::string json;
  uint64_t rc_messages = 0;
  uint64_t rc_retransmitted = 0;
  uint64_t drops = 0;
  uint64_t probes_sent = 0;
  uint64_t probes_received = 0;
  uint64_t sent_after_stop = 0;
};

// Runs the node for `probe_ns` of virtual time with probes on, then stops them and runs until
// nothing is queued or in flight.
Run run(rte_mempool* pool, uint64_t messages, uint64_t probe_ns) {
  Run r;
  NicNode nic(config(messages), pool);
  rte_mbuf* buf[64];
  uint64_t now = 0;
  bool stopped = false;
  uint64_t sent_at_stop = 0;
  for (unsigned step = 0; step < 10'000'000; ++step) {
    if (!stopped && now >= probe_ns) {
      nic.stop_probes();
      stopped = true;
      sent_at_stop = nic.counters().probes_sent;
    }
    nic.poll(now);
    while (uint16_t n = nic.transmit(0, now, buf, 64)) nic.receive(0, buf, n, now);
    if (stopped && nic.idle() && (messages == 0 || nic.rc_engine()->done())) break;
    const uint64_t next = nic.next_event_ns(now);
    if (next == EgressPort::kNever) break;
    now = std::max(next, now + 1);
  }
  r.report = nic.probe()->report();
  r.json = r.report.to_json();
  r.rc_messages = nic.rc_engine()->requester_totals().messages_completed;
  r.rc_retransmitted = nic.rc_engine()->requester_totals().packets_retransmitted;
  r.drops = nic.total_drops();
  r.probes_sent = nic.counters().probes_sent;
  r.probes_received = nic.counters().probes_received;
  r.sent_after_stop = r.probes_sent - sent_at_stop;
  nic.free_all();
  return r;
}

// A probe frame's time on a kGbps wire: its bytes, FCS, preamble and gap.
uint64_t serialisation_ns(uint64_t frame_bytes) {
  return static_cast<uint64_t>((frame_bytes + 24) * 8 / kGbps);
}

}  // namespace

TEST_CASE("NIC probe alone on a looped-back uplink: every latency is delay + serialisation") {
  test::TestPool pool(4095);
  {
    const Run r = run(pool.get(), 1, 1'000'000);  // one WRITE: the probes are alone after it
    CHECK(r.report.sent == r.probes_sent);
    CHECK(r.report.count == r.report.sent);
    CHECK(r.report.lost == 0);
    CHECK(r.report.out_of_order == 0);
    CHECK(r.report.duplicates == 0);
    CHECK(r.report.malformed == 0);
    CHECK(r.probes_received == r.report.count);
    CHECK(r.sent_after_stop == 0);
    // 1 ms at one probe per 10 us, the first at 0.
    CHECK(r.report.sent == 1'000'000 / kProbeEveryNs);
    const uint64_t lone = kDelayNs + serialisation_ns(LatencyProbeConfig{}.min_frame_length());
    INFO(r.json);
    CHECK(r.report.min_ns >= kDelayNs);
    CHECK(r.report.min_ns <= lone + 1);
    CHECK(r.report.p50_ns == r.report.min_ns);  // most probes find the link idle
    CHECK(r.rc_messages == 2);
    CHECK(r.drops == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("NIC probe behind RoCE load: queued behind it, ordered percentiles, load untouched") {
  test::TestPool pool(8191);
  {
    const Run r = run(pool.get(), 40, 2'000'000);
    INFO(r.json);
    CHECK(r.report.count == r.report.sent);
    CHECK(r.report.lost == 0);
    CHECK(r.report.sent == 2'000'000 / kProbeEveryNs);
    CHECK(r.report.min_ns <= r.report.p50_ns);
    CHECK(r.report.p50_ns <= r.report.p99_ns);
    CHECK(r.report.p99_ns <= r.report.p999_ns);
    CHECK(r.report.p999_ns <= r.report.max_ns);
    // Behind 1 KiB WRITEs on a 10 Gbit/s link (0.9 us each) a probe waits for one of them.
    CHECK(r.report.max_ns >= kDelayNs + serialisation_ns(1024 + 78));
    CHECK(r.report.changes_over_threshold > 0);
    CHECK(r.report.jitter_ns > 0);
    // The RC engine completed everything and never saw a probe (it would count a parse drop).
    CHECK(r.rc_messages == 80);
    CHECK(r.rc_retransmitted == 0);
    CHECK(r.drops == 0);
    // Virtual time: the same run gives the same report, to the nanosecond.
    CHECK(run(pool.get(), 40, 2'000'000).json == r.json);
  }
  CHECK(pool.whole());
}
