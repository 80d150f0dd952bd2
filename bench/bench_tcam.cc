// The switch's TCAM (dataplane/forwarding/tcam.h) beside raw rte_acl, in the same run:
//
// - BM_TcamClassify/rules: Tcam::classify() on bursts of 32 parsed UDP packets (1024 flows), the
//   rules N - 1 exact destinations (/32) with protocol and destination port that the traffic
//   misses, as a large ACL has, and one catch-all (10.0.0.0/8, lowest priority) that every packet
//   matches, so each packet walks the whole trie.
// - BM_Baseline_rte_acl_classify/rules: the same rules in one rte_acl context with the same field
//   layout, the same keys built from the same ParsedPackets, rte_acl_classify() on the burst: what
//   any user of rte_acl has to do at least. No counters, no rule-to-action mapping, no shadow
//   context.
// - BM_TcamRebuild/rules: Tcam::commit() after one rule changed (a new snapshot of every rule:
//   rte_acl create, add, build), beside BM_Baseline_rte_acl_build/rules (create, add, build of the
//   same rules in one raw context).
//
// ns_per_packet / ms_per_build are the headline figures.
// Run: build/bench/bench_tcam --benchmark_format=json
#include <benchmark/benchmark.h>
#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_eal.h"
#include "dataplane/forwarding/tcam.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"

namespace {

using namespace spraynet;

constexpr uint16_t kBurst = 32;
constexpr uint32_t kFlows = 1024;

rte_mempool* g_pool = nullptr;

std::vector<TcamRule> make_rules(uint32_t n) {
  std::mt19937 rng(n);
  std::vector<TcamRule> rules;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    TcamRule r;
    r.id = i + 1;
    r.priority = static_cast<int32_t>(10 + i);
    r.dst_ip = 0xAC100000 | (rng() & 0x000FFFFF);  // 172.16/12: the traffic never goes there
    r.dst_prefix_len = 32;
    r.ip_proto = 17;
    r.ip_proto_mask = 0xFF;
    r.dst_port_lo = r.dst_port_hi = static_cast<uint16_t>(1000 + rng() % 60000);
    rules.push_back(r);
  }
  TcamRule all;
  all.id = n;
  all.priority = 1;
  all.dst_ip = 0x0A000000;
  all.dst_prefix_len = 8;
  rules.push_back(all);
  return rules;
}

struct Flows {
  std::vector<rte_mbuf*> mbufs;
  std::vector<ParsedPacket> parsed;
  std::vector<const ParsedPacket*> ptrs;
  Flows() {
    const PacketParser parser;
    std::mt19937 rng(7);
    for (uint32_t i = 0; i < kFlows; ++i) {
      FrameSpec f;
      f.ip.src = 0x0A000001 + (i % 16);
      f.ip.dst = 0x0A010000 + (rng() & 0xFFFF);
      f.udp.src_port = static_cast<uint16_t>(0xC000 + (rng() & 0x3FFF));
      f.udp.dst_port = 5001;
      rte_mbuf* m = build_udp_mbuf(g_pool, f);
      ParsedPacket p;
      if (m == nullptr || parser.parse(m, p) != ParseStatus::kOk) std::abort();
      mbufs.push_back(m);
      parsed.push_back(p);
    }
    for (const auto& p : parsed) ptrs.push_back(&p);
  }
  ~Flows() { rte_pktmbuf_free_bulk(mbufs.data(), static_cast<unsigned>(mbufs.size())); }
};

void per_packet(benchmark::State& st) {
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * kFlows);
  st.counters["ns_per_packet"] = benchmark::Counter(
      kFlows * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_TcamClassify(benchmark::State& st) {
  const uint32_t n = static_cast<uint32_t>(st.range(0));
  TcamConfig cfg;
  cfg.capacity = std::max<uint32_t>(n, 16384);
  cfg.spray_rule_limit = cfg.capacity;
  Tcam tcam(cfg);
  for (const auto& r : make_rules(n)) {
    if (tcam.add(r) != TcamRefusal::kNone) std::abort();
  }
  if (!tcam.commit()) {
    st.SkipWithError("commit failed");
    return;
  }
  Flows fl;
  TcamMatch out[kBurst];
  uint64_t matched = 0;
  for (auto _ : st) {
    for (uint32_t b = 0; b < kFlows; b += kBurst) {
      tcam.classify(fl.ptrs.data() + b, kBurst, out);
      matched += out[0].matched;
    }
  }
  benchmark::DoNotOptimize(matched);
  if (matched != static_cast<uint64_t>(st.iterations()) * (kFlows / kBurst)) {
    st.SkipWithError("a packet missed the catch-all rule");
  }
  per_packet(st);
}

// The same layout as the TCAM's: rte_acl reads the first field as a byte, the others from
// 4-byte words, in network byte order.
struct RawKey {
  uint8_t proto;
  uint8_t unused[3];
  uint32_t src_ip;
  uint32_t dst_ip;
  uint16_t src_port;
  uint16_t dst_port;
  uint32_t dest_qp;
};
enum : uint8_t { kProto, kSrc, kDst, kSport, kDport, kQp, kFields };
RTE_ACL_RULE_DEF(RawRule, kFields);

rte_acl_config raw_config() {
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = kFields;
  auto def = [&cfg](uint8_t f, uint8_t type, uint8_t size, uint8_t input, size_t off) {
    cfg.defs[f] = rte_acl_field_def{type, size, f, input, static_cast<uint32_t>(off)};
  };
  def(kProto, RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, offsetof(RawKey, proto));
  def(kSrc, RTE_ACL_FIELD_TYPE_MASK, 4, 1, offsetof(RawKey, src_ip));
  def(kDst, RTE_ACL_FIELD_TYPE_MASK, 4, 2, offsetof(RawKey, dst_ip));
  def(kSport, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(RawKey, src_port));
  def(kDport, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(RawKey, dst_port));
  def(kQp, RTE_ACL_FIELD_TYPE_RANGE, 4, 4, offsetof(RawKey, dest_qp));
  return cfg;
}

uint32_t prefix(uint8_t len) {
  return len == 0 ? 0 : ~uint32_t{0} << (32 - len);
}

rte_acl_ctx* raw_build(const std::vector<TcamRule>& rules) {
  static int serial = 0;
  const std::string name = "bench_raw_acl_" + std::to_string(serial++);
  rte_acl_param param{};
  param.name = name.c_str();
  param.socket_id = SOCKET_ID_ANY;
  param.rule_size = RTE_ACL_RULE_SZ(kFields);
  param.max_rule_num = static_cast<uint32_t>(rules.size());
  rte_acl_ctx* ctx = rte_acl_create(&param);
  if (ctx == nullptr) return nullptr;
  std::vector<RawRule> raw(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    const TcamRule& r = rules[i];
    RawRule& a = raw[i];
    a = RawRule{};
    a.data.category_mask = 1;
    a.data.priority = r.priority;
    a.data.userdata = static_cast<uint32_t>(i + 1);
    a.field[kProto].value.u8 = r.ip_proto & r.ip_proto_mask;
    a.field[kProto].mask_range.u8 = r.ip_proto_mask;
    a.field[kSrc].value.u32 = r.src_ip & prefix(r.src_prefix_len);
    a.field[kSrc].mask_range.u32 = r.src_prefix_len;
    a.field[kDst].value.u32 = r.dst_ip & prefix(r.dst_prefix_len);
    a.field[kDst].mask_range.u32 = r.dst_prefix_len;
    a.field[kSport].value.u16 = r.src_port_lo;
    a.field[kSport].mask_range.u16 = r.src_port_hi;
    a.field[kDport].value.u16 = r.dst_port_lo;
    a.field[kDport].mask_range.u16 = r.dst_port_hi;
    a.field[kQp].value.u32 = r.dest_qp_lo;
    a.field[kQp].mask_range.u32 = r.dest_qp_hi;
  }
  const rte_acl_config cfg = raw_config();
  if (rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(raw.data()),
                        static_cast<uint32_t>(raw.size())) != 0 ||
      rte_acl_build(ctx, &cfg) != 0) {
    rte_acl_free(ctx);
    return nullptr;
  }
  return ctx;
}

void BM_Baseline_rte_acl_classify(benchmark::State& st) {
  const uint32_t n = static_cast<uint32_t>(st.range(0));
  rte_acl_ctx* ctx = raw_build(make_rules(n));
  if (ctx == nullptr) {
    st.SkipWithError("rte_acl build failed");
    return;
  }
  Flows fl;
  RawKey keys[kBurst];
  const uint8_t* data[kBurst];
  uint32_t results[kBurst];
  uint64_t matched = 0;
  for (auto _ : st) {
    for (uint32_t b = 0; b < kFlows; b += kBurst) {
      for (uint16_t i = 0; i < kBurst; ++i) {
        const ParsedPacket& p = *fl.ptrs[b + i];
        keys[i] = RawKey{};
        keys[i].proto = p.ip_proto;
        keys[i].src_ip = rte_cpu_to_be_32(p.src_ip);
        keys[i].dst_ip = rte_cpu_to_be_32(p.dst_ip);
        keys[i].src_port = rte_cpu_to_be_16(p.src_port);
        keys[i].dst_port = rte_cpu_to_be_16(p.dst_port);
        keys[i].dest_qp = rte_cpu_to_be_32(p.kind == PacketKind::kRoce ? p.dest_qp : 0);
        data[i] = reinterpret_cast<const uint8_t*>(&keys[i]);
      }
      rte_acl_classify(ctx, data, results, kBurst, 1);
      matched += results[0] != 0;
    }
  }
  benchmark::DoNotOptimize(matched);
  if (matched != static_cast<uint64_t>(st.iterations()) * (kFlows / kBurst)) {
    st.SkipWithError("a packet missed the catch-all rule");
  }
  rte_acl_free(ctx);
  per_packet(st);
}

void per_build(benchmark::State& st) {
  st.counters["ms_per_build"] = benchmark::Counter(
      1e-3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_TcamRebuild(benchmark::State& st) {
  const uint32_t n = static_cast<uint32_t>(st.range(0));
  TcamConfig cfg;
  cfg.capacity = std::max<uint32_t>(n, 16384);
  cfg.spray_rule_limit = cfg.capacity;
  Tcam tcam(cfg);
  const auto rules = make_rules(n);
  for (const auto& r : rules) tcam.add(r);
  if (!tcam.commit()) {
    st.SkipWithError("commit failed");
    return;
  }
  tcam.reclaim_retired();
  TcamRule changed = rules.front();
  for (auto _ : st) {
    tcam.remove(changed.id);
    changed.dst_port_lo = changed.dst_port_hi = static_cast<uint16_t>(changed.dst_port_lo + 1);
    tcam.add(changed);
    if (!tcam.commit()) st.SkipWithError("commit failed");
    st.PauseTiming();
    tcam.reclaim_retired();  // no readers: nothing to wait for
    st.ResumeTiming();
  }
  per_build(st);
}

void BM_Baseline_rte_acl_build(benchmark::State& st) {
  const auto rules = make_rules(static_cast<uint32_t>(st.range(0)));
  for (auto _ : st) {
    rte_acl_ctx* ctx = raw_build(rules);
    if (ctx == nullptr) st.SkipWithError("rte_acl build failed");
    st.PauseTiming();
    rte_acl_free(ctx);
    st.ResumeTiming();
  }
  per_build(st);
}

BENCHMARK(BM_TcamClassify)->ArgName("rules")->Arg(1)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Baseline_rte_acl_classify)->ArgName("rules")->Arg(1)->Arg(1024)->Arg(16384);
BENCHMARK(BM_TcamRebuild)->ArgName("rules")->Arg(16384)->Arg(32768)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Baseline_rte_acl_build)
    ->ArgName("rules")
    ->Arg(16384)
    ->Arg(32768)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) try {
  runtime::Eal eal(bench::eal_args(argv[0], "bench-tcam", 1024));
  runtime::PacketPool pool(
      {.name = "bench_tcam", .mbufs = 2 * kFlows - 1, .cache = 0, .data_room = 512});
  g_pool = pool.get();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_tcam: %s\n", e.what());
  return 1;
}
