// The reorder engine fed arbitrary streams: RoCE packets of a few QPs with PSNs near or far from
// the sequence, any opcode (READ requests with any DMA length, READ responses, ACKs, CNPs, reserved
// ones), non-RoCE frames, READ response ranges and known starts announced, polls and flushes, and
// time moving (or stepping back) as the input says, under a small random config.
// Checked after every step: the counters' conservation law, that what comes out is what went in
// (each mbuf once), and that nothing already due is still held after a poll. After the input
// every mbuf is back in the pool.
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>
#include <vector>

#include "dataplane/nic/reorder_engine.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "fuzz/support.h"

using namespace spraynet;

namespace {

rte_mempool* pool = nullptr;
constexpr unsigned kPoolSize = 1024;
// SPRAYNET_FUZZ_TRACE=1: print every step (to turn a reproducer into a unit test).
const bool trace = std::getenv("SPRAYNET_FUZZ_TRACE") != nullptr;

constexpr std::array<uint8_t, 14> kOpcodes = {
    opcode::kRcWriteFirst,
    opcode::kRcWriteMiddle,
    opcode::kRcWriteLast,
    opcode::kRcWriteOnly,
    opcode::kRcSendOnly,
    opcode::kRcReadRequest,
    opcode::kRcReadResponseFirst,
    opcode::kRcReadResponseMiddle,
    opcode::kRcReadResponseLast,
    opcode::kRcReadResponseOnly,
    opcode::kRcAck,
    opcode::kCnp,
    opcode::kRcFetchAdd,
    opcode::kRcWriteMiddle,
};
constexpr std::array<uint32_t, 5> kMtus = {256, 512, 1024, 2048, 4096};
constexpr std::array<uint32_t, 3> kIps = {0x0A000001, 0x0A000002, 0x0A000003};
constexpr std::array<uint32_t, 3> kQps = {0x11, 0x12, 0xFFFFFF};

class Run {
 public:
  explicit Run(FuzzedDataProvider& in) : in_(in), engine_(config(in)) {}
  ~Run() {
    engine_.flush(out_);
    take();
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  void step() {
    const uint8_t op = in_.ConsumeIntegral<uint8_t>();
    // Time: mostly forward by a little, sometimes by a lot, rarely back.
    switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
        now_ += in_.ConsumeIntegralInRange<uint64_t>(0, 1'000'000'000);
        break;
      case 1:
        now_ -= std::min(now_, in_.ConsumeIntegralInRange<uint64_t>(0, 10'000));
        break;
      default:
        now_ += in_.ConsumeIntegralInRange<uint64_t>(0, 200);
    }
    if (trace) std::fprintf(stderr, "now %llu: ", static_cast<unsigned long long>(now_));
    switch (op % 16) {
      case 0:
        if (trace) std::fprintf(stderr, "poll\n");
        engine_.poll(now_, out_);
        FUZZ_CHECK(engine_.next_event_ns() > now_);
        break;
      case 1:
        if (trace) std::fprintf(stderr, "flush\n");
        engine_.flush(out_);
        FUZZ_CHECK(engine_.buffered() == 0);
        FUZZ_CHECK(engine_.next_event_ns() == ReorderEngine::kNever);
        break;
      case 2: {
        const uint32_t i = ip(), q = qp(), p = psn();
        const bool ok = engine_.expect(i, q, p);
        if (trace) std::fprintf(stderr, "expect(%#x, %#x, %u) = %d\n", i, q, p, ok);
        break;
      }
      case 3: {
        const uint32_t i = ip(), q = qp(), p = psn();
        const uint32_t n = in_.ConsumeIntegralInRange<uint32_t>(0, 70);
        const bool ok = engine_.expect_read_responses(i, q, p, n);
        if (trace)
          std::fprintf(stderr, "expect_read_responses(%#x, %#x, %u, %u) = %d\n", i, q, p, n, ok);
        break;
      }
      case 4:
        receive_other();
        break;
      default:
        receive_roce();
    }
    take();
    FUZZ_CHECK(engine_.buffered() <= engine_.config().max_buffered);
    FUZZ_CHECK(engine_.qp_count() <= engine_.config().max_qps);
  }

 private:
  static ReorderConfig config(FuzzedDataProvider& in) {
    ReorderConfig c;
    c.window = in.ConsumeIntegralInRange<uint32_t>(1, 64);
    c.max_qps = in.ConsumeIntegralInRange<uint32_t>(1, 6);
    c.max_buffered = in.ConsumeIntegralInRange<uint32_t>(1, 96);
    c.hold_timeout_ns = in.ConsumeIntegralInRange<uint64_t>(1, 5'000);
    c.path_mtu = in.PickValueInArray(kMtus);
    if (trace) {
      std::fprintf(stderr, "window %u max_qps %u max_buffered %u hold %llu mtu %u\n", c.window,
                   c.max_qps, c.max_buffered, static_cast<unsigned long long>(c.hold_timeout_ns),
                   c.path_mtu);
    }
    FUZZ_CHECK(c.check().empty());
    return c;
  }
  uint32_t ip() { return in_.PickValueInArray(kIps); }
  uint32_t qp() { return in_.PickValueInArray(kQps); }
  // Near the last PSN most of the time (the interesting cases), anywhere otherwise.
  uint32_t psn() {
    if (in_.ConsumeIntegralInRange<int>(0, 7) == 0) {
      last_psn_ = in_.ConsumeIntegral<uint32_t>() & kPsnMask;
    } else {
      last_psn_ = (last_psn_ + in_.ConsumeIntegralInRange<int32_t>(-8, 80)) & kPsnMask;
    }
    return last_psn_;
  }

  void receive_roce() {
    FrameSpec f;
    f.ip.src = ip();
    f.ip.dst = 0x0A0000FE;
    f.udp.src_port = 0xC000;
    RoceSpec r;
    r.opcode = in_.ConsumeBool() ? in_.PickValueInArray(kOpcodes) : in_.ConsumeIntegral<uint8_t>();
    r.dest_qp = qp();
    r.psn = psn();
    r.dma_length = in_.ConsumeBool() ? in_.ConsumeIntegral<uint32_t>()
                                     : in_.ConsumeIntegralInRange<uint32_t>(0, 20'000);
    rte_mbuf* m = build_roce_mbuf(pool, f, r);
    if (m == nullptr) return;  // an opcode the builder does not know
    if (trace) {
      std::fprintf(stderr, "receive src %#x qp %#x op %#x psn %u dma_length %u\n", f.ip.src,
                   r.dest_qp, r.opcode, r.psn, r.dma_length);
    }
    deliver(m);
  }

  void receive_other() {
    FrameSpec f;
    f.ip.src = ip();
    f.udp.dst_port = in_.ConsumeBool() ? kRoceV2UdpPort : 53;  // 4791 too short for a BTH
    rte_mbuf* m = build_udp_mbuf(pool, f);
    FUZZ_CHECK(m != nullptr);
    if (trace) std::fprintf(stderr, "receive udp to port %u\n", f.udp.dst_port);
    deliver(m);
  }

  void deliver(rte_mbuf* m) {
    ParsedPacket p;
    (void)PacketParser().parse(m, p);
    FUZZ_CHECK(inside_.insert(m).second);
    const ReorderCounters before = engine_.counters();
    engine_.receive(m, p, now_, out_);
    FUZZ_CHECK(engine_.counters().in == before.in + 1);
    // A copy of a PSN already held is freed by the engine: no longer ours to track (its address
    // may come back from the pool).
    if (engine_.counters().duplicates_of_held != before.duplicates_of_held) {
      FUZZ_CHECK(engine_.counters().duplicates_of_held == before.duplicates_of_held + 1);
      FUZZ_CHECK(std::find(out_.begin(), out_.end(), m) == out_.end());
      inside_.erase(m);
    }
    received_++;
  }

  // Frees what the engine handed back, checking it is what went in, once each.
  void take() {
    if (trace) {
      for (rte_mbuf* m : out_) {
        ParsedPacket p;
        (void)PacketParser().parse(m, p);
        std::fprintf(stderr, "  out qp %#x psn %u\n", p.dest_qp, p.psn);
      }
    }
    for (rte_mbuf* m : out_) {
      FUZZ_CHECK(inside_.erase(m) == 1);
      rte_pktmbuf_free(m);
    }
    released_ += out_.size();
    out_.clear();
    const ReorderCounters& c = engine_.counters();
    FUZZ_CHECK(c.in == received_);
    FUZZ_CHECK(c.released() == released_);
    FUZZ_CHECK(c.in == c.released() + c.duplicates_of_held + engine_.buffered());
    FUZZ_CHECK(inside_.size() == engine_.buffered());
  }

 private:
  FuzzedDataProvider& in_;
  ReorderEngine engine_;
  std::vector<rte_mbuf*> out_;
  std::unordered_set<rte_mbuf*> inside_;
  uint64_t now_ = 0;
  uint32_t last_psn_ = 0;
  uint64_t received_ = 0;
  uint64_t released_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::init_eal(*argc > 0 ? (*argv)[0] : nullptr);
  pool = fuzz::make_pool("fuzz_reorder", kPoolSize, 2048 + RTE_PKTMBUF_HEADROOM);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  {
    Run run(in);
    for (int steps = 0; steps < 512 && in.remaining_bytes() > 0; ++steps) run.step();
  }
  fuzz::check_pool_whole(pool);
  return 0;
}
