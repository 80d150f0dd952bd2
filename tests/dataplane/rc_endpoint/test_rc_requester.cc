#include "dataplane/rc_endpoint/rc_requester.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "dataplane/rc_endpoint/rc_placement_responder.h"
#include "dataplane/rc_endpoint/rc_responder.h"
#include "dataplane/rc_endpoint/rc_write_segmenter.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/rc_test.h"

using namespace spraynet;
using spraynet::test::parse_ok;
using spraynet::test::requester_address;
using spraynet::test::TestPool;

namespace {

// Room for a full 4096-byte-MTU frame in one mbuf.
constexpr uint16_t kBigRoom = RTE_PKTMBUF_HEADROOM + 4096 + 256;

// The responder's answer to `a`'s requester: an RC ACKNOWLEDGE to a.local_qp, with `extension`
// after the AETH (an IRN NAK's SACK).
rte_mbuf* make_response(rte_mempool* pool, const RcQpAddress& a, uint32_t psn, uint8_t syndrome,
                        uint32_t dest_qp = 0, std::span<const uint8_t> extension = {}) {
  FrameSpec f;
  f.eth.src = a.peer_mac;
  f.eth.dst = a.local_mac;
  f.ip.src = a.peer_ip;
  f.ip.dst = a.local_ip;
  f.udp.src_port = rxe_udp_source_port(a.peer_qp);
  f.payload = extension;
  RoceSpec r;
  r.opcode = opcode::kRcAck;
  r.dest_qp = dest_qp != 0 ? dest_qp : a.local_qp;
  r.psn = psn;
  r.syndrome = syndrome;
  rte_mbuf* m = build_roce_mbuf(pool, f, r);
  REQUIRE(m != nullptr);
  return m;
}

// A READ RESPONSE of `payload` bytes to `req` (the AETH, where the opcode has one, says
// `syndrome`).
void read_response(RcRequester& req, rte_mempool* pool, uint8_t op, uint32_t psn, uint32_t payload,
                   uint64_t now, uint8_t syndrome = 0x1F) {
  const RcQpAddress& a = req.address();
  std::vector<uint8_t> bytes(payload, 0x33);
  FrameSpec f;
  f.eth.src = a.peer_mac;
  f.eth.dst = a.local_mac;
  f.ip.src = a.peer_ip;
  f.ip.dst = a.local_ip;
  f.payload = bytes;
  RoceSpec r;
  r.opcode = op;
  r.dest_qp = a.local_qp;
  r.psn = psn;
  r.syndrome = syndrome;
  rte_mbuf* m = build_roce_mbuf(pool, f, r);
  REQUIRE(m != nullptr);
  req.receive(m, parse_ok(m), now);
}

void respond(RcRequester& req, rte_mempool* pool, uint32_t psn, uint8_t syndrome, uint64_t now) {
  rte_mbuf* m = make_response(pool, req.address(), psn, syndrome);
  req.receive(m, parse_ok(m), now);
}
void ack(RcRequester& req, rte_mempool* pool, uint32_t psn, uint64_t now) {
  respond(req, pool, psn, 0x1F, now);
}
void nak(RcRequester& req, rte_mempool* pool, uint32_t psn, uint64_t now) {
  respond(req, pool, psn, aeth::kNakPsnSequenceError, now);
}

std::vector<uint32_t> psns_of(const std::vector<rte_mbuf*>& pkts) {
  std::vector<uint32_t> v;
  for (const rte_mbuf* m : pkts) v.push_back(parse_ok(m).psn);
  return v;
}
std::vector<uint32_t> psn_range(uint32_t first, uint32_t n) {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < n; ++i) v.push_back(psn_add(first, i));
  return v;
}

void free_all(std::vector<rte_mbuf*>& pkts) {
  for (rte_mbuf* m : pkts) rte_pktmbuf_free(m);
  pkts.clear();
}

}  // namespace

TEST_CASE("requester: messages are segmented exactly as RcWriteSegmenter, genuine packets") {
  TestPool pool(1023, kBigRoom);
  for (const uint32_t mtu : {1024u, 4096u}) {
    RcRequesterConfig cfg;
    cfg.message_bytes = 10000;
    cfg.mtu = mtu;
    cfg.messages = 2;
    cfg.first_psn = 0x100;
    const RcQpAddress addr = requester_address();
    RcRequester req(cfg, addr, pool.get());
    const RcWriteSegmenter seg(cfg.message_bytes, mtu);
    REQUIRE(req.packets_per_message() == seg.packets());

    std::vector<rte_mbuf*> out;
    CHECK(req.poll(0, out, 1000) == 2 * seg.packets());
    REQUIRE(out.size() == 2 * seg.packets());
    for (uint32_t msg = 0; msg < 2; ++msg) {
      for (uint32_t i = 0; i < seg.packets(); ++i) {
        const rte_mbuf* m = out[msg * seg.packets() + i];
        const ParsedPacket p = parse_ok(m);  // parses, and the ICRC verifies
        const RcWritePacket w = seg.packet(i, cfg.first_psn + msg * seg.packets());
        CHECK(p.bth_opcode == w.opcode);
        CHECK(p.psn == w.psn);
        CHECK(p.ack_req == w.ack_req);
        CHECK(p.payload_length == w.length);
        CHECK(p.dest_qp == addr.peer_qp);
        CHECK(p.src_ip == addr.local_ip);
        CHECK(p.dst_ip == addr.peer_ip);
        CHECK(p.dscp() == addr.dscp);
        CHECK(p.src_port == rxe_udp_source_port(addr.local_qp));
        CHECK(p.udp_checksum == 0);
        const auto* data = rte_pktmbuf_mtod(m, const uint8_t*);
        CHECK(MacAddress{data[0], data[1], data[2], data[3], data[4], data[5]} == addr.peer_mac);
        if (w.has_reth) {
          RethView reth(const_cast<uint8_t*>(data) + p.bth_offset + kBthSize);
          CHECK(reth.virtual_address() == cfg.remote_va + uint64_t{msg} * cfg.message_bytes);
          CHECK(reth.rkey() == cfg.rkey);
          CHECK(reth.dma_length() == cfg.message_bytes);
          CHECK(p.payload_offset == p.bth_offset + kBthSize + kRethSize);
        } else {
          CHECK(p.payload_offset == p.bth_offset + kBthSize);
        }
      }
    }
    CHECK(req.counters().messages_started == 2);
    CHECK(req.counters().packets_sent == 2 * seg.packets());
    CHECK(req.counters().packets_retransmitted == 0);
    CHECK(req.counters().payload_bytes_sent == 2 * 10000);
    free_all(out);
  }
  CHECK(pool.whole());
}

TEST_CASE("requester: AckReq on every 66th packet of a long message, as rxe's noack_pkts") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 200 * 1024;
  cfg.mtu = 1024;
  cfg.max_in_flight = 256;
  cfg.messages = 2;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 256) == 256);
  std::vector<uint32_t> asked;
  for (size_t i = 0; i < out.size(); ++i) {
    if (parse_ok(out[i]).ack_req) asked.push_back(static_cast<uint32_t>(i));
  }
  // rxe: ack_req = last || noack_pkts++ > 64, noack_pkts = 0 after any AckReq packet; the count
  // runs on across messages: 199 is the last of message 0, 265 is 66 after it.
  CHECK(asked == std::vector<uint32_t>{65, 131, 197, 199});
  free_all(out);
  CHECK(pool.whole());
}

TEST_CASE("requester: the window bounds packets in flight; a coalesced ACK frees it") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 100 * 1024;  // 100 packets
  cfg.max_in_flight = 66;          // the least that max_pkt_per_ack 64 allows
  cfg.messages = 1;
  cfg.first_psn = 1000;
  cfg.retransmit_timeout_ns = 1'000'000;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(req.poll(10, out, 1000) == 66);
  CHECK(req.in_flight() == 66);
  CHECK(req.poll(20, out, 1000) == 0);
  // Nothing to do but wait for a response or the timer.
  CHECK(req.next_event_ns() == 10 + 1'000'000);
  CHECK(psns_of(out) == psn_range(1000, 66));
  free_all(out);

  // One ACK for PSN 1009 acknowledges 1000..1009 (ACKs are cumulative).
  ack(req, pool.get(), 1009, 500);
  CHECK(req.counters().acks_received == 1);
  CHECK(req.oldest_unacked_psn() == 1010);
  CHECK(req.counters().bytes_acked == 10 * 1024);
  CHECK(req.next_event_ns() == 0);
  CHECK(req.poll(600, out, 1000) == 10);
  CHECK(psns_of(out) == psn_range(1066, 10));
  free_all(out);

  // Stale and never-sent ACKs change nothing.
  ack(req, pool.get(), 1005, 700);
  ack(req, pool.get(), 1000 + 500, 700);
  CHECK(req.counters().stale_responses == 1);
  CHECK(req.counters().invalid_responses == 1);
  CHECK(req.oldest_unacked_psn() == 1010);
  CHECK(req.poll(800, out, 1000) == 0);

  // The rest, then the final ACK completes the message.
  ack(req, pool.get(), 1075, 900);
  CHECK(req.poll(900, out, 1000) == 24);
  free_all(out);
  CHECK_FALSE(req.done());
  ack(req, pool.get(), 1099, 5000);
  CHECK(req.done());
  CHECK(req.counters().messages_completed == 1);
  CHECK(req.counters().bytes_acked == 100 * 1024);
  CHECK(req.counters().completion.count == 1);
  CHECK(req.counters().completion.min_ns == 5000 - 10);  // first packet sent -> last ACKed
  CHECK(req.completion_times().max_ns() == 4990);
  CHECK_FALSE(req.retransmit_timer_armed());
  CHECK(req.next_event_ns() == RcRequester::kNever);
  CHECK(pool.whole());
}

TEST_CASE("requester: a NAK goes back N from its PSN; retransmissions are counted") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 20 * 1024;
  cfg.messages = 1;
  cfg.first_psn = 0x40;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 100) == 20);
  free_all(out);

  nak(req, pool.get(), 0x47, 100);  // the responder expects 0x47: 0x40..0x46 arrived
  CHECK(req.counters().naks_received == 1);
  CHECK(req.counters().nak_retries == 1);
  CHECK(req.oldest_unacked_psn() == 0x47);
  CHECK(req.counters().bytes_acked == 7 * 1024);
  CHECK(req.next_psn() == 0x47);
  CHECK(req.next_event_ns() == 0);

  REQUIRE(req.poll(200, out, 100) == 13);
  CHECK(psns_of(out) == psn_range(0x47, 13));  // exactly 0x47..0x53, nothing else
  CHECK(parse_ok(out[0]).bth_opcode == opcode::kRcWriteMiddle);
  CHECK(parse_ok(out.back()).bth_opcode == opcode::kRcWriteLast);
  CHECK(req.counters().packets_retransmitted == 13);
  CHECK(req.counters().packets_sent == 33);
  free_all(out);

  // While that retry is under way, another NAK starts no second one (rxe's started_retry).
  nak(req, pool.get(), 0x47, 300);
  CHECK(req.counters().naks_ignored == 1);
  CHECK(req.poll(300, out, 100) == 0);
  // A stale NAK is ignored too.
  nak(req, pool.get(), 0x41, 300);
  CHECK(req.counters().stale_responses == 1);

  ack(req, pool.get(), 0x53, 400);
  CHECK(req.done());
  CHECK(req.counters().timeouts == 0);
  CHECK(pool.whole());
}

TEST_CASE("requester: an ACK ends the retry, so the next NAK goes back again") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 30 * 1024;
  cfg.messages = 1;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  req.poll(0, out, 100);
  free_all(out);
  nak(req, pool.get(), 5, 10);
  CHECK(req.poll(20, out, 100) == 25);
  free_all(out);
  ack(req, pool.get(), 9, 30);
  nak(req, pool.get(), 12, 40);
  CHECK(req.counters().nak_retries == 2);
  CHECK(req.poll(50, out, 100) == 18);
  CHECK(psns_of(out) == psn_range(12, 18));
  CHECK(req.counters().packets_retransmitted == 25 + 18);
  free_all(out);
  CHECK(pool.whole());
}

TEST_CASE("requester: the retransmit timeout goes back to the oldest unacked, not 1 ns early") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 10 * 1024;
  cfg.messages = 1;
  cfg.first_psn = 7;
  const uint64_t T = cfg.retransmit_timeout_ns;
  REQUIRE(T == 67'108'864);  // perftest's 4.096 us x 2^14
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  const uint64_t t0 = 5000;
  REQUIRE(req.poll(t0, out, 100) == 10);
  free_all(out);
  CHECK(req.retransmit_deadline_ns() == t0 + T);  // armed by the first send

  const uint64_t t1 = t0 + 100;
  ack(req, pool.get(), 10, t1);  // 7..10 acknowledged: the timer restarts
  CHECK(req.retransmit_deadline_ns() == t1 + T);
  CHECK(req.next_event_ns() == t1 + T);

  CHECK(req.poll(t1 + T - 1, out, 100) == 0);
  CHECK(req.counters().timeouts == 0);
  REQUIRE(req.poll(t1 + T, out, 100) == 6);
  CHECK(req.counters().timeouts == 1);
  CHECK(psns_of(out) == psn_range(11, 6));
  CHECK(req.counters().packets_retransmitted == 6);
  CHECK(req.retransmit_deadline_ns() == t1 + 2 * T);  // re-armed by the resend
  free_all(out);

  // Timed out again: everything unacknowledged goes once more.
  REQUIRE(req.poll(t1 + 2 * T, out, 100) == 6);
  CHECK(req.counters().timeouts == 2);
  free_all(out);
  ack(req, pool.get(), 16, t1 + 2 * T + 10);
  CHECK(req.done());
  CHECK_FALSE(req.retransmit_timer_armed());
  CHECK(req.poll(t1 + 10 * T, out, 100) == 0);
  CHECK(req.counters().timeouts == 2);
  CHECK(pool.whole());
}

TEST_CASE("requester: PSNs wrap at 2^24 in packets, ACKs and NAKs") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 10 * 1024;
  cfg.messages = 1;
  cfg.first_psn = 0xFFFFFC;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 100) == 10);
  CHECK(psns_of(out) ==
        std::vector<uint32_t>{0xFFFFFC, 0xFFFFFD, 0xFFFFFE, 0xFFFFFF, 0, 1, 2, 3, 4, 5});
  free_all(out);
  ack(req, pool.get(), 0x000000, 10);  // acknowledges 0xFFFFFC..0x000000
  CHECK(req.oldest_unacked_psn() == 1);
  CHECK(req.counters().bytes_acked == 5 * 1024);
  ack(req, pool.get(), 0xFFFFFE, 20);  // before the wrap: stale
  CHECK(req.counters().stale_responses == 1);
  nak(req, pool.get(), 0x000004, 30);
  REQUIRE(req.poll(40, out, 100) == 2);
  CHECK(psns_of(out) == std::vector<uint32_t>{4, 5});
  free_all(out);
  ack(req, pool.get(), 5, 50);
  CHECK(req.done());
  CHECK(pool.whole());
}

TEST_CASE("requester: bad input is counted and freed, never acted on") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 4 * 1024;
  cfg.messages = 1;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  req.poll(0, out, 100);
  free_all(out);
  const RcQpAddress& a = req.address();

  // ACK for another QP.
  rte_mbuf* m = make_response(pool.get(), a, 3, 0x1F, a.local_qp + 1);
  req.receive(m, parse_ok(m), 1);
  CHECK(req.counters().wrong_qp == 1);

  // Bad ICRC: the AETH MSN changed after the ICRC was computed.
  m = make_response(pool.get(), a, 3, 0x1F);
  ParsedPacket p = parse_ok(m);
  rte_pktmbuf_mtod(m, uint8_t*)[p.bth_offset + kBthSize + 3] ^= 0x01;
  req.receive(m, p, 1);
  CHECK(req.counters().icrc_errors == 1);

  // A WRITE handed to the requester.
  FrameSpec f;
  RoceSpec r;
  r.opcode = opcode::kRcWriteOnly;
  r.dest_qp = a.local_qp;
  m = build_roce_mbuf(pool.get(), f, r);
  req.receive(m, parse_ok(m), 1);
  CHECK(req.counters().bad_opcode == 1);

  // Not RoCE at all (what a parser failure leaves), and headers the mbuf does not hold.
  m = pool.alloc();
  req.receive(m, ParsedPacket{}, 1);
  m = make_response(pool.get(), a, 3, 0x1F);
  p = parse_ok(m);
  rte_pktmbuf_trim(m, 20);
  req.receive(m, p, 1);
  CHECK(req.counters().malformed == 2);

  // RNR NAK: counted, left to the timer. (A remote access error NAK fails the QP: see the
  // error state tests.)
  respond(req, pool.get(), 0, 0x20 | 0x0E, 1);
  CHECK(req.counters().other_naks == 1);

  CHECK(req.counters().responses_received == 6);
  CHECK(req.oldest_unacked_psn() == 0);
  CHECK(req.counters().bytes_acked == 0);
  CHECK(req.counters().acks_received == 0);
  ack(req, pool.get(), 3, 2);
  CHECK(req.done());
  CHECK(pool.whole());
}

TEST_CASE("requester: an empty mempool is counted and retried later, without spinning") {
  TestPool pool(8);
  TestPool acks;
  RcRequesterConfig cfg;
  cfg.message_bytes = 20 * 1024;
  cfg.messages = 1;
  cfg.alloc_retry_ns = 500;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(req.poll(100, out, 100) == 8);
  CHECK(req.counters().pool_empty == 1);
  CHECK(req.next_event_ns() == 600);
  CHECK(req.poll(100, out, 100) == 0);  // no new attempt before the retry time
  CHECK(req.poll(599, out, 100) == 0);
  CHECK(req.counters().pool_empty == 1);
  free_all(out);
  CHECK(req.poll(600, out, 100) == 8);
  CHECK(psns_of(out) == psn_range(8, 8));
  CHECK(req.counters().pool_empty == 2);
  free_all(out);
  CHECK(req.poll(1100, out, 100) == 4);
  free_all(out);
  ack(req, acks.get(), 19, 2000);
  CHECK(req.done());
  CHECK(req.counters().packets_retransmitted == 0);
  CHECK(pool.whole());
  CHECK(acks.whole());
}

TEST_CASE("requester: message count and inter-message gap") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 512;
  cfg.messages = 3;
  cfg.message_gap_ns = 1000;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(req.poll(0, out, 100) == 1);
  CHECK(req.next_event_ns() == 1000);
  CHECK(req.poll(999, out, 100) == 0);
  CHECK(req.poll(1000, out, 100) == 1);
  ack(req, pool.get(), 0, 1500);
  CHECK(req.poll(2500, out, 100) == 1);
  CHECK(req.poll(9000, out, 100) == 0);  // three messages, no more
  CHECK(req.counters().messages_started == 3);
  CHECK(psns_of(out) == psn_range(0, 3));
  free_all(out);
  ack(req, pool.get(), 2, 3000);
  CHECK(req.done());
  CHECK(req.counters().messages_completed == 3);
  const CompletionTimeStats& s = req.completion_times();
  CHECK(s.count() == 3);
  CHECK(s.min_ns() == 500);   // sent at 2500, ACKed at 3000
  CHECK(s.max_ns() == 2000);  // sent at 1000, ACKed at 3000
  CHECK(s.summary().sum_ns == 1500 + 2000 + 500);
  CHECK(pool.whole());
}

TEST_CASE("requester: configuration errors are refused with a reason") {
  TestPool pool;
  TestPool small(63, RTE_MBUF_DEFAULT_BUF_SIZE);
  RcRequesterConfig cfg;
  CHECK(cfg.check().empty());
  cfg.mtu = 1500;
  CHECK_THROWS_AS(RcRequester(cfg, requester_address(), pool.get()), std::invalid_argument);
  cfg.mtu = 1024;
  cfg.max_in_flight = 65;  // below max_pkt_per_ack + 2
  CHECK_FALSE(cfg.check().empty());
  cfg.max_in_flight = 128;
  cfg.first_psn = 1 << 24;
  CHECK_FALSE(cfg.check().empty());
  cfg.first_psn = 0;
  cfg.mtu = 4096;  // a 4 KB frame does not fit a 2 KB mbuf
  CHECK_THROWS_AS(RcRequester(cfg, requester_address(), small.get()), std::invalid_argument);
  RcQpAddress a = requester_address();
  a.peer_qp = 1 << 24;
  cfg.mtu = 1024;
  CHECK_THROWS_AS(RcRequester(cfg, a, pool.get()), std::invalid_argument);
  CHECK(pool.whole());
}

// ---- posted mode -------------------------------------------------------------------------------

namespace {

// What the requester put on the wire, as the test reads it back.
struct SentPacket {
  uint64_t t = 0;
  uint32_t psn = 0;
  uint8_t opcode = 0;
  bool ack_req = false;
  uint32_t payload = 0;
  uint64_t va = 0;  // RETH, when present
  uint32_t dma_length = 0;
  bool has_reth = false;
};

// A requester and a real RcResponder joined by two one-way links in virtual time: requests are
// serialised one per ser_ns (the requester is polled for one packet when the link is free) and
// arrive prop_ns later; responses arrive prop_ns after they are sent. `drop` may drop a
// request's first transmission of a PSN.
class Loop {
 public:
  Loop(RcRequester& req, RcResponder& resp) : req_(req), resp_(resp) {}
  ~Loop() {
    for (auto& [t, m] : fwd_) rte_pktmbuf_free(m);
    for (auto& [t, m] : back_) rte_pktmbuf_free(m);
  }

  uint64_t ser_ns = 100;
  uint64_t prop_ns = 1000;
  std::function<bool(const ParsedPacket&)> drop;
  // May drop a response (ACK, NAK, READ response) the responder sends, each PSN once.
  std::function<bool(const ParsedPacket&)> drop_back;
  uint64_t dropped_back = 0;
  std::vector<SentPacket> sent;
  std::map<uint32_t, uint64_t> ack_arrival;  // ACK PSN -> first arrival time at the requester
  uint64_t dropped = 0;
  uint64_t now = 0;

  // Runs until the requester is done and both links are empty, or nothing can happen any more.
  bool run(uint64_t max_steps = 1'000'000) {
    std::vector<rte_mbuf*> out;
    for (uint64_t step = 0; step < max_steps; ++step) {
      while (!fwd_.empty() && fwd_.front().first <= now) {
        rte_mbuf* m = fwd_.front().second;
        fwd_.pop_front();
        out.clear();
        resp_.receive(m, parse_ok(m), now, out);
        for (rte_mbuf* r : out) send_back(r);
      }
      while (!back_.empty() && back_.front().first <= now) {
        rte_mbuf* m = back_.front().second;
        back_.pop_front();
        const ParsedPacket p = parse_ok(m);
        ack_arrival.emplace(p.psn, now);
        req_.receive(m, p, now);
      }
      out.clear();
      resp_.poll(now, out);
      for (rte_mbuf* r : out) send_back(r);
      if (now >= link_free_) {
        out.clear();
        if (req_.poll(now, out, 1) == 1) {
          link_free_ = now + ser_ns;
          record(out[0]);
        }
      }
      if (req_.done() && fwd_.empty() && back_.empty()) return true;
      uint64_t next = std::min(fwd_.empty() ? RcRequester::kNever : fwd_.front().first,
                               back_.empty() ? RcRequester::kNever : back_.front().first);
      next = std::min(next, resp_.next_event_ns());
      const uint64_t r = req_.next_event_ns();
      if (r != RcRequester::kNever) next = std::min(next, std::max(r, link_free_));
      if (next == RcRequester::kNever) return false;
      now = std::max(now, next);
    }
    return false;
  }

 private:
  void send_back(rte_mbuf* m) {
    if (drop_back) {
      const ParsedPacket p = parse_ok(m);
      if (dropped_back_psns_.count(p.psn) == 0 && drop_back(p)) {
        dropped_back_psns_.insert(p.psn);
        ++dropped_back;
        rte_pktmbuf_free(m);
        return;
      }
    }
    back_.emplace_back(now + prop_ns, m);
  }

  void record(rte_mbuf* m) {
    const ParsedPacket p = parse_ok(m);
    SentPacket s;
    s.t = now;
    s.psn = p.psn;
    s.opcode = p.bth_opcode;
    s.ack_req = p.ack_req;
    s.payload = p.payload_length;
    s.has_reth = p.bth_opcode == opcode::kRcWriteFirst || p.bth_opcode == opcode::kRcWriteOnly ||
                 p.bth_opcode == opcode::kRcReadRequest;
    if (s.has_reth) {
      RethView reth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
      s.va = reth.virtual_address();
      s.dma_length = reth.dma_length();
    }
    const bool first_time = seen_.insert(p.psn).second;
    sent.push_back(s);
    if (first_time && drop && drop(p)) {
      ++dropped;
      rte_pktmbuf_free(m);
      return;
    }
    fwd_.emplace_back(now + prop_ns, m);
  }

  RcRequester& req_;
  RcResponder& resp_;
  std::deque<std::pair<uint64_t, rte_mbuf*>> fwd_, back_;
  std::set<uint32_t> seen_;
  std::set<uint32_t> dropped_back_psns_;
  uint64_t link_free_ = 0;
};

RcQpAddress responder_address(const RcQpAddress& a) {
  RcQpAddress b;
  b.local_mac = a.peer_mac;
  b.peer_mac = a.local_mac;
  b.local_ip = a.peer_ip;
  b.peer_ip = a.local_ip;
  b.local_qp = a.peer_qp;
  b.peer_qp = a.local_qp;
  b.dscp = a.dscp;
  return b;
}

uint32_t ceil_div(uint64_t a, uint32_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

}  // namespace

TEST_CASE("requester posted: variable sizes against a real responder, every message exact") {
  const std::vector<uint32_t> sizes = {1, 100, 1024, 1025, 65536, 3u << 20};
  const uint64_t later = 1000;  // message 1 and the rest are posted for t = 1000
  for (const uint32_t mtu : {1024u, 4096u}) {
    INFO("mtu " << mtu);
    TestPool pool(1023, kBigRoom);
    RcRequesterConfig cfg;
    cfg.posted = true;
    cfg.record_completions = true;
    cfg.mtu = mtu;
    cfg.first_psn = 0xFFFF80;  // across the 2^24 wrap
    cfg.messages = 1;          // ignored in posted mode
    cfg.message_bytes = 7;     // ignored in posted mode
    RcRequester req(cfg, requester_address(), pool.get());
    RcResponderConfig rcfg;
    rcfg.mtu = mtu;
    rcfg.first_psn = cfg.first_psn;
    RcResponder resp(rcfg, responder_address(req.address()), pool.get());

    CHECK(req.done());  // nothing posted
    CHECK(req.next_event_ns() == RcRequester::kNever);
    std::vector<uint64_t> post_ns;
    for (size_t k = 0; k < sizes.size(); ++k) {
      post_ns.push_back(k == 0 ? 0 : later);
      req.post(sizes[k], post_ns.back());
    }
    CHECK_FALSE(req.done());
    CHECK(req.messages_posted() == sizes.size());
    CHECK(req.next_event_ns() == 0);

    Loop loop(req, resp);
    REQUIRE(loop.run());
    CHECK(req.done());
    CHECK(req.next_event_ns() == RcRequester::kNever);
    CHECK(req.messages_outstanding() == 0);

    uint64_t total_bytes = 0, total_packets = 0;
    for (const uint32_t b : sizes) {
      total_bytes += b;
      total_packets += ceil_div(b, mtu);
    }
    const RcRequesterCounters& c = req.counters();
    CHECK(c.messages_started == sizes.size());
    CHECK(c.messages_completed == sizes.size());
    CHECK(c.bytes_completed == total_bytes);
    CHECK(c.bytes_acked == total_bytes);
    CHECK(c.payload_bytes_sent == total_bytes);
    CHECK(c.packets_sent == total_packets);
    CHECK(c.packets_retransmitted == 0);
    CHECK(c.timeouts == 0);
    CHECK(c.nak_retries == 0);
    CHECK(resp.counters().bytes_written == total_bytes);
    CHECK(resp.counters().accepted == total_packets);
    CHECK(resp.counters().messages_received == sizes.size());
    CHECK(resp.counters().duplicates == 0);
    CHECK(resp.counters().out_of_order_dropped == 0);
    CHECK(resp.counters().opcode_sequence_errors == 0);
    CHECK(resp.counters().length_errors == 0);

    // Packet by packet: PSNs continue across messages, each message segmented by its own size,
    // RETH per message, AckReq as rxe (last of each message, or the 66th without one).
    REQUIRE(loop.sent.size() == total_packets);
    size_t i = 0;
    uint32_t noack = 0;
    uint64_t va = cfg.remote_va;
    std::vector<uint64_t> first_sent, last_psn;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const uint32_t n = ceil_div(sizes[k], mtu);
      first_sent.push_back(loop.sent[i].t);
      CHECK(loop.sent[i].t >= post_ns[k]);
      for (uint32_t j = 0; j < n; ++j, ++i) {
        const SentPacket& s = loop.sent[i];
        INFO("message " << k << " packet " << j);
        CHECK(s.psn == psn_add(cfg.first_psn, static_cast<uint32_t>(i)));
        const uint8_t want = n == 1      ? opcode::kRcWriteOnly
                             : j == 0    ? opcode::kRcWriteFirst
                             : j + 1 < n ? opcode::kRcWriteMiddle
                                         : opcode::kRcWriteLast;
        CHECK(s.opcode == want);
        CHECK(s.payload == (j + 1 < n ? mtu : sizes[k] - j * mtu));
        CHECK(s.has_reth == (j == 0));
        if (j == 0) {
          CHECK(s.dma_length == sizes[k]);
          CHECK(s.va == va);
        }
        const bool ack_req = j + 1 == n || noack > cfg.max_pkt_per_ack;
        CHECK(s.ack_req == ack_req);
        noack = ack_req ? 0 : noack + 1;
      }
      last_psn.push_back(loop.sent[i - 1].psn);
      va += sizes[k];
    }
    // Message 1 waited for its post time although the link was free long before.
    CHECK(first_sent[0] == 0);
    CHECK(first_sent[1] == later);
    // A long message asks for ACKs in between (3 MiB at 1024: every 66th packet).
    CHECK(std::count_if(loop.sent.begin(), loop.sent.end(), [](const SentPacket& s) {
            return s.ack_req;
          }) > static_cast<long>(sizes.size()));

    // Completions: one per message, in order, with its bytes, post, first send and the time
    // the ACK of its last packet came back.
    std::vector<MessageCompletion> done;
    CHECK(req.take_completions(done) == sizes.size());
    REQUIRE(done.size() == sizes.size());
    uint64_t sum_from_post = 0, sum_from_send = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      INFO("message " << k);
      CHECK(done[k].qp_index == 0);
      CHECK(done[k].bytes == sizes[k]);
      CHECK(done[k].post_ns == post_ns[k]);
      CHECK(done[k].first_sent_ns == first_sent[k]);
      REQUIRE(loop.ack_arrival.count(last_psn[k]) == 1);
      CHECK(done[k].completed_ns == loop.ack_arrival[last_psn[k]]);
      CHECK(done[k].completed_ns > done[k].first_sent_ns);
      sum_from_post += done[k].completed_ns - done[k].post_ns;
      sum_from_send += done[k].completed_ns - done[k].first_sent_ns;
    }
    // Later messages waited behind earlier ones: the two measures differ, and FCT is from post.
    CHECK(sum_from_post > sum_from_send);
    CHECK(req.completion_times().count() == sizes.size());
    CHECK(req.completion_times().summary().sum_ns == sum_from_post);
    CHECK(c.completion.sum_ns == sum_from_post);
    CHECK(req.completion_times().max_ns() == done.back().completed_ns - later);
    CHECK(req.take_completions(done) == 0);  // taken: gone
    CHECK(done.size() == sizes.size());
    CHECK(pool.whole());
  }
}

TEST_CASE("requester posted: a lost packet (NAK) or a lost tail (timeout) goes back N") {
  const std::vector<uint32_t> sizes = {5000, 20 * 1024 + 1, 3000};  // 5, 21, 3 packets
  for (const bool tail : {false, true}) {
    INFO((tail ? "tail lost" : "middle lost"));
    TestPool pool;
    RcRequesterConfig cfg;
    cfg.posted = true;
    cfg.record_completions = true;
    cfg.first_psn = 100;
    cfg.retransmit_timeout_ns = 1'000'000;
    RcRequester req(cfg, requester_address(), pool.get());
    RcResponderConfig rcfg;
    rcfg.first_psn = cfg.first_psn;
    RcResponder resp(rcfg, responder_address(req.address()), pool.get());
    for (const uint32_t b : sizes) req.post(b, 0);

    Loop loop(req, resp);
    // Middle: packet 3 of message 1 (seq 8). Tail: the last packet of the last message.
    const uint32_t lost = cfg.first_psn + (tail ? 5 + 21 + 3 - 1 : 8);
    loop.drop = [&](const ParsedPacket& p) { return p.psn == lost; };
    REQUIRE(loop.run());
    CHECK(loop.dropped == 1);
    const RcRequesterCounters& c = req.counters();
    CHECK(c.messages_completed == 3);
    CHECK(c.bytes_completed == 5000 + 20 * 1024 + 1 + 3000);
    CHECK(resp.counters().bytes_written == 5000 + 20 * 1024 + 1 + 3000);
    CHECK(resp.counters().messages_received == 3);
    CHECK(resp.counters().accepted == 29);
    if (tail) {
      CHECK(c.timeouts == 1);
      CHECK(c.nak_retries == 0);
      // Back to the oldest unacknowledged: all of message 2 (its AckReq packet was the lost one).
      CHECK(c.packets_retransmitted == 3);
      CHECK(resp.counters().duplicates == 2);
      CHECK(req.completion_times().max_ns() >= cfg.retransmit_timeout_ns);
    } else {
      CHECK(c.timeouts == 0);
      CHECK(c.nak_retries == 1);
      CHECK(resp.counters().naks_sent == 1);
      CHECK(c.packets_retransmitted == 1 + resp.counters().out_of_order_dropped);
      // The resend starts exactly at the lost PSN, a MIDDLE of message 1, with its offset.
      auto again = std::find_if(loop.sent.begin() + 9, loop.sent.end(),
                                [&](const SentPacket& s) { return s.psn == lost; });
      REQUIRE(again != loop.sent.end());
      CHECK(again->opcode == opcode::kRcWriteMiddle);
      CHECK(again->payload == 1024);
      for (auto it = again; it != loop.sent.end(); ++it) {
        CHECK(it->psn == psn_add(lost, static_cast<uint32_t>(it - again)));
      }
    }
    // PSNs of the whole run never go past the last message's.
    for (const SentPacket& s : loop.sent) CHECK(psn_diff(s.psn, cfg.first_psn + 28) >= 0);
    std::vector<MessageCompletion> done;
    CHECK(req.take_completions(done) == 3);
    CHECK(pool.whole());
  }
}

TEST_CASE("requester posted: idle until posted, post times, message gap, window, bad posts") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.posted = true;
  cfg.message_gap_ns = 300;
  cfg.max_in_flight = 66;
  cfg.retransmit_timeout_ns = 1'000'000;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(req.done());
  CHECK(req.next_event_ns() == RcRequester::kNever);
  CHECK(req.poll(0, out, 100) == 0);
  CHECK_FALSE(req.retransmit_timer_armed());

  CHECK_THROWS_AS(req.post(0, 0), std::invalid_argument);
  CHECK_THROWS_AS(req.post(0x80000001u, 0), std::invalid_argument);
  CHECK(req.messages_posted() == 0);

  req.post(2048, 5000);
  CHECK_FALSE(req.done());
  CHECK(req.next_event_ns() == 5000);  // not sent before its post time
  CHECK(req.poll(4999, out, 100) == 0);
  CHECK(req.poll(5000, out, 100) == 2);
  CHECK(req.next_event_ns() == 5000 + 1'000'000);  // only the timer is left

  // Two more, posted in the past: the second waits for the message gap after the first.
  req.post(100 * 1024, 0);
  req.post(10, 0);
  CHECK(req.next_event_ns() == 5300);
  CHECK(req.poll(5299, out, 100) == 0);
  CHECK(req.poll(5300, out, 100) == 64);  // the window: 66 in flight
  CHECK(req.in_flight() == 66);
  CHECK(req.next_event_ns() == 5000 + 1'000'000);
  CHECK(psns_of(out) == psn_range(0, 66));
  free_all(out);

  ack(req, pool.get(), 65, 6000);  // the 64th of the long message asked for an ACK
  CHECK(req.counters().messages_completed == 1);
  // The rest of the 100 KB message, then the 10-byte one (its gap ran from 5300 to 5600).
  REQUIRE(req.poll(6000, out, 1000) == 37);
  CHECK(psns_of(out) == psn_range(66, 37));
  const ParsedPacket p = parse_ok(out.back());
  CHECK(p.bth_opcode == opcode::kRcWriteOnly);
  CHECK(p.payload_length == 10);
  CHECK(p.ack_req);
  CHECK(req.poll(6000, out, 1000) == 0);
  free_all(out);
  ack(req, pool.get(), 101, 7000);
  CHECK(req.counters().messages_completed == 2);
  CHECK_FALSE(req.done());
  ack(req, pool.get(), 102, 8000);
  CHECK(req.done());
  CHECK(req.next_event_ns() == RcRequester::kNever);
  CHECK(req.counters().bytes_completed == 2048 + 100 * 1024 + 10);
  // record_completions is off: nothing kept, while the histogram still counts (from post).
  std::vector<MessageCompletion> done;
  CHECK(req.take_completions(done) == 0);
  CHECK(req.completion_times().count() == 3);
  CHECK(req.completion_times().max_ns() == 8000);  // the 10-byte one, posted at 0

  // A fixed-mode requester takes no posts.
  RcRequesterConfig fixed;
  fixed.messages = 1;
  RcRequester f(fixed, requester_address(), pool.get());
  CHECK_THROWS_AS(f.post(100, 0), std::invalid_argument);
  CHECK(pool.whole());
}

TEST_CASE("requester fixed: completions recorded, post = first send, bytes_completed") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 3000;
  cfg.messages = 2;
  cfg.message_gap_ns = 1000;
  cfg.record_completions = true;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(req.poll(100, out, 100) == 3);
  CHECK(req.poll(1100, out, 100) == 3);
  free_all(out);
  ack(req, pool.get(), 2, 1500);
  ack(req, pool.get(), 5, 2500);
  CHECK(req.done());
  CHECK(req.counters().bytes_completed == 6000);
  std::vector<MessageCompletion> done;
  REQUIRE(req.take_completions(done) == 2);
  CHECK(done[0].bytes == 3000);
  CHECK(done[0].post_ns == 100);
  CHECK(done[0].first_sent_ns == 100);
  CHECK(done[0].completed_ns == 1500);
  CHECK(done[1].post_ns == 1100);
  CHECK(done[1].first_sent_ns == 1100);
  CHECK(done[1].completed_ns == 2500);
  CHECK(req.completion_times().summary().sum_ns == 1400 + 1400);

  RcRequesterCounters sum;
  sum += req.counters();
  sum += req.counters();
  CHECK(sum.bytes_completed == 12000);
  CHECK(pool.whole());
}

TEST_CASE("requester selective: a NAK resends the one PSN it names, with AckReq; no latch") {
  TestPool pool(1023, kBigRoom);
  {
    RcRequesterConfig cfg;
    cfg.message_bytes = 8 * 1024;
    cfg.mtu = 1024;
    cfg.messages = 2;
    cfg.first_psn = 0x100;
    cfg.selective_retransmit = true;
    RcRequester req(cfg, requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 100) == 16);
    CHECK(psns_of(out) == psn_range(0x100, 16));
    free_all(out);

    nak(req, pool.get(), 0x105, 100);  // acknowledges 0x100..0x104, asks for 0x105 alone
    CHECK(req.oldest_unacked_psn() == 0x105);
    CHECK(req.next_event_ns() == 0);
    REQUIRE(req.poll(200, out, 100) == 1);
    const ParsedPacket p = parse_ok(out[0]);
    CHECK(p.psn == 0x105);
    CHECK(p.bth_opcode == opcode::kRcWriteMiddle);
    CHECK(p.ack_req);
    free_all(out);
    CHECK(req.poll(300, out, 100) == 0);  // nothing else: no go-back-N
    CHECK(req.next_psn() == 0x110);

    // A second hole, NAKed while the first's retry is not yet acknowledged: resent too (rxe's
    // started_retry would have ignored it).
    nak(req, pool.get(), 0x10B, 400);
    REQUIRE(req.poll(500, out, 100) == 1);
    CHECK(parse_ok(out[0]).psn == 0x10B);
    free_all(out);
    // A NAK for a PSN already queued is not queued twice.
    nak(req, pool.get(), 0x10C, 600);
    nak(req, pool.get(), 0x10C, 601);
    REQUIRE(req.poll(700, out, 100) == 1);
    free_all(out);

    ack(req, pool.get(), 0x10F, 800);
    CHECK(req.done());
    const auto& c = req.counters();
    CHECK(c.packets_sent == 19);
    CHECK(c.packets_retransmitted == 3);
    CHECK(c.selective_retransmissions == 3);
    CHECK(c.nak_retries == 4);
    CHECK(c.naks_ignored == 0);
    CHECK(c.messages_completed == 2);
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "requester selective: a timeout resends the oldest PSN only; each partial ACK after it "
    "resends the next missing one at once (a lost tail)") {
  TestPool pool(1023, kBigRoom);
  {
    RcRequesterConfig cfg;
    cfg.message_bytes = 8 * 1024;
    cfg.mtu = 1024;
    cfg.messages = 1;
    cfg.retransmit_timeout_ns = 1'000'000;
    cfg.selective_retransmit = true;
    RcRequester req(cfg, requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 100) == 8);
    free_all(out);
    ack(req, pool.get(), 3, 100);  // 4..7 lost
    CHECK(req.retransmit_deadline_ns() == 1'000'100);
    CHECK(req.poll(1'000'099, out, 100) == 0);
    REQUIRE(req.poll(1'000'100, out, 100) == 1);
    CHECK(psns_of(out) == std::vector<uint32_t>{4});
    free_all(out);
    CHECK(req.counters().timeouts == 1);

    ack(req, pool.get(), 4, 1'000'200);  // the responder still misses 5: resent at once
    REQUIRE(req.poll(1'000'200, out, 100) == 1);
    CHECK(psns_of(out) == std::vector<uint32_t>{5});
    free_all(out);
    ack(req, pool.get(), 6, 1'000'300);  // 6 had arrived: 7 next
    REQUIRE(req.poll(1'000'300, out, 100) == 1);
    CHECK(psns_of(out) == std::vector<uint32_t>{7});
    free_all(out);
    ack(req, pool.get(), 7, 1'000'400);
    CHECK(req.done());
    CHECK(req.poll(3'000'000, out, 100) == 0);
    CHECK(req.counters().packets_retransmitted == 3);
    CHECK(req.counters().timeouts == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("requester selective: an ACK outside timeout recovery resends nothing") {
  TestPool pool(1023, kBigRoom);
  {
    RcRequesterConfig cfg;
    cfg.message_bytes = 8 * 1024;
    cfg.mtu = 1024;
    cfg.messages = 1;
    cfg.selective_retransmit = true;
    RcRequester req(cfg, requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 100) == 8);
    free_all(out);
    ack(req, pool.get(), 2, 100);  // 3 may merely be late (sprayed): wait for a NAK or the timer
    CHECK(req.poll(200, out, 100) == 0);
    CHECK(req.counters().packets_retransmitted == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("requester READ: one request per READ, N PSNs each, completes on its last response") {
  const std::vector<uint32_t> sizes = {1, 1024, 1025, 65536, 300000};
  TestPool pool(2047, kBigRoom);
  RcRequesterConfig cfg;
  cfg.posted = true;
  cfg.record_completions = true;
  cfg.first_psn = 0xFFFF80;  // across the 2^24 wrap
  RcRequester req(cfg, requester_address(), pool.get());
  RcResponderConfig rcfg;
  rcfg.first_psn = cfg.first_psn;
  RcResponder resp(rcfg, responder_address(req.address()), pool.get());
  for (const uint32_t b : sizes) req.post(b, 0, RcOp::kRead);
  Loop loop(req, resp);
  REQUIRE(loop.run());
  CHECK(req.done());

  uint64_t total_bytes = 0, total_psns = 0;
  REQUIRE(loop.sent.size() == sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    const SentPacket& s = loop.sent[k];
    CHECK(s.opcode == opcode::kRcReadRequest);
    CHECK(s.psn == psn_add(cfg.first_psn, static_cast<uint32_t>(total_psns)));
    CHECK(s.ack_req);
    CHECK(s.payload == 0);
    CHECK(s.va == cfg.remote_va + total_bytes);
    CHECK(s.dma_length == sizes[k]);
    total_bytes += sizes[k];
    total_psns += ceil_div(sizes[k], 1024);
  }
  CHECK(req.next_psn() == psn_add(cfg.first_psn, static_cast<uint32_t>(total_psns)));
  const RcRequesterCounters& c = req.counters();
  CHECK(c.messages_completed == sizes.size());
  CHECK(c.bytes_completed == total_bytes);
  CHECK(c.read_requests_sent == sizes.size());
  CHECK(c.packets_sent == sizes.size());
  CHECK(c.payload_bytes_sent == 0);
  CHECK(c.read_responses_accepted == total_psns);
  CHECK(c.read_bytes_received == total_bytes);
  CHECK(c.read_responses_out_of_order == 0);
  CHECK(c.read_response_errors == 0);
  CHECK(c.packets_retransmitted == 0);
  CHECK(c.timeouts == 0);
  CHECK(resp.counters().read_requests == sizes.size());
  CHECK(resp.counters().read_responses_sent == total_psns);
  std::vector<MessageCompletion> done;
  CHECK(req.take_completions(done) == sizes.size());
  CHECK(done.back().bytes == sizes.back());
}

TEST_CASE("requester READ: a lost response is retried from the first missing PSN, as rxe") {
  TestPool pool(2047, kBigRoom);
  RcRequesterConfig cfg;
  cfg.op = RcOp::kRead;
  cfg.message_bytes = 8 * 1024;  // 8 response packets: PSNs 0..7, 8..15, 16..23
  cfg.messages = 3;
  RcRequester req(cfg, requester_address(), pool.get());
  RcResponder resp(RcResponderConfig{}, responder_address(req.address()), pool.get());
  Loop loop(req, resp);
  loop.drop_back = [](const ParsedPacket& p) { return p.psn == 3; };
  REQUIRE(loop.run());
  CHECK(loop.dropped_back == 1);
  const RcRequesterCounters& c = req.counters();
  CHECK(c.messages_completed == 3);
  CHECK(c.bytes_completed == 3 * cfg.message_bytes);
  CHECK(c.read_bytes_received == 3 * cfg.message_bytes);
  // 4..7 came after the gap: dropped (check_psn COMPST_DONE). READ 2's first response is past
  // the unfinished READ 1: one retry (COMPST_ERROR_RETRY); the rest of READ 2's and READ 3's
  // responses find READ 1 not yet re-issued (req_retry put it back in wqe_state_posted:
  // get_wqe -> COMPST_DONE) or, once it is, the retry under way.
  CHECK(c.read_responses_out_of_order == 4);
  CHECK(c.read_retries == 1);
  CHECK(c.responses_ahead_of_resend + c.read_retries_ignored == 15);
  CHECK(c.responses_ahead_of_resend == 7);
  CHECK(c.timeouts == 0);
  // The go-back re-issues READ 1 from PSN 3 for the 5 MTUs left, then READs 2 and 3.
  REQUIRE(loop.sent.size() == 6);
  CHECK(loop.sent[3].psn == 3);
  CHECK(loop.sent[3].va == cfg.remote_va + 3 * 1024);
  CHECK(loop.sent[3].dma_length == 5 * 1024);
  CHECK(loop.sent[4].psn == 8);
  CHECK(loop.sent[5].psn == 16);
  CHECK(c.packets_retransmitted == 3);
  CHECK(resp.counters().read_duplicates == 3);
  CHECK(resp.counters().read_responses_sent == 24 + 5 + 8 + 8);
}

TEST_CASE("requester READ: an ACK past an unfinished READ retries; responses out of sequence") {
  TestPool pool(1023, kBigRoom);
  RcRequesterConfig cfg;
  cfg.posted = true;
  RcRequester req(cfg, requester_address(), pool.get());
  req.post(2048, 0, RcOp::kRead);  // PSNs 0, 1
  req.post(100, 0, RcOp::kWrite);  // PSN 2
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 10) == 2);
  free_all(out);
  // The WRITE's ACK overtakes the READ's responses: rxe check_psn -> COMPST_ERROR_RETRY.
  ack(req, pool.get(), 2, 10);
  CHECK(req.counters().read_retries == 1);
  CHECK(req.messages_outstanding() == 2);
  REQUIRE(req.poll(20, out, 10) == 2);  // READ and WRITE again
  CHECK(psns_of(out) == std::vector<uint32_t>{0, 2});
  free_all(out);

  // check_ack: FIRST then LAST, each an MTU.
  read_response(req, pool.get(), opcode::kRcReadResponseFirst, 0, 1024, 31);
  read_response(req, pool.get(), opcode::kRcReadResponseLast, 1, 1024, 32);
  CHECK(req.counters().read_responses_accepted == 2);
  CHECK(req.counters().read_response_errors == 0);
  CHECK(req.messages_outstanding() == 1);  // the READ completed on its last response
  ack(req, pool.get(), 2, 33);
  CHECK(req.done());
  CHECK_FALSE(req.in_error());
  CHECK(pool.whole());
}

TEST_CASE("requester READ: a response out of sequence or of the wrong size fails the QP, as rxe") {
  // rxe check_ack / do_read -> COMPST_ERROR -> rxe_qp_error: the READ and the WRITE behind it
  // complete in error and nothing more is sent.
  struct Case {
    const char* what;
    bool first_ok;  // FIRST 0 accepted before the bad response
    uint8_t op;
    uint32_t psn;
    uint32_t payload;
    uint8_t syndrome;
  };
  const Case cases[] = {
      {"MIDDLE where the READ starts", false, opcode::kRcReadResponseMiddle, 0, 1024, 0x1F},
      {"FIRST short of an MTU", false, opcode::kRcReadResponseFirst, 0, 1000, 0x1F},
      {"FIRST with a NAK AETH", false, opcode::kRcReadResponseFirst, 0, 1024, 0x61},
      {"FIRST where LAST is expected", true, opcode::kRcReadResponseFirst, 1, 1024, 0x1F},
      {"ONLY for a two-packet READ", false, opcode::kRcReadResponseOnly, 0, 1024, 0x1F},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    TestPool pool(1023, kBigRoom);
    RcRequesterConfig cfg;
    cfg.posted = true;
    RcRequester req(cfg, requester_address(), pool.get());
    req.post(2048, 0, RcOp::kRead);  // PSNs 0, 1
    req.post(100, 0, RcOp::kWrite);  // PSN 2
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 10) == 2);
    free_all(out);
    if (c.first_ok) read_response(req, pool.get(), opcode::kRcReadResponseFirst, 0, 1024, 10);
    read_response(req, pool.get(), c.op, c.psn, c.payload, 20, c.syndrome);
    CHECK(req.counters().read_response_errors == 1);
    CHECK(req.counters().read_responses_accepted == (c.first_ok ? 1u : 0u));
    CHECK(req.in_error());
    CHECK(req.counters().qp_errors == 1);
    CHECK(req.counters().fatal_naks == 0);
    CHECK(req.counters().messages_flushed == 2);
    CHECK(req.done());
    CHECK(req.poll(cfg.retransmit_timeout_ns, out, 10) == 0);
    CHECK(pool.whole());
  }
  {
    // A READ response for a WRITE's PSN (check_ack: not a READ WQE, IB_WC_FATAL_ERR).
    TestPool pool(1023, kBigRoom);
    RcRequesterConfig cfg;
    cfg.posted = true;
    RcRequester req(cfg, requester_address(), pool.get());
    req.post(100, 0, RcOp::kWrite);  // PSN 0
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 10) == 1);
    free_all(out);
    read_response(req, pool.get(), opcode::kRcReadResponseOnly, 0, 100, 10);
    CHECK(req.counters().read_response_errors == 1);
    CHECK(req.in_error());
    CHECK(req.counters().messages_flushed == 1);
    CHECK(pool.whole());
  }
}

// ---- rxe's smaller divergences (issue 11) ----------------------------------------------------

namespace {

// Hands every packet in `pkts` to `resp` and frees nothing: the responder takes them; its ACKs
// are appended to `acks`.
void deliver_all(RcResponder& resp, std::vector<rte_mbuf*>& pkts, uint64_t now,
                 std::vector<rte_mbuf*>& acks) {
  for (rte_mbuf* m : pkts) resp.receive(m, parse_ok(m), now, acks);
  pkts.clear();
}
void receive_all(RcRequester& req, std::vector<rte_mbuf*>& pkts, uint64_t now) {
  for (rte_mbuf* m : pkts) req.receive(m, parse_ok(m), now);
  pkts.clear();
}

RcResponderConfig responder_for(const RcRequesterConfig& cfg) {
  RcResponderConfig r;
  r.mtu = cfg.mtu;
  r.first_psn = cfg.first_psn;
  return r;
}

RcQpAddress responder_side(const RcQpAddress& a) {
  RcQpAddress b;
  b.local_mac = a.peer_mac;
  b.peer_mac = a.local_mac;
  b.local_ip = a.peer_ip;
  b.peer_ip = a.local_ip;
  b.local_qp = a.peer_qp;
  b.peer_qp = a.local_qp;
  return b;
}

}  // namespace

TEST_CASE("requester rxe: an ACK that overtakes a go-back does not skip the resend") {
  // The ACK of the whole message is late, not lost: the timer goes back to PSN 0 and four
  // packets are resent before it arrives. rxe (req_retry rewinds req.psn; the completer moves
  // only comp.psn) resends the other four as well, already acknowledged, and the responder
  // re-ACKs every duplicate with its last PSN.
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 8 * 1024;  // PSNs 0..7, AckReq on 7 only
  cfg.messages = 1;
  cfg.retransmit_timeout_ns = 1'000'000;
  RcRequester req(cfg, requester_address(), pool.get());
  RcResponder resp(responder_for(cfg), responder_side(req.address()), pool.get());
  std::vector<rte_mbuf*> pkts, late_ack, dup_acks;
  REQUIRE(req.poll(0, pkts, 100) == 8);
  deliver_all(resp, pkts, 10, late_ack);
  REQUIRE(late_ack.size() == 1);  // ACK 7, held back

  const uint64_t T = cfg.retransmit_timeout_ns;
  REQUIRE(req.poll(T, pkts, 4) == 4);  // the timeout: 0..3 again
  CHECK(req.counters().timeouts == 1);
  deliver_all(resp, pkts, T + 10, dup_acks);
  CHECK(dup_acks.size() == 4);  // duplicate_request: ACK again, with the last PSN (7)

  receive_all(req, late_ack, T + 20);  // comp.psn = 8, but the WRITE is still being resent
  CHECK(req.oldest_unacked_psn() == 8);
  CHECK(req.counters().messages_completed == 0);
  CHECK_FALSE(req.done());
  REQUIRE(req.poll(T + 30, pkts, 100) == 4);  // 4..7: acknowledged, and resent all the same
  CHECK(psns_of(pkts) == psn_range(4, 4));
  CHECK(req.counters().retransmitted_acked == 4);
  CHECK(req.counters().packets_retransmitted == 8);
  deliver_all(resp, pkts, T + 40, dup_acks);
  CHECK(resp.counters().duplicates == 8);
  CHECK(resp.counters().acks_sent == 1 + 8);

  // The first re-ACK (PSN 7, the message's last, now that its last packet is resent)
  // completes it (check_psn -> COMPST_COMP_ACK); the other seven are stale.
  receive_all(req, dup_acks, T + 50);
  CHECK(req.done());
  CHECK(req.counters().messages_completed == 1);
  CHECK(req.counters().stale_responses == 7);
  CHECK(req.counters().acks_received == 9);
  CHECK(req.poll(T + 60, pkts, 100) == 0);
  CHECK(pool.whole());
}

TEST_CASE("requester rxe: an ACK past a message not yet resent is ignored until the resend") {
  // Two messages of four packets. The timer goes back to 0 and two packets go before the late
  // ACK of everything arrives: message 0 is still being resent (wqe_state_processing) so check_psn
  // takes nothing of it (COMPST_DONE); completions wait for the duplicates' re-ACKs.
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 4 * 1024;
  cfg.messages = 2;
  cfg.retransmit_timeout_ns = 1'000'000;
  RcRequester req(cfg, requester_address(), pool.get());
  RcResponder resp(responder_for(cfg), responder_side(req.address()), pool.get());
  std::vector<rte_mbuf*> pkts, acks, dup_acks;
  REQUIRE(req.poll(0, pkts, 100) == 8);
  deliver_all(resp, pkts, 10, acks);
  REQUIRE(acks.size() == 2);  // ACK 3 and ACK 7
  rte_pktmbuf_free(acks[0]);
  acks.erase(acks.begin());  // ACK 3 lost, ACK 7 late

  const uint64_t T = cfg.retransmit_timeout_ns;
  REQUIRE(req.poll(T, pkts, 2) == 2);
  receive_all(req, acks, T + 1);
  CHECK(req.counters().responses_ahead_of_resend == 1);
  CHECK(req.oldest_unacked_psn() == 0);
  CHECK(req.counters().messages_completed == 0);

  REQUIRE(req.poll(T + 2, pkts, 100) == 6);  // 2..7: the rest of the go-back
  CHECK(req.counters().packets_retransmitted == 8);
  CHECK(req.counters().retransmitted_acked == 0);  // none was taken as acknowledged
  deliver_all(resp, pkts, T + 3, dup_acks);
  CHECK(dup_acks.size() == 8);
  receive_all(req, dup_acks, T + 4);  // ACK 7: both messages have gone out again: both complete
  CHECK(req.done());
  CHECK(req.counters().messages_completed == 2);
  CHECK(req.counters().stale_responses == 7);
  CHECK(pool.whole());
}

TEST_CASE("requester rxe: every response re-arms the timer, a stale one during a retry too") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 10 * 1024;
  cfg.messages = 1;
  cfg.retransmit_timeout_ns = 1'000'000;
  const uint64_t T = cfg.retransmit_timeout_ns;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 100) == 10);
  free_all(out);
  nak(req, pool.get(), 5, 100);  // go back to 5
  REQUIRE(req.poll(100, out, 100) == 5);
  free_all(out);
  CHECK(req.retransmit_deadline_ns() == 100 + T);  // armed by the resend

  // A stale ACK while the retry is under way: ignored and counted, and (rxe_comp.c COMPST_EXIT,
  // req.psn > comp.psn) the timer pushed back.
  ack(req, pool.get(), 2, 5000);
  CHECK(req.counters().stale_responses == 1);
  CHECK(req.oldest_unacked_psn() == 5);
  CHECK(req.retransmit_deadline_ns() == 5000 + T);
  // So is an ignored NAK (started_retry) and an ACK past nothing new.
  nak(req, pool.get(), 5, 6000);
  CHECK(req.counters().naks_ignored == 1);
  CHECK(req.retransmit_deadline_ns() == 6000 + T);
  CHECK(req.poll(100 + T, out, 100) == 0);
  CHECK(req.counters().timeouts == 0);
  REQUIRE(req.poll(6000 + T, out, 100) == 5);
  CHECK(req.counters().timeouts == 1);
  free_all(out);
  // Responses that never reach the completer (wrong QP) leave it alone.
  rte_mbuf* m = make_response(pool.get(), req.address(), 6, 0x1F, 0x99);
  req.receive(m, parse_ok(m), 7000);
  CHECK(req.counters().wrong_qp == 1);
  CHECK(req.retransmit_deadline_ns() == 6000 + 2 * T);
  ack(req, pool.get(), 9, 8000);
  CHECK(req.done());
  CHECK_FALSE(req.retransmit_timer_armed());
  CHECK(pool.whole());
}

TEST_CASE("requester rxe: the default window is rxe's, 129 PSNs (RXE_MAX_UNACKED_PSNS 128)") {
  TestPool pool(1023);
  RcRequesterConfig cfg;
  cfg.message_bytes = 300 * 1024;
  cfg.messages = 1;
  REQUIRE(cfg.max_in_flight == 129);
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  // rxe_requester sends while psn_compare(req.psn, comp.psn + 128) <= 0: PSNs 0..128.
  CHECK(req.poll(0, out, 1000) == 129);
  CHECK(psns_of(out) == psn_range(0, 129));
  CHECK(req.in_flight() == 129);
  CHECK(req.poll(1, out, 1000) == 0);  // not the 130th
  free_all(out);
  ack(req, pool.get(), 0, 2);
  REQUIRE(req.poll(3, out, 1000) == 1);
  CHECK(parse_ok(out[0]).psn == 129);
  free_all(out);
  CHECK(pool.whole());
}

TEST_CASE("requester rxe: a NAK invalid request fails the QP; everything outstanding is flushed") {
  for (const uint8_t syndrome : {aeth::kNakInvalidRequest, aeth::kNakRemoteAccessError,
                                 aeth::kNakRemoteOperationalError, uint8_t{0x7F}}) {
    TestPool pool;
    RcRequesterConfig cfg;
    cfg.posted = true;
    cfg.record_completions = true;
    RcRequester req(cfg, requester_address(), pool.get());
    for (int i = 0; i < 4; ++i) req.post(2048, 0);  // PSNs 0-1, 2-3, 4-5, 6-7
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 6) == 6);  // the fourth message not yet started
    free_all(out);
    ack(req, pool.get(), 1, 10);  // message 0 completes
    // A fatal NAK for a PSN already acknowledged is stale (check_psn -> COMPST_DONE).
    respond(req, pool.get(), 0, syndrome, 11);
    CHECK(req.counters().stale_responses == 1);
    CHECK_FALSE(req.in_error());

    respond(req, pool.get(), 2, syndrome, 20);  // message 1: COMPST_ERROR -> rxe_qp_error
    CHECK(req.in_error());
    CHECK(req.counters().fatal_naks == 1);
    CHECK(req.counters().qp_errors == 1);
    CHECK(req.counters().messages_flushed == 3);  // 1 and 2 in flight, 3 posted
    CHECK(req.counters().messages_completed == 1);
    CHECK(req.messages_outstanding() == 0);
    CHECK(req.done());
    CHECK_FALSE(req.retransmit_timer_armed());
    CHECK(req.next_event_ns() == RcRequester::kNever);
    std::vector<MessageCompletion> done;
    CHECK(req.take_completions(done) == 1);  // successes only
    // Nothing more is sent, not even after a timeout; responses are dropped; posts flushed.
    CHECK(req.poll(cfg.retransmit_timeout_ns * 2, out, 100) == 0);
    ack(req, pool.get(), 5, 30);
    CHECK(req.counters().responses_in_error == 1);
    CHECK(req.counters().acks_received == 1);
    req.post(100, 40);
    CHECK(req.counters().messages_flushed == 4);
    CHECK(req.poll(50, out, 100) == 0);
    CHECK(req.done());
    CHECK(req.counters().other_naks == 0);
    CHECK(pool.whole());
  }
}

TEST_CASE("requester rxe: an RNR NAK does not fail the QP") {
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 1024;
  cfg.messages = 1;
  RcRequester req(cfg, requester_address(), pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 10) == 1);
  free_all(out);
  respond(req, pool.get(), 0, 0x20 | 14, 10);
  CHECK(req.counters().other_naks == 1);
  CHECK_FALSE(req.in_error());
  ack(req, pool.get(), 0, 20);
  CHECK(req.done());
  CHECK(req.counters().messages_flushed == 0);
  CHECK(pool.whole());
}

TEST_CASE("requester rxe: the responder's NAK invalid request fails the requester's QP") {
  // A responder set up to expect PSN 1 first (a misconfigured peer): the requester's WRITE
  // MIDDLE 1 arrives in PSN sequence but without its FIRST (check_op_seq ->
  // RESPST_ERR_MISSING_OPCODE_FIRST). rxe's responder NAKs it "invalid request" and fails its QP;
  // the requester's completer fails its own (check_ack -> COMPST_ERROR).
  TestPool pool;
  RcRequesterConfig cfg;
  cfg.message_bytes = 3 * 1024;
  cfg.messages = 2;
  RcRequester req(cfg, requester_address(), pool.get());
  RcResponderConfig rcfg = responder_for(cfg);
  rcfg.first_psn = 1;
  RcResponder resp(rcfg, responder_side(req.address()), pool.get());
  std::vector<rte_mbuf*> pkts, acks;
  REQUIRE(req.poll(0, pkts, 100) == 6);
  rte_pktmbuf_free(pkts[0]);
  pkts.erase(pkts.begin());
  deliver_all(resp, pkts, 1, acks);
  CHECK(resp.in_error());
  CHECK(resp.counters().dropped_in_error == 4);
  REQUIRE(acks.size() == 1);
  const ParsedPacket n = parse_ok(acks[0]);
  CHECK(n.psn == 1);
  receive_all(req, acks, 2);
  CHECK(req.in_error());
  CHECK(req.counters().fatal_naks == 1);
  CHECK(req.counters().messages_flushed == 2);
  CHECK(req.done());
  CHECK(req.poll(cfg.retransmit_timeout_ns, pkts, 100) == 0);
  CHECK(pool.whole());
}

TEST_CASE("requester: oblivious entropy writes a new UDP source port per packet, ICRC valid") {
  TestPool pool(1023, kBigRoom);
  RcRequesterConfig cfg;
  cfg.message_bytes = 64 * 1024;
  cfg.mtu = 1024;
  cfg.messages = 1;
  cfg.entropy_values = 16;
  cfg.entropy_seed = 3;
  const RcQpAddress addr = requester_address();
  RcRequester req(cfg, addr, pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 1000) == 64);
  // The ports the stage itself gives, for this QP's rxe port and seed.
  ObliviousEntropy expected(16, rxe_udp_source_port(addr.local_qp), 3);
  std::set<uint16_t> seen;
  for (const rte_mbuf* m : out) {
    const ParsedPacket p = parse_ok(m);  // parses, and the ICRC (which covers the port) verifies
    CHECK(p.src_port == expected.next());
    seen.insert(p.src_port);
  }
  CHECK(seen.size() == 16);
  free_all(out);
  cfg.entropy_values = 12;
  CHECK_THROWS_WITH(RcRequester(cfg, addr, pool.get()), Catch::Contains("entropy_values"));
  CHECK(pool.whole());
}

TEST_CASE("requester: REPS reuses the port an ACK echoed, never one a CNP marked") {
  TestPool pool(1023, kBigRoom);
  RcRequesterConfig cfg;
  cfg.message_bytes = 64 * 1024;
  cfg.mtu = 1024;
  cfg.messages = 1;
  cfg.max_in_flight = 130;
  cfg.entropy_values = 256;
  cfg.entropy_reps = true;
  cfg.entropy_seed = 5;
  const RcQpAddress addr = requester_address();
  RcRequester req(cfg, addr, pool.get());
  std::vector<rte_mbuf*> out;
  REQUIRE(req.poll(0, out, 4) == 4);
  std::vector<uint16_t> sent;
  for (const rte_mbuf* m : out) sent.push_back(parse_ok(m).src_port);
  free_all(out);
  // ACKs echoing the ports of packets 0 and 2; a CNP marking packet 1's, then its ACK.
  const auto ack_on = [&](uint32_t psn, uint16_t port) {
    rte_mbuf* m = make_response(pool.get(), req.address(), psn, 0x1F);
    // The echo: the ACK's source port is the acknowledged packet's (ICRC rebuilt by hand).
    FrameSpec f;
    f.eth.src = addr.peer_mac;
    f.eth.dst = addr.local_mac;
    f.ip.src = addr.peer_ip;
    f.ip.dst = addr.local_ip;
    f.udp.src_port = port;
    RoceSpec r;
    r.opcode = opcode::kRcAck;
    r.dest_qp = addr.local_qp;
    r.psn = psn;
    r.syndrome = 0x1F;
    rte_pktmbuf_free(m);
    rte_mbuf* echo = build_roce_mbuf(pool.get(), f, r);
    REQUIRE(echo != nullptr);
    req.receive(echo, parse_ok(echo), 10);
  };
  ack_on(0, sent[0]);
  req.on_marked_entropy(sent[1]);
  ack_on(1, sent[1]);
  ack_on(2, sent[2]);
  REQUIRE(req.poll(20, out, 3) == 3);
  CHECK(parse_ok(out[0]).src_port == sent[0]);  // recycled, oldest first
  CHECK(parse_ok(out[1]).src_port == sent[2]);  // sent[1] was marked: skipped
  free_all(out);
  const RepsCounters* c = req.reps_counters();
  REQUIRE(c != nullptr);
  CHECK(c->reused == 2);
  CHECK(c->drawn == 5);  // the first four, and the third of the second poll: nothing left
  CHECK(c->marked == 1);
  CHECK(c->marked_not_recycled == 1);
  CHECK(pool.whole());
}

namespace {

// IRN: a requester and an RcPlacementResponder with sack, NAK delay 0, wired back to back; the
// first transmission of every PSN in `lost` is dropped, nothing else. Steps in 1 us ticks
// until the requester is done (or `limit_ns`); returns the PSNs sent again, in order, and the
// most packets ever unacknowledged.
struct IrnRun {
  std::vector<uint32_t> resent;
  uint64_t max_unacked = 0;
  uint64_t end_ns = 0;
  RcRequesterCounters req;
  RcPlacementResponderCounters resp;
};

// One message of `packets` MTUs (1024), IRN with a BDP cap of `bdp`, IRN's timeouts.
RcRequesterConfig irn_config(uint32_t packets, uint32_t bdp) {
  RcRequesterConfig cfg;
  cfg.mtu = 1024;
  cfg.message_bytes = packets * 1024;
  cfg.messages = 1;
  cfg.max_in_flight = bdp;
  cfg.max_pkt_per_ack = 0;
  cfg.selective_retransmit = true;
  cfg.irn = true;
  cfg.retransmit_timeout_ns = 320'000;
  cfg.retransmit_timeout_low_ns = 100'000;
  cfg.rto_low_packets = 3;
  return cfg;
}

IrnRun run_irn(rte_mempool* pool, uint32_t packets, uint32_t bdp, const std::set<uint32_t>& lost,
               uint64_t limit_ns = 10'000'000) {
  RcRequester req(irn_config(packets, bdp), requester_address(), pool);
  RcPlacementResponderConfig rc;
  rc.mtu = 1024;
  rc.window = bdp;
  rc.nak_delay_ns = 0;
  rc.sack = true;
  rc.ack_every_packet = true;
  RcPlacementResponder resp(rc, test::responder_address(), pool);
  IrnRun r;
  std::set<uint32_t> sent_once;
  std::vector<rte_mbuf*> out, back;
  uint64_t now = 0;
  for (; now < limit_ns && !req.done(); now += 1000) {
    req.poll(now, out, 1000);
    r.max_unacked = std::max(r.max_unacked, req.in_flight());
    for (rte_mbuf* m : out) {
      const ParsedPacket p = parse_ok(m);
      if (!sent_once.insert(p.psn).second) r.resent.push_back(p.psn);
      if (lost.count(p.psn) == 1 && sent_once.count(p.psn) == 1 &&
          std::count(r.resent.begin(), r.resent.end(), p.psn) == 0) {
        rte_pktmbuf_free(m);  // the first transmission is lost
        continue;
      }
      resp.receive(m, p, now, back);
    }
    out.clear();
    resp.poll(now, back);
    for (rte_mbuf* a : back) req.receive(a, parse_ok(a), now);
    back.clear();
  }
  r.end_ns = now;
  r.req = req.counters();
  r.resp = resp.counters();
  return r;
}

}  // namespace

TEST_CASE("requester irn: a loss pattern is recovered by resending exactly the missing PSNs") {
  TestPool pool(1023, kBigRoom);
  // Single losses, a burst, a loss right after a resend's hole, the last-but-one packet.
  const std::set<uint32_t> lost = {3, 4, 10, 17, 18, 19, 30, 45, 62};
  const IrnRun r = run_irn(pool.get(), 64, 32, lost);
  CHECK(r.req.messages_completed == 1);
  std::vector<uint32_t> resent = r.resent;
  std::sort(resent.begin(), resent.end());
  CHECK(resent == std::vector<uint32_t>(lost.begin(), lost.end()));  // each once, no other
  CHECK(r.req.packets_retransmitted == lost.size());
  CHECK(r.req.timeouts == 0);         // every hole had packets after it: NAKs recovered all
  CHECK(r.req.sack_naks == r.resp.sack_naks);
  CHECK(r.req.sack_naks > 0);
  CHECK(r.resp.duplicates == 0);
  CHECK(r.max_unacked <= 32);
  CHECK(pool.whole());
}

TEST_CASE("requester irn: one NAK's SACK resends every hole below the highest SACKed at once") {
  TestPool pool(1023, kBigRoom);
  const RcRequesterConfig cfg = irn_config(16, 16);
  {
    RcRequester req(cfg, requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 100) == 16);
    free_all(out);
    // The responder has 0..1, then 3, 6, 7 and 9: it misses 2, 4, 5 and 8 (and knows nothing of
    // 10..15). Its NAK names 2; the SACK marks PSN 2 + 1 + i for i = 0 (3), 3 (6), 4 (7), 6 (9).
    const std::vector<uint8_t> sack = {0x00, 0x20, 0x00, 0x00, 0x9A, 0x00, 0x00, 0x00};
    const auto sack_nak = [&](std::span<const uint8_t> ext, uint64_t now) {
      rte_mbuf* m =
          make_response(pool.get(), req.address(), 2, aeth::kNakPsnSequenceError, 0, ext);
      req.receive(m, parse_ok(m), now);
    };
    sack_nak(sack, 100);
    CHECK(req.oldest_unacked_psn() == 2);
    REQUIRE(req.poll(200, out, 100) == 4);
    CHECK(psns_of(out) == std::vector<uint32_t>{2, 4, 5, 8});
    free_all(out);
    CHECK(req.counters().sack_naks == 1);
    CHECK(req.counters().sacked_packets == 4);
    // The same NAK again (a duplicate on the wire): nothing is resent twice.
    sack_nak(sack, 300);
    CHECK(req.poll(400, out, 100) == 0);
    CHECK(req.counters().sack_resends_skipped == 4);
    // A malformed SACK is counted; the NAK still acts as RoCE's (its PSN, already resent).
    sack_nak(std::vector<uint8_t>{0x00, 0x10, 0x00, 0x00}, 500);
    CHECK(req.counters().sack_malformed == 1);
    CHECK(req.poll(600, out, 100) == 0);
    ack(req, pool.get(), 15, 700);
    CHECK(req.done());
  }
  CHECK(pool.whole());
}

TEST_CASE("requester irn: never more than one BDP unacknowledged, under random losses") {
  TestPool pool(1023, kBigRoom);
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    std::set<uint32_t> lost;
    for (uint32_t psn = 0; psn < 200; ++psn) {
      if (rng() % 10 == 0) lost.insert(psn);
    }
    const IrnRun r = run_irn(pool.get(), 200, 12, lost);
    CHECK(r.req.messages_completed == 1);
    CHECK(r.max_unacked <= 12);
    CHECK(r.max_unacked == 12);  // and the cap is reached: it is the cap that binds
    CHECK(r.req.packets_retransmitted == lost.size());
    CHECK(r.resp.window_overflows == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("requester irn: RTO_low while at most N are unacknowledged, RTO_high otherwise") {
  TestPool pool(1023, kBigRoom);
  // The last two packets lost: no packet after them, so no NAK; the timer recovers them.
  const IrnRun tail = run_irn(pool.get(), 20, 32, {18, 19});
  CHECK(tail.req.messages_completed == 1);
  CHECK(tail.req.timeouts == 1);
  CHECK(tail.req.rto_low_timeouts == 1);
  CHECK(tail.req.packets_retransmitted == 2);
  // Sent at 0 us, the ACK of 17 at 0 us leaves 2 unacknowledged: RTO_low (100 us) later, 18 is
  // resent; its ACK resends 19 at once (timeout recovery); done at about 100 us, not 320.
  CHECK(tail.end_ns < 200'000);
  CHECK(tail.end_ns >= 100'000);

  RcRequesterConfig cfg = irn_config(8, 8);
  {
    RcRequester req(cfg, requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(1000, out, 100) == 8);
    free_all(out);
    CHECK(req.retransmit_deadline_ns() == 1000 + 320'000);  // 8 unacknowledged: RTO_high
    ack(req, pool.get(), 3, 2000);                           // 4 left
    CHECK(req.retransmit_deadline_ns() == 2000 + 320'000);
    ack(req, pool.get(), 4, 3000);                           // 3 left: RTO_low
    CHECK(req.retransmit_deadline_ns() == 3000 + 100'000);
  }
  cfg.retransmit_timeout_low_ns = 400'000;
  CHECK(cfg.check() == "retransmit_timeout_low_ns: 1 ns .. retransmit_timeout_ns (RTO_low <= RTO_high)");
  cfg.retransmit_timeout_low_ns = 100'000;
  cfg.selective_retransmit = false;
  CHECK(cfg.check() == "irn: needs selective_retransmit");
  CHECK(pool.whole());
}

TEST_CASE("requester irn: arbitrary bytes after a NAK's AETH are read or counted, never trusted") {
  TestPool pool(1023, kBigRoom);
  std::mt19937 rng(5);
  uint64_t malformed = 0, read = 0;
  for (int round = 0; round < 300; ++round) {
    RcRequester req(irn_config(16, 16), requester_address(), pool.get());
    std::vector<rte_mbuf*> out;
    REQUIRE(req.poll(0, out, 100) == 16);
    free_all(out);
    // Random lengths (a multiple of 4, as the pad keeps them) and bytes; every fourth a valid
    // header with a random bitmap, so that the read path runs too.
    std::vector<uint8_t> ext(4 * (rng() % 40));
    for (uint8_t& b : ext) b = static_cast<uint8_t>(rng());
    if (round % 4 == 0 && ext.size() >= 8) {
      const auto bits = static_cast<uint16_t>((ext.size() - 4) * 8);
      ext[0] = static_cast<uint8_t>(bits >> 8);
      ext[1] = static_cast<uint8_t>(bits);
      ext[2] = ext[3] = 0;
    }
    const auto nak_psn = static_cast<uint32_t>(rng() % 16);
    rte_mbuf* m =
        make_response(pool.get(), req.address(), nak_psn, aeth::kNakPsnSequenceError, 0, ext);
    req.receive(m, parse_ok(m), 100);
    // Whatever the bytes said, only PSNs that were sent and are unacknowledged go again, once.
    const size_t n = req.poll(200, out, 100);
    std::set<uint32_t> seen;
    for (uint32_t psn : psns_of(out)) {
      CHECK(psn >= nak_psn);
      CHECK(psn < 16);
      CHECK(seen.insert(psn).second);
    }
    CHECK(n <= 16 - nak_psn);
    free_all(out);
    malformed += req.counters().sack_malformed;
    read += req.counters().sack_naks;
    ack(req, pool.get(), 15, 300);
    CHECK(req.done());
  }
  CHECK(malformed > 0);
  CHECK(read > 0);
  CHECK(pool.whole());
}
