#include "dataplane/rc_endpoint/rc_traffic_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/payload_store.h"
#include "dataplane/wire/roce_headers.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

constexpr uint64_t kNever = RcTrafficEngine::kNever;

ParsedPacket parse_ok(const rte_mbuf* m) {
  const PacketParser parser(ParseOptions{true, true});  // every packet on the wire is genuine
  ParsedPacket p;
  REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
  REQUIRE(p.kind == PacketKind::kRoce);
  return p;
}

bool is_request(const ParsedPacket& p) {
  return p.bth_opcode != opcode::kRcAck;
}

// One direction of a cable in virtual time: serialised one packet per ser_ns, delivered prop_ns
// later, in order, unless `fate` says otherwise for a packet.
enum class Fate { kPass, kDrop, kSwapWithNext };

class Wire {
 public:
  std::function<Fate(const ParsedPacket&)> fate;
  uint64_t ser_ns = 100;
  uint64_t prop_ns = 2000;
  uint64_t dropped = 0;
  uint64_t swapped = 0;
  uint64_t carried = 0;

  ~Wire() {
    for (auto& [t, m] : q_) rte_pktmbuf_free(m);
    if (held_ != nullptr) rte_pktmbuf_free(held_);
  }

  void send(rte_mbuf* m, uint64_t now) {
    const ParsedPacket p = parse_ok(m);
    ++carried;
    const Fate f = fate ? fate(p) : Fate::kPass;
    if (f == Fate::kDrop) {
      ++dropped;
      rte_pktmbuf_free(m);
      return;
    }
    if (f == Fate::kSwapWithNext && held_ == nullptr) {
      ++swapped;
      held_ = m;  // goes out right after the next packet
      return;
    }
    enqueue(m, now);
    if (held_ != nullptr) {
      enqueue(held_, now);
      held_ = nullptr;
    }
  }
  uint64_t next_arrival() const { return q_.empty() ? kNever : q_.front().first; }
  bool idle() const { return q_.empty() && held_ == nullptr; }

  // Packets whose last bit has arrived by now, in order.
  template <typename F>
  void deliver(uint64_t now, F&& to) {
    while (!q_.empty() && q_.front().first <= now) {
      rte_mbuf* m = q_.front().second;
      q_.pop_front();
      to(m);
    }
  }

 private:
  void enqueue(rte_mbuf* m, uint64_t now) {
    const uint64_t start = std::max(now, free_at_);
    free_at_ = start + ser_ns;
    q_.emplace_back(free_at_ + prop_ns, m);
  }

  std::deque<std::pair<uint64_t, rte_mbuf*>> q_;
  uint64_t free_at_ = 0;
  rte_mbuf* held_ = nullptr;
};

// Runs A and B wired back to back until both are done and the wires are empty (true), or
// nothing can happen any more / the step limit is reached (false). Returns the end time in *t.
bool run(RcTrafficEngine& a, RcTrafficEngine& b, Wire& ab, Wire& ba, uint64_t* end_ns = nullptr,
         uint64_t max_steps = 2'000'000) {
  uint64_t now = 0;
  std::vector<rte_mbuf*> out;
  auto receive_at = [&](RcTrafficEngine& e, Wire& back) {
    return [&](rte_mbuf* m) {
      out.clear();
      e.receive(m, parse_ok(m), now, out);
      for (rte_mbuf* r : out) back.send(r, now);
    };
  };
  for (uint64_t step = 0; step < max_steps; ++step) {
    ab.deliver(now, receive_at(b, ba));
    ba.deliver(now, receive_at(a, ab));
    out.clear();
    a.poll(now, out);
    for (rte_mbuf* m : out) ab.send(m, now);
    out.clear();
    b.poll(now, out);
    for (rte_mbuf* m : out) ba.send(m, now);
    if (a.done() && b.done() && ab.idle() && ba.idle()) {
      if (end_ns != nullptr) *end_ns = now;
      return true;
    }
    const uint64_t next =
        std::min({ab.next_arrival(), ba.next_arrival(), a.next_event_ns(), b.next_event_ns()});
    if (next == kNever) return false;
    now = std::max(now, next);
  }
  return false;
}

// Node A sends to node B: A's QPs are requesters, B's the matching responders.
struct Pair {
  RcTrafficEngineConfig a, b;
  Pair(uint32_t qps, uint64_t messages, uint32_t bytes) {
    a.qps = b.qps = qps;
    a.messages_per_qp = b.messages_per_qp = messages;
    a.message_bytes = b.message_bytes = bytes;
    a.mtu = b.mtu = 1024;
    a.first_psn = b.first_psn = 0xFFFF00;  // both directions cross the 2^24 wrap
    a.retransmit_timeout_ns = b.retransmit_timeout_ns = 1'000'000;
    a.role = RcQpRole::kRequester;
    b.role = RcQpRole::kResponder;
    a.first_local_qp = b.first_peer_qp = 0x100;
    a.first_peer_qp = b.first_local_qp = 0x200;
    b.local_mac = a.peer_mac;
    b.peer_mac = a.local_mac;
    b.local_ip = a.peer_ip;
    b.peer_ip = a.local_ip;
  }
};

// Drops / swaps the first transmission of one request PSN of one QP.
std::function<Fate(const ParsedPacket&)> once(uint32_t dest_qp, uint32_t psn, Fate what) {
  auto done = std::make_shared<bool>(false);
  return [=](const ParsedPacket& p) {
    if (*done || !is_request(p) || p.dest_qp != dest_qp || p.psn != psn) return Fate::kPass;
    *done = true;
    return what;
  };
}

}  // namespace

TEST_CASE("engine: two engines back to back, lossless in-order wire: zero retransmissions") {
  TestPool pool;
  const uint32_t qps = 4;
  const uint64_t messages = 8;
  const uint32_t bytes = 20 * 1024 + 100;  // 21 packets: FIRST, 19 MIDDLE, LAST
  Pair cfg(qps, messages, bytes);
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;

  // Round robin: the first poll gives each QP a turn before any gets a second.
  std::vector<rte_mbuf*> first;
  a.poll(0, first);
  REQUIRE(first.size() == cfg.a.max_burst);
  for (uint32_t i = 0; i < qps; ++i) CHECK(parse_ok(first[i]).dest_qp == 0x200 + i);
  for (rte_mbuf* m : first) ab.send(m, 0);

  uint64_t end = 0;
  REQUIRE(run(a, b, ab, ba, &end));
  const RcRequesterCounters rq = a.requester_totals();
  const RcResponderCounters rs = b.responder_totals();
  CHECK(rq.messages_started == qps * messages);
  CHECK(rq.messages_completed == qps * messages);
  CHECK(rq.packets_retransmitted == 0);
  CHECK(rq.timeouts == 0);
  CHECK(rq.nak_retries == 0);
  CHECK(rq.bytes_acked == qps * messages * bytes);
  CHECK(rq.packets_sent == qps * messages * 21);
  CHECK(rs.accepted == qps * messages * 21);
  CHECK(rs.bytes_written == qps * messages * bytes);
  CHECK(rs.messages_received == qps * messages);
  CHECK(rs.naks_sent == 0);
  CHECK(rs.duplicates == 0);
  CHECK(rs.out_of_order_dropped == 0);
  CHECK(rs.icrc_errors == 0);
  CHECK(rs.acks_sent == rq.acks_received);
  for (uint32_t i = 0; i < qps; ++i) {
    REQUIRE(a.requester(i) != nullptr);
    CHECK(a.requester(i)->counters().messages_completed == messages);
    CHECK(b.responder(i)->counters().messages_received == messages);
    CHECK(a.responder(i) == nullptr);
    CHECK(b.requester(i) == nullptr);
  }
  CHECK(a.requester(qps) == nullptr);
  const CompletionTimeStats& ct = a.completion_times();
  CHECK(ct.count() == qps * messages);
  // At least one message's packets on the wire, its last one's propagation and the ACK's.
  CHECK(ct.min_ns() >= 21 * ab.ser_ns + ab.prop_ns + ba.prop_ns);
  CHECK(ct.max_ns() <= end);
  CHECK(ct.percentile_ns(0.5) >= ct.min_ns());
  CHECK(ct.percentile_ns(0.99) <= ct.max_ns());
  CHECK(a.done());
  CHECK(a.next_event_ns() == kNever);
  CHECK(a.counters().received == rq.responses_received);
  CHECK(pool.whole());
}

TEST_CASE("engine: symmetric nodes, every QP both requester and responder, both directions") {
  TestPool pool;
  Pair cfg(3, 5, 8 * 1024);
  cfg.a.role = cfg.b.role = RcQpRole::kBoth;
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  REQUIRE(run(a, b, ab, ba));
  for (RcTrafficEngine* e : {&a, &b}) {
    CHECK(e->done());
    CHECK(e->requester_totals().messages_completed == 15);
    CHECK(e->requester_totals().packets_retransmitted == 0);
    CHECK(e->responder_totals().messages_received == 15);
    CHECK(e->responder_totals().bytes_written == 15 * 8 * 1024);
  }
  CHECK(pool.whole());
}

TEST_CASE("engine: one lost packet -> NAK -> the requester goes back N and completes") {
  TestPool pool;
  Pair cfg(2, 4, 16 * 1024);
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  const uint32_t lost = psn_add(cfg.a.first_psn, 20);  // message 1, packet 4 of QP 0
  ab.fate = once(0x200, lost, Fate::kDrop);
  REQUIRE(run(a, b, ab, ba));
  CHECK(ab.dropped == 1);

  const RcResponder& r0 = *b.responder(0);
  const RcRequester& q0 = *a.requester(0);
  CHECK(r0.counters().naks_sent == 1);
  CHECK(r0.counters().out_of_order_dropped >= 1);
  CHECK(q0.counters().naks_received == 1);
  CHECK(q0.counters().nak_retries == 1);
  CHECK(q0.counters().timeouts == 0);
  // Go back N: everything sent after the lost packet before the NAK came back went again.
  CHECK(q0.counters().packets_retransmitted == 1 + r0.counters().out_of_order_dropped);
  CHECK(q0.counters().messages_completed == 4);
  CHECK(r0.counters().bytes_written == 4 * 16 * 1024);  // each byte written once
  CHECK(r0.counters().accepted == 4 * 16);
  // The other QP saw nothing of it.
  CHECK(a.requester(1)->counters().packets_retransmitted == 0);
  CHECK(b.responder(1)->counters().naks_sent == 0);
  CHECK(pool.whole());
}

TEST_CASE("engine: a lost tail packet draws no NAK: the retransmit timeout recovers it") {
  TestPool pool;
  Pair cfg(1, 2, 4 * 1024);
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  const uint32_t last = psn_add(cfg.a.first_psn, 7);  // the last packet of the last message
  ab.fate = once(0x200, last, Fate::kDrop);
  uint64_t end = 0;
  REQUIRE(run(a, b, ab, ba, &end));
  const RcRequesterCounters rq = a.requester_totals();
  CHECK(rq.timeouts == 1);
  CHECK(rq.nak_retries == 0);
  // Back to the oldest unacknowledged packet: the whole second message, whose first three
  // packets had arrived but, asking for no ACK, were never acknowledged.
  CHECK(rq.packets_retransmitted == 4);
  CHECK(b.responder_totals().duplicates == 3);
  CHECK(b.responder_totals().naks_sent == 0);
  CHECK(end >= cfg.a.retransmit_timeout_ns);
  CHECK(a.completion_times().max_ns() >= cfg.a.retransmit_timeout_ns);
  CHECK(pool.whole());
}

TEST_CASE("engine: swapping two adjacent packets costs a NAK and a go-back-N") {
  TestPool pool;
  Pair cfg(1, 4, 16 * 1024);
  // First the same run in order, for comparison.
  {
    RcTrafficEngine a(cfg.a, pool.get());
    RcTrafficEngine b(cfg.b, pool.get());
    Wire ab, ba;
    REQUIRE(run(a, b, ab, ba));
    CHECK(a.requester_totals().packets_retransmitted == 0);
  }
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  // Packet 10 is overtaken by packet 11, as spraying over unequal paths does.
  ab.fate = once(0x200, psn_add(cfg.a.first_psn, 10), Fate::kSwapWithNext);
  REQUIRE(run(a, b, ab, ba));
  CHECK(ab.swapped == 1);
  CHECK(ab.dropped == 0);  // nothing was lost on the wire...
  const RcResponderCounters rs = b.responder_totals();
  const RcRequesterCounters rq = a.requester_totals();
  CHECK(rs.naks_sent >= 1);  // ...yet the responder NAKed
  CHECK(rs.out_of_order_dropped >= 1);
  CHECK(rq.nak_retries >= 1);
  CHECK(rq.packets_retransmitted > 0);  // and the requester resent good packets
  CHECK(rs.duplicates > 0);             // some of which had already arrived
  CHECK(rq.timeouts == 0);
  CHECK(rq.messages_completed == 4);
  CHECK(rs.bytes_written == 4 * 16 * 1024);
  CHECK(pool.whole());
}

TEST_CASE("engine ooo_placement: a swap costs nothing; a lost packet is resent alone") {
  TestPool pool;
  Pair cfg(2, 4, 16 * 1024);
  cfg.a.ooo_placement = cfg.b.ooo_placement = true;
  cfg.b.placement_nak_delay_ns = 20'000;
  {
    Pair one(1, 4, 16 * 1024);  // one QP: the packet after 10 on the wire is its 11
    one.a.ooo_placement = one.b.ooo_placement = true;
    RcTrafficEngine a(one.a, pool.get());
    RcTrafficEngine b(one.b, pool.get());
    REQUIRE(b.placement_responder(0) != nullptr);
    CHECK(b.responder(0) == nullptr);
    CHECK(a.requester(0)->config().selective_retransmit);
    CHECK(b.placement_responder(0)->config().window == cfg.b.max_in_flight);
    Wire ab, ba;
    ab.fate = once(0x200, psn_add(cfg.a.first_psn, 10), Fate::kSwapWithNext);
    REQUIRE(run(a, b, ab, ba));
    CHECK(ab.swapped == 1);
    const RcPlacementResponderCounters pl = b.placement_totals();
    CHECK(pl.placed_out_of_order == 1);
    CHECK(pl.naks_sent == 0);
    CHECK(a.requester_totals().packets_retransmitted == 0);
    CHECK(a.requester_totals().messages_completed == 4);
  }
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  const uint32_t lost = psn_add(cfg.a.first_psn, 20);
  ab.fate = once(0x200, lost, Fate::kDrop);
  REQUIRE(run(a, b, ab, ba));
  const RcRequester& q0 = *a.requester(0);
  const RcPlacementResponder& r0 = *b.placement_responder(0);
  CHECK(r0.counters().holes_naked == 1);
  CHECK(q0.counters().naks_received == 1);
  CHECK(q0.counters().packets_retransmitted == 1);
  CHECK(q0.counters().selective_retransmissions == 1);
  CHECK(q0.counters().timeouts == 0);
  CHECK(r0.counters().bytes_written == 4 * 16 * 1024);  // each byte written once
  CHECK(r0.counters().duplicates == 0);
  CHECK(q0.counters().messages_completed == 4);
  CHECK(a.requester(1)->counters().packets_retransmitted == 0);
  CHECK(b.responder_totals().packets_received == 0);  // no rxe responder in this engine
  CHECK(pool.whole());
}

TEST_CASE("engine ooo_placement: a lost tail is resent by the timer, only the lost packet") {
  TestPool pool;
  Pair cfg(1, 2, 4 * 1024);
  cfg.a.ooo_placement = cfg.b.ooo_placement = true;
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  ab.fate = once(0x200, psn_add(cfg.a.first_psn, 7), Fate::kDrop);
  REQUIRE(run(a, b, ab, ba));
  const RcRequesterCounters rq = a.requester_totals();
  CHECK(rq.timeouts == 1);
  // rxe's go-back-N resent 4 packets here (3 of them duplicates). The selective requester
  // resends the oldest unacknowledged one (a duplicate: it had arrived, asking for no ACK); its
  // cumulative re-ACK shows the next missing PSN, which goes at once: 2 packets, 1 duplicate.
  CHECK(rq.packets_retransmitted == 2);
  CHECK(b.placement_totals().duplicates == 1);
  CHECK(rq.messages_completed == 2);
  CHECK(pool.whole());
}

TEST_CASE("engine irn: two QPs lose packets; the SACKs resend exactly those, under the BDP cap") {
  TestPool pool;
  Pair cfg(2, 3, 16 * 1024);
  for (RcTrafficEngineConfig* c : {&cfg.a, &cfg.b}) {
    c->ooo_placement = true;
    c->irn = true;
    c->max_in_flight = 10;  // the BDP cap, far below rxe's 66
    c->placement_nak_delay_ns = 0;
    c->retransmit_timeout_ns = 320'000;
  }
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  CHECK(a.requester(0)->config().irn);
  CHECK(a.requester(0)->config().max_in_flight == 10);
  CHECK(b.placement_responder(0)->config().sack);
  CHECK(b.placement_responder(0)->config().ack_every_packet);
  Wire ab, ba;
  const std::set<uint32_t> lost = {3, 4, 9, 30};  // PSNs after first_psn, of both QPs
  std::set<std::pair<uint32_t, uint32_t>> dropped;
  ab.fate = [&](const ParsedPacket& p) {
    const auto off = static_cast<uint32_t>(psn_diff(cfg.a.first_psn, p.psn));
    if (!is_request(p) || lost.count(off) == 0) return Fate::kPass;
    return dropped.insert({p.dest_qp, off}).second ? Fate::kDrop : Fate::kPass;
  };
  REQUIRE(run(a, b, ab, ba));
  const RcRequesterCounters rq = a.requester_totals();
  CHECK(dropped.size() == 8);
  CHECK(rq.packets_retransmitted == 8);  // exactly the lost ones
  CHECK(rq.timeouts == 0);
  CHECK(rq.sack_naks > 0);
  CHECK(rq.messages_completed == 6);
  CHECK(b.placement_totals().duplicates == 0);
  CHECK(b.placement_totals().window_overflows == 0);
  CHECK(b.placement_totals().bytes_written == 2 * 3 * 16 * 1024);
  CHECK(pool.whole());

  RcTrafficEngineConfig bad = cfg.a;
  bad.ooo_placement = false;
  CHECK(bad.check() == "irn: needs ooo_placement (IRN's responder places out of order)");
  bad = cfg.a;
  bad.irn_rto_low_ns = 400'000;
  CHECK(bad.check() == "irn_rto_low_ns: 1 ns .. retransmit_timeout_ns (RTO_low <= RTO_high)");
}

TEST_CASE("engine: dispatch by DestQP and opcode; strangers are counted and freed") {
  TestPool pool;
  Pair cfg(2, 1, 1024);
  cfg.a.qp_roles = {RcQpRole::kRequester, RcQpRole::kResponder};
  RcTrafficEngine a(cfg.a, pool.get());
  std::vector<rte_mbuf*> out;

  auto packet = [&](uint8_t op, uint32_t dest_qp) {
    FrameSpec f;
    RoceSpec r;
    r.opcode = op;
    r.dest_qp = dest_qp;
    r.psn = cfg.a.first_psn;
    r.ack_req = true;
    std::vector<uint8_t> payload(op == opcode::kRcAck ? 0 : 16);
    f.payload = payload;
    rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
    REQUIRE(m != nullptr);
    return m;
  };
  auto feed = [&](rte_mbuf* m) { return a.receive(m, parse_ok(m), 10, out); };

  feed(packet(opcode::kRcAck, 0x0FF));        // below the first QP
  feed(packet(opcode::kRcAck, 0x102));        // past the last
  feed(packet(opcode::kRcWriteOnly, 0x100));  // QP 0 has no responder
  feed(packet(opcode::kRcAck, 0x101));        // QP 1 has no requester
  feed(packet(opcode::kRcSendOnly, 0x100));   // not an RC WRITE or ACK
  rte_mbuf* m = pool.alloc();
  a.receive(m, ParsedPacket{}, 10, out);  // what a parse failure leaves
  CHECK(out.empty());
  CHECK(a.counters().unknown_qp == 2);
  CHECK(a.counters().no_responder == 1);
  CHECK(a.counters().no_requester == 1);
  CHECK(a.counters().bad_opcode == 1);
  CHECK(a.counters().not_roce == 1);
  CHECK(a.counters().received == 6);

  // A WRITE ONLY with AckReq for QP 1 reaches its responder, which answers at once.
  REQUIRE(feed(packet(opcode::kRcWriteOnly, 0x101)) == 1);
  REQUIRE(out.size() == 1);
  const ParsedPacket p = parse_ok(out[0]);
  CHECK(p.bth_opcode == opcode::kRcAck);
  CHECK(p.dest_qp == 0x201);
  rte_pktmbuf_free(out[0]);
  out.clear();
  // An ACK for QP 0 reaches its requester (it sent nothing yet: invalid, ignored).
  feed(packet(opcode::kRcAck, 0x100));
  CHECK(a.requester(0)->counters().invalid_responses == 1);
  CHECK(a.responder(1)->counters().accepted == 1);
  CHECK(pool.whole());
}

TEST_CASE("engine: next_event_ns, done() and configuration checks") {
  TestPool pool;
  Pair cfg(2, 1, 1024);
  cfg.a.message_gap_ns = 500;
  cfg.a.messages_per_qp = 2;
  RcTrafficEngine a(cfg.a, pool.get());
  CHECK(a.next_event_ns() == 0);  // packets ready
  CHECK_FALSE(a.done());
  std::vector<rte_mbuf*> out;
  CHECK(a.poll(0, out) == 2);  // one message per QP; the second waits for the gap
  CHECK(a.next_event_ns() == 500);
  CHECK(a.poll(499, out) == 0);
  CHECK(a.poll(500, out) == 2);
  CHECK(a.next_event_ns() == 1'000'000);  // only the retransmit deadlines are left
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);
  out.clear();

  // A responder-only engine is done from the start and idle.
  RcTrafficEngine b(cfg.b, pool.get());
  CHECK(b.done());
  CHECK(b.next_event_ns() == kNever);
  CHECK(b.poll(0, out) == 0);

  RcTrafficEngineConfig bad = cfg.a;
  bad.qp_roles = {RcQpRole::kBoth};  // one role for two QPs
  CHECK_FALSE(bad.check().empty());
  CHECK_THROWS_AS(RcTrafficEngine(bad, pool.get()), std::invalid_argument);
  bad = cfg.a;
  bad.first_local_qp = 0xFFFFFF;  // QP 1 would be 2^24
  CHECK_FALSE(bad.check().empty());
  bad = cfg.a;
  bad.mtu = 4096;  // 4 KB frames in 2 KB mbufs
  bad.message_bytes = 8192;
  CHECK_THROWS_AS(RcTrafficEngine(bad, pool.get()), std::invalid_argument);
  bad = cfg.a;
  bad.max_burst = 0;
  CHECK_FALSE(bad.check().empty());
  bad = cfg.a;
  bad.entropy_values = 12;  // not a power of two: the requesters' check, named
  CHECK(bad.check() == "entropy_values: must be 0 (off) or a power of two up to 16384");
  CHECK_THROWS_AS(RcTrafficEngine(bad, pool.get()), std::invalid_argument);
  CHECK(pool.whole());
}

TEST_CASE("engine: many QPs share the wire fairly") {
  TestPool pool(8191);
  const uint32_t qps = 16;
  Pair cfg(qps, 3, 64 * 1024);
  RcTrafficEngine a(cfg.a, pool.get());
  RcTrafficEngine b(cfg.b, pool.get());
  Wire ab, ba;
  // Over the first 8 polls (256 packets), each QP gets its 16.
  std::vector<rte_mbuf*> out;
  for (int i = 0; i < 8; ++i) a.poll(0, out);
  REQUIRE(out.size() == 256);
  std::vector<int> per_qp(qps, 0);
  for (rte_mbuf* m : out) ++per_qp[parse_ok(m).dest_qp - 0x200];
  CHECK(std::all_of(per_qp.begin(), per_qp.end(), [](int n) { return n == 16; }));
  for (rte_mbuf* m : out) ab.send(m, 0);
  REQUIRE(run(a, b, ab, ba));
  CHECK(a.requester_totals().messages_completed == qps * 3);
  CHECK(a.requester_totals().packets_retransmitted == 0);
  // Same-size messages over a fair wire: the slowest QP finished not far behind the fastest.
  std::set<uint64_t> maxima;
  for (uint32_t i = 0; i < qps; ++i) maxima.insert(a.requester(i)->counters().completion.max_ns);
  CHECK(*maxima.rbegin() <= *maxima.begin() * 3 / 2);
  CHECK(pool.whole());
}

// ---- per-QP specs, posted messages, poll limit ------------------------------------------------

namespace {

MacAddress mac(uint8_t last) {
  return MacAddress{0x02, 0, 0, 0, 0, last};
}

RcQpSpec spec(RcQpRole role, uint32_t ip, uint8_t mac_last, uint32_t peer_qp) {
  RcQpSpec s;
  s.role = role;
  s.peer_ip = ip;
  s.peer_mac = mac(mac_last);
  s.peer_qp = peer_qp;
  return s;
}

// Several engines, each reached by its local_ip, over a lossless network: every packet arrives
// delay_ns after it is sent. Runs until every engine is done and nothing is in flight.
bool run_hosts(const std::vector<RcTrafficEngine*>& hosts, uint64_t delay_ns = 1000,
               uint64_t max_steps = 1'000'000) {
  std::deque<std::pair<uint64_t, rte_mbuf*>> net;  // in send order = arrival order
  std::vector<rte_mbuf*> out;
  uint64_t now = 0;
  auto send_all = [&] {
    for (rte_mbuf* m : out) net.emplace_back(now + delay_ns, m);
    out.clear();
  };
  bool ok = false;
  for (uint64_t step = 0; step < max_steps; ++step) {
    while (!net.empty() && net.front().first <= now) {
      rte_mbuf* m = net.front().second;
      net.pop_front();
      const ParsedPacket p = parse_ok(m);
      RcTrafficEngine* to = nullptr;
      for (RcTrafficEngine* h : hosts) {
        if (h->config().local_ip == p.dst_ip) to = h;
      }
      REQUIRE(to != nullptr);
      to->receive(m, p, now, out);
      send_all();
    }
    for (RcTrafficEngine* h : hosts) {
      h->poll(now, out);
      send_all();
    }
    if (net.empty() &&
        std::all_of(hosts.begin(), hosts.end(), [](RcTrafficEngine* h) { return h->done(); })) {
      ok = true;
      break;
    }
    uint64_t next = net.empty() ? kNever : net.front().first;
    for (RcTrafficEngine* h : hosts) next = std::min(next, h->next_event_ns());
    if (next == kNever) break;
    now = std::max(now, next);
  }
  for (auto& [t, m] : net) rte_pktmbuf_free(m);
  return ok;
}

}  // namespace

TEST_CASE("engine specs: three QPs to three peers, one of them a responder, right addresses") {
  TestPool pool;
  RcTrafficEngineConfig cfg;
  cfg.qps = 3;
  cfg.first_local_qp = 0x40;
  cfg.local_ip = 0x0A000001;
  cfg.local_mac = mac(0x01);
  cfg.message_bytes = 2048;
  cfg.qp_specs = {spec(RcQpRole::kRequester, 0x0A000102, 0xA2, 0x500),
                  spec(RcQpRole::kResponder, 0x0A000203, 0xB3, 0x600),
                  spec(RcQpRole::kRequester, 0x0A000304, 0xC4, 0x700)};
  cfg.qp_specs[0].messages = 1;
  cfg.qp_specs[2].posted = true;
  cfg.qp_specs[2].udp_src_port = 0xC123;
  REQUIRE(cfg.check().empty());
  RcTrafficEngine e(cfg, pool.get());
  REQUIRE(e.requester(0) != nullptr);
  CHECK(e.responder(0) == nullptr);
  CHECK(e.requester(1) == nullptr);
  REQUIRE(e.responder(1) != nullptr);
  REQUIRE(e.requester(2) != nullptr);
  CHECK(e.requester(2)->config().posted);
  CHECK_FALSE(e.requester(0)->config().posted);
  CHECK(e.requester(0)->config().messages == 1);

  CHECK_THROWS_AS(e.post(3, 100, 0), std::out_of_range);
  CHECK_THROWS_AS(e.post(0, 100, 0), std::invalid_argument);  // fixed-size requester
  CHECK_THROWS_AS(e.post(1, 100, 0), std::invalid_argument);  // responder only
  CHECK_THROWS_AS(e.post(2, 0, 0), std::invalid_argument);    // no such size
  e.post(2, 5000, 0);

  std::vector<rte_mbuf*> out;
  REQUIRE(e.poll(0, out) == 2 + 5);  // QP 0: one 2 KB message; QP 2: 5000 bytes
  int from0 = 0, from2 = 0;
  for (const rte_mbuf* m : out) {
    const ParsedPacket p = parse_ok(m);
    const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
    const MacAddress dst{d[0], d[1], d[2], d[3], d[4], d[5]};
    const MacAddress src{d[6], d[7], d[8], d[9], d[10], d[11]};
    CHECK(p.src_ip == cfg.local_ip);
    CHECK(src == cfg.local_mac);
    CHECK(p.dscp() == cfg.dscp);
    if (p.dest_qp == 0x500) {
      ++from0;
      CHECK(p.dst_ip == 0x0A000102);
      CHECK(dst == mac(0xA2));
      CHECK(p.src_port == rxe_udp_source_port(0x40));
    } else {
      REQUIRE(p.dest_qp == 0x700);
      ++from2;
      CHECK(p.dst_ip == 0x0A000304);
      CHECK(dst == mac(0xC4));
      CHECK(p.src_port == 0xC123);
    }
  }
  CHECK(from0 == 2);
  CHECK(from2 == 5);
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);
  out.clear();

  // A WRITE from peer B to QP 1 is answered to peer B.
  FrameSpec f;
  f.ip.src = 0x0A000203;
  f.ip.dst = cfg.local_ip;
  std::vector<uint8_t> payload(64);
  f.payload = payload;
  RoceSpec w;
  w.opcode = opcode::kRcWriteOnly;
  w.dest_qp = 0x41;
  w.psn = cfg.first_psn;
  w.ack_req = true;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, w);
  REQUIRE(m != nullptr);
  REQUIRE(e.receive(m, parse_ok(m), 10, out) == 1);
  const ParsedPacket a = parse_ok(out[0]);
  const auto* d = rte_pktmbuf_mtod(out[0], const uint8_t*);
  CHECK(a.bth_opcode == opcode::kRcAck);
  CHECK(a.dest_qp == 0x600);
  CHECK(a.dst_ip == 0x0A000203);
  CHECK(a.src_ip == cfg.local_ip);
  CHECK((MacAddress{d[0], d[1], d[2], d[3], d[4], d[5]}) == mac(0xB3));
  CHECK(a.src_port == rxe_udp_source_port(0x41));
  CHECK(e.responder(1)->counters().accepted == 1);
  rte_pktmbuf_free(out[0]);
  out.clear();
  CHECK(pool.whole());
}

TEST_CASE("engine specs: configuration checks") {
  TestPool pool;
  RcTrafficEngineConfig cfg;
  cfg.qps = 2;
  cfg.qp_specs = {spec(RcQpRole::kRequester, 1, 1, 1), spec(RcQpRole::kBoth, 2, 2, 2)};
  CHECK(cfg.check().empty());
  RcTrafficEngineConfig bad = cfg;
  bad.qp_specs.pop_back();  // one spec for two QPs
  CHECK_FALSE(bad.check().empty());
  CHECK_THROWS_AS(RcTrafficEngine(bad, pool.get()), std::invalid_argument);
  bad = cfg;
  bad.qp_specs[1].role = static_cast<RcQpRole>(0);
  CHECK_FALSE(bad.check().empty());
  bad = cfg;
  bad.qp_specs[1].role = static_cast<RcQpRole>(4);
  CHECK_FALSE(bad.check().empty());
  bad = cfg;
  bad.qp_specs[0].peer_qp = 1u << 24;
  CHECK_FALSE(bad.check().empty());
  bad.qp_specs[0].peer_qp = (1u << 24) - 1;
  CHECK(bad.check().empty());
  bad = cfg;
  bad.qp_specs[1].message_bytes = 0x80000001u;  // the requester config it implies is bad
  CHECK_FALSE(bad.check().empty());
  bad = cfg;
  bad.qp_roles = {RcQpRole::kRequester, RcQpRole::kRequester};  // two sources of roles
  CHECK_FALSE(bad.check().empty());
  bad = cfg;
  bad.qp_specs[1].role = RcQpRole::kResponder;
  bad.qp_specs[1].posted = true;  // a responder posts nothing
  CHECK_FALSE(bad.check().empty());
  bad = cfg;
  bad.first_peer_qp = 0xFFFFFF;  // unused with specs
  CHECK(bad.check().empty());
  CHECK(pool.whole());
}

TEST_CASE("engine specs: one host posts to two hosts; completions and FCT from post time") {
  TestPool pool(8191);
  // Host A (QP 0 -> host B, QP 1 -> host C, both posted), B and C answer (responders).
  RcTrafficEngineConfig a, b, c;
  for (RcTrafficEngineConfig* e : {&a, &b, &c}) {
    e->mtu = 1024;
    e->first_psn = 0xFFFFF0;
    e->retransmit_timeout_ns = 1'000'000;
  }
  const uint32_t first_qp[] = {0x10, 0x20, 0x30};
  uint8_t n = 0;
  for (RcTrafficEngineConfig* e : {&a, &b, &c}) {
    e->local_ip = 0x0A000001 + n;
    e->local_mac = mac(static_cast<uint8_t>(n + 1));
    e->first_local_qp = first_qp[n];
    e->qps = n == 0 ? 2 : 1;
    ++n;
  }
  a.record_completions = true;
  a.qp_specs = {spec(RcQpRole::kRequester, b.local_ip, 2, 0x20),
                spec(RcQpRole::kRequester, c.local_ip, 3, 0x30)};
  a.qp_specs[0].posted = a.qp_specs[1].posted = true;
  b.qp_specs = {spec(RcQpRole::kResponder, a.local_ip, 1, 0x10)};
  c.qp_specs = {spec(RcQpRole::kResponder, a.local_ip, 1, 0x11)};
  RcTrafficEngine ea(a, pool.get()), eb(b, pool.get()), ec(c, pool.get());
  CHECK(ea.done());
  CHECK(ea.next_event_ns() == kNever);

  const std::vector<uint32_t> to_b = {1, 4096, 100'000};
  const std::vector<uint32_t> to_c = {1025, 3u << 20};
  for (const uint32_t s : to_b) ea.post(0, s, 0);
  ea.post(1, to_c[0], 500);
  ea.post(1, to_c[1], 2000);
  CHECK_FALSE(ea.done());
  REQUIRE(run_hosts({&ea, &eb, &ec}));

  uint64_t bytes_b = 0, bytes_c = 0;
  for (const uint32_t s : to_b) bytes_b += s;
  for (const uint32_t s : to_c) bytes_c += s;
  CHECK(eb.responder_totals().bytes_written == bytes_b);
  CHECK(ec.responder_totals().bytes_written == bytes_c);
  CHECK(eb.responder_totals().messages_received == 3);
  CHECK(ec.responder_totals().messages_received == 2);
  const RcRequesterCounters rq = ea.requester_totals();
  CHECK(rq.messages_completed == 5);
  CHECK(rq.bytes_completed == bytes_b + bytes_c);
  CHECK(rq.packets_retransmitted == 0);

  std::vector<MessageCompletion> done;
  REQUIRE(ea.take_completions(done) == 5);
  uint64_t sum = 0;
  std::vector<uint32_t> got_b, got_c;
  for (const MessageCompletion& m : done) {
    (m.qp_index == 0 ? got_b : got_c).push_back(m.bytes);
    CHECK(m.qp_index <= 1);
    CHECK(m.first_sent_ns >= m.post_ns);
    CHECK(m.completed_ns > m.first_sent_ns);
    sum += m.completed_ns - m.post_ns;
  }
  CHECK(got_b == to_b);
  CHECK(got_c == to_c);
  CHECK(done[3].post_ns == 500);
  CHECK(done[3].first_sent_ns == 500);
  CHECK(done[4].post_ns == 2000);
  CHECK(ea.completion_times().count() == 5);
  CHECK(ea.completion_times().summary().sum_ns == sum);
  CHECK(ea.take_completions(done) == 0);

  // More work later: the engine wakes for it, and is done again.
  ea.post(1, 10, 10'000'000);
  CHECK(ea.next_event_ns() == 10'000'000);
  CHECK_FALSE(ea.done());
  std::vector<rte_mbuf*> out;
  CHECK(ea.poll(9'999'999, out) == 0);
  CHECK(ea.poll(10'000'000, out) == 1);
  CHECK(parse_ok(out[0]).dst_ip == c.local_ip);
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("engine: poll's max_packets limits requester packets, not pending ACKs") {
  TestPool pool;
  Pair cfg(4, 0, 64 * 1024);  // unlimited
  RcTrafficEngine a(cfg.a, pool.get());
  std::vector<rte_mbuf*> out;
  CHECK(a.poll(0, out, 5) == 5);
  CHECK(out.size() == 5);
  for (uint32_t i = 0; i < 4; ++i) CHECK(parse_ok(out[i]).dest_qp == 0x200 + i);  // round robin
  CHECK(parse_ok(out[4]).dest_qp == 0x200);
  CHECK(a.poll(0, out, 0) == 0);
  CHECK(a.poll(0, out, 1000) == cfg.a.max_burst);  // never more than max_burst
  CHECK(a.poll(0, out) == cfg.a.max_burst);
  CHECK(out.size() == 5 + 2 * cfg.a.max_burst);
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);
  out.clear();

  // A responder whose ACK found the mempool empty sends it on a poll with max_packets 0.
  TestPool tiny(8);
  TestPool other;
  RcTrafficEngine b(cfg.b, tiny.get());
  std::vector<rte_mbuf*> hold;
  while (rte_mbuf* m = rte_pktmbuf_alloc(tiny.get())) hold.push_back(m);
  FrameSpec f;
  std::vector<uint8_t> payload(16);
  f.payload = payload;
  RoceSpec w;
  w.opcode = opcode::kRcWriteOnly;
  w.dest_qp = cfg.b.first_local_qp;
  w.psn = cfg.b.first_psn;
  w.ack_req = true;
  rte_mbuf* m = build_roce_mbuf(other.get(), f, w);
  REQUIRE(m != nullptr);
  CHECK(b.receive(m, parse_ok(m), 100, out) == 0);
  CHECK(b.responder(0)->control_pending());
  for (rte_mbuf* h : hold) rte_pktmbuf_free(h);
  const uint64_t t = b.next_event_ns();
  REQUIRE(t != kNever);
  CHECK(b.poll(t, out, 0) == 1);
  REQUIRE(out.size() == 1);
  CHECK(parse_ok(out[0]).bth_opcode == opcode::kRcAck);
  rte_pktmbuf_free(out[0]);
  CHECK(pool.whole());
  CHECK(tiny.whole());
  CHECK(other.whole());
}

TEST_CASE("engine: poll with RcTxRoom gives a QP packets only while its uplink has room") {
  TestPool pool;
  Pair cfg(4, 1, 16 * 1024);  // 16 packets per QP
  auto engine = std::make_unique<RcTrafficEngine>(cfg.a, pool.get());
  RcTrafficEngine& a = *engine;
  // QPs 0 and 2 leave by uplink 0, QPs 1 and 3 by uplink 1.
  const std::vector<uint16_t> qp_uplink = {0, 1, 0, 1};
  std::vector<uint32_t> frames = {3, 0};
  RcTxRoom room{qp_uplink, frames};
  CHECK(room.admits(0));
  CHECK_FALSE(room.admits(1));
  // With no room on uplink 1, its QPs wait; their next event does not count either.
  CHECK(a.next_event_ns(&room) == 0);

  std::vector<rte_mbuf*> out;
  REQUIRE(a.poll(0, out, 32, &room) == 3);  // uplink 0's room, whatever the budget
  CHECK(frames[0] == 0);
  for (rte_mbuf* m : out) {
    const uint32_t qp = parse_ok(m).dest_qp - 0x200;
    CHECK((qp == 0 || qp == 2));
  }
  // Round robin among the admitted QPs: both of uplink 0's QPs had a turn.
  std::set<uint32_t> seen;
  for (rte_mbuf* m : out) seen.insert(parse_ok(m).dest_qp);
  CHECK(seen.size() == 2);
  // Nothing has room now: no packet, and nothing due for poll().
  CHECK(a.poll(0, out, 32, &room) == 0);
  CHECK(a.next_event_ns(&room) == kNever);
  // Room on uplink 1 only: only QPs 1 and 3 send; an unknown uplink (kAnyUplink) is not held.
  frames = {0, 2};
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);  // the wire's business: dropped here
  out.clear();
  REQUIRE(a.poll(0, out, 32, &room) == 2);
  for (rte_mbuf* m : out) {
    const uint32_t qp = parse_ok(m).dest_qp - 0x200;
    CHECK((qp == 1 || qp == 3));
  }
  const std::vector<uint16_t> any = {RcTxRoom::kAnyUplink, RcTxRoom::kAnyUplink,
                                     RcTxRoom::kAnyUplink, RcTxRoom::kAnyUplink};
  frames = {0, 0};
  RcTxRoom free_room{any, frames};
  CHECK(a.poll(0, out, 1, &free_room) == 1);
  for (rte_mbuf* m : out) rte_pktmbuf_free(m);
  out.clear();
  engine.reset();  // what the requesters kept for retransmission goes back with them
  CHECK(pool.whole());
}

// ---- cost per packet independent of the QP count; one-shot QPs retired and reused ----------

namespace {

// Host A (requesters) and host B (responders), `qps` posted QP pairs; the first `active` of
// them get `messages` posts of `bytes` each at 0. Runs them over run_hosts and returns A's and
// B's work (QPs visited) with the packets A sent.
struct CostRun {
  RcEngineWork a, b;
  uint64_t packets = 0;
  uint64_t end_ns = 0;
};

CostRun cost_of(uint32_t qps, uint32_t active, uint32_t messages, uint32_t bytes) {
  TestPool pool(8191);
  RcTrafficEngineConfig a, b;
  for (RcTrafficEngineConfig* e : {&a, &b}) {
    e->mtu = 256;  // a small payload pattern per QP: 100,000 requesters stay light
    e->first_psn = 0xFFFFF0;
    e->retransmit_timeout_ns = 1'000'000;
    e->qps = qps;
  }
  a.local_ip = 0x0A000001;
  b.local_ip = 0x0A000002;
  a.local_mac = mac(1);
  b.local_mac = mac(2);
  a.first_local_qp = 0x100;
  b.first_local_qp = 0x100 + qps;
  a.qp_specs.reserve(qps);
  b.qp_specs.reserve(qps);
  for (uint32_t i = 0; i < qps; ++i) {
    a.qp_specs.push_back(spec(RcQpRole::kRequester, b.local_ip, 2, b.first_local_qp + i));
    a.qp_specs.back().posted = true;
    b.qp_specs.push_back(spec(RcQpRole::kResponder, a.local_ip, 1, a.first_local_qp + i));
  }
  RcTrafficEngine ea(a, pool.get()), eb(b, pool.get());
  for (uint32_t i = 0; i < active; ++i) {
    for (uint32_t k = 0; k < messages; ++k) ea.post(i, bytes, 0);
  }
  REQUIRE(run_hosts({&ea, &eb}));
  CostRun r;
  r.a = ea.work();
  r.b = eb.work();
  r.packets = ea.requester_totals().packets_sent;
  CHECK(ea.requester_totals().messages_completed == uint64_t{active} * messages);
  CHECK(ea.requester_totals().packets_retransmitted == 0);
  CHECK(pool.whole());
  return r;
}

}  // namespace

TEST_CASE("engine: 100,000 QPs of which 10 are active cost per packet what 10 QPs alone cost") {
  const CostRun alone = cost_of(10, 10, 4, 64 * 1024);
  const CostRun crowd = cost_of(100'000, 10, 4, 64 * 1024);
  // The same traffic, packet for packet.
  REQUIRE(alone.packets == crowd.packets);
  CHECK(alone.packets == 10u * 4 * 256);
  // Counted, not timed: the QPs poll() and next_event_ns() looked at. The 99,990 idle QPs have
  // nothing due and are never visited.
  CHECK(crowd.a.polls == alone.a.polls);
  CHECK(crowd.a.qp_visits == alone.a.qp_visits);
  CHECK(crowd.b.qp_visits == alone.b.qp_visits);
  // And the visits per packet are a small constant: each packet's QP, a few times.
  CHECK(static_cast<double>(crowd.a.qp_visits) / static_cast<double>(crowd.packets) < 4.0);
}

TEST_CASE("engine: one-shot QPs exist only while their flow does; retired ones are reused") {
  TestPool pool(8191);
  const uint32_t flows = 2000;
  RcTrafficEngineConfig a, b;
  for (RcTrafficEngineConfig* e : {&a, &b}) {
    e->mtu = 1024;
    e->first_psn = 0x100;
    e->retransmit_timeout_ns = 1'000'000;
    e->qps = flows;
  }
  a.local_ip = 0x0A000001;
  b.local_ip = 0x0A000002;
  a.local_mac = mac(1);
  b.local_mac = mac(2);
  a.first_local_qp = 0x100;
  b.first_local_qp = 0x100 + flows;
  a.record_completions = true;
  for (uint32_t i = 0; i < flows; ++i) {
    a.qp_specs.push_back(spec(RcQpRole::kRequester, b.local_ip, 2, b.first_local_qp + i));
    a.qp_specs.back().posted = true;
    a.qp_specs.back().one_shot = true;
    b.qp_specs.push_back(spec(RcQpRole::kResponder, a.local_ip, 1, a.first_local_qp + i));
    b.qp_specs.back().one_shot = true;
  }
  RcTrafficEngine ea(a, pool.get()), eb(b, pool.get());
  CHECK(ea.qps_live() == 0);
  CHECK(eb.qps_live() == 0);
  CHECK(ea.done());
  CHECK(ea.next_event_ns() == kNever);
  CHECK(ea.requester(0) == nullptr);  // no state before its post
  CHECK(ea.flow_counters(0).has_requester);
  const uint64_t empty_bytes = ea.memory_bytes();
  const uint64_t eb_empty_bytes = eb.memory_bytes();

  // Flows arrive 2 us apart, each of 3000 bytes (3 packets), on a 1 us network: at most a few
  // in flight at once. The driver retires the receiving QP when the sender's completion comes.
  std::deque<std::pair<uint64_t, rte_mbuf*>> net;
  std::vector<rte_mbuf*> out;
  std::vector<MessageCompletion> done;
  uint64_t now = 0;
  uint32_t next_flow = 0;
  uint64_t peak_live = 0, peak_bytes = 0;
  auto send_all = [&] {
    for (rte_mbuf* m : out) net.emplace_back(now + 1000, m);
    out.clear();
  };
  for (uint64_t step = 0; step < 1'000'000; ++step) {
    while (next_flow < flows && uint64_t{next_flow} * 2000 <= now) ea.post(next_flow++, 3000, now);
    while (!net.empty() && net.front().first <= now) {
      rte_mbuf* m = net.front().second;
      net.pop_front();
      const ParsedPacket p = parse_ok(m);
      (p.dst_ip == b.local_ip ? eb : ea).receive(m, p, now, out);
      send_all();
    }
    ea.poll(now, out);
    send_all();
    eb.poll(now, out);
    send_all();
    done.clear();
    ea.take_completions(done);
    for (const MessageCompletion& c : done) eb.retire_responder(c.qp_index);
    peak_live = std::max(peak_live, ea.qps_live() + eb.qps_live());
    peak_bytes = std::max(peak_bytes, ea.memory_bytes());
    if (next_flow == flows && net.empty() && ea.done()) break;
    uint64_t next = std::min(net.empty() ? kNever : net.front().first,
                             next_flow < flows ? uint64_t{next_flow} * 2000 : kNever);
    next = std::min({next, ea.next_event_ns(), eb.next_event_ns()});
    if (next == kNever) break;
    now = std::max(now, next);
  }
  REQUIRE(next_flow == flows);
  const RcRequesterCounters rq = ea.requester_totals();
  CHECK(rq.messages_completed == flows);
  CHECK(rq.bytes_acked == uint64_t{flows} * 3000);
  CHECK(eb.responder_totals().bytes_written == uint64_t{flows} * 3000);
  CHECK(ea.work().qps_created == flows);
  CHECK(ea.work().qps_retired == flows);
  CHECK(eb.work().qps_retired == flows);
  CHECK(ea.qps_live() == 0);
  CHECK(eb.qps_live() == 0);
  // Never more than a handful of QPs had state at once, and memory stayed what a handful takes.
  CHECK(ea.work().qps_live_peak <= 4);
  CHECK(peak_live <= 8);
  // (The retired flows' figures are kept: one RcQpFlowCounters per flow and a 4-byte slot per QP.)
  CHECK(peak_bytes < empty_bytes + flows * (sizeof(RcQpFlowCounters) + 4) + 4 * 8192);
  // A retired QP's flow keeps its figures; its state is gone.
  CHECK(ea.requester(7) == nullptr);
  CHECK(eb.responder(7) == nullptr);
  CHECK(ea.flow_counters(7).bytes_acked == 3000);
  CHECK(ea.flow_counters(7).packets_sent == 3);
  // Every memory its flows took is given back: what is left is the per-QP bookkeeping.
  CHECK(ea.memory_bytes() <= empty_bytes + flows * (sizeof(RcQpFlowCounters) + 4) + 64);
  // The responders keep only their slot.
  CHECK(eb.memory_bytes() <= eb_empty_bytes + flows * 4 + 64);

  // A late duplicate for a retired QP is counted and freed, not answered.
  RcQpAddress from = ea.config().address(3);
  std::vector<rte_mbuf*> late;
  {
    RcTrafficEngineConfig one = a;
    one.qp_specs[3].one_shot = false;
    RcTrafficEngine replay(one, pool.get());
    replay.post(3, 100, 0);
    replay.poll(0, late);
  }
  REQUIRE(late.size() == 1);
  out.clear();
  CHECK(eb.receive(late[0], parse_ok(late[0]), now, out) == 0);
  CHECK(out.empty());
  CHECK(eb.counters().retired_qp == 1);
  (void)from;
  CHECK(pool.whole());
}

TEST_CASE("engine: one-shot configuration checks and misuse") {
  TestPool pool;
  RcTrafficEngineConfig cfg;
  cfg.qps = 2;
  cfg.qp_specs = {spec(RcQpRole::kRequester, 1, 1, 1), spec(RcQpRole::kResponder, 2, 2, 2)};
  cfg.qp_specs[0].one_shot = true;  // not posted
  CHECK(cfg.check().find("one_shot") != std::string::npos);
  cfg.qp_specs[0].posted = true;
  CHECK(cfg.check().empty());
  cfg.qp_specs[1].role = RcQpRole::kBoth;
  cfg.qp_specs[1].one_shot = true;
  CHECK(cfg.check().find("qp_specs[1].one_shot") != std::string::npos);
  cfg.qp_specs[1].role = RcQpRole::kResponder;
  RcTrafficEngine e(cfg, pool.get());
  CHECK_THROWS_AS(e.retire_responder(0), std::invalid_argument);  // a requester
  CHECK_THROWS_AS(e.retire_responder(2), std::out_of_range);
  CHECK_THROWS_AS(e.post(0, 0, 0), std::invalid_argument);
  e.retire_responder(1);  // before any packet: nothing to free
  CHECK(e.work().qps_retired == 1);
  CHECK(pool.whole());
}

TEST_CASE("engine: one-shot payloads are in the store from the start, in one order everywhere") {
  // fabric_emu --mpi ranks each build every engine but start only their own hosts' QPs; a
  // segment crosses ranks as (region, offset), so the stores must agree whatever was started.
  TestPool pool;
  TestPool segments;
  RcTrafficEngineConfig cfg;
  cfg.mtu = 1024;
  cfg.qps = 2;
  cfg.qp_specs = {spec(RcQpRole::kRequester, 0x0A000002, 2, 0x200),
                  spec(RcQpRole::kResponder, 0x0A000002, 2, 0x201)};
  cfg.qp_specs[0].posted = true;
  cfg.qp_specs[0].one_shot = true;
  cfg.qp_specs[1].one_shot = true;
  PayloadStore idle_store(segments.get()), busy_store(segments.get());
  RcTrafficEngineConfig idle_cfg = cfg, busy_cfg = cfg;
  idle_cfg.payload_store = &idle_store;
  busy_cfg.payload_store = &busy_store;
  RcTrafficEngine idle(idle_cfg, pool.get());
  RcTrafficEngine busy(busy_cfg, pool.get());
  busy.post(0, 3000, 0);  // makes the requester
  std::vector<rte_mbuf*> out;
  busy.poll(0, out);
  REQUIRE(!out.empty());
  for (rte_mbuf* m : out) {
    // Every payload segment the busy engine sent lies where the idle store has the same bytes.
    for (rte_mbuf* s = m; s != nullptr; s = s->next) {
      const auto* data = rte_pktmbuf_mtod(s, const uint8_t*);
      const auto place = busy_store.place_of(data, s->data_len);
      if (!place) continue;
      const uint8_t* there = idle_store.address(*place);
      REQUIRE(there != nullptr);
      CHECK(std::equal(data, data + s->data_len, there));
    }
    rte_pktmbuf_free(m);
  }
  CHECK(idle_store.address({1, 0}) != nullptr);  // the responder's READ payload, too
  CHECK(idle_store.address({2, 0}) == nullptr);
  CHECK(busy_store.address({2, 0}) == nullptr);
}
