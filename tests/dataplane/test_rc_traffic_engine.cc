#include "dataplane/rc_traffic_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "dataplane/packet_builder.h"
#include "dataplane/packet_parser.h"
#include "dataplane/roce_headers.h"
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
