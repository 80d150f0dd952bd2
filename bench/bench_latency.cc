// Latency the switch adds, on net_ring ports, at a share of the output link's rate: LatencyProbe
// probes (TSC-stamped UDP) through switch_emu's SwitchLcore under a PollLoop on TSC time, beside
// the same loop with the same rings forwarding rx -> tx directly (io forwarding: the I/O floor).
//
// One thread: a handler around the switch (or around the io forward) is the load generator and
// the receiver, as tests/switch_emu/test_latency_probe_switch.cc. Once per loop iteration it tops
// up the load (1024-byte UDP frames, 500 flows, paced by TSC at --load of the 10 Gbit/s output
// link; a backlog of more than 64 frames, when the thread was descheduled, is dropped from the
// schedule rather than sent in a burst), sends a probe when one is due (100 kpps, DSCP 0: the
// same traffic class and queue as the load) and takes what came out. The PollLoop runs as
// switch_emu's (tx buffers of 32, a partial burst drained after at most 100 us: "drain 100us")
// and, to show the pipeline apart from that batching, with partial bursts sent after every loop
// iteration ("drain 0").
//
// Output: one JSON object per (mode, load) on stdout.
//   bench_latency [--probes N] [--loads 0.1,0.5,0.9]
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_eal.h"
#include "control/config_reader.h"
#include "control/switch_config.h"
#include "dataplane/probe/latency_probe.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/wire/packet_builder.h"
#include "switch_emu/switch_lcore.h"
#include "switch_emu/switch_node.h"

using namespace spraynet;

namespace {

constexpr double kLinkGbps = 10.0;
constexpr size_t kFrameBytes = 1024;  // without FCS
constexpr uint64_t kProbeRatePps = 100'000;

struct Rings {
  rte_ring* rx = nullptr;
  rte_ring* tx = nullptr;
};

Rings ring_port(const std::string& name) {
  Rings r;
  r.rx =
      rte_ring_create((name + "_rx").c_str(), 16384, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  r.tx =
      rte_ring_create((name + "_tx").c_str(), 16384, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (r.rx == nullptr || r.tx == nullptr ||
      rte_eth_from_rings(name.c_str(), &r.rx, 1, &r.tx, 1, SOCKET_ID_ANY) < 0) {
    std::fprintf(stderr, "bench_latency: ring port %s failed\n", name.c_str());
    std::exit(1);
  }
  return r;
}

class Driver : public runtime::BurstHandler {
 public:
  Driver(bool through_switch, switch_emu::SwitchShared& shared, Rings in, Rings out,
         uint16_t out_port_id, rte_mempool* pool, LatencyProbe& probe, uint64_t probes, double load,
         runtime::StopSignal& stop)
      : switch_(through_switch),
        in_(in),
        out_(out),
        out_port_id_(out_port_id),
        pool_(pool),
        probe_(probe),
        probes_(probes),
        stop_(stop),
        inner_(shared, {0, 1}) {
    payload_.assign(kFrameBytes - 14 - 20 - 8, 0x5A);
    load_pps_ = load * kLinkGbps * 1e9 / ((kFrameBytes + 4 + 20) * 8.0);
  }

  void on_rx(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             runtime::TxSink& tx) override {
    if (switch_) {
      inner_.on_rx(port_id, queue, pkts, n, now_ns, tx);
      return;
    }
    for (uint16_t i = 0; i < n; ++i) tx.send(out_port_id_, 0, pkts[i]);
  }

  void on_poll(uint64_t now_ns, runtime::TxSink& tx) override {
    if (switch_) inner_.on_poll(now_ns, tx);
    take_output(now_ns);
    if (start_ns_ == 0) start_ns_ = now_ns;
    if (probe_.sent() < probes_) {
      const double due = static_cast<double>(now_ns - start_ns_) * load_pps_ * 1e-9;
      if (due - static_cast<double>(scheduled_) > 64) {
        skipped += static_cast<uint64_t>(due) - scheduled_;
        scheduled_ = static_cast<uint64_t>(due);
      }
      while (static_cast<double>(scheduled_) < due) {
        FrameSpec f;
        f.ip.src = 0x0A000000 | static_cast<uint32_t>(rng_() % 500);
        f.ip.dst = 0x0B000001;
        f.udp.src_port = static_cast<uint16_t>(f.ip.src);
        f.udp.dst_port = 7000;
        f.payload = payload_;
        ++scheduled_;
        rte_mbuf* m = build_udp_mbuf(pool_, f);
        if (m == nullptr) break;
        if (rte_ring_enqueue(in_.rx, m) != 0) {
          rte_pktmbuf_free(m);
          ++ring_full;
          break;
        }
        ++load_sent;
      }
      if (now_ns >= probe_.next_send_ns()) {
        rte_mbuf* m = probe_.make_probe(pool_, now_ns);
        if (m != nullptr && rte_ring_enqueue(in_.rx, m) != 0) {
          rte_pktmbuf_free(m);
          ++ring_full;
        }
      }
      end_ns = now_ns;
    } else if (probe_.report().count + probe_.report().lost >= probes_ ||
               now_ns - end_ns > 50'000'000) {
      stop_.request();
    }
  }

  void on_stop(uint64_t now_ns, runtime::TxSink& tx) override {
    if (switch_) inner_.on_stop(now_ns, tx);
  }

  void take_output(uint64_t now_ns) {
    rte_mbuf* burst[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(out_.tx, reinterpret_cast<void**>(burst), 64, nullptr)) >
           0) {
      for (unsigned i = 0; i < n; ++i) {
        if (!probe_.on_receive(burst[i], now_ns)) ++load_received;
        rte_pktmbuf_free(burst[i]);
      }
    }
  }

  uint64_t load_sent = 0;
  uint64_t load_received = 0;
  uint64_t ring_full = 0;
  uint64_t skipped = 0;
  uint64_t end_ns = 0;
  uint64_t start_ns() const { return start_ns_; }

 private:
  bool switch_;
  Rings in_, out_;
  uint16_t out_port_id_;
  rte_mempool* pool_;
  LatencyProbe& probe_;
  uint64_t probes_;
  runtime::StopSignal& stop_;
  switch_emu::SwitchLcore inner_;
  std::vector<uint8_t> payload_;
  double load_pps_ = 0;
  uint64_t scheduled_ = 0;
  uint64_t start_ns_ = 0;
  std::mt19937 rng_{5};
};

}  // namespace

int main(int argc, char** argv) try {
  uint64_t probes = 20000;
  std::vector<double> loads = {0.1, 0.5, 0.9};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--probes") == 0) {
      probes = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--loads") == 0) {
      loads.clear();
      std::stringstream ss(argv[i + 1]);
      std::string item;
      while (std::getline(ss, item, ',')) loads.push_back(std::strtod(item.c_str(), nullptr));
    } else {
      std::fprintf(stderr, "usage: bench_latency [--probes N] [--loads 0.1,0.5,0.9]\n");
      return 2;
    }
  }
  runtime::Eal eal(bench::eal_args(argv[0], "bench-lat", 512));
  runtime::PacketPool pool_owner(
      {.name = "bench_lat", .mbufs = 16383, .cache = 256, .data_room = 2176});
  rte_mempool* pool = pool_owner.get();

  int run = 0;
  std::printf("[\n");
  bool first = true;
  for (double load : loads) {
    for (uint64_t drain_ns : {uint64_t{100'000}, uint64_t{0}}) {
      for (bool through_switch : {false, true}) {
        const std::string tag = "lat" + std::to_string(run++);
        Rings in = ring_port(tag + "_in");
        Rings out = ring_port(tag + "_out");
        {
          const std::string yaml = "ports:\n  - {name: in, device: net_ring_" + tag +
                                   "_in, link: {rate_gbps: 100, delay_ns: 0}}\n"
                                   "  - {name: out, device: net_ring_" +
                                   tag +
                                   "_out, link: {rate_gbps: 10, delay_ns: 0}}\n"
                                   "routes:\n  - {prefix: 0.0.0.0/0, port: out}\n";
          const control::SwitchConfig config =
              control::parse_switch_config(control::ConfigNode::load_string(yaml, "bench.yaml"));
          std::vector<runtime::Port> ports;
          switch_emu::SwitchShared shared;
          runtime::StopSignal stop;
          shared.node_port_of.assign(RTE_MAX_ETHPORTS, -1);
          for (uint16_t i = 0; i < 2; ++i) {
            ports.emplace_back(runtime::PortConfig{config.ports[i].device}, pool);
            shared.dpdk_port.push_back(ports.back().id());
            shared.node_port_of[ports.back().id()] = i;
          }
          auto node = std::make_unique<switch_emu::SwitchNode>(config, pool);
          shared.node = node.get();
          shared.stop = &stop;
          LatencyProbeConfig pc;
          pc.rate_pps = kProbeRatePps;
          pc.frame_length = 128;
          pc.dscp = 0;  // the load's class: queued behind it
          pc.max_samples = probes;
          LatencyProbe probe(pc);
          std::vector<runtime::RxQueue> rx;
          std::vector<runtime::TxQueue> tx;
          for (auto& p : ports) {
            rx.push_back({&p, 0});
            tx.push_back({&p, 0});
          }
          Driver d(through_switch, shared, in, out, ports[1].id(), pool, probe, probes, load, stop);
          runtime::TscClock clock;
          runtime::PollLoopConfig loop_cfg;
          loop_cfg.drain_interval_ns = drain_ns;
          runtime::PollLoop loop(rx, tx, d, clock, loop_cfg);
          loop.run(stop);
          d.take_output(clock.now_ns());
          const LatencyReport r = probe.report();
          const double secs = static_cast<double>(d.end_ns - d.start_ns()) * 1e-9;
          const double offered = secs > 0 ? static_cast<double>(d.load_sent) * (kFrameBytes + 24) *
                                                8 / secs / (kLinkGbps * 1e9)
                                          : 0;
          std::printf(
              "%s  {\"mode\": \"%s\", \"drain_ns\": %lu, \"load\": %.2f, "
              "\"achieved_load\": %.3f, "
              "\"p50_ns\": %lu, \"p99_ns\": %lu, \"p999_ns\": %lu, \"max_ns\": %lu, "
              "\"count\": %lu, \"lost\": %lu, \"load_sent\": %lu, \"load_received\": %lu, "
              "\"skipped\": %lu, \"ring_full\": %lu, \"switch_drops\": %lu}",
              first ? "" : ",\n", through_switch ? "switch" : "io_forward", drain_ns, load, offered,
              r.p50_ns, r.p99_ns, r.p999_ns, r.max_ns, r.count, r.lost, d.load_sent,
              d.load_received, d.skipped, d.ring_full, through_switch ? node->total_drops() : 0UL);
          std::fflush(stdout);
          first = false;
          node->free_all();
          node.reset();
          ports.clear();
        }
        for (Rings* r : {&in, &out}) {
          rte_ring_free(r->rx);
          rte_ring_free(r->tx);
        }
      }
    }
  }
  std::printf("\n]\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_latency: %s\n", e.what());
  return 1;
}
