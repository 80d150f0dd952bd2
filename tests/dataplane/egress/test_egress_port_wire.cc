// EgressPort with the wire as its link (EgressPortConfig::wire): no shaper and no delay line,
// frames leave when the driver takes them; strict priority, PFC pauses, the PMD's refusals
// (unsend) and the depth path selection reads (load_bytes).
#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "dataplane/egress/egress_port.h"
#include "dataplane/wire/int_header.h"
#include "dataplane/wire/packet_builder.h"
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

EgressPortConfig wire_config() {
  EgressPortConfig c;
  c.wire = true;
  c.link.propagation_delay_ns = 5000;  // an emulated link's; a wire port must not use it
  c.link.rate_gbps = 1.0;
  return c;
}

// Takes up to max frames at now_ns; returns their markers and frees them.
std::vector<uint16_t> take(EgressPort& port, uint64_t now_ns, uint16_t max = 64) {
  rte_mbuf* out[EgressPort::kWireBurst];
  std::vector<uint16_t> markers;
  const uint16_t n = port.dequeue(now_ns, out, max);
  for (uint16_t i = 0; i < n; ++i) {
    markers.push_back(marker_of(out[i]));
    rte_pktmbuf_free(out[i]);
  }
  return markers;
}

struct CountingListener : EgressQueueListener {
  int64_t outstanding_bytes = 0;
  uint64_t releases = 0;
  void on_enqueue(uint16_t, uint8_t, uint32_t b, uint64_t) override { outstanding_bytes += b; }
  void on_release(uint16_t, uint8_t, uint32_t b, uint64_t) override {
    outstanding_bytes -= b;
    ++releases;
  }
};

}  // namespace

TEST_CASE("a wire port hands a frame over at once: no serialisation, no delay line") {
  TestPool pool;
  {
    EgressPort port(wire_config());
    REQUIRE(port.enqueue(make_frame(pool, 1000, 1), 0, kNoPort, 0, 100) ==
            EgressEnqueueResult::kQueued);
    // Nothing starts by itself: it waits in its class until the driver takes it, due now.
    CHECK(port.queued_bytes() == 1000);
    CHECK(port.in_flight() == 0);
    CHECK(port.next_event_ns() == 100);
    // At the very ns it came (a 1 Gbit/s emulated link with 5 us of delay would take 13 us).
    CHECK(take(port, 100) == std::vector<uint16_t>{1});
    CHECK(port.next_event_ns() == EgressPort::kNever);
    CHECK(port.counters(0, 100).transmitted_packets == 1);
    CHECK(port.counters(0, 100).transmitted_bytes == 1000);
    const EgressAccounting a = port.accounting();
    CHECK(a.offered == 1);
    CHECK(a.dequeued == 1);
    CHECK(a.balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("a wire port serves the control queue, then classes in strict priority") {
  TestPool pool;
  {
    EgressPort port(wire_config());
    port.enqueue(make_frame(pool, 100, 10), 1, kNoPort, 1, 0);
    port.enqueue(make_frame(pool, 100, 70), 7, kNoPort, 7, 0);
    port.enqueue(make_frame(pool, 100, 11), 1, kNoPort, 1, 0);
    port.enqueue(make_frame(pool, 100, 30), 3, kNoPort, 3, 0);
    port.enqueue_control(make_pfc(pool), 0);
    port.enqueue(make_frame(pool, 100, 71), 7, kNoPort, 7, 0);
    // Two at a time (a tx queue with room for two): the order holds across calls.
    CHECK(take(port, 1, 2) == std::vector<uint16_t>{kPfcMarker, 70});
    CHECK(take(port, 1, 2) == std::vector<uint16_t>{71, 30});
    CHECK(take(port, 1, 2) == std::vector<uint16_t>{10, 11});
    CHECK(take(port, 1, 2).empty());
    CHECK(port.accounting().balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("a paused class stays queued on a wire port while the others leave") {
  TestPool pool;
  CountingListener listener;
  {
    EgressPort port(wire_config());
    port.set_listener(&listener);
    port.enqueue(make_frame(pool, 200, 30), 3, 0, 3, 0);
    port.enqueue(make_frame(pool, 200, 31), 3, 0, 3, 0);
    port.enqueue(make_frame(pool, 200, 10), 1, 0, 1, 0);
    port.pause(3, 5000, 0);
    CHECK(take(port, 10) == std::vector<uint16_t>{10});
    CHECK(port.queued_packets(3) == 2);
    CHECK(port.paused(3, 10));
    // Still paused just before the timer runs out; due when it does.
    CHECK(take(port, 4999).empty());
    CHECK(port.next_event_ns() == 5000);
    CHECK(port.stalled_since_ns(3, 4999) == 0);
    // The pause runs out: the class leaves, in order, and the listener gets its buffer back.
    CHECK(take(port, 5000) == std::vector<uint16_t>{30, 31});
    CHECK(listener.outstanding_bytes == 0);
    CHECK(listener.releases == 3);

    // An XON lets a paused class go at once.
    port.enqueue(make_frame(pool, 200, 32), 3, 0, 3, 6000);
    port.pause(3, 100'000, 6000);
    CHECK(take(port, 6001).empty());
    port.resume(3, 6002);
    CHECK(take(port, 6002) == std::vector<uint16_t>{32});
    CHECK(port.counters(3, 7000).pause_intervals == 2);
    CHECK(port.accounting().balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("what the PMD refuses goes back first, counted in flight, and in the port's depth") {
  TestPool pool;
  {
    EgressPort port(wire_config());
    for (uint16_t i = 0; i < 4; ++i) port.enqueue(make_frame(pool, 100, i), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 100, 70), 7, kNoPort, 7, 0);
    rte_mbuf* out[EgressPort::kWireBurst];
    REQUIRE(port.dequeue(1, out, 64) == 5);  // 70, 0, 1, 2, 3
    CHECK(marker_of(out[0]) == 70);
    // The PMD took two: the three others are the port's again, first in line, and counted.
    rte_pktmbuf_free(out[0]);
    rte_pktmbuf_free(out[1]);
    uint64_t bytes = 500;
    port.unsend(out + 2, 3, &bytes);
    CHECK(bytes == 200);
    CHECK(port.in_flight() == 3);
    CHECK(port.queued_bytes() == 0);
    CHECK(port.load_bytes() == 300);
    EgressAccounting a = port.accounting();
    CHECK(a.dequeued == 2);
    CHECK(a.in_flight == 3);
    CHECK(a.balanced());
    CHECK(port.next_event_ns() == 1);
    // A class-7 frame that comes meanwhile still goes after them: they have left their classes.
    port.enqueue(make_frame(pool, 100, 71), 7, kNoPort, 7, 2);
    CHECK(take(port, 3) == std::vector<uint16_t>{1, 2, 3, 71});
    CHECK(port.load_bytes() == 0);
    // Transmitted once each, whatever the PMD refused.
    CHECK(port.counters(0, 3).transmitted_packets == 4);
    CHECK(port.counters(7, 3).transmitted_packets == 2);

    // The PMD's tx descriptors count in the depth, never in what the port holds.
    port.set_tx_backlog(4096);
    CHECK(port.load_bytes() == 4096);
    CHECK(port.queued_bytes() == 0);
    a = port.accounting();
    CHECK(a.dequeued == 6);
    CHECK(a.balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("a wire port going down drops what it holds, refused frames too") {
  TestPool pool;
  {
    EgressPort port(wire_config());
    port.enqueue(make_frame(pool, 100, 1), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 100, 2), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 100, 3), 0, kNoPort, 0, 0);
    rte_mbuf* out[EgressPort::kWireBurst];
    REQUIRE(port.dequeue(1, out, 2) == 2);
    rte_pktmbuf_free(out[0]);
    port.unsend(out + 1, 1);
    port.set_link_up(false, 2);
    CHECK(port.in_flight() == 0);
    CHECK(port.load_bytes() == 0);
    CHECK(port.counters(0, 2).drops_link_down == 2);
    CHECK(take(port, 3).empty());
    CHECK(port.enqueue(make_frame(pool, 100, 4), 0, kNoPort, 0, 3) ==
          EgressEnqueueResult::kLinkDown);
    CHECK(port.next_event_ns() == EgressPort::kNever);
    const EgressAccounting a = port.accounting();
    CHECK(a.lost == 2);
    CHECK(a.balanced());
  }
  CHECK(pool.whole());
}

TEST_CASE("free_all on a wire port frees queued and refused frames") {
  TestPool pool;
  {
    EgressPort port(wire_config());
    port.enqueue(make_frame(pool, 100, 1), 0, kNoPort, 0, 0);
    port.enqueue(make_frame(pool, 100, 2), 2, kNoPort, 2, 0);
    rte_mbuf* out[EgressPort::kWireBurst];
    REQUIRE(port.dequeue(1, out, 1) == 1);
    port.unsend(out, 1);
    port.free_all();
    const EgressAccounting a = port.accounting();
    CHECK(a.freed_at_shutdown == 2);
    CHECK(a.balanced());
    CHECK(port.load_bytes() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("a wire port pushes INT records as the driver takes the frames, in burst order") {
  TestPool pool;
  {
    EgressPortConfig c = wire_config();
    c.int_telemetry.enabled = true;
    EgressPort port(c);
    std::vector<uint8_t> bytes;
    {
      std::vector<uint8_t> data(500, 0x11);
      FrameSpec f;
      f.ip.src = 0x0A000001;
      f.ip.dst = 0x0A000002;
      f.payload = data;
      RoceSpec r;
      r.opcode = opcode::kRcSendOnly;
      bytes.resize(roce_frame_length(f, r));
      REQUIRE(build_roce_frame(bytes, f, r) == bytes.size());
      REQUIRE(int_insert(bytes, 3));
    }
    const auto len = static_cast<uint32_t>(bytes.size());
    REQUIRE(port.enqueue(pool.make(bytes), 2, kNoPort, 2, 0) == EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(pool.make(bytes), 2, kNoPort, 2, 0) == EgressEnqueueResult::kQueued);
    REQUIRE(port.enqueue(make_frame(pool, 100, 4), 1, kNoPort, 1, 0) ==
            EgressEnqueueResult::kQueued);
    rte_mbuf* out[EgressPort::kWireBurst];
    uint64_t sent = 0;
    REQUIRE(port.dequeue(700, out, EgressPort::kWireBurst, &sent) == 3);
    const auto a = int_parse(out[0]);
    const auto b = int_parse(out[1]);
    REQUIRE((a && b && a->nhop == 1 && b->nhop == 1));
    // Behind the first: the second and the class-1 frame; behind the second: the class-1 one.
    CHECK(a->hops()[0].qlen_bytes == (len + 100) / 80 * 80);
    CHECK(b->hops()[0].qlen_bytes == 100 / 80 * 80);
    CHECK(a->hops()[0].egress_ts_ns == 700);
    CHECK(a->hops()[0].tx_bytes == 0);
    CHECK(b->hops()[0].tx_bytes == len + 24);
    CHECK(a->hops()[0].line_rate_mbps == 1000);
    CHECK(sent == 2 * (len + 24) + 100);
    CHECK(port.tx_bytes() == sent);
    CHECK(port.int_counters().pushed == 2);
    for (int i = 0; i < 3; ++i) rte_pktmbuf_free(out[i]);
  }
  CHECK(pool.whole());
}
