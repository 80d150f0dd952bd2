// NicNode (nic_emu's pipeline) in-process, no ports: host -> spray -> uplinks (TX) and
// uplinks -> PPCID check, checksum restore, reorder -> host (RX), each beside the same node doing
// the least it can on the same packets, in the same run:
//
// - BM_NicSprayTx/payload: bursts of 32 RoCE WRITE MIDDLE packets of 64 QPs from the host port,
//   spray mode rr (a path per packet, PPCID written), taken off the four uplinks' egress (10 Tbit/s
//   emulated links, no delay) and fed in again. Baseline BM_Baseline_NicFlowTx: spray mode flow
//   (per-flow hash).
// - BM_NicReorderRx/payload: the same packets arriving over the four uplinks (bursts of 32 round
//   robin), each QP's PSNs reordered up to 8 deep (as bench_reorder, 64 QPs, blocks of 4096, PSNs
//   wrapping), a valid PPCID in each, the reorder engine putting them back in order for the host
//   port. Baseline BM_Baseline_NicNoReorderRx: receive: none (no reorder engine).
//
// ns_per_packet is the headline figure. Run: build/bench/bench_nic --benchmark_format=json
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_eal.h"
#include "control/config_reader.h"
#include "control/nic_config.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/ppcid.h"
#include "dataplane/wire/roce_headers.h"
#include "nic_emu/nic_node.h"

namespace {

using namespace spraynet;

constexpr uint32_t kQps = 64;
constexpr uint32_t kBlock = 4096;
constexpr uint16_t kBurst = 32;
constexpr uint16_t kUplinks = 4;
constexpr uint64_t kNsPerPacket = 50;

rte_mempool* g_pool = nullptr;

control::NicConfig nic_config(const std::string& spray, const std::string& receive) {
  std::string y = "nic:\n  name: bench\n  host: {name: host, device: h}\n  uplinks:\n";
  for (int i = 0; i < kUplinks; ++i) {
    y += "    - {name: up" + std::to_string(i) + ", device: u" + std::to_string(i) +
         ", path_id: " + std::to_string(i + 1) + ", link: {rate_gbps: 10000, delay_ns: 0}}\n";
  }
  y += "  spray: {mode: " + spray + ", ppcid_layout: ts-high}\n  receive: " + receive + "\n";
  if (receive == "reorder-buffer") y += "  reorder: {window: 256, hold_timeout_us: 100}\n";
  return control::parse_nic_config(control::ConfigNode::load_string(y, "bench.yaml"));
}

std::vector<rte_mbuf*> roce_packets(uint32_t n, size_t payload_bytes) {
  std::vector<uint8_t> payload(payload_bytes, 0x5A);
  std::vector<rte_mbuf*> out;
  for (uint32_t i = 0; i < n; ++i) {
    FrameSpec f;
    f.ip.src = 0x0A000001;
    f.ip.dst = 0x0A000002;
    f.udp.src_port = static_cast<uint16_t>(0xC000 + i % kQps);
    f.payload = payload;
    RoceSpec r;
    r.opcode = opcode::kRcWriteMiddle;
    r.dest_qp = 0x100 + i % kQps;
    r.psn = i / kQps;
    rte_mbuf* m = build_roce_mbuf(g_pool, f, r);
    if (m == nullptr) std::abort();
    out.push_back(m);
  }
  return out;
}

void per_packet(benchmark::State& st, uint64_t packets) {
  st.SetItemsProcessed(static_cast<int64_t>(packets));
  st.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(packets) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void spray_tx(benchmark::State& st, const std::string& mode) {
  nic_emu::NicNode node(nic_config(mode, "none"), g_pool);
  std::vector<rte_mbuf*> pkts = roce_packets(kBurst, static_cast<size_t>(st.range(0)));
  std::vector<rte_mbuf*> next(kBurst);
  uint64_t now = 1'000'000;
  uint64_t packets = 0;
  for (auto _ : st) {
    node.receive(node.host_port(), pkts.data(), static_cast<uint16_t>(pkts.size()), now);
    now += kNsPerPacket * kBurst;
    node.poll(now);
    uint16_t got = 0;
    for (uint16_t u = 0; u < kUplinks; ++u) {
      got += node.transmit(u, now, next.data() + got, static_cast<uint16_t>(kBurst - got));
    }
    packets += got;
    pkts.assign(next.begin(), next.begin() + got);
    if (got == 0) {
      st.SkipWithError("nothing came out of the uplinks");
      break;
    }
  }
  rte_pktmbuf_free_bulk(pkts.data(), static_cast<unsigned>(pkts.size()));
  node.free_all();
  per_packet(st, packets);
}

void BM_NicSprayTx(benchmark::State& st) {
  spray_tx(st, "rr");
}
void BM_Baseline_NicFlowTx(benchmark::State& st) {
  spray_tx(st, "flow");
}

// Arrival order of one block: each QP's PSN offsets jittered up to `ahead`, QPs round robin.
std::vector<std::pair<uint32_t, uint32_t>> rx_order(uint32_t ahead) {
  const uint32_t per_qp = kBlock / kQps;
  std::mt19937 rng(ahead * 1000 + kQps);
  std::uniform_real_distribution<double> u(0.0, static_cast<double>(ahead));
  std::vector<std::vector<uint32_t>> orders(kQps);
  for (uint32_t q = 0; q < kQps; ++q) {
    std::vector<std::pair<double, uint32_t>> keyed;
    for (uint32_t i = 0; i < per_qp; ++i) keyed.emplace_back(i + u(rng), i);
    std::stable_sort(keyed.begin(), keyed.end());
    for (const auto& [key, i] : keyed) orders[q].push_back(i);
  }
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t k = 0; k < per_qp; ++k) {
    for (uint32_t q = 0; q < kQps; ++q) out.emplace_back(q, orders[q][k]);
  }
  return out;
}

// Rewrites a packet as QP q's PSN psn arriving on uplink u (DestQP, PSN, PPCID).
void stamp(rte_mbuf* m, const ParsedPacket& p, uint32_t q, uint32_t psn, uint16_t u) {
  uint8_t* bth = rte_pktmbuf_mtod_offset(m, uint8_t*, p.bth_offset);
  const uint32_t qp = 0x100 + q;
  bth[5] = static_cast<uint8_t>(qp >> 16);
  bth[6] = static_cast<uint8_t>(qp >> 8);
  bth[7] = static_cast<uint8_t>(qp);
  bth[9] = static_cast<uint8_t>(psn >> 16);
  bth[10] = static_cast<uint8_t>(psn >> 8);
  bth[11] = static_cast<uint8_t>(psn);
  auto* udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr*, p.l4_offset);
  udp->dgram_cksum =
      rte_cpu_to_be_16(ppcid_encode(PpcidLayout::kTsHigh, static_cast<uint8_t>(u + 1), 0, qp, psn));
}

void reorder_rx(benchmark::State& st, const std::string& receive) {
  nic_emu::NicNode node(nic_config("rr", receive), g_pool);
  const auto order = rx_order(8);
  std::vector<rte_mbuf*> pool = roce_packets(kBlock, static_cast<size_t>(st.range(0)));
  ParsedPacket p;
  const PacketParser parser;
  if (parser.parse(pool[0], p) != ParseStatus::kOk) std::abort();  // one layout for all
  std::vector<uint32_t> base(kQps, 0xFFF000);                      // wraps within the first blocks
  uint64_t now = 1'000'000;
  std::vector<rte_mbuf*> free_list(pool.begin(), pool.end());
  std::vector<rte_mbuf*> burst;
  rte_mbuf* out[256];
  auto drain = [&] {
    uint16_t n;
    while ((n = node.transmit(node.host_port(), now, out, 256)) > 0) {
      free_list.insert(free_list.end(), out, out + n);
    }
  };
  // Each QP's start learnt first: the PSN just before its first block, then the hold timeout.
  for (uint32_t q = 0; q < kQps; ++q) {
    rte_mbuf* m = free_list.back();
    free_list.pop_back();
    stamp(m, p, q, (base[q] - 1) & kPsnMask, 0);
    node.receive(0, &m, 1, now);
  }
  now += 200'000;
  node.poll(now);
  drain();
  uint64_t packets = 0;
  uint16_t uplink = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < kBlock; i += kBurst) {
      burst.clear();
      for (uint32_t j = i; j < i + kBurst; ++j) {
        if (free_list.empty()) break;
        rte_mbuf* m = free_list.back();
        free_list.pop_back();
        const auto [q, off] = order[j];
        stamp(m, p, q, (base[q] + off) & kPsnMask, uplink);
        burst.push_back(m);
      }
      node.receive(uplink, burst.data(), static_cast<uint16_t>(burst.size()), now);
      uplink = static_cast<uint16_t>((uplink + 1) % kUplinks);
      now += kNsPerPacket * kBurst;
      node.poll(now);
      const size_t before = free_list.size();
      drain();
      packets += free_list.size() - before;
    }
    for (uint32_t q = 0; q < kQps; ++q) base[q] = (base[q] + kBlock / kQps) & kPsnMask;
  }
  node.flush(now);
  drain();
  if (node.reorder() != nullptr && node.reorder()->counters().psns_skipped != 0) {
    st.SkipWithError("the reorder engine skipped PSNs");
  }
  node.free_all();
  rte_pktmbuf_free_bulk(free_list.data(), static_cast<unsigned>(free_list.size()));
  per_packet(st, packets);
}

void BM_NicReorderRx(benchmark::State& st) {
  reorder_rx(st, "reorder-buffer");
}
void BM_Baseline_NicNoReorderRx(benchmark::State& st) {
  reorder_rx(st, "none");
}

BENCHMARK(BM_NicSprayTx)->ArgName("payload")->Arg(64)->Arg(1024);
BENCHMARK(BM_Baseline_NicFlowTx)->ArgName("payload")->Arg(64)->Arg(1024);
BENCHMARK(BM_NicReorderRx)->ArgName("payload")->Arg(64)->Arg(1024);
BENCHMARK(BM_Baseline_NicNoReorderRx)->ArgName("payload")->Arg(64)->Arg(1024);

}  // namespace

int main(int argc, char** argv) try {
  runtime::Eal eal(bench::eal_args(argv[0], "bench-nic", 512));
  runtime::PacketPool pool(
      {.name = "bench_nic", .mbufs = 2 * kBlock - 1, .cache = 0, .data_room = 2176});
  g_pool = pool.get();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_nic: %s\n", e.what());
  return 1;
}
