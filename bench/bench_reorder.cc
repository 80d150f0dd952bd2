// Receive-side reordering cost per packet: ReorderEngine against DPDK's lib/reorder
// (rte_reorder, 22.11), the baseline, measured in the same run on the same permuted input.
//
// Input: blocks of max(4096, 64 x QPs) packets. Within a block each QP's PSNs arrive jittered (PSN
// i gets the key i + U[0, ahead) and packets go in key order: no packet overtakes one more than
// ahead - 1 PSNs before it), QPs interleaved round-robin; block after block, so the sequences run
// on (and ReorderEngine's 24-bit PSNs wrap). Both sides see every packet in the same order and must
// give back all of each block, in order; a run that does not is reported as an error, not a number.
//
// - BM_ReorderEngine/ahead/qps: receive() per packet (lookup, order, release), poll() per burst
//   of 32, hold timeout 100 us never reached (10 ns per packet of virtual time up to 64 QPs,
//   then less: see ps_per_packet).
// - BM_Baseline_rte_reorder_per_qp/ahead/qps: what DPDK offers for the same job: rte_hash lookup
//   of (source IP, DestQP) to a per-QP rte_reorder buffer, insert, then drain at once (released
//   as soon as in order, like ReorderEngine). rte_reorder has one 32-bit sequence per buffer, no
//   timeout and no 24-bit wrap: the input gives it 32-bit sequence numbers.
// - BM_Baseline_rte_reorder_raw/ahead: rte_reorder alone, one sequence, drained once per burst
//   of 32 as examples/packet_ordering does (so its buffer is 2 x 256): its floor, with no per-QP
//   lookup at all.
//
// ns_per_packet is the headline figure. Run: build/bench/bench_reorder --benchmark_format=json
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_reorder.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_eal.h"
#include "dataplane/nic/reorder_engine.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"

namespace {

using namespace spraynet;

constexpr uint32_t kMinBlock = 4096;
constexpr uint32_t kPerQpMin = 64;  // PSNs per QP per block: at least the deepest reordering
constexpr uint32_t kMaxQps = 4096;
constexpr uint32_t kMaxBlock = kMaxQps * kPerQpMin;

uint32_t block_of(uint32_t qps) {
  return std::max(kMinBlock, qps * kPerQpMin);
}
constexpr uint32_t kBurst = 32;
constexpr uint32_t kWindow = 256;  // ReorderEngine window and rte_reorder buffer size
// Virtual time per packet: 10 ns up to 64 QPs; beyond, scaled down so that each QP still sees
// one of its packets every 640 ns (a faster line) and reordering 64 deep stays within the hold
// timeout, as a spraying fabric's reordering does (microseconds, whatever the QP count).
constexpr uint64_t kPsPerPacket = 10'000;
uint64_t ps_per_packet(uint32_t qps) {
  return qps <= 64 ? kPsPerPacket : kPsPerPacket * 64 / qps;
}

rte_mempool* g_pool = nullptr;  // a benchmark program, not dataplane: one pool for all runs

// One block of input: for each arrival position, the QP and the PSN offset within the block.
struct Input {
  uint32_t qps = 1;
  uint32_t block = kMinBlock;
  uint32_t per_qp = kMinBlock;
  std::vector<uint32_t> qp;      // QP index of each arrival
  std::vector<uint32_t> offset;  // PSN offset from the QP's block start
};

Input make_input(uint32_t ahead, uint32_t qps) {
  Input in;
  in.qps = qps;
  in.block = block_of(qps);
  in.per_qp = in.block / qps;
  std::mt19937 rng(ahead * 1000 + qps);  // the same input for both sides of a comparison
  std::uniform_real_distribution<double> u(0.0, static_cast<double>(ahead));
  std::vector<std::vector<uint32_t>> orders(qps);
  for (uint32_t q = 0; q < qps; ++q) {
    std::vector<std::pair<double, uint32_t>> keyed;
    for (uint32_t i = 0; i < in.per_qp; ++i) keyed.emplace_back(i + u(rng), i);
    std::stable_sort(keyed.begin(), keyed.end());
    for (const auto& [key, i] : keyed) orders[q].push_back(i);
  }
  for (uint32_t k = 0; k < in.per_qp; ++k) {
    for (uint32_t q = 0; q < qps; ++q) {
      in.qp.push_back(q);
      in.offset.push_back(orders[q][k]);
    }
  }
  return in;
}

uint32_t src_ip_of(uint32_t q) {
  return 0x0A000001 + (q >> 3);  // 8 QPs per source address
}
uint32_t dest_qp_of(uint32_t q) {
  return 0x100 + (q & 7);
}

// One block of real RoCE mbufs (WRITE MIDDLE), each already parsed: what both sides get per packet.
struct Packets {
  std::vector<rte_mbuf*> mbufs;
  std::vector<ParsedPacket> parsed;

  explicit Packets(const Input& in) {
    const PacketParser parser;
    for (uint32_t i = 0; i < in.block; ++i) {
      FrameSpec f;
      f.ip.src = src_ip_of(in.qp[i]);
      f.ip.dst = 0x0A0000FE;
      f.udp.src_port = 0xC000;
      RoceSpec r;
      r.opcode = opcode::kRcWriteMiddle;
      r.dest_qp = dest_qp_of(in.qp[i]);
      rte_mbuf* m = build_roce_mbuf(g_pool, f, r);
      ParsedPacket p;
      if (m == nullptr || parser.parse(m, p) != ParseStatus::kOk) std::abort();
      mbufs.push_back(m);
      parsed.push_back(p);
    }
  }
  ~Packets() { rte_pktmbuf_free_bulk(mbufs.data(), static_cast<unsigned>(mbufs.size())); }
};

void set_counters(benchmark::State& st, uint32_t block) {
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * block);
  // Inverted rate of block x 1e-9 per iteration: nanoseconds per packet.
  st.counters["ns_per_packet"] = benchmark::Counter(
      block * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ReorderEngine(benchmark::State& st) {
  const uint32_t ahead = static_cast<uint32_t>(st.range(0));
  const uint32_t qps = static_cast<uint32_t>(st.range(1));
  const Input in = make_input(ahead, qps);
  Packets pk(in);
  ReorderConfig cfg;
  cfg.window = kWindow;
  cfg.max_qps = std::max(kMaxQps, qps);
  cfg.max_buffered = kMaxBlock;  // 4096 QPs x 64 deep hold more than the default 65536
  ReorderEngine engine(cfg);
  std::vector<rte_mbuf*> out;
  out.reserve(in.block);
  std::vector<uint32_t> base(qps, 0xFFF000);  // the PSNs wrap within the first blocks
  uint64_t now = 0;
  uint64_t now_ps = 0;
  const uint64_t step_ps = ps_per_packet(qps);

  // Every QP's start learnt before measuring: a packet just before its first block, then its hold.
  for (uint32_t q = 0; q < qps; ++q) {
    ParsedPacket p = pk.parsed[q];
    p.psn = psn_add(base[q], kPsnMask);  // base - 1
    engine.receive(pk.mbufs[q], p, now, out);
  }
  now += cfg.hold_timeout_ns;
  now_ps = now * 1000;
  engine.poll(now, out);
  if (out.size() != qps) st.SkipWithError("priming failed");
  out.clear();

  uint64_t released = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < in.block; ++i) {
      ParsedPacket& p = pk.parsed[i];
      p.psn = psn_add(base[in.qp[i]], in.offset[i]);
      engine.receive(pk.mbufs[i], p, now, out);
      now_ps += step_ps;
      now = now_ps / 1000;
      if ((i & (kBurst - 1)) == kBurst - 1) {
        engine.poll(now, out);
        released += out.size();
        out.clear();
      }
    }
    for (uint32_t q = 0; q < qps; ++q) base[q] = psn_add(base[q], in.per_qp);
  }
  benchmark::DoNotOptimize(released);
  const ReorderCounters& c = engine.counters();
  if (released != static_cast<uint64_t>(st.iterations()) * in.block || c.psns_skipped != 0 ||
      c.duplicates != 0 || engine.buffered() != 0) {
    static std::string why;  // SkipWithError keeps the pointer
    why = "ReorderEngine did not restore the order: released " + std::to_string(released) + " of " +
          std::to_string(st.iterations() * in.block) + ", skipped " +
          std::to_string(c.psns_skipped) + " (timeouts " + std::to_string(c.gap_timeouts) +
          ", slides " + std::to_string(c.window_slides) + ", forced " +
          std::to_string(c.gaps_forced) + "), duplicates " + std::to_string(c.duplicates) +
          ", buffer_full " + std::to_string(c.buffer_full) + ", qp_table_full " +
          std::to_string(c.qp_table_full) + ", held " + std::to_string(engine.buffered());
    st.SkipWithError(why.c_str());
  }
  set_counters(st, in.block);
  st.counters["max_buffered"] = static_cast<double>(c.max_buffered_seen);
}

uint32_t* seqn(rte_mbuf* m) {
  // The field rte_reorder reads; the inline accessor rte_reorder_seqn() is experimental API.
  return RTE_MBUF_DYNFIELD(m, rte_reorder_seqn_dynfield_offset, uint32_t*);
}

void BM_Baseline_rte_reorder_per_qp(benchmark::State& st) {
  const uint32_t ahead = static_cast<uint32_t>(st.range(0));
  const uint32_t qps = static_cast<uint32_t>(st.range(1));
  const Input in = make_input(ahead, qps);
  Packets pk(in);
  static int run = 0;
  const std::string tag = std::to_string(run++);

  rte_hash_parameters hp{};
  const std::string hname = "bench_rq_" + tag;
  hp.name = hname.c_str();
  hp.entries = std::max<uint32_t>(2 * qps, 64);
  hp.key_len = sizeof(uint64_t);
  hp.hash_func = rte_hash_crc;
  hp.socket_id = static_cast<int>(SOCKET_ID_ANY);
  rte_hash* h = rte_hash_create(&hp);
  if (h == nullptr) {
    st.SkipWithError("rte_hash_create failed");
    return;
  }
  std::vector<rte_reorder_buffer*> by_slot(hp.entries, nullptr);
  std::vector<rte_reorder_buffer*> buffers;
  for (uint32_t q = 0; q < qps; ++q) {
    const uint64_t key = (uint64_t{src_ip_of(q)} << 32) | dest_qp_of(q);
    const int32_t slot = rte_hash_add_key(h, &key);
    const std::string rname = "bench_r_" + tag + "_" + std::to_string(q);
    rte_reorder_buffer* b = rte_reorder_create(rname.c_str(), SOCKET_ID_ANY, kWindow);
    if (slot < 0 || b == nullptr) {
      st.SkipWithError("rte_reorder_create failed");
      return;
    }
    by_slot[static_cast<size_t>(slot)] = b;
    buffers.push_back(b);
  }
  std::vector<uint32_t> base(qps, 1000);
  rte_mbuf* drained[kBurst];
  // Each buffer's start is its first insert: prime with the sequence just before the first block.
  for (uint32_t q = 0; q < qps; ++q) {
    *seqn(pk.mbufs[q]) = base[q] - 1;
    rte_reorder_insert(buffers[q], pk.mbufs[q]);
    rte_reorder_drain(buffers[q], drained, kBurst);
  }

  uint64_t released = 0;
  uint64_t refused = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < in.block; ++i) {
      rte_mbuf* m = pk.mbufs[i];
      const ParsedPacket& p = pk.parsed[i];
      *seqn(m) = base[in.qp[i]] + in.offset[i];
      const uint64_t key = (uint64_t{p.src_ip} << 32) | p.dest_qp;
      const int32_t slot = rte_hash_lookup(h, &key);
      rte_reorder_buffer* b = by_slot[static_cast<size_t>(slot)];
      if (rte_reorder_insert(b, m) != 0) ++refused;
      unsigned n;
      while ((n = rte_reorder_drain(b, drained, kBurst)) > 0) released += n;
    }
    for (uint32_t q = 0; q < qps; ++q) base[q] += in.per_qp;
  }
  benchmark::DoNotOptimize(released);
  if (released != static_cast<uint64_t>(st.iterations()) * in.block || refused != 0) {
    st.SkipWithError("rte_reorder did not restore the order");
  }
  set_counters(st, in.block);
  for (rte_reorder_buffer* b : buffers) rte_reorder_free(b);
  rte_hash_free(h);
}

void BM_Baseline_rte_reorder_raw(benchmark::State& st) {
  const uint32_t ahead = static_cast<uint32_t>(st.range(0));
  const Input in = make_input(ahead, 1);
  Packets pk(in);
  static int run = 0;
  const std::string name = "bench_raw_" + std::to_string(run++);
  // Drained once per burst, the sequence may run a burst beyond the window before min_seqn moves:
  // twice the window, or rte_reorder would skip gaps and then refuse the late packets.
  rte_reorder_buffer* b = rte_reorder_create(name.c_str(), SOCKET_ID_ANY, 2 * kWindow);
  if (b == nullptr) {
    st.SkipWithError("rte_reorder_create failed");
    return;
  }
  uint32_t base = 1000;
  std::vector<rte_mbuf*> drained_v(in.block);
  rte_mbuf** drained = drained_v.data();
  *seqn(pk.mbufs[0]) = base - 1;
  rte_reorder_insert(b, pk.mbufs[0]);
  rte_reorder_drain(b, drained, in.block);

  uint64_t released = 0;
  uint64_t refused = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < in.block; ++i) {
      rte_mbuf* m = pk.mbufs[i];
      *seqn(m) = base + in.offset[i];
      if (rte_reorder_insert(b, m) != 0) ++refused;
      if ((i & (kBurst - 1)) == kBurst - 1) released += rte_reorder_drain(b, drained, in.block);
    }
    base += in.block;
  }
  benchmark::DoNotOptimize(released);
  if (released != static_cast<uint64_t>(st.iterations()) * in.block || refused != 0) {
    st.SkipWithError("rte_reorder did not restore the order");
  }
  set_counters(st, in.block);
  rte_reorder_free(b);
}

// {ahead, qps}: depth 0 (ahead 1: in order), 8 and 64 at 1, 64 and 4096 QPs; window-deep
// reordering (256) of one QP.
void qp_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ahead", "qps"});
  for (int64_t qps : {1, 64, 4096}) {
    for (int64_t ahead : {1, 8, 64}) b->Args({ahead, qps});
  }
  b->Args({256, 1});
}

BENCHMARK(BM_ReorderEngine)->Apply(qp_args);
BENCHMARK(BM_Baseline_rte_reorder_per_qp)->Apply(qp_args);
BENCHMARK(BM_Baseline_rte_reorder_raw)->ArgName("ahead")->Arg(1)->Arg(8)->Arg(64)->Arg(256);

}  // namespace

int main(int argc, char** argv) try {
  runtime::Eal eal(bench::eal_args(argv[0], "bench-reorder", 1024));
  runtime::PacketPool pool({.name = "bench_reorder",
                            .mbufs = kMaxBlock + 2 * kMinBlock - 1,
                            .cache = 0,
                            .data_room = 512});
  g_pool = pool.get();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_reorder: %s\n", e.what());
  return 1;
}
