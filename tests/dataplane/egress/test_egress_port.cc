#include "dataplane/egress/egress_port.h"

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/int_header.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/pfc_frame.h"
#include "tests/dataplane/egress/egress_frames.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;
using spraynet::test::kNoPort;
using spraynet::test::kPfcMarker;
using spraynet::test::make_frame;
using spraynet::test::make_pfc;
using spraynet::test::marker_of;

namespace {

constexpr uint64_t kNever = EgressPort::kNever;

EgressPortConfig port_config(double gbps, uint64_t delay_ns = 0) {
  EgressPortConfig c;
  c.link.rate_gbps = gbps;
  c.link.propagation_delay_ns = delay_ns;
  return c;
}

// Dequeues everything that has arrived by now_ns; returns the markers and frees the mbufs.
std::vector<uint16_t> drain(EgressPort& port, uint64_t now_ns) {
  std::vector<uint16_t> markers;
  rte_mbuf* out[32];
  for (;;) {
    const uint16_t n = port.dequeue(now_ns, out, 32);
    for (uint16_t i = 0; i < n; ++i) {
      markers.push_back(marker_of(out[i]));
      rte_pktmbuf_free(out[i]);
    }
    if (n < 32) return markers;
  }
}

// Records what the port tells its listener.
struct RecordingListener : EgressQueueListener {
  struct Event {
    bool enqueue;
    uint16_t port;
    uint8_t priority;
    uint32_t bytes;
    uint64_t now_ns;
  };
  std::vector<Event> events;
  int64_t outstanding_bytes = 0;
  void on_enqueue(uint16_t p, uint8_t prio, uint32_t b, uint64_t now) override {
    events.push_back({true, p, prio, b, now});
    outstanding_bytes += b;
  }
  void on_release(uint16_t p, uint8_t prio, uint32_t b, uint64_t now) override {
    events.push_back({false, p, prio, b, now});
    outstanding_bytes -= b;
  }
};

}  // namespace

TEST_CASE("1000 frames of 1000 B at 10 Gbit/s arrive exactly on time, driven by next_event_ns") {
  TestPool pool;
  const uint64_t delay = 3000;
  EgressPortConfig c = port_config(10.0, delay);
  c.class_limit_bytes[0] = 2'000'000;
  {
    EgressPort port(c);
    for (uint16_t i = 0; i < 1000; ++i) {
      REQUIRE(port.enqueue(make_frame(pool, 1000, i), 0, kNoPort, 0, 0) ==
              EgressEnqueueResult::kQueued);
    }
    CHECK(port.queued_bytes(0) == 999'000);  // the first one started at once
    CHECK(port.in_flight() == 1);

    // The discrete-event driver: wake at next_event_ns, collect what has arrived.
    std::vector<uint64_t> arrival;
    std::vector<uint16_t> order;
    uint64_t wakeups = 0;
    for (uint64_t t = port.next_event_ns(); t != kNever; t = port.next_event_ns()) {
      ++wakeups;
      for (uint16_t m : drain(port, t)) {
        order.push_back(m);
        arrival.push_back(t);
      }
    }
    REQUIRE(arrival.size() == 1000);
    for (size_t i = 0; i < arrival.size(); ++i) {
      // Frame i's last bit leaves at (i + 1) x 819.2 ns and arrives `delay` later.
      REQUIRE(arrival[i] == (static_cast<uint64_t>(i + 1) * 8192 + 9) / 10 + delay);
      REQUIRE(order[i] == i);
    }
    CHECK(arrival.back() == 819'200 + delay);
    CHECK(wakeups >= 1000);
    const EgressClassCounters k = port.counters(0, arrival.back());
    CHECK(k.enqueued == 1000);
    CHECK(k.transmitted_packets == 1000);
    CHECK(k.transmitted_bytes == 1'000'000);
    CHECK(port.next_event_ns() == kNever);
  }
  CHECK(pool.whole());
}

TEST_CASE("A late driver call gives the same arrivals as a punctual one") {
  TestPool pool;
  EgressPortConfig c = port_config(10.0, 3000);
  c.class_limit_bytes[0] = 2'000'000;
  {
    EgressPort port(c);
    for (uint16_t i = 0; i < 1000; ++i) port.enqueue(make_frame(pool, 1000, i), 0, kNoPort, 0, 0);
    CHECK(drain(port, 819'200 + 3000 - 1).size() == 999);
    CHECK(port.next_event_ns() == 819'200 + 3000);
    CHECK(drain(port, 819'200 + 3000).size() == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("Propagation delay holds each frame on the wire") {
  TestPool pool;
  {
    EgressPort port(port_config(10.0, 5000));
    port.enqueue(make_frame(pool, 1000, 1), 2, kNoPort, 0, 1000);
    CHECK(port.next_event_ns() == 1000 + 820 + 5000);
    CHECK(drain(port, 6819).empty());
    CHECK(port.in_flight() == 1);
    CHECK(drain(port, 6820) == std::vector<uint16_t>{1});
    CHECK(port.next_event_ns() == kNever);
  }
  CHECK(pool.whole());
}

TEST_CASE("Strict priority: control first, then class 7 down to 0; paused classes are skipped") {
  TestPool pool;
  {
    EgressPort port(port_config(10.0));
    // 100 (class 0) takes the idle link at once; the rest wait behind it.
    port.enqueue(make_frame(pool, 1000, 100), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 101), 1, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 105), 5, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 107), 7, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 102), 2, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 117), 7, kNoPort, 0, 0);
    port.pause(5, 1'000'000, 0);
    port.pause(0, 1'000'000, 0);  // control frames ignore pauses
    port.enqueue_control(make_pfc(pool), 0);
    const std::vector<uint16_t> expected = {100, kPfcMarker, 107, 117, 102, 101};
    CHECK(drain(port, 100'000) == expected);
    CHECK(port.queued_packets(5) == 1);
    CHECK(port.paused(5, 100'000));
    CHECK(port.any_paused(100'000));
    CHECK_FALSE(port.any_paused(100'000, 0b1101'1110));
    port.resume(5, 200'000);
    CHECK_FALSE(port.paused(5, 200'000));
    CHECK(drain(port, 300'000) == std::vector<uint16_t>{105});
    CHECK(port.control_counters().transmitted_packets == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("Frames start when they could have, not when the driver happens to call") {
  TestPool pool;
  {
    EgressPort port(port_config(10.0));
    port.enqueue(make_frame(pool, 1000, 1), 0, kNoPort, 0, 0);    // on the wire 0 .. 819.2
    port.enqueue(make_frame(pool, 1000, 2), 0, kNoPort, 0, 100);  // ready at 100: starts 819.2
    // A class-7 frame handed over at 1000 cannot overtake a frame that started at 819.2.
    port.enqueue(make_frame(pool, 1000, 3), 7, kNoPort, 0, 1000);
    CHECK(port.next_event_ns() == 820);
    const std::vector<uint16_t> expected = {1, 2, 3};
    CHECK(drain(port, 10'000) == expected);
  }
  CHECK(pool.whole());
}

TEST_CASE("A pause holds the class for exactly the given time; resume releases at once") {
  TestPool pool;
  {
    EgressPort port(port_config(100.0));
    const uint64_t t = 1000;
    const uint64_t hold = pfc_quanta_to_ns(0xFFFF, 100.0);
    REQUIRE(hold == 335'539);
    port.pause(3, t + hold, t);
    port.enqueue(make_frame(pool, 1000, 1), 3, kNoPort, 3, t);
    CHECK(port.next_event_ns() == t + hold);  // the driver wakes when the pause runs out

    CHECK(drain(port, t + 335'538).empty());
    CHECK(port.paused(3, t + 335'538));
    CHECK(port.queued_packets(3) == 1);
    CHECK(port.stalled_since_ns(3, t + 335'538) == t);

    CHECK_FALSE(port.paused(3, t + 335'540));
    CHECK(drain(port, t + 335'540).empty());  // started at t + hold, 81.92 ns on the wire
    CHECK(port.queued_packets(3) == 0);
    CHECK(port.next_event_ns() == t + hold + 82);
    CHECK(drain(port, t + hold + 82) == std::vector<uint16_t>{1});
    CHECK(port.counters(3, t + 400'000).paused_ns == hold);

    // XON (resume) lets the class go at that very ns.
    const uint64_t u = 1'000'000;
    port.pause(3, u + hold, u);
    port.enqueue(make_frame(pool, 1000, 2), 3, kNoPort, 3, u);
    CHECK(drain(port, u + 5000).empty());
    port.resume(3, u + 5000);
    CHECK(port.queued_packets(3) == 0);
    CHECK(port.next_event_ns() == u + 5000 + 82);
    CHECK(drain(port, u + 5082) == std::vector<uint16_t>{2});
    CHECK(port.counters(3, u + 10'000).paused_ns == hold + 5000);

    // A pause frame replaces the timer: a refresh extends it, a shorter one shortens it.
    port.pause(3, u + 20'000, u + 10'000);
    port.pause(3, u + 30'000, u + 15'000);
    CHECK(port.paused(3, u + 29'999));
    CHECK_FALSE(port.paused(3, u + 30'000));
    CHECK(port.counters(3, u + 40'000).paused_ns == hold + 5000 + 20'000);
  }
  CHECK(pool.whole());
}

TEST_CASE("The listener hears every packet enter and leave a class queue") {
  TestPool pool;
  RecordingListener listener;
  {
    EgressPortConfig c = port_config(10.0);
    c.class_limit_bytes[3] = 2000;
    EgressPort port(c);
    port.set_listener(&listener);
    port.enqueue(make_frame(pool, 1000, 1), 3, 4, 3, 0);  // starts at once
    port.enqueue(make_frame(pool, 1000, 2), 3, 5, 3, 0);  // waits
    REQUIRE(listener.events.size() == 3);
    CHECK(listener.events[0].enqueue);
    CHECK_FALSE(listener.events[1].enqueue);  // 1 left the queue: it started transmission
    CHECK(listener.events[1].port == 4);
    CHECK(listener.events[1].bytes == 1000);
    CHECK(listener.events[2].enqueue);
    CHECK(listener.events[2].port == 5);
    port.enqueue_control(make_pfc(pool), 0);  // control frames are not accounted
    CHECK(listener.events.size() == 3);
    drain(port, 100'000);
    CHECK(listener.outstanding_bytes == 0);
    CHECK(listener.events.back().port == 5);
    // The release is stamped with the moment the frame started: after the control frame
    // (60 B + 24 = 67.2 ns) that went ahead of it.
    CHECK(listener.events.back().now_ns == 819 + 67);

    // A refused packet never entered: no call at all.
    port.pause(3, 10'000'000, 200'000);
    port.enqueue(make_frame(pool, 1000, 3), 3, 6, 3, 200'000);
    port.enqueue(make_frame(pool, 1000, 4), 3, 6, 3, 200'000);
    const size_t before = listener.events.size();
    CHECK(port.enqueue(make_frame(pool, 1000, 5), 3, 6, 3, 200'000) ==
          EgressEnqueueResult::kQueueFull);
    CHECK(listener.events.size() == before);
    port.free_all();  // shutdown: releases are still reported
    CHECK(listener.outstanding_bytes == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("A full class queue drops and counts; other classes are unaffected") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(10.0);
    c.class_limit_bytes[1] = 3000;
    EgressPort port(c);
    port.pause(1, 1'000'000, 0);
    for (uint16_t i = 0; i < 3; ++i) {
      CHECK(port.enqueue(make_frame(pool, 1000, i), 1, kNoPort, 1, 0) ==
            EgressEnqueueResult::kQueued);
    }
    CHECK(port.enqueue(make_frame(pool, 1000, 3), 1, kNoPort, 1, 0) ==
          EgressEnqueueResult::kQueueFull);
    CHECK(port.enqueue(make_frame(pool, 1000, 4), 2, kNoPort, 1, 0) ==
          EgressEnqueueResult::kQueued);
    CHECK(port.counters(1, 0).drops_queue_full == 1);
    CHECK(port.counters(1, 0).enqueued == 3);
    CHECK(port.queued_bytes(1) == 3000);
    CHECK(port.queued_bytes() == 3000);  // class 2's frame is already on the wire
    CHECK(drain(port, 1'100'000).size() == 4);
  }
  CHECK(pool.whole());
}

TEST_CASE("The control queue has a frame limit") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(10.0);
    c.control_queue_limit_frames = 2;
    EgressPort port(c);
    CHECK(port.enqueue_control(make_pfc(pool), 0) == EgressEnqueueResult::kQueued);  // on wire
    CHECK(port.enqueue_control(make_pfc(pool), 0) == EgressEnqueueResult::kQueued);
    CHECK(port.enqueue_control(make_pfc(pool), 0) == EgressEnqueueResult::kQueued);
    CHECK(port.enqueue_control(make_pfc(pool), 0) == EgressEnqueueResult::kQueueFull);
    CHECK(port.control_counters().drops_queue_full == 1);
    CHECK(drain(port, 10'000).size() == 3);
  }
  CHECK(pool.whole());
}

TEST_CASE("The delay line has a frame limit: a driver that stops draining loses frames, counted") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(10.0);
    c.delay_line_limit_frames = 4;
    EgressPort port(c);
    // One 1000 B frame every 10 us (each takes 0.82 us on the wire): each has arrived before the
    // next is enqueued, and nobody dequeues, so arrived frames pile up in the delay line.
    // Frames 0-3 fill it; 4-10 are sent and lost at the far end.
    for (uint16_t i = 0; i <= 10; ++i) {
      CHECK(port.enqueue(make_frame(pool, 1000, i), 0, kNoPort, 0, i * 10'000) ==
            EgressEnqueueResult::kQueued);
    }
    CHECK(port.in_flight() == 4);
    const auto k = port.counters(0, 100'000);
    CHECK(k.transmitted_packets == 11);
    CHECK(k.drops_delay_line_full == 7);
    CHECK(drain(port, 1'000'000) == std::vector<uint16_t>{0, 1, 2, 3});
    // Drained, it holds frames again.
    CHECK(port.enqueue(make_frame(pool, 1000, 11), 0, kNoPort, 0, 1'000'000) ==
          EgressEnqueueResult::kQueued);
    CHECK(drain(port, 2'000'000) == std::vector<uint16_t>{11});
    CHECK(port.counters(0, 2'000'000).drops_delay_line_full == 7);
  }
  CHECK(pool.whole());
  EgressPortConfig c;
  CHECK(c.delay_line_limit_frames == EgressPortConfig::kDefaultDelayLineLimitFrames);
  c.delay_line_limit_frames = 0;
  CHECK(c.check() == "delay_line_limit_frames: must be > 0");
}

TEST_CASE("A down link drops and counts everything and sends nothing") {
  TestPool pool;
  RecordingListener listener;
  {
    EgressPort port(port_config(10.0, 2000));
    port.set_listener(&listener);
    port.enqueue(make_frame(pool, 1000, 1), 0, 1, 3, 0);  // on the wire 0 .. 819.2: at 2820
    port.enqueue(make_frame(pool, 1000, 2), 0, 1, 3, 0);  // queued
    port.enqueue(make_frame(pool, 1000, 3), 0, 1, 3, 0);  // queued
    port.pause(6, 1'000'000, 0);
    port.enqueue(make_frame(pool, 1000, 4), 6, 1, 3, 0);  // queued, paused
    port.enqueue_control(make_pfc(pool), 0);              // goes next: 819.2 .. 886.4, arrives 2887
    // Frame 2 then runs 886.4 .. 1705.6 (arrives 3706), frame 3 from 1705.6: at 3000 both are
    // on the wire, frame 1 and the PFC frame have arrived, frame 4 is still queued.
    port.set_link_up(false, 3000);
    CHECK_FALSE(port.link_up());
    CHECK(port.queued_bytes() == 0);
    CHECK_FALSE(port.paused(6, 3000));
    CHECK(port.counters(0, 3000).drops_link_down == 2);  // 2 and 3 died on the wire
    CHECK(port.counters(6, 3000).drops_link_down == 1);
    CHECK(port.control_counters().drops_link_down == 0);
    CHECK(listener.outstanding_bytes == 0);
    // What had already arrived is still delivered; nothing else ever is.
    const std::vector<uint16_t> arrived = {1, kPfcMarker};
    CHECK(drain(port, 3000) == arrived);
    CHECK(port.enqueue(make_frame(pool, 1000, 5), 0, 1, 3, 4000) == EgressEnqueueResult::kLinkDown);
    CHECK(port.enqueue_control(make_pfc(pool), 4000) == EgressEnqueueResult::kLinkDown);
    CHECK(port.counters(0, 4000).drops_link_down == 3);
    CHECK(port.control_counters().drops_link_down == 1);
    CHECK(port.next_event_ns() == kNever);
    CHECK(drain(port, 1'000'000).empty());

    port.set_link_up(true, 2'000'000);
    CHECK(port.enqueue(make_frame(pool, 1000, 6), 0, 1, 3, 2'000'000) ==
          EgressEnqueueResult::kQueued);
    CHECK(port.next_event_ns() == 2'000'000 + 820 + 2000);
    CHECK(drain(port, 2'002'820) == std::vector<uint16_t>{6});
  }
  CHECK(pool.whole());
}

TEST_CASE("Frames lost on the wire are freed and counted, never returned") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(10.0);
    c.link.loss_rate = 0.5;
    c.link.seed = 3;
    c.class_limit_bytes[0] = 4'000'000;
    EgressPort port(c);
    for (uint16_t i = 0; i < 2000; ++i) port.enqueue(make_frame(pool, 1000, i), 0, kNoPort, 0, 0);
    const size_t delivered = drain(port, 10'000'000).size();
    const EgressClassCounters k = port.counters(0, 10'000'000);
    CHECK(delivered + k.drops_loss == 2000);
    CHECK(k.transmitted_packets == 2000);  // lost frames still used the wire
    CHECK(k.drops_loss > 800);
    CHECK(k.drops_loss < 1200);

    port.set_loss_rate(0.0, 10'000'000);
    port.set_bit_error_rate(1.0, 10'000'000);
    port.enqueue(make_frame(pool, 1000, 1), 0, kNoPort, 0, 10'000'000);
    CHECK(drain(port, 20'000'000).empty());
    CHECK(port.counters(0, 20'000'000).drops_bit_error == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("Changing the rate at run time applies to frames started after the change") {
  TestPool pool;
  {
    EgressPort port(port_config(10.0));
    port.enqueue(make_frame(pool, 1000, 1), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 1000, 2), 0, kNoPort, 0, 0);
    port.set_link_rate_gbps(100.0, 100);  // frame 1 keeps 10 G; frame 2 starts at 820 at 100 G
    CHECK(port.next_event_ns() == 820);
    CHECK(drain(port, 820) == std::vector<uint16_t>{1});
    CHECK(port.next_event_ns() == 902);
    CHECK(drain(port, 902) == std::vector<uint16_t>{2});
    CHECK_THROWS_AS(port.set_link_rate_gbps(0.0, 1000), std::invalid_argument);
    port.set_propagation_delay_ns(500, 1000);
    port.enqueue(make_frame(pool, 1000, 3), 0, kNoPort, 0, 1000);
    CHECK(port.next_event_ns() == 1000 + 82 + 500);
    CHECK(drain(port, 1582) == std::vector<uint16_t>{3});
  }
  CHECK(pool.whole());
}

TEST_CASE("Watchdog drop mode flushes the class, drops arrivals and ignores pauses") {
  TestPool pool;
  RecordingListener listener;
  {
    EgressPort port(port_config(10.0));
    port.set_listener(&listener);
    port.pause(3, 1'000'000, 100);
    port.enqueue(make_frame(pool, 1000, 1), 3, 2, 3, 200);
    port.enqueue(make_frame(pool, 1000, 2), 3, 2, 3, 300);
    // Paused since 100, queued since 200: the stall counts from the pause, queue or not.
    CHECK(port.stalled_since_ns(3, 500) == 100);
    CHECK(port.stalled_since_ns(2, 500) == kNever);

    port.set_drop_mode(3, true, 1000);
    CHECK(port.drop_mode(3));
    CHECK(port.any_drop_mode());
    CHECK(port.queued_packets(3) == 0);
    CHECK(port.counters(3, 1000).drops_watchdog == 2);
    CHECK(listener.outstanding_bytes == 0);
    CHECK_FALSE(port.paused(3, 1000));
    CHECK(port.stalled_since_ns(3, 1000) == kNever);

    CHECK(port.enqueue(make_frame(pool, 1000, 3), 3, 2, 3, 2000) ==
          EgressEnqueueResult::kWatchdogDrop);
    CHECK(port.counters(3, 2000).drops_watchdog == 3);
    port.pause(3, 1'000'000, 2000);
    CHECK_FALSE(port.paused(3, 2000));
    CHECK(port.pauses_ignored_by_watchdog() == 1);
    // Other classes carry on.
    CHECK(port.enqueue(make_frame(pool, 1000, 4), 4, 2, 4, 2000) == EgressEnqueueResult::kQueued);

    port.set_drop_mode(3, false, 3000);
    CHECK_FALSE(port.any_drop_mode());
    CHECK(port.enqueue(make_frame(pool, 1000, 5), 3, 2, 3, 3000) == EgressEnqueueResult::kQueued);
    const std::vector<uint16_t> expected = {4, 5};
    CHECK(drain(port, 10'000) == expected);
    CHECK(listener.outstanding_bytes == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("An empty paused class is stalled too; forward mode ignores pauses and drops nothing") {
  TestPool pool;
  RecordingListener listener;
  {
    EgressPort port(port_config(10.0));
    port.set_listener(&listener);
    port.pause(3, 1'000'000, 100);
    CHECK(port.stalled_since_ns(3, 500) == 100);  // nothing queued: stalled all the same
    port.enqueue(make_frame(pool, 1000, 1), 3, 2, 3, 200);
    CHECK(port.stalled_since_ns(3, 500) == 100);
    port.resume(3, 600);
    CHECK(port.stalled_since_ns(3, 600) == kNever);  // the pause ended: the stall with it
    port.pause(3, 1'000'000, 700);  // before frame 1 finished (started 600, 800 ns)
    CHECK(port.stalled_since_ns(3, 900) == 700);

    port.set_forward_mode(3, true, 1000);
    CHECK(port.pauses_ignored(3));
    CHECK_FALSE(port.drop_mode(3));
    CHECK_FALSE(port.any_drop_mode());
    CHECK_FALSE(port.paused(3, 1000));
    CHECK(port.stalled_since_ns(3, 1000) == kNever);
    port.pause(3, 1'000'000, 1500);
    CHECK_FALSE(port.paused(3, 1500));
    CHECK(port.pauses_ignored_by_watchdog() == 1);
    CHECK(port.enqueue(make_frame(pool, 1000, 2), 3, 2, 3, 2000) == EgressEnqueueResult::kQueued);
    CHECK(drain(port, 10'000) == std::vector<uint16_t>{1, 2});
    CHECK(port.counters(3, 10'000).drops_watchdog == 0);

    port.set_forward_mode(3, false, 20'000);
    CHECK_FALSE(port.pauses_ignored(3));
    port.pause(3, 30'000, 20'000);
    CHECK(port.paused(3, 20'000));  // honoured again
    CHECK(listener.outstanding_bytes == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("Bad input is counted and freed, never a crash") {
  TestPool pool;
  {
    EgressPort port(port_config(10.0));
    CHECK(port.enqueue(make_frame(pool, 1000, 1), 8, kNoPort, 0, 0) ==
          EgressEnqueueResult::kInvalid);
    CHECK(port.enqueue(nullptr, 0, kNoPort, 0, 0) == EgressEnqueueResult::kInvalid);
    CHECK(port.enqueue_control(nullptr, 0) == EgressEnqueueResult::kInvalid);
    port.pause(9, 100, 0);
    port.resume(200, 0);
    port.set_drop_mode(8, true, 0);
    CHECK(port.invalid_requests() == 6);
    CHECK_FALSE(port.paused(9, 0));
    CHECK(port.queued_bytes(8) == 0);
    CHECK(port.next_event_ns() == kNever);

    EgressPortConfig bad = port_config(0.0);
    CHECK(bad.check() == "link: rate_gbps: must be > 0");
    CHECK_THROWS_AS(EgressPort(bad), std::invalid_argument);
    bad = port_config(10.0);
    bad.class_limit_bytes[4] = 0;
    CHECK(bad.check() == "class_limit_bytes[4]: must be > 0");
  }
  CHECK(pool.whole());
}

TEST_CASE("The destructor frees whatever is still queued or in flight") {
  TestPool pool;
  {
    EgressPort port(port_config(1.0, 1'000'000));
    for (uint16_t i = 0; i < 20; ++i) port.enqueue(make_frame(pool, 1000, i), i % 8, 0, 0, 0);
    port.enqueue_control(make_pfc(pool), 0);
    CHECK(port.in_flight() == 1);
    CHECK(pool.in_use() == 21);
  }
  CHECK(pool.whole());
}

namespace {

// A RoCEv2 WRITE ONLY (1024 B payload, ICRC written) whose UDP source port is `marker`, with
// these ECN bits (DSCP 26), tagged with one 802.1Q tag when `vlan`.
rte_mbuf* make_roce(const TestPool& pool, uint16_t marker, uint8_t ecn, bool vlan = false) {
  static const std::vector<uint8_t> payload(1024, 0x5A);
  FrameSpec f;
  f.eth.vlan = vlan;
  f.eth.pcp = 3;
  f.eth.vlan_id = 100;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000102;
  f.ip.tos = static_cast<uint8_t>((26 << 2) | ecn);
  f.udp.src_port = marker;
  f.payload = payload;
  RoceSpec r;
  r.dest_qp = 0x000123;
  r.psn = marker;
  r.dma_length = 1024;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
  if (m == nullptr) throw std::runtime_error("build_roce_mbuf failed");
  return m;
}

uint32_t roce_bytes(const TestPool& pool, bool vlan = false) {
  rte_mbuf* m = make_roce(pool, 0, 2, vlan);
  const uint32_t bytes = rte_pktmbuf_pkt_len(m);
  rte_pktmbuf_free(m);
  return bytes;
}

// Class 3 marks every ECN-capable packet when the depth it is judged on is above `step` bytes,
// none at or below (kmin = kmax, pmax 1: no draw decides anything).
EgressPortConfig ecn_step_config(uint64_t step, EcnMarkPoint at) {
  EgressPortConfig c = port_config(1.0);  // slow: everything queues behind the first frame
  c.ecn.classes[3] = EcnClassConfig{true, step, step, 1.0};
  c.ecn.mark_at = at;
  c.ecn.seed = 9;
  return c;
}

struct Arrived {
  uint16_t marker;
  uint8_t ecn;
};

// Dequeues everything, checks each frame's IPv4 checksum and ICRC, and frees it.
std::vector<Arrived> drain_roce(EgressPort& port) {
  std::vector<Arrived> out;
  rte_mbuf* burst[32];
  for (uint64_t t = port.next_event_ns(); t != kNever; t = port.next_event_ns()) {
    const uint16_t n = port.dequeue(t, burst, 32);
    for (uint16_t i = 0; i < n; ++i) {
      ParsedPacket p;
      // The parser verifies the IPv4 header checksum and the ICRC (which masks the TOS byte).
      REQUIRE(PacketParser(ParseOptions{true, true}).parse(burst[i], p) == ParseStatus::kOk);
      REQUIRE(p.kind == PacketKind::kRoce);
      const auto* ip = rte_pktmbuf_mtod_offset(burst[i], const rte_ipv4_hdr*, p.l3_offset);
      rte_ipv4_hdr copy = *ip;
      copy.hdr_checksum = 0;
      CHECK(rte_ipv4_cksum(&copy) == ip->hdr_checksum);  // DPDK's, from scratch
      CHECK(verify_icrc(burst[i], p.l3_offset, p.l3_length(), nullptr));
      CHECK(p.dscp() == 26);
      out.push_back({p.src_port, static_cast<uint8_t>(p.tos & 3)});
      rte_pktmbuf_free(burst[i]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("ECN at dequeue: a frame is marked on the depth it leaves behind, above kmax only") {
  TestPool pool;
  for (const bool vlan : {false, true}) {
    INFO((vlan ? "802.1Q-tagged" : "untagged"));
    const uint32_t bytes = roce_bytes(pool, vlan);
    // 10 frames at once: frame 0 starts at once leaving nothing behind, frame i >= 1 leaves
    // (9 - i) frames. Above 3 frames: frames 1..5 are marked, 0 and 6..9 are not.
    EgressPort port(ecn_step_config(3ull * bytes, EcnMarkPoint::kDequeue));
    REQUIRE(port.ecn_marker() != nullptr);
    for (uint16_t i = 0; i < 10; ++i) {
      REQUIRE(port.enqueue(make_roce(pool, i, 2, vlan), 3, kNoPort, 3, 0) ==
              EgressEnqueueResult::kQueued);
    }
    const std::vector<Arrived> got = drain_roce(port);
    REQUIRE(got.size() == 10);
    for (uint16_t i = 0; i < 10; ++i) {
      INFO("frame " << i);
      CHECK(got[i].marker == i);
      CHECK(got[i].ecn == ((i >= 1 && i <= 5) ? 3 : 2));
    }
    const EgressClassCounters k = port.counters(3, 0);
    CHECK(k.ecn_marked == 5);
    CHECK(k.ecn_not_ect == 0);
    CHECK(port.ecn_marker()->counters(3).not_ipv4 == 0);
    CHECK(k.transmitted_packets == 10);
    CHECK(port.accounting().balanced());
    CHECK(port.accounting().dequeued == 10);
  }
  CHECK(pool.whole());
}

TEST_CASE("ECN at enqueue: a frame is marked on the depth it finds, itself not included") {
  TestPool pool;
  const uint32_t bytes = roce_bytes(pool);
  {
    // Frame 0 finds an idle port, frame i >= 1 finds frames 1..i-1 waiting ((i - 1) frames):
    // above 3 frames, frames 5..9 are marked.
    EgressPort port(ecn_step_config(3ull * bytes, EcnMarkPoint::kEnqueue));
    for (uint16_t i = 0; i < 10; ++i) {
      REQUIRE(port.enqueue(make_roce(pool, i, 1), 3, kNoPort, 3, 0) ==
              EgressEnqueueResult::kQueued);
      // Marked on the way in: what waits in the queue is CE already.
      CHECK(port.counters(3, 0).ecn_marked == (i >= 5 ? i - 4u : 0u));
    }
    const std::vector<Arrived> got = drain_roce(port);
    REQUIRE(got.size() == 10);
    for (uint16_t i = 0; i < 10; ++i) {
      INFO("frame " << i);
      CHECK(got[i].marker == i);
      CHECK(got[i].ecn == (i >= 5 ? 3 : 1));  // ECT(1) is ECN-capable too
    }
    CHECK(port.counters(3, 0).ecn_marked == 5);
    CHECK(port.accounting().balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("ECN: a Not-ECT frame is never marked, counted ecn_not_ect; other classes untouched") {
  TestPool pool;
  const uint32_t bytes = roce_bytes(pool);
  {
    EgressPort port(ecn_step_config(3ull * bytes, EcnMarkPoint::kDequeue));
    // Class 3 Not-ECT: frames 1..5 would be marked. Class 2 (marking off) ECT(0): never.
    for (uint16_t i = 0; i < 10; ++i) {
      REQUIRE(port.enqueue(make_roce(pool, i, 0), 3, kNoPort, 3, 0) ==
              EgressEnqueueResult::kQueued);
    }
    for (uint16_t i = 10; i < 20; ++i) {
      REQUIRE(port.enqueue(make_roce(pool, i, 2), 2, kNoPort, 2, 0) ==
              EgressEnqueueResult::kQueued);
    }
    const std::vector<Arrived> got = drain_roce(port);
    REQUIRE(got.size() == 20);
    for (const Arrived& a : got) {
      INFO("frame " << a.marker);
      CHECK(a.ecn == (a.marker < 10 ? 0 : 2));
    }
    CHECK(port.counters(3, 0).ecn_marked == 0);
    CHECK(port.counters(3, 0).ecn_not_ect == 5);
    CHECK(port.counters(2, 0).ecn_marked == 0);
    CHECK(port.counters(2, 0).ecn_not_ect == 0);
    CHECK(port.accounting().balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("ECN never touches a control frame, at either marking point") {
  TestPool pool;
  for (const EcnMarkPoint at : {EcnMarkPoint::kDequeue, EcnMarkPoint::kEnqueue}) {
    // Every class marks at any depth above 0: a control frame would be judged if it ever were.
    EgressPortConfig c = port_config(1.0);
    for (auto& k : c.ecn.classes) k = EcnClassConfig{true, 0, 0, 1.0};
    c.ecn.mark_at = at;
    EgressPort port(c);
    std::vector<std::vector<uint8_t>> sent;
    for (int i = 0; i < 5; ++i) {
      rte_mbuf* m = make_pfc(pool);
      const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
      sent.emplace_back(d, d + rte_pktmbuf_data_len(m));
      REQUIRE(port.enqueue_control(m, 0) == EgressEnqueueResult::kQueued);
    }
    rte_mbuf* burst[8];
    uint16_t n = 0;
    for (uint64_t t = port.next_event_ns(); t != kNever; t = port.next_event_ns()) {
      n += port.dequeue(t, burst + n, static_cast<uint16_t>(8 - n));
    }
    REQUIRE(n == 5);
    for (uint16_t i = 0; i < n; ++i) {
      const auto* d = rte_pktmbuf_mtod(burst[i], const uint8_t*);
      CHECK(std::vector<uint8_t>(d, d + rte_pktmbuf_data_len(burst[i])) == sent[i]);
      rte_pktmbuf_free(burst[i]);
    }
    for (uint8_t tc = 0; tc < 8; ++tc) {
      const EcnClassCounters& k = port.ecn_marker()->counters(tc);
      CHECK(k.marked + k.not_ect + k.already_ce + k.not_ipv4 == 0);
    }
    CHECK(port.accounting().balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("ECN: a frame that is not IPv4 is left alone; no class on means no marker") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(1.0);
    c.ecn.classes[0] = EcnClassConfig{true, 0, 0, 1.0};
    EgressPort port(c);
    // A frame with an unknown EtherType, queued behind another: judged, not IPv4, unchanged.
    std::vector<uint8_t> frame(100, 0x11);
    frame[12] = 0x88;
    frame[13] = 0xB5;  // local experimental EtherType
    REQUIRE(port.enqueue(pool.make(frame), 0, kNoPort, 0, 0) == EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(pool.make(frame), 0, kNoPort, 0, 0) == EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(pool.make(frame), 0, kNoPort, 0, 0) == EgressEnqueueResult::kQueued);
    rte_mbuf* burst[4];
    uint16_t n = 0;
    for (uint64_t t = port.next_event_ns(); t != kNever; t = port.next_event_ns()) {
      n += port.dequeue(t, burst + n, static_cast<uint16_t>(4 - n));
    }
    REQUIRE(n == 3);
    for (uint16_t i = 0; i < n; ++i) {
      const auto* d = rte_pktmbuf_mtod(burst[i], const uint8_t*);
      CHECK(std::vector<uint8_t>(d, d + rte_pktmbuf_data_len(burst[i])) == frame);
      rte_pktmbuf_free(burst[i]);
    }
    CHECK(port.ecn_marker()->counters(0).not_ipv4 == 1);  // frame 1 alone left one behind it
    CHECK(port.counters(0, 0).ecn_marked == 0);
  }
  {
    EgressPort port(port_config(1.0));  // the default: every class off
    CHECK(port.ecn_marker() == nullptr);
    CHECK(port.enqueue(make_roce(pool, 1, 2), 3, kNoPort, 3, 0) == EgressEnqueueResult::kQueued);
    CHECK(port.enqueue(make_roce(pool, 2, 2), 3, kNoPort, 3, 0) == EgressEnqueueResult::kQueued);
    const std::vector<Arrived> got = drain_roce(port);
    REQUIRE(got.size() == 2);
    CHECK(got[1].ecn == 2);
    CHECK(port.counters(3, 0).ecn_marked == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("ipv4_offset: 14 untagged, 18 behind one 802.1Q tag, -1 for anything else") {
  TestPool pool;
  rte_mbuf* m = make_roce(pool, 1, 2);
  CHECK(ipv4_offset(m) == 14);
  rte_pktmbuf_free(m);
  m = make_roce(pool, 1, 2, true);
  CHECK(ipv4_offset(m) == 18);
  rte_pktmbuf_free(m);
  m = make_pfc(pool);
  CHECK(ipv4_offset(m) == -1);
  rte_pktmbuf_free(m);
  std::vector<uint8_t> qinq(64, 0);
  qinq[12] = 0x81;
  qinq[16] = 0x81;  // a second tag: not read through
  m = pool.make(qinq);
  CHECK(ipv4_offset(m) == -1);
  rte_pktmbuf_free(m);
  m = pool.make(std::vector<uint8_t>(13, 0));  // too short to hold an EtherType
  CHECK(ipv4_offset(m) == -1);
  rte_pktmbuf_free(m);
  CHECK(ipv4_offset(nullptr) == -1);
  CHECK(pool.whole());
}

TEST_CASE("ECN: a bad marker config is the port's config error") {
  EgressPortConfig c = port_config(10.0);
  c.ecn.classes[5] = EcnClassConfig{true, 200, 100, 0.2};
  CHECK(c.check() == "ecn: classes[5].kmin_bytes: must be <= kmax_bytes (100)");
  CHECK_THROWS_AS(EgressPort(c), std::invalid_argument);
  c.ecn.classes[5] = EcnClassConfig{true, 100, 200, 0.0};
  CHECK(c.check() == "ecn: classes[5].pmax: must be in (0, 1]");
}

namespace {

// A RoCE write of `payload` bytes carrying an empty INT stack with a budget of max_hops.
rte_mbuf* int_frame(const TestPool& pool, size_t payload, uint8_t max_hops) {
  std::vector<uint8_t> data(payload, 0x5A);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.payload = data;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = 7;
  std::vector<uint8_t> bytes(roce_frame_length(f, r));
  REQUIRE(build_roce_frame(bytes, f, r) == bytes.size());
  REQUIRE(int_insert(bytes, max_hops));
  return pool.make(bytes);
}

// Queues m in class 3 at time 0 and returns it once it has crossed the link.
rte_mbuf* send_one(EgressPort& port, rte_mbuf* m) {
  REQUIRE(port.enqueue(m, 3, kNoPort, 3, 0) == EgressEnqueueResult::kQueued);
  rte_mbuf* out[1];
  uint16_t n = 0;
  for (uint64_t t = 0; n == 0 && t < 100'000; t += 100) n = port.dequeue(t, out, 1);
  REQUIRE(n == 1);
  return out[0];
}

}  // namespace

TEST_CASE("INT: a frame carrying INT gets the port's record as it starts; others are untouched") {
  TestPool pool;
  {
    EgressPortConfig c = port_config(10);
    c.int_telemetry.enabled = true;
    EgressPort port(c);
    rte_mbuf* a = int_frame(pool, 1000, 5);
    const uint32_t len = rte_pktmbuf_pkt_len(a);  // 14 + 20 + 8 + 16 (INT) + 12 + 1000 + 4
    REQUIRE(len == 1074);
    REQUIRE(port.enqueue(a, 3, kNoPort, 3, 0) == EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(int_frame(pool, 1000, 5), 3, kNoPort, 3, 0) ==
            EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(make_frame(pool, 1000, 9), 3, kNoPort, 3, 0) ==
            EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(int_frame(pool, 1000, 0), 3, kNoPort, 3, 0) ==
            EgressEnqueueResult::kQueued);

    rte_mbuf* out[8];
    std::vector<rte_mbuf*> got;
    for (uint64_t t = 0; got.size() < 4 && t < 100'000; t += 100) {
      const uint16_t n = port.dequeue(t, out, 8);
      got.insert(got.end(), out, out + n);
    }
    REQUIRE(got.size() == 4);
    // On the wire: the frame, its record (24 B) and 24 B of preamble, IFG and FCS, at 0.8 ns a
    // byte at 10 Gbit/s.
    const uint32_t wire_a = len + 24;
    const auto ra = int_parse(got[0]);
    REQUIRE(ra.has_value());
    REQUIRE(ra->nhop == 1);
    CHECK(ra->hops()[0].queue_id == 3);
    CHECK(ra->hops()[0].qlen_bytes == 0);  // it starts as it is queued, before B, C and D come
    CHECK(ra->hops()[0].egress_ts_ns == 0);
    CHECK(ra->hops()[0].tx_bytes == 0);
    CHECK(ra->hops()[0].line_rate_mbps == 10'000);
    CHECK(rte_pktmbuf_pkt_len(got[0]) == wire_a);
    const auto rb = int_parse(got[1]);
    REQUIRE(rb.has_value());
    REQUIRE(rb->nhop == 1);
    CHECK(rb->hops()[0].qlen_bytes == (1000 + len) / 80 * 80);  // C, D
    const double b_start = (wire_a + 24) * 0.8;
    CHECK(rb->hops()[0].egress_ts_ns >= static_cast<uint64_t>(b_start) - 1);
    CHECK(rb->hops()[0].egress_ts_ns <= static_cast<uint64_t>(b_start) + 1);
    CHECK(rb->hops()[0].tx_bytes == wire_a);
    CHECK(marker_of(got[2]) == 9);
    CHECK(rte_pktmbuf_pkt_len(got[2]) == 1000);
    // D's budget was 0: no record, E set, its length unchanged.
    const auto rd = int_parse(got[3]);
    REQUIRE(rd.has_value());
    CHECK(rd->nhop == 0);
    CHECK(rd->hops_exceeded);
    CHECK(rte_pktmbuf_pkt_len(got[3]) == len);

    CHECK(port.int_counters().pushed == 2);
    CHECK(port.int_counters().hops_exceeded == 1);
    CHECK(port.int_counters().mtu_exceeded == 0);
    CHECK(port.tx_bytes() == 2 * wire_a + 1000 + len);
    CHECK(port.counters(3, 100'000).transmitted_bytes == port.tx_bytes());
    CHECK(port.accounting().balanced());
    for (rte_mbuf* m : got) rte_pktmbuf_free(m);
  }
  {
    // A frame limit with no room for a record: M set, the frame sent as it was.
    EgressPortConfig c = port_config(10);
    c.int_telemetry.enabled = true;
    c.int_telemetry.max_frame_len = 1074 + 23;
    EgressPort port(c);
    rte_mbuf* out[1] = {send_one(port, int_frame(pool, 1000, 5))};
    CHECK(rte_pktmbuf_pkt_len(out[0]) == 1074);
    CHECK(int_parse(out[0])->mtu_exceeded);
    CHECK(port.int_counters().mtu_exceeded == 1);
    rte_pktmbuf_free(out[0]);
  }
  {
    // Off (the default): INT frames pass as they are.
    EgressPort port(port_config(10));
    rte_mbuf* out[1] = {send_one(port, int_frame(pool, 1000, 5))};
    CHECK(int_parse(out[0])->nhop == 0);
    CHECK(port.int_counters().pushed == 0);
    rte_pktmbuf_free(out[0]);
  }
  CHECK(pool.whole());
  EgressPortConfig bad = port_config(10);
  bad.int_telemetry.enabled = true;
  bad.int_telemetry.udp_port = 4791;
  CHECK_THROWS_WITH(EgressPort(bad), Catch::Contains("int_telemetry.udp_port"));
}
