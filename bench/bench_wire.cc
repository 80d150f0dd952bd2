// Wire-format costs per packet, each beside the DPDK routine that does the nearest job, in the
// same run: PacketParser vs rte_net_get_ptype (DPDK's software header walk), and the ICRC
// (zlib CRC-32 with the RoCEv2 field masks) vs rte_net_crc_calc (DPDK's SIMD Ethernet CRC-32 over
// the same bytes, unmasked) and zlib's crc32() (the ICRC's first implementation: a CRC-32 over
// the masked bytes, table-driven). Run: build/bench/bench_wire --benchmark_format=json
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_net.h>
#include <rte_net_crc.h>

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_eal.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"

namespace {

using namespace spraynet;

rte_mempool* g_pool = nullptr;

std::vector<uint8_t> roce_frame(size_t payload_bytes) {
  std::vector<uint8_t> payload(payload_bytes, 0x5A);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.udp.src_port = 0xC123;
  f.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = 0x11;
  r.psn = 0x100;
  std::vector<uint8_t> out(payload_bytes + 128);
  out.resize(build_roce_frame(out, f, r));
  return out;
}

rte_mbuf* mbuf_of(const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
  std::copy(f.begin(), f.end(), rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())));
  return m;
}

void BM_PacketParser(benchmark::State& st) {
  rte_mbuf* m = mbuf_of(roce_frame(static_cast<size_t>(st.range(0))));
  const PacketParser parser;
  ParsedPacket p;
  for (auto _ : st) {
    benchmark::DoNotOptimize(parser.parse(m, p));
    benchmark::DoNotOptimize(p.psn);
  }
  rte_pktmbuf_free(m);
  st.SetItemsProcessed(st.iterations());
}

void BM_Baseline_rte_net_get_ptype(benchmark::State& st) {
  rte_mbuf* m = mbuf_of(roce_frame(static_cast<size_t>(st.range(0))));
  rte_net_hdr_lens lens;
  for (auto _ : st) {
    benchmark::DoNotOptimize(rte_net_get_ptype(m, &lens, RTE_PTYPE_ALL_MASK));
  }
  rte_pktmbuf_free(m);
  st.SetItemsProcessed(st.iterations());
}

void BM_Icrc(benchmark::State& st) {
  const auto f = roce_frame(static_cast<size_t>(st.range(0)));
  for (auto _ : st) benchmark::DoNotOptimize(compute_icrc(f.data() + 14, f.size() - 14 - 4));
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * (f.size() - 18)));
}

void BM_Baseline_rte_net_crc_calc(benchmark::State& st) {
  const auto f = roce_frame(static_cast<size_t>(st.range(0)));
  for (auto _ : st) {
    benchmark::DoNotOptimize(
        rte_net_crc_calc(f.data() + 14, static_cast<uint32_t>(f.size() - 18), RTE_NET_CRC32_ETH));
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * (f.size() - 18)));
}

void BM_Baseline_zlib_crc32(benchmark::State& st) {
  const auto f = roce_frame(static_cast<size_t>(st.range(0)));
  for (auto _ : st) {
    benchmark::DoNotOptimize(crc32(0xFFFFFFFFu, f.data() + 14, static_cast<uInt>(f.size() - 18)));
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * (f.size() - 18)));
}

BENCHMARK(BM_PacketParser)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Baseline_rte_net_get_ptype)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Baseline_rte_net_crc_calc)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Baseline_zlib_crc32)->Arg(64)->Arg(1024)->Arg(4096);

}  // namespace

int main(int argc, char** argv) try {
  runtime::Eal eal(bench::eal_args(argv[0], "bench-wire", 256));
  rte_net_crc_set_alg(RTE_NET_CRC_SSE42);  // falls back to scalar where the CPU lacks it
  runtime::PacketPool pool({.name = "bench_wire", .mbufs = 1023, .cache = 0, .data_room = 9216});
  g_pool = pool.get();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_wire: %s\n", e.what());
  return 1;
}
