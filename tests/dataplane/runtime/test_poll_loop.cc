#include "dataplane/runtime/poll_loop.h"

#include <catch2/catch.hpp>

#include "tests/support/dpdk_test.h"

#include <csignal>
#include <cstdint>
#include <vector>

#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "tests/support/pcap_file.h"

using spraynet::runtime::BurstHandler;
using spraynet::runtime::LcoreRunner;
using spraynet::runtime::PacketPool;
using spraynet::runtime::PollLoop;
using spraynet::runtime::Port;
using spraynet::runtime::StopSignal;
using spraynet::runtime::TscClock;
using spraynet::runtime::TxSink;
using spraynet::test::Frame;

namespace {

// A loop that never stops would hang the test: every handler here also requests stop after
// this many iterations, and the test then fails on its counts instead.
constexpr uint64_t kMaxLoops = 5'000'000;

// Sends everything it receives to one (port, queue) and asks to stop after `stop_after`
// packets, by request() or by raising a signal.
class Forwarder : public BurstHandler {
 public:
  Forwarder(StopSignal& stop, uint16_t to_port, uint64_t stop_after, int signal = 0,
            uint16_t to_queue = 0)
      : stop_(stop),
        to_port_(to_port),
        to_queue_(to_queue),
        stop_after_(stop_after),
        signal_(signal) {}

  void on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
             TxSink& tx) override {
    // Counted, not CHECKed: Catch2 assertions are not for worker lcores.
    if (now_ns < last_now_) ++time_went_back;
    last_now_ = now_ns;
    for (uint16_t i = 0; i < n; ++i) tx.send(to_port_, to_queue_, pkts[i]);
    received += n;
    if (received >= stop_after_ && !asked_) {
      asked_ = true;
      if (signal_ != 0) {
        std::raise(signal_);
      } else {
        stop_.request();
      }
    }
  }
  void on_poll(uint64_t, TxSink&) override {
    if (++polls == kMaxLoops) stop_.request();
  }
  void on_stop(uint64_t, TxSink&) override { ++stops; }

  uint64_t received = 0, polls = 0, stops = 0, time_went_back = 0;

 private:
  StopSignal& stop_;
  uint16_t to_port_;
  uint16_t to_queue_;
  uint64_t stop_after_;
  int signal_;
  bool asked_ = false;
  uint64_t last_now_ = 0;
};

std::vector<Frame> test_frames(unsigned count) {
  std::vector<Frame> frames;
  for (unsigned i = 0; i < count; ++i) {
    // Sizes from a minimal Ethernet frame up to a standard MTU, one needing two mbufs.
    const size_t size = i == count / 2 ? 3000 : 60 + (i * 97) % 1455;
    Frame f(size);
    for (size_t b = 0; b < size; ++b) f[b] = static_cast<uint8_t>(i * 31 + b * 7);
    frames.push_back(std::move(f));
  }
  return frames;
}

// Puts `count` 60-byte packets on a net_ring port's rx side (its tx loops back).
void preload(Port& ring, PacketPool& pool, unsigned count) {
  std::vector<rte_mbuf*> pkts(count);
  REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), pkts.data(), count) == 0);
  for (auto* m : pkts) REQUIRE(rte_pktmbuf_append(m, 60) != nullptr);
  REQUIRE(ring.tx_burst(0, pkts.data(), static_cast<uint16_t>(count)) == count);
}

}  // namespace

TEST_CASE("a pcap passes through the loop byte for byte", "[poll_loop]") {
  const spraynet::test::TempPath in("poll_loop_in.pcap"), out("poll_loop_out.pcap");
  const std::vector<Frame> frames = test_frames(200);
  spraynet::test::write_pcap(in.str(), frames);

  PacketPool pool({.name = "loop_pcap"});
  {
    Port rx_port({.device = "net_pcap_in0,rx_pcap=" + in.str()}, pool.get());
    Port tx_port({.device = "net_pcap_out0,tx_pcap=" + out.str()}, pool.get());
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, tx_port.id(), frames.size());
    PollLoop loop({{&rx_port, 0}}, {{&tx_port, 0}}, fwd, clock);
    const uint64_t t0 = clock.now_ns();
    loop.run(stop);
    const uint64_t elapsed = clock.now_ns() - t0;

    const auto c = loop.counters();
    // Busy: the iterations that received a burst, within the run.
    CHECK(c.busy_ns > 0);
    CHECK(c.busy_ns <= elapsed);
    CHECK(c.rx_packets == frames.size());
    CHECK(c.tx_packets == frames.size());
    CHECK(c.tx_dropped == 0);
    CHECK(c.loops > 0);
    CHECK(fwd.stops == 1);
    CHECK(fwd.polls < kMaxLoops);
    CHECK(fwd.time_went_back == 0);
  }  // net_pcap writes its file out when the port is removed
  CHECK(spraynet::test::read_pcap(out.str()) == frames);
  CHECK(pool.whole());
}

TEST_CASE("a stop request lets the loop drain what already arrived", "[poll_loop]") {
  PacketPool pool({.name = "loop_drain"});
  {
    Port source({.device = "net_ring_drain0"}, pool.get());
    Port sink({.device = "net_null_drain0"}, pool.get());
    preload(source, pool, 100);
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, sink.id(), 1);  // asks to stop at the first burst
    PollLoop loop({{&source, 0}}, {{&sink, 0}}, fwd, clock);
    loop.run(stop);

    CHECK(stop.requested());
    CHECK(fwd.received == 100);
    CHECK(loop.counters().loops == 1);
    CHECK(loop.counters().rx_packets == 100);
    CHECK(loop.counters().tx_packets == 100);
    CHECK(fwd.stops == 1);
    CHECK(spraynet::test::drain_rx(source) == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("SIGTERM stops the loop; a source that never runs dry is cut off", "[poll_loop]") {
  PacketPool pool({.name = "loop_sigterm"});
  {
    Port source({.device = "net_null_term0"}, pool.get());  // every rx burst is full
    Port sink({.device = "net_null_term1"}, pool.get());
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, sink.id(), 1000, SIGTERM);
    PollLoop loop({{&source, 0}}, {{&sink, 0}}, fwd, clock, {.max_drain_rounds = 8});
    loop.run(stop);

    CHECK(stop.requested());
    const auto c = loop.counters();
    CHECK(c.loops == 1000 / PollLoop::kBurst + 1);
    CHECK(c.rx_packets == (c.loops + 8) * PollLoop::kBurst);
    CHECK(c.tx_packets == c.rx_packets);
    CHECK(c.tx_dropped == 0);
    CHECK(fwd.stops == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("an mbuf sent to a port the loop does not own is freed and counted", "[poll_loop]") {
  PacketPool pool({.name = "loop_unrouted"});
  {
    Port source({.device = "net_ring_unrout0"}, pool.get());
    preload(source, pool, 40);
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, RTE_MAX_ETHPORTS - 1, 40);
    PollLoop loop({{&source, 0}}, {}, fwd, clock);
    loop.run(stop);

    const auto c = loop.counters();
    CHECK(c.rx_packets == 40);
    CHECK(c.unrouted == 40);
    CHECK(c.tx_dropped == 40);
    CHECK(c.tx_packets == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("tx refused by a full queue is counted as dropped and freed", "[poll_loop]") {
  PacketPool pool({.name = "loop_full"});
  {
    Port source({.device = "net_null_full0"}, pool.get());
    Port ring({.device = "net_ring_full0"}, pool.get());  // nobody reads it: full at 1023
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, ring.id(), 2000);
    PollLoop loop({{&source, 0}}, {{&ring, 0}}, fwd, clock, {.max_drain_rounds = 0});
    loop.run(stop);

    const auto c = loop.counters();
    CHECK(c.rx_packets == 2016);  // 63 bursts of 32
    CHECK(c.tx_packets == 1023);
    CHECK(c.tx_dropped == c.rx_packets - 1023);
    CHECK(spraynet::test::drain_rx(ring) == 1023);
  }
  CHECK(pool.whole());
}

namespace {

// Holds every packet (like a delay line) and lets them go only in on_stop.
class Holder : public BurstHandler {
 public:
  Holder(StopSignal& stop, uint16_t to_port, size_t hold)
      : stop_(stop), to_(to_port), hold_(hold) {}
  void on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t, TxSink&) override {
    held_.insert(held_.end(), pkts, pkts + n);
    if (held_.size() >= hold_) stop_.request();
  }
  void on_poll(uint64_t, TxSink&) override {
    if (++polls_ == kMaxLoops) stop_.request();
  }
  void on_stop(uint64_t, TxSink& tx) override {
    for (rte_mbuf* m : held_) tx.send(to_, 0, m);
    held_.clear();
  }

 private:
  StopSignal& stop_;
  uint16_t to_;
  size_t hold_;
  uint64_t polls_ = 0;
  std::vector<rte_mbuf*> held_;
};

// Sends a few packets (less than a burst) once, then watches the destination ring until they
// arrive, which only the loop's periodic flush can make happen.
class Trickle : public BurstHandler {
 public:
  Trickle(StopSignal& stop, Port& ring, PacketPool& pool) : stop_(stop), ring_(ring), pool_(pool) {}
  void on_rx(uint16_t, uint16_t, rte_mbuf**, uint16_t, uint64_t, TxSink&) override {}
  void on_poll(uint64_t now_ns, TxSink& tx) override {
    if (sent_at_ == 0) {
      for (int i = 0; i < 5; ++i) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
        rte_pktmbuf_append(m, 60);
        tx.send(ring_.id(), 0, m);
      }
      sent_at_ = now_ns + 1;
    }
    rte_mbuf* pkts[8];
    const uint16_t n = ring_.rx_burst(0, pkts, 8);
    rte_pktmbuf_free_bulk(pkts, n);
    arrived += n;
    if (arrived == 5 && waited_ns == 0) {
      waited_ns = now_ns + 1 - sent_at_;
      stop_.request();
    }
    if (++polls_ == kMaxLoops) stop_.request();
  }

  unsigned arrived = 0;
  uint64_t waited_ns = 0;

 private:
  StopSignal& stop_;
  Port& ring_;
  PacketPool& pool_;
  uint64_t sent_at_ = 0;
  uint64_t polls_ = 0;
};

}  // namespace

TEST_CASE("on_stop releases what the handler held, and it is sent", "[poll_loop]") {
  PacketPool pool({.name = "loop_on_stop"});
  {
    Port source({.device = "net_ring_hold0"}, pool.get());
    Port dest({.device = "net_ring_hold1"}, pool.get());
    preload(source, pool, 50);
    TscClock clock;
    StopSignal stop;
    Holder holder(stop, dest.id(), 50);
    PollLoop loop({{&source, 0}}, {{&dest, 0}}, holder, clock);
    loop.run(stop);

    CHECK(loop.counters().tx_packets == 50);
    CHECK(spraynet::test::drain_rx(dest) == 50);
  }
  CHECK(pool.whole());
}

TEST_CASE("a partly filled tx buffer is flushed while the loop runs", "[poll_loop]") {
  PacketPool pool({.name = "loop_flush"});
  {
    Port ring({.device = "net_ring_flush0"}, pool.get());
    TscClock clock;
    StopSignal stop;
    Trickle trickle(stop, ring, pool);
    PollLoop loop({}, {{&ring, 0}}, trickle, clock, {.drain_interval_ns = 100'000});
    loop.run(stop);

    // Seen from on_poll, so before the final flush at stop. How long it took is not checked:
    // the packets wait for the next flush tick, anywhere within one interval of being sent.
    CHECK(trickle.arrived == 5);
    CHECK(trickle.waited_ns > 0);
    CHECK(loop.counters().tx_packets == 5);
  }
  CHECK(pool.whole());
}

TEST_CASE("a tx queue given twice is refused", "[poll_loop]") {
  PacketPool pool({.name = "loop_twice"});
  Port ring({.device = "net_ring_twice0"}, pool.get());
  TscClock clock;
  StopSignal stop;
  Forwarder fwd(stop, ring.id(), 1);
  CHECK_THROWS_WITH(PollLoop({}, {{&ring, 0}, {&ring, 0}}, fwd, clock),
                    "PollLoop: tx queue 0 of port " + std::to_string(ring.id()) + " given twice");
  CHECK(pool.whole());
}

TEST_CASE("two lcores run a loop each on their own queues and stop together", "[poll_loop]") {
  const std::vector<unsigned> lcores = LcoreRunner::all_lcores();
  REQUIRE(lcores.size() >= 2);
  PacketPool pool({.name = "loop_lcores"});
  {
    Port source({.device = "net_ring_lcores0", .rx_queues = 2, .tx_queues = 2}, pool.get());
    Port sink({.device = "net_null_lcores0", .rx_queues = 2, .tx_queues = 2}, pool.get());
    for (uint16_t q = 0; q < 2; ++q) {  // net_ring loops tx queue q back to rx queue q
      std::vector<rte_mbuf*> pkts(300);
      REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), pkts.data(), 300) == 0);
      for (auto* m : pkts) rte_pktmbuf_append(m, 60);
      REQUIRE(source.tx_burst(q, pkts.data(), 300) == 300);
    }
    TscClock clock;
    StopSignal stop;
    // Whichever loop gets to 300 first stops both; the other drains the rest of its queue.
    std::vector<Forwarder> handlers;
    handlers.emplace_back(stop, sink.id(), 300, 0, 0);
    handlers.emplace_back(stop, sink.id(), 300, 0, 1);
    std::vector<uint64_t> rx(2), tx(2);
    LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned i) {
      const auto q = static_cast<uint16_t>(i);
      PollLoop loop({{&source, q}}, {{&sink, q}}, handlers[i], clock);
      loop.run(stop);
      rx[i] = loop.counters().rx_packets;
      tx[i] = loop.counters().tx_packets;
    });
    for (unsigned i = 0; i < 2; ++i) {
      CHECK(rx[i] == 300);
      CHECK(tx[i] == 300);
      CHECK(handlers[i].received == 300);
      CHECK(handlers[i].stops == 1);
    }
  }
  CHECK(pool.whole());
}

TEST_CASE("the idle back-off sleeps after idle_polls empty rounds, doubling up to the cap",
          "[poll_loop][idle_backoff]") {
  using spraynet::runtime::IdleBackoff;
  IdleBackoff b({.max_sleep_ns = 5'000, .min_sleep_ns = 1'000, .idle_polls = 3});
  CHECK(b.enabled());
  std::vector<uint64_t> sleeps;
  for (int i = 0; i < 8; ++i) sleeps.push_back(b.after_iteration(false));
  CHECK(sleeps == std::vector<uint64_t>{0, 0, 0, 1'000, 2'000, 4'000, 5'000, 5'000});
  // Any work ends the back-off: the schedule starts over.
  CHECK(b.after_iteration(true) == 0);
  sleeps.clear();
  for (int i = 0; i < 4; ++i) sleeps.push_back(b.after_iteration(false));
  CHECK(sleeps == std::vector<uint64_t>{0, 0, 0, 1'000});

  IdleBackoff off({.max_sleep_ns = 0});
  CHECK_FALSE(off.enabled());
  for (int i = 0; i < 1000; ++i) REQUIRE(off.after_iteration(false) == 0);
}

TEST_CASE("a minimum sleep above the maximum is refused", "[poll_loop][idle_backoff]") {
  PacketPool pool({.name = "loop_bad_backoff"});
  TscClock clock;
  StopSignal stop;
  Forwarder fwd(stop, 0, 1);
  spraynet::runtime::PollLoopConfig cfg;
  cfg.idle_backoff = {.max_sleep_ns = 1'000, .min_sleep_ns = 2'000};
  CHECK_THROWS_WITH(PollLoop({}, {}, fwd, clock, cfg),
                    "PollLoop: idle back-off min_sleep_ns 2000 above max_sleep_ns 1000");
}

namespace {

// Waits, from inside the loop, until the loop has slept `sleeps` times, then puts one packet on
// a net_ring port's rx side and stops once it came through: the sleeping loop still receives.
class Napper : public BurstHandler {
 public:
  Napper(StopSignal& stop, Port& ring, PacketPool& pool, uint64_t sleeps)
      : stop_(stop), ring_(ring), pool_(pool), sleeps_(sleeps) {}
  void attach(const PollLoop& loop) { loop_ = &loop; }

  void on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t, TxSink&) override {
    rte_pktmbuf_free_bulk(pkts, n);
    received += n;
    stop_.request();
  }
  void on_poll(uint64_t, TxSink&) override {
    if (++polls_ == kMaxLoops) stop_.request();
    if (injected || loop_->counters().idle_sleeps < sleeps_) return;
    injected = true;
    sleeps_at_inject = loop_->counters().idle_sleeps;
    std::vector<rte_mbuf*> pkts(1);
    REQUIRE(rte_pktmbuf_alloc_bulk(pool_.get(), pkts.data(), 1) == 0);
    REQUIRE(rte_pktmbuf_append(pkts[0], 60) != nullptr);
    REQUIRE(ring_.tx_burst(0, pkts.data(), 1) == 1);
  }

  bool injected = false;
  uint64_t received = 0, sleeps_at_inject = 0;

 private:
  StopSignal& stop_;
  Port& ring_;
  PacketPool& pool_;
  uint64_t sleeps_;
  const PollLoop* loop_ = nullptr;
  uint64_t polls_ = 0;
};

}  // namespace

TEST_CASE("an idle loop with the back-off sleeps, and still receives",
          "[poll_loop][idle_backoff]") {
  PacketPool pool({.name = "loop_backoff"});
  {
    Port ring({.device = "net_ring_backoff0"}, pool.get());
    TscClock clock;
    StopSignal stop;
    Napper napper(stop, ring, pool, 20);
    spraynet::runtime::PollLoopConfig cfg;
    cfg.idle_backoff = {.max_sleep_ns = 50'000, .min_sleep_ns = 1'000, .idle_polls = 16};
    PollLoop loop({{&ring, 0}}, {}, napper, clock, cfg);
    napper.attach(loop);
    loop.run(stop);

    CHECK(napper.injected);
    CHECK(napper.sleeps_at_inject >= 20);
    CHECK(napper.received == 1);
    const auto c = loop.counters();
    CHECK(c.idle_sleeps >= 20);
    CHECK(c.idle_sleep_ns > 0);
    // One packet, one busy iteration: far less busy time than the loop slept.
    CHECK(c.busy_ns > 0);
    CHECK(c.busy_ns < c.idle_sleep_ns);
    // 16 empty rounds before each run of sleeps: far fewer iterations than a busy loop's.
    CHECK(c.loops < 16 + c.idle_sleeps + 10);
  }
  CHECK(pool.whole());
}

TEST_CASE("a loaded loop never backs off", "[poll_loop][idle_backoff]") {
  PacketPool pool({.name = "loop_loaded"});
  {
    Port source({.device = "net_null_loaded0"}, pool.get());  // every rx burst is full
    Port sink({.device = "net_null_loaded1"}, pool.get());
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, sink.id(), 100'000);
    spraynet::runtime::PollLoopConfig cfg;
    cfg.idle_backoff = {.max_sleep_ns = 50'000, .min_sleep_ns = 1'000, .idle_polls = 0};
    PollLoop loop({{&source, 0}}, {{&sink, 0}}, fwd, clock, cfg);
    loop.run(stop);

    CHECK(fwd.received >= 100'000);
    CHECK(loop.counters().idle_sleeps == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("progress() is read from another lcore while the loop runs, and only grows",
          "[poll_loop]") {
  const std::vector<unsigned> lcores = LcoreRunner::all_lcores();
  REQUIRE(lcores.size() >= 2);
  PacketPool pool({.name = "loop_progress"});
  {
    Port source({.device = "net_null_progress0"}, pool.get());  // never runs dry
    Port sink({.device = "net_null_progress1"}, pool.get());
    TscClock clock;
    StopSignal stop;
    Forwarder fwd(stop, sink.id(), UINT64_MAX);
    PollLoop loop({{&source, 0}}, {{&sink, 0}}, fwd, clock);
    spraynet::runtime::PollLoopProgress last{}, first_seen{};
    uint64_t reads = 0, went_back = 0;
    bool moved = false;
    LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned i) {
      if (i == 1) {
        loop.run(stop);
        return;
      }
      // Bounded polling on a condition: the loop has moved on since it was first seen running.
      const uint64_t deadline = clock.now_ns() + 30'000'000'000ULL;
      while (clock.now_ns() < deadline && !stop.requested()) {
        const spraynet::runtime::PollLoopProgress p = loop.progress();
        ++reads;
        if (p.loops < last.loops || p.rx_packets < last.rx_packets ||
            p.tx_packets < last.tx_packets) {
          ++went_back;
        }
        last = p;
        if (first_seen.loops == 0) first_seen = p;
        if (first_seen.loops > 0 && p.loops > first_seen.loops + 100 &&
            p.rx_packets > first_seen.rx_packets && p.tx_packets > first_seen.tx_packets) {
          moved = true;
          break;
        }
      }
      stop.request();
    });
    CHECK(moved);
    CHECK(reads > 0);
    CHECK(went_back == 0);
    // After run() returned: what it published last is its final count.
    const auto c = loop.counters();
    const auto p = loop.progress();
    CHECK(p.loops == c.loops);
    CHECK(p.rx_packets == c.rx_packets);
    CHECK(p.tx_packets == c.tx_packets);
  }
  CHECK(pool.whole());
}
