// The out-of-order placement responder: packets inside the window are placed in any order, the
// bitmap closes gaps, ACKs are cumulative, a hole is NAKed only once it has waited nak_delay_ns,
// what lies beyond the window is dropped and counted.
#include "dataplane/rc_endpoint/rc_placement_responder.h"

#include <rte_ip.h>
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
constexpr uint8_t kAckUnlimited = 0x1F;

rte_mbuf* make_write(rte_mempool* pool, uint8_t op, uint32_t psn, uint32_t payload, bool ack_req,
                     uint32_t dest_qp = 0x22) {
  return test::make_rc_write(pool, op, psn, payload, ack_req, dest_qp, 4 * kMtu);
}

struct Ack {
  uint32_t psn = 0;
  uint8_t syndrome = 0;
  uint32_t msn = 0;
};

Ack take(rte_mbuf* m) {
  const ParsedPacket p = parse_ok(m);
  const RcQpAddress a = responder_address();
  CHECK(p.bth_opcode == opcode::kRcAck);
  CHECK(p.dest_qp == a.peer_qp);
  CHECK(p.src_ip == a.local_ip);
  CHECK(p.dst_ip == a.peer_ip);
  CHECK(p.dscp() == a.dscp);
  AethView aeth(rte_pktmbuf_mtod(m, uint8_t*) + p.bth_offset + kBthSize);
  Ack r{p.psn, aeth.syndrome(), aeth.msn()};
  rte_pktmbuf_free(m);
  return r;
}

// Delivers one WRITE; returns the ACK/NAKs it caused, taken and freed.
std::vector<Ack> write(RcPlacementResponder& r, rte_mempool* pool, uint8_t op, uint32_t psn,
                       bool ack_req, uint64_t now, uint32_t payload = kMtu) {
  rte_mbuf* m = make_write(pool, op, psn, payload, ack_req);
  std::vector<rte_mbuf*> out;
  r.receive(m, parse_ok(m), now, out);
  std::vector<Ack> acks;
  for (rte_mbuf* a : out) acks.push_back(take(a));
  return acks;
}

std::vector<Ack> poll(RcPlacementResponder& r, uint64_t now) {
  std::vector<rte_mbuf*> out;
  r.poll(now, out);
  std::vector<Ack> acks;
  for (rte_mbuf* a : out) acks.push_back(take(a));
  return acks;
}

RcPlacementResponderConfig config(uint32_t window = 128, uint64_t nak_delay_ns = 10'000,
                                  uint32_t first_psn = 0) {
  RcPlacementResponderConfig c;
  c.mtu = kMtu;
  c.window = window;
  c.nak_delay_ns = nak_delay_ns;
  c.first_psn = first_psn;
  return c;
}

bool is_ack(const Ack& a, uint32_t psn, uint32_t msn) {
  return a.syndrome == kAckUnlimited && a.psn == psn && a.msn == msn;
}
bool is_nak(const Ack& a, uint32_t psn) {
  return a.syndrome == aeth::kNakPsnSequenceError && a.psn == psn;
}

using namespace opcode;

}  // namespace

TEST_CASE("placement: in order, every packet placed, AckReq answered with its PSN and the MSN") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 100).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 1, false, 200).empty());
    const auto acks = write(r, pool.get(), kRcWriteLast, 2, true, 300, 100);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 2, 1));
    CHECK(r.expected_psn() == 3);
    CHECK(r.msn() == 1);
    CHECK_FALSE(r.hole_open());
    const auto& c = r.counters();
    CHECK(c.placed == 3);
    CHECK(c.placed_out_of_order == 0);
    CHECK(c.bytes_written == 2 * kMtu + 100);
    CHECK(c.messages_received == 1);
    CHECK(c.holes_opened == 0);
    CHECK(c.naks_sent == 0);
    CHECK(c.opcode_sequence_errors == 0);
    CHECK(r.next_event_ns() == RcPlacementResponder::kNever);
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "placement: reordered packets are placed at once; the gap closing sends one "
    "cumulative ACK and completes the message; no NAK before the delay") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(128, 10'000), responder_address(), pool.get());
    // Message of 4 packets arriving 0, 2, 3, 1: the AckReq on 3 cannot be answered until 1.
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 0).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 2, false, 1'000).empty());
    CHECK(r.hole_open());
    CHECK(r.placed_beyond() == 1);
    CHECK(r.next_event_ns() == 11'000);  // the hole's NAK time
    CHECK(write(r, pool.get(), kRcWriteLast, 3, true, 2'000).empty());
    CHECK(r.msn() == 0);  // complete behind the hole, not yet in MSN order
    CHECK(poll(r, 10'999).empty());
    const auto acks = write(r, pool.get(), kRcWriteMiddle, 1, false, 5'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 3, 1));
    CHECK(r.expected_psn() == 4);
    CHECK_FALSE(r.hole_open());
    CHECK(r.next_event_ns() == RcPlacementResponder::kNever);
    CHECK(poll(r, 1'000'000).empty());  // the closed hole is never NAKed
    const auto& c = r.counters();
    CHECK(c.placed == 4);
    CHECK(c.placed_out_of_order == 2);
    CHECK(c.max_distance == 2);
    CHECK(c.messages_received == 1);
    CHECK(c.holes_opened == 1);
    CHECK(c.holes_naked == 0);
    CHECK(c.naks_sent == 0);
    CHECK(c.duplicates == 0);
    CHECK(c.opcode_sequence_errors == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement: messages complete in MSN order, two ONLY messages swapped") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteOnly, 1, true, 0, 10).empty());
    CHECK(r.msn() == 0);
    const auto acks = write(r, pool.get(), kRcWriteOnly, 0, true, 10, 10);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 1, 2));
    CHECK(r.counters().messages_received == 2);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement: duplicates are re-ACKed with the cumulative point, placed or before") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(), responder_address(), pool.get());
    // Before anything arrived: "everything before first_psn".
    auto acks = write(r, pool.get(), kRcWriteMiddle, 0xFFFFFF, false, 0);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 0xFFFFFF, 0));
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 1).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 2, false, 2).empty());
    // Before expected: a duplicate, ACKed with expected - 1, AckReq or not.
    acks = write(r, pool.get(), kRcWriteFirst, 0, false, 3);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 0, 0));
    // Beyond the hole and already placed: a duplicate too, same cumulative ACK.
    acks = write(r, pool.get(), kRcWriteMiddle, 2, true, 4);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 0, 0));
    const auto& c = r.counters();
    CHECK(c.duplicates == 3);
    CHECK(c.placed == 2);
    CHECK(c.bytes_written == 2 * kMtu);
    CHECK(r.placed_beyond() == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "placement: a hole is NAKed once, with its PSN, when it has waited nak_delay_ns; "
    "the next hole gets its own clock when the first closes") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(128, 10'000), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 0).empty());
    // 1 and 4 are missing.
    CHECK(write(r, pool.get(), kRcWriteMiddle, 2, false, 1'000).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 3, false, 2'000).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 5, false, 3'000).empty());
    CHECK(r.next_event_ns() == 11'000);
    CHECK(poll(r, 10'999).empty());
    auto acks = poll(r, 11'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_nak(acks[0], 1));
    CHECK(r.hole_naked());
    CHECK(r.next_event_ns() == RcPlacementResponder::kNever);
    // Latched: later arrivals and polls do not NAK the same hole again.
    CHECK(write(r, pool.get(), kRcWriteMiddle, 6, false, 12'000).empty());
    CHECK(poll(r, 100'000).empty());
    // The retransmission of 1 closes the first hole: cumulative ACK up to 3; 4 is the next hole,
    // with 5 and 6 beyond it, and its clock starts now.
    acks = write(r, pool.get(), kRcWriteMiddle, 1, true, 200'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 3, 0));
    CHECK(r.hole_open());
    CHECK_FALSE(r.hole_naked());
    CHECK(r.next_event_ns() == 210'000);
    acks = poll(r, 210'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_nak(acks[0], 4));
    acks = write(r, pool.get(), kRcWriteMiddle, 4, true, 220'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 6, 0));
    CHECK_FALSE(r.hole_open());
    const auto& c = r.counters();
    CHECK(c.holes_opened == 2);
    CHECK(c.holes_naked == 2);
    CHECK(c.naks_sent == 2);
    CHECK(c.placed == 7);
    CHECK(c.placed_out_of_order == 4);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement: nak_delay_ns 0 NAKs the first out-of-order arrival, as rxe and IRN do") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(128, 0), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 0).empty());
    auto acks = write(r, pool.get(), kRcWriteMiddle, 2, false, 5);
    REQUIRE(acks.size() == 1);
    CHECK(is_nak(acks[0], 1));
    CHECK(write(r, pool.get(), kRcWriteMiddle, 3, false, 6).empty());  // but placed, and once
    CHECK(r.counters().placed == 3);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement: a packet window or more PSNs after expected is dropped and counted") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(8, 10'000), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 8, false, 0).empty());  // expected 0: slot 8 of 8
    CHECK(r.counters().window_overflows == 1);
    CHECK(r.counters().placed == 0);
    CHECK_FALSE(r.hole_open());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 7, false, 1).empty());  // the last slot
    CHECK(r.counters().placed == 1);
    CHECK(r.hole_open());
    // Once expected moves, the window moves with it: 8 fits after 0 arrives (which closes a
    // gap, so it is ACKed; 1..6 are still missing).
    auto acks = write(r, pool.get(), kRcWriteFirst, 0, false, 2);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 0, 0));
    CHECK(write(r, pool.get(), kRcWriteMiddle, 8, false, 3).empty());
    CHECK(r.counters().placed == 3);
    CHECK(r.counters().window_overflows == 1);
    // The bitmap is reused across its wrap: PSNs 1..8 arrive, then 9..16 in order.
    for (uint32_t psn = 1; psn <= 6; ++psn) write(r, pool.get(), kRcWriteMiddle, psn, false, 4);
    CHECK(r.expected_psn() == 9);
    for (uint32_t psn = 9; psn <= 16; ++psn) write(r, pool.get(), kRcWriteMiddle, psn, false, 5);
    CHECK(r.expected_psn() == 17);
    CHECK(r.counters().duplicates == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement: PSNs wrap at 2^24 for placement, ACKs and NAKs") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(128, 1'000, 0xFFFFFE), responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0xFFFFFE, false, 0).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 0x000000, false, 1).empty());
    auto acks = poll(r, 1'001);
    REQUIRE(acks.size() == 1);
    CHECK(is_nak(acks[0], 0xFFFFFF));
    acks = write(r, pool.get(), kRcWriteLast, 0x000001, true, 2'000);  // beyond the hole
    CHECK(acks.empty());
    acks = write(r, pool.get(), kRcWriteMiddle, 0xFFFFFF, false, 3'000);
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 0x000001, 1));
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "placement: bad ICRC, wrong QP, bad opcodes and lengths are counted and dropped; "
    "opcode order is checked as the cumulative point passes") {
  TestPool pool(255);
  {
    RcPlacementResponder r(config(), responder_address(), pool.get());
    std::vector<rte_mbuf*> out;
    rte_mbuf* m = make_write(pool.get(), kRcWriteFirst, 0, kMtu, false);
    const ParsedPacket p = parse_ok(m);
    rte_pktmbuf_mtod(m, uint8_t*)[p.payload_offset] ^= 1;  // payload bit flip: ICRC fails
    r.receive(m, p, 0, out);
    m = make_write(pool.get(), kRcWriteFirst, 0, kMtu, false, 0x23);
    r.receive(m, parse_ok(m), 0, out);
    CHECK(write(r, pool.get(), kRcWriteMiddle, 0, false, 0, 100).empty());  // MIDDLE != MTU
    CHECK(out.empty());
    const auto& c = r.counters();
    CHECK(c.icrc_errors == 1);
    CHECK(c.wrong_qp == 1);
    CHECK(c.length_errors == 1);
    CHECK(c.placed == 0);
    // A MIDDLE with no FIRST before it is placed (placement cannot know yet), then counted.
    CHECK(write(r, pool.get(), kRcWriteMiddle, 1, false, 0).empty());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 0).size() == 1);  // closes the gap
    CHECK(c.opcode_sequence_errors == 0);
    CHECK(write(r, pool.get(), kRcWriteFirst, 2, false, 0).empty());  // FIRST inside a message
    CHECK(c.opcode_sequence_errors == 1);
    CHECK(c.packets_received == 6);
  }
  CHECK(pool.whole());
}

TEST_CASE(
    "placement: an ACK or NAK that finds the mempool empty waits and is sent later; "
    "an ACK that shows the NAKed PSN has arrived drops the NAK") {
  TestPool pool;     // requests
  TestPool acks(4);  // the responder's ACK/NAKs
  {
    RcPlacementResponder r(config(128, 0), responder_address(), acks.get());
    std::vector<rte_mbuf*> held;
    for (int i = 0; i < 4; ++i) held.push_back(acks.alloc());
    std::vector<rte_mbuf*> out;
    rte_mbuf* m = make_write(pool.get(), kRcWriteFirst, 0, kMtu, false);
    r.receive(m, parse_ok(m), 0, out);
    m = make_write(pool.get(), kRcWriteMiddle, 2, kMtu, false);
    r.receive(m, parse_ok(m), 10, out);  // NAK due at once (delay 0), no mbuf
    CHECK(out.empty());
    CHECK(r.control_pending());
    CHECK(r.counters().pool_empty == 1);
    CHECK(r.next_event_ns() == 10 + r.config().alloc_retry_ns);
    for (rte_mbuf* h : held) rte_pktmbuf_free(h);
    auto got = poll(r, 10 + r.config().alloc_retry_ns);
    REQUIRE(got.size() == 1);
    CHECK(is_nak(got[0], 1));
    CHECK_FALSE(r.control_pending());

    // Next hole (4) NAKed while the pool is empty, then filled: the ACK supersedes the NAK.
    held.clear();
    for (int i = 0; i < 4; ++i) held.push_back(acks.alloc());
    for (uint32_t psn : {1u, 3u, 5u, 4u}) {
      m = make_write(pool.get(), kRcWriteMiddle, psn, kMtu, false);
      r.receive(m, parse_ok(m), 5'000, out);
    }
    CHECK(out.empty());
    for (rte_mbuf* h : held) rte_pktmbuf_free(h);
    got = poll(r, 10'000);
    REQUIRE(got.size() == 1);
    CHECK(is_ack(got[0], 5, 0));
    CHECK(r.counters().naks_sent == 1);
  }
  CHECK(pool.whole());
  CHECK(acks.whole());
}

TEST_CASE("placement: configuration errors are refused with a reason") {
  TestPool pool(15);
  RcPlacementResponderConfig c = config();
  c.window = 0;
  CHECK(c.check().starts_with("window:"));
  c.window = RcPlacementResponderConfig::kMaxWindow + 1;
  CHECK(c.check().starts_with("window:"));
  c = config();
  c.mtu = 1000;
  CHECK(c.check().starts_with("mtu:"));
  CHECK_THROWS_AS(RcPlacementResponder(c, responder_address(), pool.get()), std::invalid_argument);
  CHECK_THROWS_AS(RcPlacementResponder(config(), responder_address(), nullptr),
                  std::invalid_argument);
}

TEST_CASE(
    "placement sack (IRN): a NAK carries what lies beyond its PSN; a gap is NAKed once; every "
    "packet is ACKed") {
  TestPool pool(255);
  {
    RcPlacementResponderConfig c = config(64, 0);
    c.sack = true;
    c.ack_every_packet = true;
    RcPlacementResponder r(c, responder_address(), pool.get());
    const auto deliver = [&](uint32_t psn, uint64_t now) {
      rte_mbuf* m = make_write(pool.get(), kRcWriteMiddle, psn, kMtu, false);
      std::vector<rte_mbuf*> out;
      r.receive(m, parse_ok(m), now, out);
      return out;
    };
    // A message's middle: 0, 1 arrive (each ACKed), 2..3 lost, 4 arrives: NAK 2, SACK {4}.
    for (uint32_t psn : {0u, 1u}) {
      auto out = deliver(psn, 10);
      REQUIRE(out.size() == 1);
      CHECK(is_ack(take(out[0]), psn, 0));
    }
    auto out = deliver(4, 20);
    REQUIRE(out.size() == 2);
    CHECK(is_ack(take(out[0]), 1, 0));  // a duplicate cumulative ACK for the packet itself
    {
      const ParsedPacket p = parse_ok(out[1]);
      CHECK(p.bth_opcode == opcode::kRcAck);
      CHECK(p.psn == 2);
      REQUIRE(p.payload_length == 8);  // the SACK: 32 bits
      const uint8_t* b = rte_pktmbuf_mtod(out[1], const uint8_t*) + p.payload_offset;
      // PSN 4 is 2 + 1 + 1: bit 1, the second most significant of the first byte.
      CHECK(std::vector<uint8_t>(b, b + 8) ==
            std::vector<uint8_t>{0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00});
      CHECK(is_nak(take(out[1]), 2));
    }
    // 5 arrives: no new gap, no NAK. 7 arrives: 6 is a new gap past the NAK's SACK: NAK again,
    // still naming 2, SACK {4, 5, 7}.
    out = deliver(5, 30);
    REQUIRE(out.size() == 1);
    CHECK(is_ack(take(out[0]), 1, 0));
    out = deliver(7, 40);
    REQUIRE(out.size() == 2);
    CHECK(is_ack(take(out[0]), 1, 0));
    {
      const ParsedPacket p = parse_ok(out[1]);
      const uint8_t* b = rte_pktmbuf_mtod(out[1], const uint8_t*) + p.payload_offset;
      CHECK(b[4] == 0x68);  // offsets 1 (4), 2 (5), 4 (7): 0110 1000
      CHECK(is_nak(take(out[1]), 2));
    }
    // 2 arrives: expected moves to 3, a hole both NAKs reported: no NAK, one ACK.
    out = deliver(2, 50);
    REQUIRE(out.size() == 1);
    CHECK(is_ack(take(out[0]), 2, 0));
    // 3 arrives: expected to 6, reported by the second NAK: no NAK.
    out = deliver(3, 60);
    REQUIRE(out.size() == 1);
    CHECK(is_ack(take(out[0]), 5, 0));
    out = deliver(6, 70);
    REQUIRE(out.size() == 1);
    CHECK(is_ack(take(out[0]), 7, 0));
    CHECK(r.counters().naks_sent == 2);
    CHECK(r.counters().sack_naks == 2);
    CHECK(r.counters().holes_naked == 2);
    CHECK(r.next_event_ns() == RcPlacementResponder::kNever);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement sack (IRN): with a NAK delay, a gap filled in time is never NAKed") {
  TestPool pool(255);
  {
    RcPlacementResponderConfig c = config(64, 5'000);
    c.sack = true;
    RcPlacementResponder r(c, responder_address(), pool.get());
    CHECK(write(r, pool.get(), kRcWriteFirst, 0, false, 0).empty());
    CHECK(write(r, pool.get(), kRcWriteMiddle, 2, false, 100).empty());
    CHECK(r.next_event_ns() == 100 + 5'000);
    CHECK(poll(r, 5'099).empty());
    const auto acks = write(r, pool.get(), kRcWriteMiddle, 1, false, 1'000);  // late, not lost
    REQUIRE(acks.size() == 1);
    CHECK(is_ack(acks[0], 2, 0));
    CHECK(poll(r, 10'000).empty());
    CHECK(r.counters().naks_sent == 0);
    CHECK(r.next_event_ns() == RcPlacementResponder::kNever);
  }
  CHECK(pool.whole());
}

TEST_CASE("placement echo_ce: an ACK carries BECN when a packet since the last one had CE") {
  TestPool pool(255);
  {
    RcPlacementResponderConfig c = config();
    c.echo_ce = true;
    c.ack_every_packet = true;
    RcPlacementResponder r(c, responder_address(), pool.get());
    std::vector<rte_mbuf*> out;
    rte_mbuf* m = make_write(pool.get(), kRcWriteFirst, 0, kMtu, false);
    auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14);
    ip->type_of_service |= 0x3;  // CE
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    r.receive(m, parse_ok(m), 0, out);
    m = make_write(pool.get(), kRcWriteMiddle, 1, kMtu, false);
    r.receive(m, parse_ok(m), 0, out);
    REQUIRE(out.size() == 2);
    CHECK(BthView(rte_pktmbuf_mtod(out[0], uint8_t*) + parse_ok(out[0]).bth_offset).becn());
    CHECK_FALSE(BthView(rte_pktmbuf_mtod(out[1], uint8_t*) + parse_ok(out[1]).bth_offset).becn());
    for (rte_mbuf* a : out) rte_pktmbuf_free(a);
    CHECK(r.counters().becn_sent == 1);
  }
  CHECK(pool.whole());
}
