#include "dataplane/nic/reorder_engine.h"

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

constexpr uint64_t kNever = ReorderEngine::kNever;
constexpr uint64_t kHold = 100'000;  // the default hold timeout

struct Qp {
  uint32_t src_ip = 0x0A000001;
  uint32_t dest_qp = 0x11;
};
constexpr Qp kQp{};

ReorderConfig config_with(uint32_t window, uint32_t max_qps = 4096, uint32_t max_buffered = 65536) {
  ReorderConfig c;
  c.window = window;
  c.max_qps = max_qps;
  c.max_buffered = max_buffered;
  c.hold_timeout_ns = kHold;
  return c;
}

ParsedPacket parse(const rte_mbuf* m) {
  ParsedPacket p;
  REQUIRE(PacketParser().parse(m, p) == ParseStatus::kOk);
  return p;
}

uint32_t psn_of(const rte_mbuf* m) {
  return parse(m).psn;
}

// A reorder engine fed with real RoCE mbufs, each parsed before it goes in, as the NIC does.
// Everything released is collected in `out`; free_out() hands it back to the pool.
class Rx {
 public:
  Rx(const TestPool& pool, const ReorderConfig& config) : pool_(pool), engine(config) {}
  ~Rx() { free_out(); }
  Rx(const Rx&) = delete;
  Rx& operator=(const Rx&) = delete;

  rte_mbuf* make(uint32_t psn, Qp qp = kQp, uint8_t op = opcode::kRcWriteMiddle,
                 uint32_t dma_length = 0) const {
    FrameSpec f;
    f.ip.src = qp.src_ip;
    f.ip.dst = 0x0A0000FE;
    f.udp.src_port = 0xC000;
    RoceSpec r;
    r.opcode = op;
    r.dest_qp = qp.dest_qp;
    r.psn = psn;
    r.dma_length = dma_length;
    rte_mbuf* m = build_roce_mbuf(pool_.get(), f, r);
    if (m == nullptr) throw std::runtime_error("build_roce_mbuf failed");
    return m;
  }
  void receive(rte_mbuf* m, uint64_t now_ns) {
    const ParsedPacket p = parse(m);
    engine.receive(m, p, now_ns, out);
  }
  rte_mbuf* send_op(uint32_t psn, uint8_t op, uint64_t now_ns, uint32_t dma_length = 0,
                    Qp qp = kQp) {
    rte_mbuf* m = make(psn, qp, op, dma_length);
    receive(m, now_ns);
    return m;
  }
  rte_mbuf* send(uint32_t psn, uint64_t now_ns, Qp qp = kQp) {
    rte_mbuf* m = make(psn, qp);
    receive(m, now_ns);
    return m;
  }
  std::vector<uint32_t> out_psns() const {
    std::vector<uint32_t> v;
    for (const rte_mbuf* m : out) v.push_back(psn_of(m));
    return v;
  }
  // PSNs released so far, then frees them.
  std::vector<uint32_t> take() {
    std::vector<uint32_t> v = out_psns();
    free_out();
    return v;
  }
  void free_out() {
    released_total += out.size();
    for (rte_mbuf* m : out) rte_pktmbuf_free(m);
    out.clear();
  }
  // Every packet in is either handed back or still held, and the counters say so.
  void check_accounting() const {
    const ReorderCounters& c = engine.counters();
    CHECK(c.in == c.released() + c.duplicates_of_held + engine.buffered());
    CHECK(c.released() == released_total + out.size());
  }

 private:
  const TestPool& pool_;

 public:
  ReorderEngine engine;
  std::vector<rte_mbuf*> out;
  uint64_t released_total = 0;
};

// Arrival order for PSNs start .. start+n-1 in which no packet overtakes one more than
// max_ahead - 1 PSNs before it: each PSN i gets the key i + U[0, max_ahead) and they arrive in key
// order. (Displacing every packet by fewer than `window` positions is not enough: a packet moved
// early by w-1 can overtake one moved late by w-1, a PSN distance of nearly 2w.)
std::vector<uint32_t> jittered(uint32_t start, uint32_t n, uint32_t max_ahead, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, static_cast<double>(max_ahead));
  std::vector<std::pair<double, uint32_t>> keyed;
  for (uint32_t i = 0; i < n; ++i) keyed.emplace_back(i + u(rng), i);
  std::stable_sort(keyed.begin(), keyed.end());
  std::vector<uint32_t> order;
  for (const auto& [key, i] : keyed) order.push_back(psn_add(start, i));
  // The generator's promise, checked: when PSN k arrives, every PSN before k - max_ahead + 1
  // has arrived.
  std::set<uint32_t> missing;
  for (uint32_t i = 0; i < n; ++i) missing.insert(i);
  for (uint32_t psn : order) {
    const uint32_t i = (psn - start) & kPsnMask;
    REQUIRE(i - *missing.begin() < max_ahead);
    missing.erase(i);
  }
  return order;
}

// Feeds `order` one packet every 100 ns (polling as a driver would) and checks that exactly the
// sent mbufs come out, each once, in PSN order.
void check_restores_order(uint32_t start, uint32_t n, uint32_t window, uint32_t seed) {
  TestPool pool;
  {
    Rx rx(pool, config_with(window));
    std::mt19937 rng(seed);
    const std::vector<uint32_t> order = jittered(start, n, window, rng);
    std::map<uint32_t, rte_mbuf*> sent;  // psn -> mbuf
    uint64_t now = 1'000'000;
    for (uint32_t psn : order) {
      sent[psn] = rx.send(psn, now);
      rx.engine.poll(now, rx.out);
      rx.check_accounting();
      now += 100;
    }
    // The last hold (the start, when the window never slid) ends.
    rx.engine.poll(now + kHold, rx.out);
    REQUIRE(rx.out.size() == n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t psn = psn_add(start, i);
      REQUIRE(psn_of(rx.out[i]) == psn);
      REQUIRE(rx.out[i] == sent.at(psn));  // the very mbuf that was sent with it
    }
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.in == n);
    CHECK(c.released_in_order + c.released_after_hold == n);
    CHECK(c.duplicates == 0);
    CHECK(c.psns_skipped == 0);
    CHECK(c.gap_timeouts == 0);
    CHECK(c.max_buffered_seen <= window);
    CHECK(rx.engine.buffered() == 0);
    CHECK(rx.engine.next_event_ns() == kNever);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

}  // namespace

TEST_CASE("config check names the key and the reason; the constructor refuses bad configs") {
  CHECK(ReorderConfig{}.check().empty());
  ReorderConfig c;
  c.window = 0;
  CHECK(c.check() == "window: must be from 1 to 16384");
  c.window = ReorderConfig::kMaxWindow + 1;
  CHECK(c.check().rfind("window:", 0) == 0);
  CHECK_THROWS_WITH(ReorderEngine(c), Catch::Contains("reorder engine: window"));
  c = {};
  c.hold_timeout_ns = 0;
  CHECK(c.check().rfind("hold_timeout_ns:", 0) == 0);
  c.hold_timeout_ns = ReorderConfig::kMaxHoldTimeoutNs + 1;
  CHECK(c.check().rfind("hold_timeout_ns:", 0) == 0);
  c = {};
  c.max_qps = 0;
  CHECK(c.check().rfind("max_qps:", 0) == 0);
  c.max_qps = ReorderConfig::kMaxQps;
  c.window = 4096;  // 2^32 ring slots: refused before anything is allocated
  CHECK(c.check() == "max_qps: times window must be at most 16777216 ring slots");
  CHECK_THROWS_AS(ReorderEngine(c), std::invalid_argument);
  c = {};
  c.max_buffered = 0;
  CHECK(c.check().rfind("max_buffered:", 0) == 0);
  c.max_buffered = ReorderConfig::kMaxBuffered + 1;
  CHECK(c.check().rfind("max_buffered:", 0) == 0);
  c = {};
  c.window = 1;
  c.max_qps = 1;
  c.max_buffered = 1;
  c.hold_timeout_ns = 1;
  CHECK(c.check().empty());
  ReorderEngine e(c);
  CHECK(e.next_event_ns() == kNever);
  CHECK(e.buffered() == 0);
  CHECK(e.qp_count() == 0);
}

TEST_CASE("property: jittered arrivals come out exactly in PSN order, same mbufs, none lost") {
  for (uint32_t window : {1u, 2u, 7u, 16u, 100u, 256u}) {
    for (uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
      INFO("window " << window << " seed " << seed);
      check_restores_order(1000, 2000, window, seed);
    }
  }
}

TEST_CASE("property: the same across the 2^24 PSN wrap") {
  for (uint32_t window : {3u, 16u, 100u, 256u}) {
    for (uint32_t seed : {11u, 12u, 13u}) {
      INFO("window " << window << " seed " << seed);
      check_restores_order(0xFFFFF0, 1500, window, seed);
      check_restores_order(0xFFFF00, 1500, window, seed);
    }
  }
}

TEST_CASE("a new QP holds its first packet for the hold time and learns an earlier start") {
  TestPool pool;
  {
    Rx rx(pool, config_with(8));
    const uint64_t t0 = 5'000;
    rx.send(105, t0);
    CHECK(rx.out.empty());  // even a first packet waits: its predecessor may be on another path
    CHECK(rx.engine.next_event_ns() == t0 + kHold);
    rx.send(103, t0 + 10);  // before the held start: the new start
    rx.send(104, t0 + 20);
    rx.send(100, t0 + 30);  // earlier still, and 105 still fits the window behind it
    rx.send(92, t0 + 35);   // 92..105 would not fit a window of 8: too old, passed on at once
    REQUIRE(rx.out_psns() == std::vector<uint32_t>{92});
    CHECK(rx.engine.counters().duplicates == 1);
    rx.free_out();
    rx.send(101, t0 + 40);
    rx.send(102, t0 + 50);
    CHECK(rx.out.empty());  // all in order now, but the start is not known until the hold ends
    CHECK(rx.engine.next_event_ns() == t0 + kHold);  // the first packet's arrival sets it
    rx.engine.poll(t0 + kHold - 1, rx.out);
    CHECK(rx.out.empty());
    rx.engine.poll(t0 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{100, 101, 102, 103, 104, 105});
    CHECK(rx.engine.counters().gap_timeouts == 0);  // learning the start is not a gap
    CHECK(rx.engine.counters().released_after_hold == 6);
    CHECK(rx.engine.next_event_ns() == kNever);

    // The start is fixed now: an earlier PSN is a duplicate, the next one goes at once.
    rx.send(99, t0 + kHold + 1);
    rx.send(106, t0 + kHold + 2);
    CHECK(rx.take() == std::vector<uint32_t>{99, 106});
    CHECK(rx.engine.counters().duplicates == 2);
    CHECK(rx.engine.counters().released_in_order == 1);

    int seen = 0;
    rx.engine.for_each_qp([&](const ReorderQpView& v) {
      ++seen;
      CHECK(v.src_ip == kQp.src_ip);
      CHECK(v.dest_qp == kQp.dest_qp);
      CHECK(v.expected_psn == 107);
      CHECK(v.start_fixed);
      CHECK(v.buffered == 0);
      CHECK(v.counters.in == 9);
      CHECK(v.counters.reordered == 6);
      CHECK(v.counters.duplicates == 2);
    });
    CHECK(seen == 1);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a start held past its hold time skips the gaps in front of the first arrival") {
  TestPool pool;
  {
    Rx rx(pool, config_with(16));
    rx.send(10, 0);
    rx.send(7, 50);  // new start 7; 8 and 9 never come
    rx.engine.poll(kHold - 1, rx.out);
    CHECK(rx.out.empty());
    rx.engine.poll(kHold, rx.out);  // 10's hold ends: everything before 10 has waited enough
    CHECK(rx.take() == std::vector<uint32_t>{7, 10});
    CHECK(rx.engine.counters().gap_timeouts == 1);
    CHECK(rx.engine.counters().psns_skipped == 2);
    CHECK(rx.engine.next_event_ns() == kNever);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a real gap is skipped exactly when its hold ends, not one ns before") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    // Learn the start: PSN 10 at t=0, released when its hold ends.
    rx.send(10, 0);
    rx.engine.poll(kHold, rx.out);
    REQUIRE(rx.take() == std::vector<uint32_t>{10});

    // 11 and 12 are lost; 13 arrives at t1 and waits for them.
    const uint64_t t1 = 1'000'000;
    rx.send(13, t1);
    rx.send(14, t1 + 5);
    CHECK(rx.out.empty());
    CHECK(rx.engine.next_event_ns() == t1 + kHold);
    rx.engine.poll(t1 + kHold - 1, rx.out);
    CHECK(rx.out.empty());
    CHECK(rx.engine.counters().gap_timeouts == 0);
    rx.engine.poll(t1 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{13, 14});
    CHECK(rx.engine.counters().gap_timeouts == 1);
    CHECK(rx.engine.counters().psns_skipped == 2);
    CHECK(rx.engine.next_event_ns() == kNever);
    // The responder NAKed 11 and dropped 13 and 14: the requester goes back to 11 and resends
    // 11..14, sprayed again (here 12 overtakes 11). The first resent PSN of the gap given up
    // restarts the sequence there, so the resent packets reach the responder in order instead
    // of passing on as duplicates in whatever order they arrive.
    rx.send(12, t1 + kHold + 1);
    rx.send(11, t1 + kHold + 2);
    rx.send(14, t1 + kHold + 3);
    rx.send(13, t1 + kHold + 4);
    CHECK(rx.take() == std::vector<uint32_t>{11, 12, 13, 14});
    CHECK(rx.engine.counters().resyncs == 1);
    CHECK(rx.engine.counters().duplicates == 0);
    // An old copy of what was already delivered again is a duplicate, passed on at once.
    rx.send(13, t1 + kHold + 5);
    CHECK(rx.take() == std::vector<uint32_t>{13});
    CHECK(rx.engine.counters().duplicates == 1);

    // The deadline is the arrival of the earliest packet still waiting: 17 at t2, then 16 fills
    // part of the gap, 15 never comes. The hold still ends at t2 + hold.
    const uint64_t t2 = 2'000'000;
    rx.send(17, t2);
    rx.send(16, t2 + 50'000);
    CHECK(rx.engine.next_event_ns() == t2 + kHold);
    rx.engine.poll(t2 + kHold - 1, rx.out);
    CHECK(rx.out.empty());
    rx.engine.poll(t2 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{16, 17});
    CHECK(rx.engine.counters().gap_timeouts == 2);
    CHECK(rx.engine.counters().psns_skipped == 3);

    // Filling the first gap leaves the packet behind the second one holding its own arrival
    // time: 21 at t3 (gap 18-19, 20), 18 arrives and goes, 20 is still waited for until t3+hold.
    const uint64_t t3 = 3'000'000;
    rx.send(21, t3);
    rx.send(19, t3 + 10);
    rx.send(18, t3 + 20);
    CHECK(rx.take() == std::vector<uint32_t>{18, 19});
    CHECK(rx.engine.next_event_ns() == t3 + kHold);
    rx.engine.poll(t3 + kHold - 1, rx.out);
    CHECK(rx.out.empty());
    rx.engine.poll(t3 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{21});
    CHECK(rx.engine.counters().psns_skipped == 4);

    // Gap filled before its hold ends: nothing left to wait for.
    const uint64_t t4 = 4'000'000;
    rx.send(23, t4);
    CHECK(rx.engine.next_event_ns() == t4 + kHold);
    rx.send(22, t4 + 1);
    CHECK(rx.take() == std::vector<uint32_t>{22, 23});
    CHECK(rx.engine.next_event_ns() == kNever);
    CHECK(rx.engine.counters().gap_timeouts == 3);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("next_event_ns is the earliest deadline across QPs, and stays exact as packets leave") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    const Qp a{0x0A000001, 1}, b{0x0A000002, 1};
    for (const Qp& q : {a, b}) rx.send(0, 0, q);
    rx.engine.poll(kHold, rx.out);
    REQUIRE(rx.take().size() == 2);

    rx.send(5, 1000, a);  // a waits for 1-4 from t=1000
    rx.send(3, 2000, b);  // b waits for 1-2 from t=2000
    CHECK(rx.engine.next_event_ns() == 1000 + kHold);
    // a's gap fills: a holds nothing any more, b's deadline is next.
    for (uint32_t psn = 1; psn <= 4; ++psn) rx.send(psn, 3000, a);
    CHECK(rx.take() == std::vector<uint32_t>{1, 2, 3, 4, 5});
    CHECK(rx.engine.next_event_ns() == 2000 + kHold);
    rx.engine.poll(1000 + kHold, rx.out);  // a's old deadline: nothing due
    CHECK(rx.out.empty());
    rx.engine.poll(2000 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{3});

    // A clock that steps back (another lcore's timestamp) never makes deadlines go backwards.
    rx.send(10, 50'000, a);
    rx.send(10, 40'000, b);
    CHECK(rx.engine.next_event_ns() == 50'000 + kHold);
    rx.engine.poll(50'000 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{10, 10});
    CHECK(rx.engine.next_event_ns() == kNever);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a duplicate of a released PSN passes at once; a copy of a held PSN is dropped") {
  TestPool pool;
  {
    Rx rx(pool, config_with(32));
    rx.send(0, 0);
    rx.engine.poll(kHold, rx.out);
    rx.take();
    rx.send(1, kHold + 1);
    rx.send(2, kHold + 2);
    REQUIRE(rx.take() == std::vector<uint32_t>{1, 2});

    rx.send(1, kHold + 3);  // already released: a retransmission, re-ACKed by the responder
    rte_mbuf* held5 = rx.send(5, kHold + 4);
    rx.send(5, kHold + 5);  // same PSN again while 5 is held
    // The copy of 5 must not reach the responder ahead of the gap at 3: it is dropped, the held
    // original keeps its slot.
    REQUIRE(rx.out.size() == 1);
    CHECK(psn_of(rx.out[0]) == 1);
    CHECK(rx.engine.counters().duplicates_of_held == 1);
    CHECK(rx.engine.buffered() == 1);
    rx.free_out();
    rx.send(3, kHold + 6);
    rte_mbuf* m4 = rx.send(4, kHold + 7);
    REQUIRE(rx.out.size() == 3);
    CHECK(rx.out[1] == m4);
    CHECK(rx.out[2] == held5);
    CHECK(rx.take() == std::vector<uint32_t>{3, 4, 5});
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.duplicates == 1);
    CHECK(c.duplicates_of_held == 1);
    CHECK(c.psns_skipped == 0);
    rx.engine.for_each_qp([](const ReorderQpView& v) { CHECK(v.counters.duplicates == 2); });
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a packet beyond the window slides it, releasing what falls out in PSN order") {
  TestPool pool;
  {
    Rx rx(pool, config_with(8));
    rx.send(0, 0);
    rx.engine.poll(kHold, rx.out);
    REQUIRE(rx.take() == std::vector<uint32_t>{0});  // expected is now 1

    const uint64_t t = 2 * kHold;
    rx.send(3, t);
    rx.send(4, t);
    rx.send(6, t);
    rx.send(8, t);  // offset 7 from expected 1: the last slot of the window
    CHECK(rx.out.empty());
    rx.send(13, t);  // needs expected >= 6: 1-2 and 5 are given up, 3, 4 and 6 released
    CHECK(rx.take() == std::vector<uint32_t>{3, 4, 6});
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.window_slides == 1);
    CHECK(c.psns_skipped == 3);
    CHECK(c.gap_timeouts == 0);
    CHECK(rx.engine.buffered() == 2);  // 8 and 13
    rx.send(7, t + 1);
    CHECK(rx.take() == std::vector<uint32_t>{7, 8});

    // Far beyond, with little held: 9-12 are skipped, then the jump to 1000 - 7 = 993.
    rx.send(1000, t + 2);
    CHECK(rx.take() == std::vector<uint32_t>{13});
    CHECK(c.window_slides == 2);
    CHECK(c.psns_skipped == 3 + 4 + (993 - 14));
    rx.engine.for_each_qp([](const ReorderQpView& v) {
      CHECK(v.expected_psn == 993);
      CHECK(v.counters.gaps_skipped == 4);  // 1-2, 5, then 9-12, 14-992
    });
    // A second slide releases 1000 (the first PSN of its window) and holds 1007.
    rx.send(psn_add(1000, 7), t + 3);
    rx.engine.flush(rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{1000, 1007});
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("window of one: every PSN ahead slides, in-order traffic is untouched") {
  TestPool pool;
  {
    Rx rx(pool, config_with(1));
    rx.send(0xFFFFFE, 0);
    rx.engine.poll(kHold, rx.out);
    rx.send(0xFFFFFF, kHold);
    rx.send(0, kHold);
    rx.send(2, kHold);  // ahead by 1 = window: slides over 1
    CHECK(rx.take() == std::vector<uint32_t>{0xFFFFFE, 0xFFFFFF, 0, 2});
    CHECK(rx.engine.counters().psns_skipped == 1);
    CHECK(rx.engine.buffered() == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("many QPs interleaved: each restored independently, keyed by source IP and DestQP") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    std::mt19937 rng(42);
    constexpr uint32_t kPerQp = 50;
    // Same DestQP behind different source IPs, different DestQPs behind one IP.
    std::vector<Qp> qps;
    for (uint32_t ip = 0; ip < 8; ++ip) {
      for (uint32_t qp = 0; qp < 8; ++qp) qps.push_back({0x0A000001 + ip, 0x100 + qp});
    }
    struct Stream {
      std::vector<uint32_t> order;
      size_t next = 0;
      uint32_t start;
    };
    std::vector<Stream> streams;
    for (size_t i = 0; i < qps.size(); ++i) {
      const uint32_t start = (i * 0x40000u + 0xFFFFE0u) & kPsnMask;  // some wrap
      streams.push_back({jittered(start, kPerQp, 64, rng), 0, start});
    }
    std::map<rte_mbuf*, size_t> qp_of;
    size_t remaining = qps.size() * kPerQp;
    uint64_t now = 0;
    while (remaining > 0) {
      const size_t i = rng() % qps.size();
      Stream& s = streams[i];
      if (s.next == s.order.size()) continue;
      qp_of[rx.send(s.order[s.next++], now, qps[i])] = i;
      rx.engine.poll(now, rx.out);  // the whole run takes 32 us: no hold ends before the last
      --remaining;
      now += 10;
    }
    rx.engine.poll(now + kHold, rx.out);
    REQUIRE(rx.out.size() == qps.size() * kPerQp);
    std::vector<uint32_t> count(qps.size(), 0);
    for (rte_mbuf* m : rx.out) {
      const size_t i = qp_of.at(m);
      REQUIRE(psn_of(m) == psn_add(streams[i].start, count[i]++));
    }
    CHECK(rx.engine.qp_count() == qps.size());
    int views = 0;
    rx.engine.for_each_qp([&](const ReorderQpView& v) {
      ++views;
      const auto it = std::find_if(qps.begin(), qps.end(), [&](const Qp& q) {
        return q.src_ip == v.src_ip && q.dest_qp == v.dest_qp;
      });
      REQUIRE(it != qps.end());
      const size_t i = static_cast<size_t>(it - qps.begin());
      CHECK(v.expected_psn == psn_add(streams[i].start, kPerQp));
      CHECK(v.counters.in == kPerQp);
      CHECK(v.buffered == 0);
    });
    CHECK(views == 64);
    CHECK(rx.engine.counters().psns_skipped == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("packets that are not sequenced RoCE requests pass through at once") {
  TestPool pool;
  {
    Rx rx(pool, config_with(16));
    FrameSpec f;
    f.ip.src = 0x0A000001;
    f.ip.dst = 0x0A000002;
    f.udp.src_port = 1234;
    f.udp.dst_port = 53;
    rte_mbuf* udp = build_udp_mbuf(pool.get(), f);
    REQUIRE(udp != nullptr);
    rx.receive(udp, 0);
    // Responder-to-requester traffic (ACKs coalesce, so their PSNs have holes) and CNPs.
    rx.receive(rx.make(7, kQp, opcode::kRcAck), 0);
    rx.receive(rx.make(3, kQp, opcode::kRcReadResponseMiddle), 0);
    rx.receive(rx.make(0, kQp, opcode::kCnp), 0);
    REQUIRE(rx.out.size() == 4);
    CHECK(rx.out[0] == udp);
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.not_roce == 1);
    CHECK(c.unsequenced == 3);
    CHECK(rx.engine.qp_count() == 0);  // no context was made for them
    rx.engine.receive(nullptr, ParsedPacket{}, 0, rx.out);
    CHECK(c.null_mbufs == 1);
    CHECK(c.in == 4);

    CHECK(ReorderEngine::is_sequenced(opcode::kRcSendOnly));
    CHECK(ReorderEngine::is_sequenced(opcode::kRcWriteFirst));
    CHECK(ReorderEngine::is_sequenced(opcode::kRcReadRequest));
    CHECK(ReorderEngine::is_sequenced(opcode::kRcFetchAdd));
    CHECK(ReorderEngine::is_sequenced(0x24));  // UC SEND ONLY
    CHECK(ReorderEngine::is_sequenced(0x64));  // UD SEND ONLY
    CHECK_FALSE(ReorderEngine::is_sequenced(opcode::kRcAtomicAck));
    CHECK_FALSE(ReorderEngine::is_sequenced(opcode::kRcReadResponseFirst));
    CHECK_FALSE(ReorderEngine::is_sequenced(0xAD));  // XRC READ RESPONSE FIRST
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("QP table at its limit: idle LRU context evicted, else passed on and counted") {
  TestPool pool;
  {
    Rx rx(pool, config_with(16, /*max_qps=*/4));
    const Qp q[6] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {3, 1}, {3, 2}};
    for (int i = 0; i < 4; ++i) rx.send(100, 0, q[i]);  // each holds its first packet
    CHECK(rx.engine.qp_count() == 4);
    rte_mbuf* fifth = rx.send(100, 1, q[4]);
    REQUIRE(rx.out.size() == 1);
    CHECK(rx.out[0] == fifth);  // no context free, none idle: unordered but delivered
    CHECK(rx.engine.counters().qp_table_full == 1);
    CHECK(rx.engine.qp_count() == 4);
    rx.free_out();

    rx.engine.poll(kHold, rx.out);  // all four released: all idle now
    CHECK(rx.take().size() == 4);
    rx.send(101, kHold + 1, q[0]);  // q0 used again: q1 is now the least recently used
    rx.send(101, kHold + 2, q[2]);
    rx.send(101, kHold + 3, q[3]);
    CHECK(rx.take().size() == 3);
    rx.send(500, kHold + 4, q[4]);  // takes q1's context
    CHECK(rx.engine.counters().qps_evicted == 1);
    CHECK(rx.engine.qp_count() == 4);
    bool q1_present = false;
    rx.engine.for_each_qp([&](const ReorderQpView& v) {
      if (v.src_ip == q[1].src_ip && v.dest_qp == q[1].dest_qp) q1_present = true;
    });
    CHECK_FALSE(q1_present);
    // q0 still has its context (its start is known: 102 goes at once).
    rx.send(102, kHold + 5, q[0]);
    CHECK(rx.take() == std::vector<uint32_t>{102});
    // q4 holds 500, the others are idle (LRU first: q2, q3, q0): q5 takes q2's context, q1
    // q3's, q2 q0's. Each new one holds its first packet, so after that nothing is evictable.
    rx.send(7, kHold + 6, q[5]);
    rx.send(8, kHold + 7, q[1]);
    rx.send(9, kHold + 8, q[2]);
    CHECK(rx.engine.counters().qps_evicted == 4);
    rte_mbuf* another = rx.send(1, kHold + 9, {9, 9});
    REQUIRE(rx.out.size() == 1);
    CHECK(rx.out[0] == another);
    CHECK(rx.engine.counters().qp_table_full == 2);
    rx.free_out();
    rx.engine.poll(kNever - 1, rx.out);
    CHECK(rx.take().size() == 4);
    CHECK(rx.engine.buffered() == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("QP lookup survives heavy eviction churn") {
  TestPool pool;
  {
    // A small table with constant eviction exercises backward-shift deletion: every live QP must
    // keep finding its own context (its start stays fixed: its next PSN goes at once).
    Rx rx(pool, config_with(4, /*max_qps=*/16));
    std::mt19937 rng(9);
    std::map<uint64_t, uint32_t> next_psn;  // key -> next PSN of live QPs we know the start of
    uint64_t now = 0;
    for (int i = 0; i < 5000; ++i) {
      const Qp q{static_cast<uint32_t>(rng() % 40), static_cast<uint32_t>(rng() % 3)};
      const uint64_t key = (uint64_t{q.src_ip} << 32) | q.dest_qp;
      bool live = false;
      rx.engine.for_each_qp([&](const ReorderQpView& v) {
        live |= v.src_ip == q.src_ip && v.dest_qp == q.dest_qp && v.start_fixed;
      });
      if (live) {
        rx.send(next_psn.at(key), now, q);
        REQUIRE(rx.out.size() == 1);  // known context, in order: out at once
        ++next_psn[key];
      } else {
        rx.send(0, now, q);  // a new context: held for the hold time
        next_psn[key] = 1;
        now += kHold;
        rx.engine.poll(now, rx.out);
      }
      rx.free_out();
      now += 1;
    }
    CHECK(rx.engine.counters().qps_evicted > 100);
    CHECK(rx.engine.counters().qp_table_full == 0);
    CHECK(rx.engine.counters().duplicates == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("hold records at their limit: the QP gives up its gap early, else passes on") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64, 16, /*max_buffered=*/8));
    const Qp a{1, 1}, b{2, 2};
    rx.send(0, 0, a);
    rx.send(0, 0, b);
    rx.engine.poll(kHold, rx.out);
    REQUIRE(rx.take().size() == 2);

    const uint64_t t = 2 * kHold;
    for (uint32_t psn = 3; psn <= 10; ++psn) rx.send(psn, t, a);  // 8 held: the limit
    CHECK(rx.engine.buffered() == 8);
    CHECK(rx.engine.counters().max_buffered_seen == 8);
    CHECK(rx.out.empty());

    // b holds nothing, so it cannot make room: its packet goes unordered.
    rte_mbuf* from_b = rx.send(5, t + 1, b);
    REQUIRE(rx.out.size() == 1);
    CHECK(rx.out[0] == from_b);
    CHECK(rx.engine.counters().buffer_full == 1);
    rx.free_out();
    // A new QP cannot even hold its first packet: the same.
    rx.send(77, t + 1, {3, 3});
    CHECK(rx.take() == std::vector<uint32_t>{77});
    CHECK(rx.engine.counters().buffer_full == 2);

    // a gives up 1-2 early and releases 3-10 to make room for 12 (11 still awaited).
    rx.send(12, t + 2, a);
    CHECK(rx.take() == std::vector<uint32_t>{3, 4, 5, 6, 7, 8, 9, 10});
    CHECK(rx.engine.counters().gaps_forced == 1);
    CHECK(rx.engine.counters().psns_skipped == 2);
    CHECK(rx.engine.buffered() == 1);

    // 12 and 14..20 fill the records again; 11 needs none: it goes in order with 12 behind it.
    for (uint32_t psn = 14; psn <= 20; ++psn) rx.send(psn, t + 3, a);
    CHECK(rx.engine.buffered() == 8);
    rx.send(11, t + 4, a);
    CHECK(rx.take() == std::vector<uint32_t>{11, 12});
    // 14..20 and 22 fill the records; 23 finds none, so the gap at 13 is given up.
    for (uint32_t psn = 22; psn <= 23; ++psn) rx.send(psn, t + 5, a);
    rx.send(25, t + 5, a);
    CHECK(rx.take() == std::vector<uint32_t>{14, 15, 16, 17, 18, 19, 20});
    CHECK(rx.engine.counters().gaps_forced == 2);
    CHECK(rx.engine.buffered() == 3);  // 22, 23, 25
    rx.check_accounting();
    rx.engine.flush(rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{22, 23, 25});
    CHECK(rx.engine.buffered() == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("with every record taken, a packet before the first held one goes in order") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64, 4, /*max_buffered=*/4));
    rx.send(0, 0);
    rx.engine.poll(kHold, rx.out);
    rx.take();
    for (uint32_t psn = 10; psn < 14; ++psn) rx.send(psn, kHold + 1);
    CHECK(rx.engine.buffered() == 4);
    rx.send(5, kHold + 2);  // 1-4 given up; 5 needs no record; 6-9 still awaited
    CHECK(rx.take() == std::vector<uint32_t>{5});
    CHECK(rx.engine.counters().gaps_forced == 1);
    CHECK(rx.engine.counters().psns_skipped == 4);
    CHECK(rx.engine.buffered() == 4);
    rx.send(15, kHold + 3);  // no record: 6-9 given up, 10-13 released, 15 held
    CHECK(rx.take() == std::vector<uint32_t>{10, 11, 12, 13});
    CHECK(rx.engine.counters().gaps_forced == 2);
    CHECK(rx.engine.buffered() == 1);
    const Qp b{5, 5};
    rx.send(8, kHold + 4, b);  // b's first packet: its tentative start
    rx.send(16, kHold + 5);
    rx.send(17, kHold + 5);
    CHECK(rx.engine.buffered() == 4);  // b's 8, a's 15-17: full
    CHECK(rx.out.empty());
    // A QP whose start is still being learned, with every record taken, makes an earlier PSN
    // its start and releases it at once.
    rx.send(6, kHold + 6, b);
    CHECK(rx.take() == std::vector<uint32_t>{6});
    rx.send(7, kHold + 7, b);
    CHECK(rx.take() == std::vector<uint32_t>{7, 8});
    rx.engine.for_each_qp([&](const ReorderQpView& v) {
      if (v.dest_qp == b.dest_qp) {
        CHECK(v.expected_psn == 9);
        CHECK(v.start_fixed);
      }
    });
    rx.engine.flush(rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{15, 16, 17});
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("flush releases everything held in PSN order per QP") {
  TestPool pool;
  {
    Rx rx(pool, config_with(32));
    const Qp a{1, 1}, b{2, 2};
    for (uint32_t psn : {5u, 3u, 9u}) rx.send(psn, 0, a);
    for (uint32_t psn : {0xFFFFFEu, 1u}) rx.send(psn, 0, b);
    rx.engine.flush(rx.out);
    std::vector<uint32_t> got = rx.take();
    // Contexts are visited in table order; within each QP the order is by PSN.
    const std::vector<uint32_t> a_then_b{3, 5, 9, 0xFFFFFE, 1};
    const std::vector<uint32_t> b_then_a{0xFFFFFE, 1, 3, 5, 9};
    CHECK((got == a_then_b || got == b_then_a));
    CHECK(rx.engine.buffered() == 0);
    CHECK(rx.engine.next_event_ns() == kNever);
    CHECK(rx.engine.counters().psns_skipped == 4 + 2);  // 4, 6-8; 0xFFFFFF, 0
    // Flushed contexts keep going from where they were.
    rx.send(10, 1, a);
    CHECK(rx.take() == std::vector<uint32_t>{10});
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("destructor frees every mbuf still held") {
  TestPool pool;
  {
    ReorderEngine engine(config_with(128));
    std::vector<rte_mbuf*> out;
    Rx maker(pool, config_with(1));
    for (uint32_t qp = 0; qp < 20; ++qp) {
      for (uint32_t psn = 0; psn < 100; psn += 3) {
        rte_mbuf* m = maker.make(psn, {7, qp});
        engine.receive(m, parse(m), 0, out);
      }
    }
    CHECK(out.empty());
    CHECK(engine.buffered() == 20 * 34);
    CHECK(pool.in_use() == 20 * 34);
  }
  CHECK(pool.whole());
}

TEST_CASE("property: random loss, duplicates, jitter and tight limits keep every invariant") {
  TestPool pool;
  for (uint32_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    Rx rx(pool, config_with(16, /*max_qps=*/6, /*max_buffered=*/12));
    std::mt19937 rng(seed);
    std::vector<uint32_t> next(10, 0xFFFF80);
    std::set<rte_mbuf*> inside;
    uint64_t now = 0;
    for (int step = 0; step < 20000; ++step) {
      const uint32_t q = rng() % 10;
      // Mostly near the QP's frontier: a bit behind (duplicates), a bit ahead (reordering), rarely
      // far ahead (slides); some PSNs are never sent (loss).
      const int r = static_cast<int>(rng() % 100);
      uint32_t psn;
      if (r < 10) {
        psn = psn_add(next[q], kPsnMask + 1 - 1 - rng() % 8);
      } else if (r < 95) {
        psn = psn_add(next[q], rng() % 12);
      } else {
        psn = psn_add(next[q], 20 + rng() % 100);
      }
      if (psn_before(next[q], psn_add(psn, 1))) next[q] = psn_add(psn, 1);
      const uint64_t dropped_before = rx.engine.counters().duplicates_of_held;
      rte_mbuf* m = rx.send(psn, now, {q, q});
      // A copy of a held PSN is freed at once: it never comes out.
      if (rx.engine.counters().duplicates_of_held == dropped_before) inside.insert(m);
      const uint64_t e = rx.engine.next_event_ns();
      if (e != kNever && rng() % 4 == 0) {
        const size_t before = rx.out.size();
        if (e > now) {
          // Exact: nothing is due one ns before the deadline, something is at it.
          rx.engine.poll(e - 1, rx.out);
          REQUIRE(rx.out.size() == before);
          now = e;
        }
        rx.engine.poll(now, rx.out);
        REQUIRE(rx.out.size() > before);
      }
      for (rte_mbuf* o : rx.out) REQUIRE(inside.erase(o) == 1);  // each mbuf out exactly once
      REQUIRE(inside.size() == rx.engine.buffered());
      REQUIRE(rx.engine.buffered() <= 12);
      REQUIRE(rx.engine.qp_count() <= 6);
      rx.free_out();
      const ReorderCounters& c = rx.engine.counters();
      REQUIRE(c.in == c.released() + c.duplicates_of_held + rx.engine.buffered());
      now += rng() % 3000;
    }
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.duplicates > 0);
    CHECK(c.duplicates_of_held > 0);
    CHECK(c.gap_timeouts > 0);
    CHECK(c.window_slides > 0);
    CHECK(c.qp_table_full > 0);
    CHECK(c.qps_evicted > 0);
    CHECK(c.gaps_forced > 0);
    CHECK(c.buffer_full > 0);
    CHECK(c.max_buffered_seen == 12);
    rx.engine.flush(rx.out);
    for (rte_mbuf* o : rx.out) REQUIRE(inside.erase(o) == 1);
    CHECK(inside.empty());
    rx.free_out();
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a QP whose first PSN is known is not held to learn it, and depth is counted") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    REQUIRE(rx.engine.expect(kQp.src_ip, kQp.dest_qp, 100));
    CHECK_FALSE(rx.engine.expect(kQp.src_ip, kQp.dest_qp, 100));  // known already
    rx.send(100, 1000);
    CHECK(rx.take() == std::vector<uint32_t>{100});  // released at once, no hold
    rx.send(103, 1001);                              // 2 PSNs ahead of the expected 101
    rx.send(101, 1002);
    rx.send(102, 1003);
    CHECK(rx.take() == std::vector<uint32_t>{101, 102, 103});
    const auto& h = rx.engine.depth_histogram();
    CHECK(h[0] == 3);  // 100, 101, 102 arrived as expected
    CHECK(h[2] == 1);  // 103 came 2 ahead
    uint64_t total = 0;
    for (uint64_t v : h) total += v;
    CHECK(total == 4);
    for (rte_mbuf* m : rx.out) rte_pktmbuf_free(m);
    rx.out.clear();
  }
  CHECK(pool.whole());
}

TEST_CASE("a copy of the held tentative start of a new QP is dropped, not passed on") {
  TestPool pool;
  {
    Rx rx(pool, config_with(32));
    rte_mbuf* first = rx.send(7, 0);
    rx.send(7, 10);  // a second copy while the first is held to learn the start
    CHECK(rx.out.empty());
    CHECK(rx.engine.counters().duplicates_of_held == 1);
    rx.engine.poll(kHold, rx.out);
    REQUIRE(rx.out.size() == 1);
    CHECK(rx.out[0] == first);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a READ request consumes one PSN per response packet: the next request is in order") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));  // path MTU 1024
    REQUIRE(rx.engine.config().path_mtu == 1024);
    REQUIRE(rx.engine.expect(kQp.src_ip, kQp.dest_qp, 100));
    // 4096 bytes at MTU 1024: READ RESPONSE FIRST, MIDDLE, MIDDLE, LAST = PSNs 100..103, so the
    // next request carries PSN 104 (IBA 9.7.1). Counting the READ as one PSN would hold 104
    // for a whole hold time as if 101..103 were missing.
    rx.send_op(100, opcode::kRcReadRequest, 0, 4096);
    rx.send_op(104, opcode::kRcWriteOnly, 1);
    CHECK(rx.take() == std::vector<uint32_t>{100, 104});
    CHECK(rx.engine.buffered() == 0);
    CHECK(rx.engine.next_event_ns() == kNever);
    // A zero-length READ and one of a single byte consume one PSN; 1025 bytes consume two.
    rx.send_op(105, opcode::kRcReadRequest, 2, 0);
    rx.send_op(106, opcode::kRcReadRequest, 3, 1);
    rx.send_op(107, opcode::kRcReadRequest, 4, 1025);
    rx.send_op(109, opcode::kRcWriteOnly, 5);
    CHECK(rx.take() == std::vector<uint32_t>{105, 106, 107, 109});
    // Reordered: the request after a READ arrives first, is held, and follows the READ out.
    rx.send_op(113, opcode::kRcWriteOnly, 6);
    rx.send_op(110, opcode::kRcReadRequest, 7, 3000);  // 3 PSNs: 110..112
    CHECK(rx.take() == std::vector<uint32_t>{110, 113});
    CHECK(rx.engine.buffered() == 0);
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.read_requests == 5);
    CHECK(c.gap_timeouts == 0);
    CHECK(c.psns_skipped == 0);
    CHECK(c.released_after_hold == 1);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("READ responses are sequenced within the ranges announced by the NIC's TX") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    const Qp peer{0x0A000002, 0x11};  // responses come from the responder to our QP 0x11
    // Not announced: passed on at once, as before.
    rx.send_op(50, opcode::kRcReadResponseOnly, 0, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{50});
    CHECK(rx.engine.counters().unsequenced == 1);

    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 200, 3));
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 203, 2));
    rx.send_op(202, opcode::kRcReadResponseLast, 10, 0, peer);
    rx.send_op(201, opcode::kRcReadResponseMiddle, 11, 0, peer);
    CHECK(rx.out.empty());
    CHECK(rx.engine.next_event_ns() == 10 + kHold);
    rx.send_op(200, opcode::kRcReadResponseFirst, 12, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{200, 201, 202});
    rx.send_op(204, opcode::kRcReadResponseLast, 13, 0, peer);
    rx.send_op(203, opcode::kRcReadResponseFirst, 14, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{203, 204});

    // A WRITE (PSNs 205..209, answered by ACKs) between two READs: the responses jump the gap.
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 210, 2));
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 215, 1));  // gap 212..214
    rx.send_op(215, opcode::kRcReadResponseOnly, 20, 0, peer);
    rx.send_op(211, opcode::kRcReadResponseLast, 21, 0, peer);
    CHECK(rx.out.empty());
    rx.send_op(210, opcode::kRcReadResponseFirst, 22, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{210, 211, 215});
    // ACKs of the same QP stay unsequenced; a response past every range too.
    rx.send_op(213, opcode::kRcAck, 23, 0, peer);
    rx.send_op(230, opcode::kRcReadResponseOnly, 24, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{213, 230});

    // A retry re-issues the READ from its first missing response: the sequence moves back.
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 211, 1));
    rx.send_op(211, opcode::kRcReadResponseLast, 30, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{211});
    // ... and re-issues the WRITE and the READ after it: that READ's response is in order again.
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 215, 1));
    rx.send_op(215, opcode::kRcReadResponseOnly, 30, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{215});
    CHECK(rx.engine.buffered() == 0);

    // The request context of the same (source IP, DestQP) is a different sequence.
    REQUIRE(rx.engine.expect(peer.src_ip, peer.dest_qp, 7));
    rx.send_op(7, opcode::kRcWriteOnly, 31, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{7});
    int views = 0;
    rx.engine.for_each_qp([&](const ReorderQpView& v) {
      ++views;
      CHECK(v.dest_qp == 0x11);
      CHECK(v.expected_psn == (v.read_responses ? 216u : 8u));
    });
    CHECK(views == 2);

    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.read_ranges_announced == 6);
    CHECK(c.read_responses_sequenced == 10);
    CHECK(c.read_responses_reordered == 5);  // 202, 201, 204, 215, 211
    CHECK(c.read_ranges_rewound == 1);
    CHECK(c.gap_timeouts == 0);
    CHECK(c.unsequenced == 3);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("a READ response gap is skipped when its hold ends, like a request gap") {
  TestPool pool;
  {
    Rx rx(pool, config_with(64));
    const Qp peer{0x0A000002, 0x11};
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 0, 4));
    rx.send_op(0, opcode::kRcReadResponseFirst, 0, 0, peer);
    rx.send_op(2, opcode::kRcReadResponseMiddle, 1, 0, peer);
    rx.send_op(2, opcode::kRcReadResponseMiddle, 2, 0, peer);  // a copy of a held one: dropped
    CHECK(rx.take() == std::vector<uint32_t>{0});
    rx.engine.poll(1 + kHold - 1, rx.out);
    CHECK(rx.out.empty());
    rx.engine.poll(1 + kHold, rx.out);
    CHECK(rx.take() == std::vector<uint32_t>{2});
    rx.send_op(3, opcode::kRcReadResponseLast, 3 + kHold, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{3});
    const ReorderCounters& c = rx.engine.counters();
    CHECK(c.gap_timeouts == 1);
    CHECK(c.duplicates_of_held == 1);
    CHECK(c.resyncs == 0);
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

// Found by fuzz/fuzz_reorder_engine: a rewind shortened the last range while responses of the
// wider range before it were held; the next range's gap then began before them, the gap jump
// left them held behind `expected`, and poll() spun for ever on their expired deadlines.
TEST_CASE("responses held past a rewound range are released before the next range's gap") {
  TestPool pool;
  {
    Rx rx(pool, config_with(16));
    const Qp peer{0x0A000002, 0x11};
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 54, 53));  // 54..106
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 0, 1));    // retry: 0
    CHECK(rx.engine.counters().read_ranges_rewound == 1);
    rx.send_op(5, opcode::kRcReadResponseMiddle, 0, 0, peer);  // inside 54..106's announcement
    rx.send_op(8, opcode::kRcReadResponseMiddle, 1, 0, peer);
    CHECK(rx.out.empty());
    REQUIRE(rx.engine.expect_read_responses(peer.src_ip, peer.dest_qp, 1000, 2));
    rx.engine.poll(kHold, rx.out);  // 5's hold ends
    CHECK(rx.take() == std::vector<uint32_t>{5});
    rx.engine.poll(1 + kHold, rx.out);  // then 8's; returns
    CHECK(rx.take() == std::vector<uint32_t>{8});
    CHECK(rx.engine.buffered() == 0);
    CHECK(rx.engine.next_event_ns() == kNever);
    // The gap up to the next range is jumped: its first response is in order.
    rx.send_op(1000, opcode::kRcReadResponseFirst, 2 + kHold, 0, peer);
    CHECK(rx.take() == std::vector<uint32_t>{1000});
    rx.check_accounting();
  }
  CHECK(pool.whole());
}

TEST_CASE("memory: contexts, rings and hold records are made as they are used, up to the limits") {
  TestPool pool(4095);
  {
    Rx rx(pool, config_with(1024, 64, 4096));
    const uint64_t empty = rx.engine.memory_bytes();
    CHECK(empty >= sizeof(ReorderEngine));
    // Nothing near max_qps x window ring slots (256 KiB) or max_buffered records up front.
    CHECK(empty < sizeof(ReorderEngine) + 64 * 1024 * 4 / 4);
    // One QP, PSNs 1..100 held behind 0: one ring of 1024 slots, at least 100 records.
    REQUIRE(rx.engine.expect(kQp.src_ip, kQp.dest_qp, 0));
    for (uint32_t psn = 1; psn <= 100; ++psn) rx.receive(rx.make(psn), 0);
    REQUIRE(rx.engine.buffered() == 100);
    const uint64_t one = rx.engine.memory_bytes();
    CHECK(one >= empty + 1024 * 4 + 100 * 16);
    // Eight QPs more, three held each: more rings, more records.
    for (uint32_t q = 1; q <= 8; ++q) {
      const Qp qp{0x0A000001, 0x11 + q};
      REQUIRE(rx.engine.expect(qp.src_ip, qp.dest_qp, 0));
      for (uint32_t psn = 1; psn <= 3; ++psn) rx.receive(rx.make(psn, qp), 0);
    }
    const uint64_t nine = rx.engine.memory_bytes();
    CHECK(nine >= one + 8 * 1024 * 4);
    // Releasing them all keeps the storage for the next ones: no new allocation, the same bytes.
    rx.engine.flush(rx.out);
    CHECK(rx.engine.memory_bytes() == nine);
    // Capacity doubles as contexts are added (at most twice what is in use), up to max_qps.
    CHECK(nine <= sizeof(ReorderEngine) + 2 * (9 * 1024 * 4 + 9 * 256) + 2 * 124 * 40 + 128 * 16);
    for (uint32_t q = 0; q < 100; ++q) rx.engine.expect(0x0A000002, 0x100 + q, 0);
    CHECK(rx.engine.qp_count() == 64);  // max_qps
    CHECK(rx.engine.memory_bytes() >= empty + 64 * 1024 * 4);
    CHECK(rx.engine.memory_bytes() <= empty + 64 * (1024 * 4 + 256) + 2 * 124 * 40);
  }
  CHECK(pool.whole());
}

TEST_CASE("memory: a full engine holds exactly max_buffered records and max_qps contexts") {
  TestPool pool(4095);
  {
    Rx rx(pool, config_with(64, 4, 50));
    // 4 QPs (the limit), each holding what it can until the 50 records are all taken.
    for (uint32_t q = 0; q < 4; ++q) {
      const Qp qp{0x0A000001, 0x20 + q};
      REQUIRE(rx.engine.expect(qp.src_ip, qp.dest_qp, 0));
      for (uint32_t psn = 1; psn <= 20; ++psn) rx.receive(rx.make(psn, qp), 0);
    }
    CHECK(rx.engine.counters().max_buffered_seen == 50);
    CHECK(rx.engine.memory_bytes() <=
          sizeof(ReorderEngine) + 4 * (64 * 4 + 256) + 50 * 40 + 16 * 16);
    rx.engine.flush(rx.out);
  }
  CHECK(pool.whole());
}
