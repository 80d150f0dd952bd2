#include "dataplane/rc_endpoint/rc_responder.h"

#include <rte_mbuf.h>

#include <catch2/catch.hpp>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/rc_test.h"

using namespace spraynet;
using spraynet::test::parse_ok;
using spraynet::test::responder_address;
using spraynet::test::TestPool;

namespace {

constexpr uint32_t kMtu = 1024;

// A WRITE request from the requester to the responder's QP.
rte_mbuf* make_write(rte_mempool* pool, uint8_t op, uint32_t psn, uint32_t payload, bool ack_req,
                     uint32_t dest_qp = 0x22) {
  return test::make_rc_write(pool, op, psn, payload, ack_req, dest_qp, 3 * kMtu);
}

size_t deliver(RcResponder& resp, rte_mbuf* m, uint64_t now, std::vector<rte_mbuf*>& out) {
  return resp.receive(m, parse_ok(m), now, out);
}

struct Ack {
  uint32_t psn = 0;
  uint8_t syndrome = 0;
  uint32_t msn = 0;
};

// Checks everything about an ACK/NAK the responder built, then frees it.
Ack take(rte_mbuf* m) {
  const ParsedPacket p = parse_ok(m);  // parses, ICRC verifies
  const RcQpAddress a = responder_address();
  CHECK(p.bth_opcode == opcode::kRcAck);
  CHECK(p.dest_qp == a.peer_qp);
  CHECK(p.src_ip == a.local_ip);
  CHECK(p.dst_ip == a.peer_ip);
  CHECK(p.src_port == rxe_udp_source_port(a.local_qp));
  CHECK(p.dscp() == a.dscp);
  CHECK_FALSE(p.ack_req);
  AethView aeth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
  Ack r{p.psn, aeth.syndrome(), aeth.msn()};
  rte_pktmbuf_free(m);
  return r;
}

RcResponderConfig config(uint32_t first_psn = 0) {
  RcResponderConfig c;
  c.mtu = kMtu;
  c.first_psn = first_psn;
  return c;
}

}  // namespace

TEST_CASE("responder: in-order WRITEs are accepted and AckReq gets an ACK with its PSN") {
  TestPool pool;
  RcResponder resp(config(100), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 100, kMtu, false), 1, out) ==
        0);
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 101, kMtu, false), 2, out) ==
        0);
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 102, 100, true), 3, out) == 1);
  Ack a = take(out[0]);
  out.clear();
  CHECK(a.psn == 102);
  CHECK(a.syndrome == 0x1F);  // rxe's AETH_ACK_UNLIMITED
  CHECK(a.msn == 1);

  // A WRITE ONLY without AckReq is accepted silently, one with AckReq is acknowledged.
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 103, 8, false), 4, out) == 0);
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 104, 0, true), 5, out) == 1);
  a = take(out[0]);
  out.clear();
  CHECK(a.psn == 104);
  CHECK(a.msn == 3);

  const RcResponderCounters& c = resp.counters();
  CHECK(c.packets_received == 5);
  CHECK(c.accepted == 5);
  CHECK(c.bytes_written == 2 * kMtu + 100 + 8);
  CHECK(c.messages_received == 3);
  CHECK(c.acks_sent == 2);
  CHECK(c.naks_sent == 0);
  CHECK(resp.expected_psn() == 105);
  CHECK(resp.msn() == 3);
  CHECK(pool.whole());
}

TEST_CASE("responder: a gap gets one NAK with the expected PSN, then silent drops, then recovery") {
  TestPool pool;
  RcResponder resp(config(0), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 0, kMtu, false), 1, out);
  // PSN 1 is lost.
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 2, kMtu, false), 2, out) ==
          1);
  const Ack n = take(out[0]);
  out.clear();
  CHECK(n.syndrome == aeth::kNakPsnSequenceError);
  CHECK(n.psn == 1);
  CHECK(n.msn == 0);
  CHECK(resp.nak_latched());
  // Everything after the gap is dropped without a word, AckReq or not.
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 3, kMtu, false), 3, out) == 0);
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 4, 10, true), 4, out) == 0);
  CHECK(resp.counters().naks_sent == 1);
  CHECK(resp.counters().out_of_order_dropped == 3);
  CHECK(resp.expected_psn() == 1);

  // The requester goes back to 1: accepted, the latch resets.
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 1, kMtu, false), 5, out) == 0);
  CHECK_FALSE(resp.nak_latched());
  deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 2, kMtu, false), 6, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 3, kMtu, false), 7, out);
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 4, 10, true), 8, out) == 1);
  const Ack a = take(out[0]);
  out.clear();
  CHECK(a.syndrome == 0x1F);
  CHECK(a.psn == 4);
  CHECK(a.msn == 1);
  CHECK(resp.counters().accepted == 5);
  CHECK(resp.counters().bytes_written == 4 * kMtu + 10);

  // A new gap gets a new NAK.
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 7, 10, true), 9, out) == 1);
  CHECK(take(out[0]).psn == 5);
  out.clear();
  CHECK(resp.counters().naks_sent == 2);
  CHECK(pool.whole());
}

TEST_CASE("responder: a duplicate is re-ACKed with the last accepted PSN, AckReq or not") {
  TestPool pool;
  RcResponder resp(config(10), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 10, kMtu, false), 1, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 11, kMtu, false), 2, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 12, kMtu, true), 3, out);
  REQUIRE(out.size() == 1);
  take(out[0]);
  out.clear();

  // rxe duplicate_request: send_ack(qp, AETH_ACK_UNLIMITED, ack_psn - 1).
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 11, kMtu, false), 4, out) ==
          1);
  Ack a = take(out[0]);
  out.clear();
  CHECK(a.syndrome == 0x1F);
  CHECK(a.psn == 12);
  CHECK(a.msn == 1);
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 10, kMtu, true), 5, out) ==
          1);
  CHECK(take(out[0]).psn == 12);
  out.clear();
  CHECK(resp.counters().duplicates == 2);
  CHECK(resp.counters().accepted == 3);
  CHECK(resp.counters().bytes_written == 3 * kMtu);
  CHECK(resp.counters().acks_sent == 3);
  CHECK(resp.expected_psn() == 13);
  CHECK(pool.whole());
}

TEST_CASE("responder: bad ICRC, wrong QP, bad opcodes and lengths are counted and dropped") {
  TestPool pool;
  RcResponder resp(config(0), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;

  // Bad ICRC: a payload byte changed in flight.
  rte_mbuf* m = make_write(pool.get(), opcode::kRcWriteOnly, 0, 64, true);
  ParsedPacket p = parse_ok(m);
  rte_pktmbuf_mtod(m, uint8_t*)[p.payload_offset + 5] ^= 0x80;
  CHECK(resp.receive(m, p, 1, out) == 0);
  CHECK(resp.counters().icrc_errors == 1);

  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 0, 64, true, 0x23), 2, out) ==
        0);
  CHECK(resp.counters().wrong_qp == 1);

  // Not WRITE requests: a SEND and an ACK.
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcSendOnly, 0, 64, true), 3, out) == 0);
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcAck, 0, 0, false), 3, out) == 0);
  CHECK(resp.counters().bad_opcode == 2);

  // (Opcode sequence and length errors fail the QP: see the next test.)

  // Not RoCE; headers beyond the mbuf.
  m = pool.alloc();
  CHECK(resp.receive(m, ParsedPacket{}, 9, out) == 0);
  m = make_write(pool.get(), opcode::kRcWriteLast, 1, 10, true);
  p = parse_ok(m);
  rte_pktmbuf_trim(m, 8);
  CHECK(resp.receive(m, p, 9, out) == 0);
  CHECK(resp.counters().malformed == 2);

  CHECK(resp.counters().accepted == 0);
  CHECK(resp.expected_psn() == 0);
  CHECK(resp.counters().packets_received == 6);
  CHECK(out.empty());
  CHECK_FALSE(resp.in_error());
  // Still works.
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 0, 10, true), 10, out) == 1);
  CHECK(take(out[0]).psn == 0);
  CHECK(pool.whole());
}

TEST_CASE("responder: opcode sequence and length errors NAK invalid request, fail the QP") {
  // rxe class C errors (check_op_seq, check_length -> do_class_ac_error(AETH_NAK_INVALID_REQ)):
  // a NAK 0x61 with the offending packet's PSN, then the error state: nothing is answered again.
  struct Case {
    const char* what;
    uint8_t op;
    uint32_t payload;
    bool in_message;  // a WRITE FIRST (PSN 0) accepted before; the bad packet is PSN 1
    bool sequence;    // an opcode sequence error, else a length error
  };
  const Case cases[] = {
      {"MIDDLE without FIRST", opcode::kRcWriteMiddle, kMtu, false, true},
      {"LAST without FIRST", opcode::kRcWriteLast, 10, false, true},
      {"FIRST inside a message", opcode::kRcWriteFirst, kMtu, true, true},
      {"ONLY inside a message", opcode::kRcWriteOnly, 10, true, true},
      {"FIRST shorter than the MTU", opcode::kRcWriteFirst, 100, false, false},
      {"ONLY longer than the MTU", opcode::kRcWriteOnly, kMtu + 4, false, false},
      {"LAST without payload", opcode::kRcWriteLast, 0, true, false},
      {"MIDDLE shorter than the MTU", opcode::kRcWriteMiddle, 8, true, false},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    TestPool pool;
    RcResponder resp(config(0), responder_address(), pool.get());
    std::vector<rte_mbuf*> out;
    uint32_t psn = 0;
    if (c.in_message) {
      deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, psn++, kMtu, false), 1, out);
    }
    REQUIRE(deliver(resp, make_write(pool.get(), c.op, psn, c.payload, false), 2, out) == 1);
    const Ack n = take(out[0]);
    out.clear();
    CHECK(n.syndrome == aeth::kNakInvalidRequest);
    CHECK(n.psn == psn);
    CHECK(resp.in_error());
    const RcResponderCounters& k = resp.counters();
    CHECK(k.opcode_sequence_errors == (c.sequence ? 1u : 0u));
    CHECK(k.length_errors == (c.sequence ? 0u : 1u));
    CHECK(k.naks_invalid_request == 1);
    CHECK(k.naks_sent == 0);
    CHECK(k.qp_errors == 1);
    // The error state: a valid packet, a gap and a duplicate all go unanswered.
    CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, psn, 10, true), 3, out) == 0);
    CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, psn + 5, 10, true), 3, out) ==
          0);
    CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 0, 10, true), 3, out) == 0);
    CHECK(resp.poll(4, out) == 0);
    CHECK(k.dropped_in_error == 3);
    CHECK(k.accepted == (c.in_message ? 1u : 0u));
    CHECK(k.qp_errors == 1);
    CHECK(pool.whole());
  }
}

TEST_CASE("responder: PSNs wrap at 2^24 for acceptance, NAKs and duplicates") {
  TestPool pool;
  RcResponder resp(config(0xFFFFFE), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 0xFFFFFE, kMtu, false), 1, out);
  // 0xFFFFFF is lost; 0x000000 is after it.
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 0, kMtu, false), 2, out) ==
          1);
  Ack n = take(out[0]);
  out.clear();
  CHECK(n.syndrome == aeth::kNakPsnSequenceError);
  CHECK(n.psn == 0xFFFFFF);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 0xFFFFFF, kMtu, false), 3, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteMiddle, 0, kMtu, false), 4, out);
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 1, 4, true), 5, out) == 1);
  CHECK(take(out[0]).psn == 1);
  out.clear();
  CHECK(resp.expected_psn() == 2);
  // A duplicate from before the wrap is re-ACKed with 0x000001.
  REQUIRE(deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 0xFFFFFE, kMtu, false), 6,
                  out) == 1);
  CHECK(take(out[0]).psn == 1);
  out.clear();
  CHECK(resp.counters().duplicates == 1);
  CHECK(resp.counters().accepted == 4);
  CHECK(pool.whole());
}

TEST_CASE("responder: an ACK that finds the mempool empty waits and is sent later") {
  TestPool pool;     // requests
  TestPool acks(4);  // the responder's ACKs
  RcResponderConfig cfg = config(0);
  cfg.alloc_retry_ns = 100;
  RcResponder resp(cfg, responder_address(), acks.get());
  std::vector<rte_mbuf*> held;
  for (int i = 0; i < 4; ++i) held.push_back(acks.alloc());

  std::vector<rte_mbuf*> out;
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 0, 8, true), 1000, out) == 0);
  CHECK(resp.counters().pool_empty == 1);
  CHECK(resp.control_pending());
  CHECK(resp.next_event_ns() == 1100);
  // A gap while waiting: a NAK too, after the ACK.
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 2, 8, true), 1050, out) == 0);
  CHECK(resp.poll(1099, out) == 0);
  for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  REQUIRE(resp.poll(1100, out) == 2);
  const Ack a = take(out[0]);
  const Ack n = take(out[1]);
  out.clear();
  CHECK(a.syndrome == 0x1F);
  CHECK(a.psn == 0);
  CHECK(n.syndrome == aeth::kNakPsnSequenceError);
  CHECK(n.psn == 1);
  CHECK_FALSE(resp.control_pending());
  CHECK(resp.next_event_ns() == RcResponder::kNever);

  // A pending NAK is dropped once an ACK shows its PSN has arrived.
  held.clear();
  for (int i = 0; i < 4; ++i) held.push_back(acks.alloc());
  deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 3, 8, true), 2000, out);  // latched
  CHECK_FALSE(resp.control_pending());  // dropped silently: the NAK was already sent
  deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 1, 8, true), 2000, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 3, 8, true), 2000, out);  // NAK 2
  deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 2, 8, true), 2000, out);
  for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  REQUIRE(resp.poll(2100, out) == 1);
  const Ack last = take(out[0]);
  out.clear();
  CHECK(last.syndrome == 0x1F);
  CHECK(last.psn == 2);
  CHECK(resp.counters().naks_sent == 1);
  CHECK(pool.whole());
  CHECK(acks.whole());
}

namespace {

rte_mbuf* make_read(rte_mempool* pool, uint32_t psn, uint64_t va, uint32_t length,
                    uint32_t rkey = 0x42) {
  const RcQpAddress a = responder_address();
  FrameSpec f;
  f.eth.src = a.peer_mac;
  f.eth.dst = a.local_mac;
  f.ip.src = a.peer_ip;
  f.ip.dst = a.local_ip;
  f.udp.src_port = rxe_udp_source_port(a.peer_qp);
  RoceSpec r;
  r.opcode = opcode::kRcReadRequest;
  r.dest_qp = a.local_qp;
  r.psn = psn;
  r.ack_req = true;
  r.virtual_address = va;
  r.rkey = rkey;
  r.dma_length = length;
  rte_mbuf* m = build_roce_mbuf(pool, f, r);
  REQUIRE(m != nullptr);
  return m;
}

struct Response {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  uint32_t payload = 0;
  bool has_aeth = false;
  uint8_t syndrome = 0;
  uint32_t msn = 0;
};

// Checks and frees every READ response in `out`.
std::vector<Response> take_responses(std::vector<rte_mbuf*>& out) {
  std::vector<Response> v;
  const RcQpAddress a = responder_address();
  for (rte_mbuf* m : out) {
    const ParsedPacket p = parse_ok(m);  // parses, ICRC verifies: a genuine RoCEv2 packet
    CHECK(p.dest_qp == a.peer_qp);
    CHECK(p.src_ip == a.local_ip);
    CHECK(p.dst_ip == a.peer_ip);
    Response r{p.bth_opcode, p.psn, p.payload_length, false, 0, 0};
    r.has_aeth = p.payload_offset == p.bth_offset + kBthSize + kAethSize;
    if (r.has_aeth) {
      AethView aeth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
      r.syndrome = aeth.syndrome();
      r.msn = aeth.msn();
    }
    v.push_back(r);
    rte_pktmbuf_free(m);
  }
  out.clear();
  return v;
}

}  // namespace

TEST_CASE("responder: a READ is answered FIRST/MIDDLE/LAST or ONLY from poll, N PSNs consumed") {
  TestPool pool;
  RcResponder resp(config(10), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  // 2.5 MTUs: FIRST, MIDDLE, LAST with PSNs 10, 11, 12; the next request carries PSN 13.
  CHECK(deliver(resp, make_read(pool.get(), 10, 0x8000, 2 * kMtu + 512), 1, out) == 0);
  CHECK(resp.expected_psn() == 13);
  CHECK(resp.msn() == 1);  // C9-148: at once
  CHECK(resp.read_responses_pending());
  CHECK(resp.next_event_ns() == 0);
  CHECK(resp.poll(2, out, 2) == 2);  // paced by the caller's budget
  CHECK(resp.poll(2, out) == 1);
  std::vector<Response> r = take_responses(out);
  REQUIRE(r.size() == 3);
  CHECK(r[0].opcode == opcode::kRcReadResponseFirst);
  CHECK(r[1].opcode == opcode::kRcReadResponseMiddle);
  CHECK(r[2].opcode == opcode::kRcReadResponseLast);
  for (uint32_t i = 0; i < 3; ++i) CHECK(r[i].psn == 10 + i);
  CHECK(r[0].payload == kMtu);
  CHECK(r[1].payload == kMtu);
  CHECK(r[2].payload == 512);
  CHECK(r[0].has_aeth);  // AETH on FIRST and LAST, not on MIDDLE
  CHECK_FALSE(r[1].has_aeth);
  CHECK(r[2].has_aeth);
  CHECK(r[2].syndrome == 0x1F);
  CHECK(r[2].msn == 1);
  CHECK_FALSE(resp.read_responses_pending());
  CHECK(resp.next_event_ns() == RcResponder::kNever);

  // One MTU or less: ONLY. A zero-length READ: ONLY with no payload, one PSN.
  deliver(resp, make_read(pool.get(), 13, 0x9000, kMtu), 3, out);
  deliver(resp, make_read(pool.get(), 14, 0x9000, 0), 3, out);
  resp.poll(3, out);
  r = take_responses(out);
  REQUIRE(r.size() == 2);
  CHECK(r[0].opcode == opcode::kRcReadResponseOnly);
  CHECK(r[0].payload == kMtu);
  CHECK(r[1].opcode == opcode::kRcReadResponseOnly);
  CHECK(r[1].payload == 0);
  CHECK(r[1].psn == 14);
  CHECK(resp.expected_psn() == 15);

  // An ACK decided after a READ waits until the READ's responses are out.
  deliver(resp, make_read(pool.get(), 15, 0xA000, 2 * kMtu), 4, out);
  CHECK(deliver(resp, make_write(pool.get(), opcode::kRcWriteOnly, 17, 8, true), 4, out) == 0);
  resp.poll(4, out);
  r = take_responses(out);
  REQUIRE(r.size() == 3);
  CHECK(r[0].psn == 15);
  CHECK(r[1].psn == 16);
  CHECK(r[2].opcode == opcode::kRcAck);
  CHECK(r[2].psn == 17);
  // The AETH MSN of a READ's responses is the one after that READ, even when later requests
  // were taken before the responses went out.
  deliver(resp, make_read(pool.get(), 18, 0xB000, kMtu), 5, out);
  deliver(resp, make_read(pool.get(), 19, 0xB000, kMtu), 5, out);
  resp.poll(5, out);
  r = take_responses(out);
  REQUIRE(r.size() == 2);
  CHECK(r[0].msn == 6);
  CHECK(r[1].msn == 7);

  const RcResponderCounters& c = resp.counters();
  CHECK(c.read_requests == 6);
  CHECK(c.read_responses_sent == 9);
  CHECK(c.read_bytes_sent == 2 * kMtu + 512 + kMtu + 2 * kMtu + 2 * kMtu);
  CHECK(c.messages_received == 7);
  CHECK(pool.whole());
}

TEST_CASE("responder: a duplicate READ replays from its own PSN, as rxe duplicate_request") {
  TestPool pool;
  RcResponder resp(config(0), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  deliver(resp, make_read(pool.get(), 0, 0x8000, 4 * kMtu), 1, out);  // PSNs 0..3
  resp.poll(1, out);
  CHECK(take_responses(out).size() == 4);
  deliver(resp, make_read(pool.get(), 4, 0x20000, kMtu), 1, out);  // PSN 4
  resp.poll(1, out);
  CHECK(take_responses(out).size() == 1);

  // From the resource's first PSN the replay starts with FIRST (rdatm_res_state_new).
  deliver(resp, make_read(pool.get(), 0, 0x8000, 4 * kMtu), 2, out);
  resp.poll(2, out);
  std::vector<Response> r = take_responses(out);
  REQUIRE(r.size() == 4);
  CHECK(r[0].opcode == opcode::kRcReadResponseFirst);
  CHECK(r[0].psn == 0);
  CHECK(r[3].opcode == opcode::kRcReadResponseLast);
  // The requester got 0 and 1 and re-issues the rest (req_retry): PSN 2, VA + 2 MTU, 2 MTU.
  // The replay starts in the middle (rdatm_res_state_replay).
  deliver(resp, make_read(pool.get(), 2, 0x8000 + 2 * kMtu, 2 * kMtu), 3, out);
  resp.poll(3, out);
  r = take_responses(out);
  REQUIRE(r.size() == 2);
  CHECK(r[0].opcode == opcode::kRcReadResponseMiddle);
  CHECK(r[0].psn == 2);
  CHECK(r[1].opcode == opcode::kRcReadResponseLast);
  CHECK(r[1].psn == 3);
  // The second READ's duplicate: ONLY.
  deliver(resp, make_read(pool.get(), 4, 0x20000, kMtu), 3, out);
  resp.poll(3, out);
  r = take_responses(out);
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == opcode::kRcReadResponseOnly);
  CHECK(r[0].psn == 4);

  // Dropped (class D): rxe reset the resource's VA to the last duplicate's ("Reset the
  // resource, except length"), so the whole READ again is no longer a subset; longer than the
  // resource; another rkey. The expected PSN and MSN never move for duplicates.
  deliver(resp, make_read(pool.get(), 0, 0x8000, 4 * kMtu), 4, out);
  deliver(resp, make_read(pool.get(), 1, 0x8000 + 2 * kMtu, 5 * kMtu), 4, out);
  deliver(resp, make_read(pool.get(), 2, 0x8000 + 2 * kMtu, 2 * kMtu, 0x43), 4, out);
  resp.poll(4, out);
  CHECK(out.empty());
  CHECK(resp.expected_psn() == 5);
  CHECK(resp.msn() == 2);

  const RcResponderCounters& c = resp.counters();
  CHECK(c.read_requests == 2);
  CHECK(c.read_duplicates == 3);
  CHECK(c.read_duplicates_dropped == 3);
  CHECK(c.duplicates == 6);
  CHECK(c.read_responses_sent == 4 + 1 + 4 + 2 + 1);
  CHECK(pool.whole());
}

TEST_CASE("responder: a READ inside a WRITE message or with a payload is refused; a gap NAKs") {
  TestPool pool;
  RcResponder resp(config(0), responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  {
    // After WRITE FIRST only MIDDLE/LAST may come (check_op_seq ->
    // RESPST_ERR_MISSING_OPCODE_LAST_C): NAK invalid request, the QP fails, no READ reply.
    RcResponder bad(config(0), responder_address(), pool.get());
    deliver(bad, make_write(pool.get(), opcode::kRcWriteFirst, 0, kMtu, false), 1, out);
    REQUIRE(deliver(bad, make_read(pool.get(), 1, 0x8000, kMtu), 1, out) == 1);
    const Ack e = take(out[0]);
    out.clear();
    CHECK(e.syndrome == aeth::kNakInvalidRequest);
    CHECK(e.psn == 1);
    CHECK(bad.counters().opcode_sequence_errors == 1);
    CHECK(bad.in_error());
    CHECK(bad.expected_psn() == 1);
    CHECK_FALSE(bad.read_responses_pending());
    CHECK(bad.counters().read_requests == 0);
  }
  deliver(resp, make_write(pool.get(), opcode::kRcWriteFirst, 0, kMtu, false), 1, out);
  deliver(resp, make_write(pool.get(), opcode::kRcWriteLast, 1, 10, false), 1, out);
  // A READ ahead of the expected PSN: the usual NAK with the expected PSN.
  REQUIRE(deliver(resp, make_read(pool.get(), 5, 0x8000, kMtu), 2, out) == 1);
  const Ack n = take(out[0]);
  out.clear();
  CHECK(n.syndrome == aeth::kNakPsnSequenceError);
  CHECK(n.psn == 2);
  CHECK_FALSE(resp.read_responses_pending());
  CHECK(resp.counters().read_requests == 0);
  CHECK(pool.whole());
}

TEST_CASE("responder: echo_entropy acknowledges every packet on the port it came on") {
  TestPool pool;
  RcResponderConfig c = config(0);
  c.echo_entropy = true;
  RcResponder resp(c, responder_address(), pool.get());
  std::vector<rte_mbuf*> out;
  const uint16_t ports[] = {0xC101, 0xC2F3, 0xC777};
  const uint8_t ops[] = {opcode::kRcWriteFirst, opcode::kRcWriteMiddle, opcode::kRcWriteLast};
  for (uint32_t i = 0; i < 3; ++i) {
    // No AckReq on the first two: acknowledged all the same, each on its own packet's port.
    rte_mbuf* w = test::make_rc_write(pool.get(), ops[i], i, i < 2 ? kMtu : 10, i == 2, 0x22,
                                      3 * kMtu, ports[i]);
    REQUIRE(deliver(resp, w, i + 1, out) == 1);
    const ParsedPacket p = parse_ok(out[0]);  // the ICRC over the echoed port verifies
    CHECK(p.bth_opcode == opcode::kRcAck);
    CHECK(p.psn == i);
    CHECK(p.src_port == ports[i]);
    rte_pktmbuf_free(out[0]);
    out.clear();
  }
  CHECK(resp.counters().acks_sent == 3);
  CHECK(pool.whole());
}
