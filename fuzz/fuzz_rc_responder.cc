// The RC responder fed arbitrary request streams: WRITE FIRST/MIDDLE/LAST/ONLY, READ requests
// (any VA, rkey, DMA length, with or without payload), SENDs, ACKs and reserved opcodes, PSNs at,
// before and after the expected one, payload lengths around the MTU, another DestQP, corrupted
// ICRCs and non-RoCE frames; polls with any TX budget, and an ACK pool small enough to run dry.
// Checked: receive() returns what it appended, everything it sends parses as a valid RoCE
// packet (ICRC verified) to the requester, and after the input both pools are whole.
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "dataplane/rc_endpoint/rc_responder.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "fuzz/support.h"

using namespace spraynet;

namespace {

rte_mempool* requests = nullptr;  // what the requester sends
rte_mempool* replies = nullptr;   // the responder's ACKs and READ responses: small, runs dry
constexpr uint16_t kDataRoom = 4096 + 512 + RTE_PKTMBUF_HEADROOM;

constexpr std::array<uint8_t, 10> kOpcodes = {
    opcode::kRcWriteFirst,  opcode::kRcWriteMiddle,  opcode::kRcWriteLast, opcode::kRcWriteOnly,
    opcode::kRcReadRequest, opcode::kRcWriteMiddle,  opcode::kRcWriteLast, opcode::kRcSendOnly,
    opcode::kRcAck,         opcode::kRcWriteOnlyImm,
};
constexpr std::array<uint32_t, 5> kMtus = {256, 512, 1024, 2048, 4096};

RcQpAddress responder_address() {
  RcQpAddress a;
  a.local_mac = {0x02, 0, 0, 0, 0, 0x0B};
  a.peer_mac = {0x02, 0, 0, 0, 0, 0x0A};
  a.local_ip = 0x0A000002;
  a.peer_ip = 0x0A000001;
  a.local_qp = 0x22;
  a.peer_qp = 0x11;
  a.dscp = 26;
  return a;
}

const PacketParser strict(ParseOptions{true, true});

void take(std::vector<rte_mbuf*>& out, const RcQpAddress& a) {
  for (rte_mbuf* m : out) {
    ParsedPacket p;
    FUZZ_CHECK(strict.parse(m, p) == ParseStatus::kOk);
    FUZZ_CHECK(p.kind == PacketKind::kRoce);
    FUZZ_CHECK(p.dest_qp == a.peer_qp && p.dst_ip == a.peer_ip && p.src_ip == a.local_ip);
    FUZZ_CHECK(p.bth_opcode == opcode::kRcAck || (p.bth_opcode >= opcode::kRcReadResponseFirst &&
                                                  p.bth_opcode <= opcode::kRcReadResponseOnly));
    rte_pktmbuf_free(m);
  }
  out.clear();
}

void run(FuzzedDataProvider& in) {
  RcResponderConfig config;
  config.mtu = in.PickValueInArray(kMtus);
  config.first_psn = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint32_t>() & kPsnMask;
  config.max_read_resources = in.ConsumeIntegralInRange<uint32_t>(1, 6);
  config.alloc_retry_ns = in.ConsumeIntegralInRange<uint64_t>(0, 5'000);
  FUZZ_CHECK(config.check().empty());
  const RcQpAddress a = responder_address();
  RcResponder resp(config, a, replies);
  std::vector<rte_mbuf*> out;
  std::vector<uint8_t> payload;
  uint64_t now = 0;

  for (int steps = 0; steps < 256 && in.remaining_bytes() > 0; ++steps) {
    now += in.ConsumeIntegralInRange<uint64_t>(0, 3'000);
    const uint8_t what = in.ConsumeIntegral<uint8_t>();
    if (what % 8 == 0) {
      const size_t budget = in.ConsumeIntegralInRange<size_t>(0, 40);
      const size_t before = out.size();
      const size_t n = resp.poll(now, out, budget);
      FUZZ_CHECK(out.size() == before + n);
      // The budget paces READ responses; pending ACK/NAKs may follow them (rc_responder.h).
      size_t responses = 0;
      for (size_t i = before; i < out.size(); ++i) {
        ParsedPacket p;
        if (PacketParser().parse(out[i], p) == ParseStatus::kOk && p.bth_opcode != opcode::kRcAck) {
          ++responses;
        }
      }
      FUZZ_CHECK(responses <= budget);
      // Keep some of what was sent in flight, so that the reply pool can run dry.
      if (in.ConsumeBool()) take(out, a);
      continue;
    }
    FrameSpec f = responder_address().frame(0);
    std::swap(f.eth.src, f.eth.dst);
    std::swap(f.ip.src, f.ip.dst);
    RoceSpec r;
    r.opcode = in.ConsumeBool() ? in.PickValueInArray(kOpcodes) : in.ConsumeIntegral<uint8_t>();
    r.dest_qp = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? 0x23 : a.local_qp;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        r.psn = in.ConsumeIntegral<uint32_t>() & kPsnMask;
        break;
      case 1:
        r.psn = (resp.expected_psn() + in.ConsumeIntegralInRange<uint32_t>(0, 8)) & kPsnMask;
        break;
      case 2:
        r.psn = (resp.expected_psn() - in.ConsumeIntegralInRange<uint32_t>(1, 8)) & kPsnMask;
        break;
      default:
        r.psn = resp.expected_psn();
    }
    r.ack_req = in.ConsumeBool();
    r.virtual_address = in.ConsumeBool() ? 0x1000 : in.ConsumeIntegral<uint64_t>();
    r.rkey = in.ConsumeBool() ? 0x42 : in.ConsumeIntegral<uint32_t>();
    r.dma_length = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 5 * config.mtu)
                                    : in.ConsumeIntegral<uint32_t>();
    size_t len = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        len = config.mtu;
        break;
      case 1:
        len = config.mtu + in.ConsumeIntegralInRange<int>(-2, 1);
        break;
      case 2:
        len = 0;
        break;
      default:
        len = in.ConsumeIntegralInRange<size_t>(0, config.mtu + 8);
    }
    payload.assign(len, 0x5A);
    f.payload = payload;
    rte_mbuf* m = build_roce_mbuf(requests, f, r);
    if (m == nullptr) continue;  // an opcode the builder does not know, or too long
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {  // a flipped bit anywhere
      const uint32_t at = in.ConsumeIntegralInRange<uint32_t>(0, rte_pktmbuf_data_len(m) - 1);
      rte_pktmbuf_mtod(m, uint8_t*)[at] ^= static_cast<uint8_t>(1u << (what % 8));
    }
    ParsedPacket p;
    (void)PacketParser().parse(m, p);
    const size_t before = out.size();
    const size_t n = resp.receive(m, p, now, out);  // takes m
    FUZZ_CHECK(n <= 2 && out.size() == before + n);
    if (out.size() > 16) take(out, a);
  }
  take(out, a);
  // Drain: pending ACKs/NAKs go out once the pool has room again (a READ of gigabytes may
  // still have responses to send when this gives up; they hold no mbuf).
  for (int i = 0; i < 256 && resp.next_event_ns() != RcResponder::kNever; ++i) {
    now = std::max(now + 1, resp.next_event_ns());
    resp.poll(now, out, 16);
    take(out, a);
  }
  if (!resp.read_responses_pending()) FUZZ_CHECK(!resp.control_pending());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::init_eal(*argc > 0 ? (*argv)[0] : nullptr);
  requests = fuzz::make_pool("fuzz_rc_req", 64, kDataRoom);
  replies = fuzz::make_pool("fuzz_rc_resp", 24, kDataRoom);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  run(in);
  fuzz::check_pool_whole(requests);
  fuzz::check_pool_whole(replies);
  return 0;
}
