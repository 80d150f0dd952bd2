// The latency probe through the switch on real DPDK ports: net_ring ethdevs, a PollLoop running
// SwitchLcore on TSC time. A handler around SwitchLcore is the traffic generator and the
// receiver: once per loop iteration (on_poll, with the loop's TSC now_ns) it tops up the load on
// the input port, sends a probe when the probe says one is due, and takes everything the switch
// put on its output rings, handing each packet to the probe with the same now_ns. Nothing waits
// on the wall clock; nothing asserts how fast it ran.
#include "dataplane/probe/latency_probe.h"

#include <rte_mbuf.h>
#include <rte_ring.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "switch_emu/switch_lcore.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ring_switch.h"

using namespace spraynet;
using spraynet::test::RingSwitch;

namespace {

constexpr uint64_t kProbes = 2000;
constexpr uint64_t kLoadInFlight = 2048;  // load packets between the input and output rings

// RFC 3550 6.4.1 over (S, R) pairs in arrival order, written out apart from LatencyProbe.
double rfc3550_jitter(const std::vector<std::pair<uint64_t, uint64_t>>& arrivals) {
  double j = 0;
  for (size_t i = 1; i < arrivals.size(); ++i) {
    const double prev = static_cast<double>(static_cast<int64_t>(arrivals[i - 1].second) -
                                            static_cast<int64_t>(arrivals[i - 1].first));
    const double cur = static_cast<double>(static_cast<int64_t>(arrivals[i].second) -
                                           static_cast<int64_t>(arrivals[i].first));
    const double d = cur - prev;
    j = j + ((d < 0 ? -d : d) - j) / 16;
  }
  return j;
}

class ProbeDriver : public runtime::BurstHandler {
 public:
  ProbeDriver(RingSwitch& sw, rte_mempool* pool, LatencyProbe& probe)
      : sw_(sw), pool_(pool), probe_(probe), inner_(sw.shared, {0, 1, 2}) {
    payload_.assign(200, 0x5A);
  }

  void on_rx(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override {
    inner_.on_rx(port_id, queue, pkts, n, now_ns, tx);
  }

  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override {
    inner_.on_poll(now_ns, tx);
    take_output(now_ns);
    if (probe_.sent() < kProbes) {
      // Load: 500 flows, topped up to kLoadInFlight packets in flight.
      for (int i = 0; i < 64 && load_sent - load_received < kLoadInFlight; ++i) {
        FrameSpec f;
        f.ip.src = 0x0A000000 | static_cast<uint32_t>(rng_() % 500);
        f.ip.dst = 0x0B000001;
        f.udp.src_port = static_cast<uint16_t>(f.ip.src);
        f.udp.dst_port = 7000;
        f.payload = payload_;
        rte_mbuf* m = build_udp_mbuf(pool_, f);
        if (m == nullptr) break;
        if (rte_ring_enqueue(sw_.rings[0].rx, m) != 0) {
          rte_pktmbuf_free(m);
          ++ring_full;
          break;
        }
        ++load_sent;
      }
      if (now_ns >= probe_.next_send_ns()) {
        rte_mbuf* m = probe_.make_probe(pool_, now_ns);
        if (m != nullptr) {
          send_ns.push_back(now_ns);  // index = sequence number
          if (rte_ring_enqueue(sw_.rings[0].rx, m) != 0) {
            rte_pktmbuf_free(m);
            ++ring_full;
          }
        }
      }
    } else if (probes_received >= kProbes) {
      sw_.stop.request();
    }
  }

  void on_stop(uint64_t now_ns, runtime::TxSink& tx) override { inner_.on_stop(now_ns, tx); }

  // Everything on the output rings: probes to the probe (and their (S, R) recorded), load freed.
  void take_output(uint64_t now_ns) {
    for (size_t port = 1; port < sw_.rings.size(); ++port) {
      rte_mbuf* burst[64];
      unsigned n;
      while ((n = rte_ring_dequeue_burst(sw_.rings[port].tx, reinterpret_cast<void**>(burst), 64,
                                         nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
          rte_mbuf* m = burst[i];
          if (probe_.on_receive(m, now_ns)) {
            ParsedPacket p;
            REQUIRE(parser_.parse(m, p) == ParseStatus::kOk);
            const uint64_t seq =
                load_be64(rte_pktmbuf_mtod_offset(m, const uint8_t*, p.l4_offset + 8 + 8));
            REQUIRE(seq < send_ns.size());
            arrivals.push_back({send_ns[seq], now_ns});
            CHECK(p.ttl == 63);  // it went through the switch
            ++probes_received;
          } else {
            ++load_received;
          }
          rte_pktmbuf_free(m);
        }
      }
    }
  }

  std::vector<uint64_t> send_ns;                        // by sequence number
  std::vector<std::pair<uint64_t, uint64_t>> arrivals;  // (S, R) in arrival order
  uint64_t load_sent = 0;
  uint64_t load_received = 0;
  uint64_t probes_received = 0;
  uint64_t ring_full = 0;

 private:
  RingSwitch& sw_;
  rte_mempool* pool_;
  LatencyProbe& probe_;
  switch_emu::SwitchLcore inner_;
  PacketParser parser_;
  std::vector<uint8_t> payload_;
  std::mt19937 rng_{5};
};

}  // namespace

TEST_CASE("latency probe through the switch on net_ring ports under load, TSC time") {
  test::TestPool pool(16383);
  {
    // A backstop only: should a probe never come out, the switch stops after 1 s idle and the
    // count check below fails instead of the test hanging.
    RingSwitch sw("lps", 2, pool.get(), 1'000'000'000);
    LatencyProbeConfig c;
    c.rate_pps = 200'000;  // every 5 us
    c.frame_length = 128;
    c.change_threshold_ns = 20'000;
    LatencyProbe probe(c);

    std::vector<runtime::RxQueue> rx;
    std::vector<runtime::TxQueue> tx;
    for (auto& p : sw.ports) {
      rx.push_back({&p, 0});
      tx.push_back({&p, 0});
    }
    ProbeDriver driver(sw, pool.get(), probe);
    runtime::TscClock clock;
    runtime::PollLoop loop(rx, tx, driver, clock);
    loop.run(sw.stop);
    driver.take_output(clock.now_ns());  // whatever the stop flushed

    const LatencyReport r = probe.report();
    INFO(r.to_json() << "; load sent " << driver.load_sent << ", received " << driver.load_received
                     << ", loops " << loop.counters().loops);
    CHECK(driver.ring_full == 0);
    CHECK(loop.counters().tx_dropped == 0);
    CHECK(sw.node->total_drops() == 0);
    CHECK(driver.load_sent > kProbes);  // under load: more load than probes
    CHECK(driver.load_received == driver.load_sent);

    CHECK(r.sent == kProbes);
    CHECK(r.count == kProbes);
    CHECK(r.lost == 0);
    CHECK(r.duplicates == 0);
    CHECK(r.malformed == 0);
    CHECK(r.clock_backwards == 0);
    CHECK(r.samples == kProbes);
    CHECK_FALSE(r.sample_cap_hit);
    CHECK(r.min_ns <= r.p50_ns);
    CHECK(r.p50_ns <= r.p99_ns);
    CHECK(r.p99_ns <= r.p999_ns);
    CHECK(r.p999_ns <= r.max_ns);
    CHECK(r.min_ns > 0);

    // The probe's figures against the test's own record of the same (send, receive) pairs.
    REQUIRE(driver.arrivals.size() == kProbes);
    CHECK(r.jitter_ns == rfc3550_jitter(driver.arrivals));
    std::vector<uint64_t> lat;
    for (const auto& [s, rcv] : driver.arrivals) lat.push_back(rcv - s);
    CHECK(probe.samples() == lat);
    CHECK(r.min_ns == *std::min_element(lat.begin(), lat.end()));
    CHECK(r.max_ns == *std::max_element(lat.begin(), lat.end()));
    uint64_t over = 0;
    for (size_t i = 1; i < lat.size(); ++i)
      over += (lat[i] > lat[i - 1] ? lat[i] - lat[i - 1] : lat[i - 1] - lat[i]) > 20'000;
    CHECK(r.changes_over_threshold == over);
    // One flow on one path: a ring keeps order.
    CHECK(r.out_of_order == 0);
  }
  CHECK(pool.whole());
}
