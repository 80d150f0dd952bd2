#include "dataplane/egress/pfc_state.h"

#include <rte_mbuf.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataplane/egress/egress_port.h"
#include "dataplane/wire/packet_builder.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

constexpr uint8_t kPrio = 3;  // the default lossless priority; class 3 on egress

rte_mbuf* make_frame(const TestPool& pool, uint32_t frame_bytes) {
  std::vector<uint8_t> payload(frame_bytes - 42, 0x5A);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.udp.src_port = 1000;
  f.udp.dst_port = 4791;
  f.payload = payload;
  rte_mbuf* m = build_udp_mbuf(pool.get(), f);
  if (m == nullptr) throw std::runtime_error("build_udp_mbuf failed");
  return m;
}

EgressPortConfig egress_config(double gbps) {
  EgressPortConfig c;
  c.link.rate_gbps = gbps;
  return c;
}

PfcStateConfig pfc_config(size_t ports, double gbps) {
  PfcStateConfig c;
  c.port_link_gbps.assign(ports, gbps);
  c.buffer.port_headroom_bytes.assign(ports, SharedBuffer::auto_headroom_bytes(gbps, 1000, 4352));
  return c;
}

// A static threshold of `threshold` bytes (the old per-port buffer x XOFF fraction), XON
// `xon_offset` below it, in a pool that never fills.
PfcStateConfig static_config(size_t ports, double gbps, uint64_t threshold, uint64_t xon_offset) {
  PfcStateConfig c = pfc_config(ports, gbps);
  c.buffer.pool_bytes = 1 << 20;
  c.buffer.static_threshold_bytes = threshold;
  c.buffer.xon_offset_bytes = xon_offset;
  return c;
}

PfcFrame pause_frame(uint8_t prio, uint16_t quanta) {
  PfcFrame f;
  f.class_enable = static_cast<uint8_t>(1u << prio);
  f.quanta[prio] = quanta;
  return f;
}

std::vector<PfcEmission> take(PfcState& pfc, uint64_t now_ns) {
  std::vector<PfcEmission> out(8);
  out.resize(pfc.take_frames(now_ns, out));
  return out;
}

// Frees everything the port delivers by now_ns; returns how many.
size_t drain(EgressPort& port, uint64_t now_ns) {
  rte_mbuf* out[32];
  size_t total = 0;
  for (uint16_t n; (n = port.dequeue(now_ns, out, 32)) > 0; total += n) {
    for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(out[i]);
  }
  return total;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("PFC config: defaults and a static threshold are valid, nonsense is refused by key") {
  PfcStateConfig c = pfc_config(2, 100.0);
  CHECK(c.check().empty());
  CHECK(c.buffer.pool_bytes == SharedBufferConfig::kDefaultPoolBytes);
  CHECK(c.buffer.alpha == 1.0);
  CHECK(c.xoff_quanta == 0xFFFF);
  CHECK(c.enabled_priorities == 0x08);
  CHECK(c.watchdog_detection_ns == 200'000'000);
  CHECK(c.watchdog_restoration_ns == 200'000'000);
  c.buffer.static_threshold_bytes = 65'000;
  CHECK(c.check().empty());

  PfcStateConfig bad = c;
  bad.buffer.static_threshold_bytes = 0;
  bad.buffer.alpha = 1000;
  CHECK(bad.check() == "buffer.alpha: must be in [1/128, 128] (SONiC dynamic_th -7..7)");
  bad = c;
  bad.buffer.port_headroom_bytes.pop_back();
  CHECK(bad.check() == "buffer.port_headroom_bytes: one per port (2), got 1");
  bad = c;
  bad.xoff_quanta = 0;
  CHECK(bad.check() == "xoff_quanta: must be > 0 (0 is XON)");
  bad = c;
  bad.port_link_gbps[1] = 0;
  CHECK(bad.check() == "port_link_gbps[1]: must be > 0");
  bad = c;
  bad.buffer.pool_bytes = 2;
  CHECK(bad.check() == "buffer.pool_bytes: must be at least 65536");
  CHECK_THROWS_AS(PfcState(bad, nullptr), std::invalid_argument);
}

TEST_CASE("XOFF goes to the ingress port exactly when the buffer crosses the XOFF threshold") {
  const uint64_t xoff_packets = GENERATE(80, 65);
  TestPool pool;
  {
    PfcStateConfig c = static_config(2, 100.0, xoff_packets * 1000, 20'000);
    c.xoff_quanta = 0x1234;
    PfcState pfc(c, nullptr);
    EgressPort out_port(egress_config(100.0));  // port 0: where the traffic leaves
    EgressPort in_port(egress_config(100.0));   // port 1: where it came from
    pfc.attach_port(0, out_port);
    pfc.attach_port(1, in_port);
    CHECK(pfc.buffer().threshold_bytes() == xoff_packets * 1000);

    out_port.pause(kPrio, 1'000'000'000, 0);  // downstream paused: the packets stay queued
    for (uint64_t i = 1; i < xoff_packets; ++i) {
      out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, i);
      REQUIRE(take(pfc, i).empty());
    }
    CHECK_FALSE(pfc.xoff_asserted(1, kPrio));
    // Nothing due but the watchdog's deadline for the egress class, paused since 0.
    CHECK(pfc.next_event_ns(xoff_packets) == c.watchdog_detection_ns);

    out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, xoff_packets);
    CHECK(pfc.buffered_bytes(1, kPrio) == xoff_packets * 1000);
    CHECK(pfc.xoff_asserted(1, kPrio));
    CHECK(pfc.next_event_ns(xoff_packets) == xoff_packets);  // a frame is due now
    const std::vector<PfcEmission> sent = take(pfc, xoff_packets);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].port == 1);
    CHECK(sent[0].frame.class_enable == 0x08);
    CHECK(sent[0].frame.quanta[kPrio] == 0x1234);
    CHECK(pfc.counters(1).priority[kPrio].xoff_sent == 1);
    CHECK(pfc.counters(1).frames_sent == 1);
    CHECK(pfc.counters(0).frames_sent == 0);

    // Further packets above XOFF do not send another XOFF before the refresh is due.
    out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, 1000);
    CHECK(take(pfc, 1000).empty());
    out_port.free_all();
    CHECK(pfc.buffered_bytes(1, kPrio) == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("An asserted XOFF is refreshed before the pause it asked for runs out") {
  PfcState pfc(static_config(2, 100.0, 8000, 2000), nullptr);
  const uint64_t pause_ns = pfc.pause_duration_ns(1, 0xFFFF);
  const uint64_t refresh = pfc.xoff_refresh_interval_ns(1);
  CHECK(pause_ns == 335'539);
  CHECK(refresh == pause_ns / 2);

  const uint64_t t0 = 5000;
  pfc.on_enqueue(1, kPrio, 7000, t0);  // below the threshold
  CHECK(take(pfc, t0).empty());
  pfc.on_enqueue(1, kPrio, 2000, t0);  // would pass it: to the headroom, XOFF
  REQUIRE(take(pfc, t0).size() == 1);
  CHECK(pfc.next_event_ns(t0) == t0 + refresh);
  CHECK(take(pfc, t0 + refresh - 1).empty());
  for (int i = 1; i <= 3; ++i) {
    const uint64_t due = t0 + i * refresh;
    const std::vector<PfcEmission> again = take(pfc, due);
    REQUIRE(again.size() == 1);
    CHECK(again[0].port == 1);
    CHECK(again[0].frame.quanta[kPrio] == 0xFFFF);
    // The upstream sender is still paused by the previous frame when this one arrives.
    CHECK(due < t0 + (i - 1) * refresh + pause_ns);
  }
  CHECK(pfc.counters(1).priority[kPrio].xoff_sent == 4);
  CHECK(pfc.counters(1).priority[kPrio].xoff_refreshes_sent == 3);

  // The headroom drained but still above XON (7000 > 8000 - 2000): still refreshed. At XON:
  // XON, and no more refreshes.
  pfc.on_release(1, kPrio, 2000, t0 + 4 * refresh - 10);
  CHECK(pfc.buffer().headroom_used_bytes(1, kPrio) == 0);
  CHECK(take(pfc, t0 + 4 * refresh).size() == 1);
  pfc.on_release(1, kPrio, 999, t0 + 4 * refresh + 5);  // 6001
  CHECK(pfc.xoff_asserted(1, kPrio));
  pfc.on_release(1, kPrio, 1, t0 + 4 * refresh + 10);  // 6000
  const std::vector<PfcEmission> xon = take(pfc, t0 + 4 * refresh + 10);
  REQUIRE(xon.size() == 1);
  CHECK(xon[0].frame.class_enable == 0x08);
  CHECK(xon[0].frame.quanta[kPrio] == 0);
  CHECK(xon[0].frame.is_xon(kPrio));
  CHECK(pfc.next_event_ns(t0 + 4 * refresh + 10) == PfcState::kNever);
  CHECK(take(pfc, t0 + 100 * refresh).empty());
  CHECK(pfc.counters(1).priority[kPrio].xon_sent == 1);
}

TEST_CASE("XON is sent when draining takes the buffer to the XON threshold, not before") {
  TestPool pool;
  {
    PfcState pfc(static_config(2, 100.0, 80'000, 20'000), nullptr);
    EgressPort out_port(egress_config(100.0));
    pfc.attach_port(0, out_port);
    out_port.pause(kPrio, 1'000'000'000, 0);
    for (int i = 0; i < 90; ++i) out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, 0);
    REQUIRE(take(pfc, 0).size() == 1);  // the XOFF

    // Downstream resumes: frames leave one every 81.92 ns and release their buffer.
    out_port.resume(kPrio, 1000);
    uint64_t previous = pfc.buffered_bytes(1, kPrio);
    uint64_t t = 1000;
    while (pfc.xoff_asserted(1, kPrio)) {
      REQUIRE(take(pfc, t).empty());
      previous = pfc.buffered_bytes(1, kPrio);
      drain(out_port, ++t);
    }
    CHECK(previous == 61'000);                      // above 80,000 - 20,000 it held on
    CHECK(pfc.buffered_bytes(1, kPrio) == 60'000);  // the first release at XON
    const std::vector<PfcEmission> xon = take(pfc, t);
    REQUIRE(xon.size() == 1);
    CHECK(xon[0].port == 1);
    CHECK(xon[0].frame.is_xon(kPrio));
    drain(out_port, 1'000'000);
    CHECK(pfc.buffered_bytes(1, kPrio) == 0);
    CHECK(pfc.accounting_underflows() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("A received PAUSE holds the class for quanta x 512 bit times; XON releases at once") {
  TestPool pool;
  {
    PfcState pfc(pfc_config(1, 100.0), nullptr);
    EgressPort port(egress_config(100.0));
    pfc.attach_port(0, port);
    const uint64_t t = 10'000;

    const PfcPauseUpdate update = pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), t);
    CHECK(update.pause_classes == 0x08);
    CHECK(update.resume_classes == 0);
    CHECK(update.pause_until_ns[kPrio] == t + 335'539);  // 65535 x 5.12 ns = 335,539.2
    port.apply(update, t);
    port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, t);

    CHECK(drain(port, t + 335'538) == 0);
    CHECK(port.paused(kPrio, t + 335'538));
    CHECK(port.queued_packets(kPrio) == 1);
    drain(port, t + 335'540);
    CHECK_FALSE(port.paused(kPrio, t + 335'540));
    CHECK(port.queued_packets(kPrio) == 0);  // started when the pause ran out
    CHECK(drain(port, t + 335'539 + 82) == 1);
    CHECK(pfc.counters(0).priority[kPrio].xoff_received == 1);

    // XON (quanta 0) lets the class go at that very ns.
    const uint64_t u = 1'000'000;
    port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), u), u);
    port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, u);
    CHECK(drain(port, u + 1000) == 0);
    const PfcPauseUpdate xon = pfc.on_pfc_frame(0, pause_frame(kPrio, 0), u + 1000);
    CHECK(xon.resume_classes == 0x08);
    CHECK(xon.pause_classes == 0);
    port.apply(xon, u + 1000);
    CHECK(port.queued_packets(kPrio) == 0);
    CHECK(port.next_event_ns() == u + 1000 + 82);
    CHECK(drain(port, u + 1082) == 1);
    CHECK(pfc.counters(0).priority[kPrio].xon_received == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("Pause time follows the port's link rate, and only enabled priorities are honoured") {
  TestPool pool;
  {
    PfcStateConfig c = pfc_config(2, 400.0);
    PfcState pfc(c, nullptr);
    CHECK(pfc.pause_duration_ns(0, 0xFFFF) == 83'885);  // 65535 x 1.28 ns = 83,884.8
    EgressPort port(egress_config(25.0));
    pfc.attach_port(1, port);  // an attached port's own link rate wins
    CHECK(pfc.port_link_gbps(1) == 25.0);
    CHECK(pfc.pause_duration_ns(1, 1000) == 20'480);  // 1000 x 20.48 ns
    port.set_link_rate_gbps(100.0, 0);
    CHECK(pfc.pause_duration_ns(1, 1000) == 5120);

    PfcFrame f;
    f.class_enable = 0b1000'1001;  // priorities 0, 3, 7; only 3 is lossless here
    f.quanta = {100, 0, 0, 200, 0, 0, 0, 300};
    const PfcPauseUpdate u = pfc.on_pfc_frame(0, f, 0);
    CHECK(u.pause_classes == 0x08);
    CHECK(u.pause_until_ns[kPrio] == 256);  // 200 x 1.28 ns at 400 G
    CHECK(pfc.counters(0).ignored_priority_pauses == 2);
    CHECK(pfc.counters(0).frames_received == 1);
  }
  CHECK(pool.whole());
}

TEST_CASE("Several priorities due on one port go out in one frame; a short burst leaves the rest") {
  PfcStateConfig c = pfc_config(3, 100.0);
  c.enabled_priorities = 0b0001'1000;  // 3 and 4
  c.buffer.static_threshold_bytes = 8000;
  PfcState pfc(c, nullptr);
  pfc.on_enqueue(2, 3, 9000, 0);
  pfc.on_enqueue(2, 4, 9000, 0);
  pfc.on_enqueue(0, 4, 9000, 0);
  pfc.on_enqueue(1, 5, 9000, 0);  // not lossless: not accounted
  CHECK(pfc.buffered_bytes(1, 5) == 0);
  std::vector<PfcEmission> out(1);
  REQUIRE(pfc.take_frames(0, out) == 1);
  CHECK(out[0].port == 0);
  CHECK(out[0].frame.class_enable == 0b0001'0000);
  REQUIRE(pfc.take_frames(0, out) == 1);
  CHECK(out[0].port == 2);
  CHECK(out[0].frame.class_enable == 0b0001'1000);
  CHECK(out[0].frame.quanta[3] == 0xFFFF);
  CHECK(out[0].frame.quanta[4] == 0xFFFF);
  CHECK(pfc.take_frames(0, out) == 0);

  // Bad input is counted, locally generated traffic silently ignored.
  pfc.on_enqueue(7, 3, 100, 0);
  pfc.on_release(3, 9, 100, 0);
  pfc.on_enqueue(EgressPort::kNoIngressPort, 3, 100, 0);
  pfc.on_pfc_frame(3, pause_frame(3, 1), 0);
  CHECK(pfc.unknown_port_events() == 3);
  pfc.on_release(1, 3, 100, 0);  // never accounted
  CHECK(pfc.accounting_underflows() == 1);
  EgressPort spare(egress_config(100.0));
  CHECK_THROWS_AS(pfc.attach_port(3, spare), std::out_of_range);
}

TEST_CASE("Fast feedback makes a port ineligible at once for a paused lossless class, only") {
  const bool fast_feedback = GENERATE(false, true);
  TestPool pool;
  {
    PfcStateConfig c = pfc_config(2, 100.0);
    c.enabled_priorities = 0b0001'1000;  // 3 and 4
    c.fast_feedback = fast_feedback;
    PfcState pfc(c, nullptr);
    EgressPort port(egress_config(100.0));
    pfc.attach_port(0, port);
    CHECK(pfc.eligible(0, kPrio, 0));
    CHECK(pfc.eligible(1, kPrio, 0));  // not attached: nothing known against it
    CHECK_FALSE(pfc.eligible(2, kPrio, 0));

    port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 1000), 100), 100);  // until 100 + 5120
    port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, 100);
    CHECK(pfc.eligible(0, kPrio, 100) == !fast_feedback);
    CHECK(pfc.eligible(0, kPrio, 5219) == !fast_feedback);
    CHECK(pfc.eligible(0, kPrio, 5220));  // the pause ran out
    // The other lossless class and the lossy ones are not paused: the port stays theirs.
    CHECK(pfc.eligible(0, 4, 100));
    CHECK(pfc.eligible(0, 0, 100));
    const PathLoad load = pfc.path_load(0, kPrio, 200);
    CHECK(load.queued_bytes == 1000);
    CHECK(load.eligible == !fast_feedback);
    CHECK(pfc.path_load(0, 4, 200).eligible);

    // A pause of a priority that is not lossless here is not honoured and changes nothing.
    port.apply(pfc.on_pfc_frame(0, pause_frame(5, 1000), 6000), 6000);
    CHECK(pfc.eligible(0, kPrio, 6000));
    CHECK(pfc.eligible(0, 5, 6000));

    port.set_link_up(false, 7000);  // a down link is never eligible, for any class
    CHECK_FALSE(pfc.eligible(0, kPrio, 7000));
    CHECK_FALSE(pfc.eligible(0, 0, 7000));
    CHECK_FALSE(pfc.path_load(0, kPrio, 7000).eligible);
  }
  CHECK(pool.whole());
}

TEST_CASE("The watchdog turns a stuck paused queue into drop mode, logs once, and restores") {
  TestPool pool;
  std::ostringstream log_text;
  auto logger = std::make_shared<spdlog::logger>(
      "pfc_test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_text));
  logger->set_level(spdlog::level::info);
  {
    PfcStateConfig c = pfc_config(1, 1.0);  // at 1 G, 0xFFFF quanta pause 33.55 ms
    c.fast_feedback = false;
    PfcState pfc(c, logger);
    EgressPort port(egress_config(1.0));
    pfc.attach_port(0, port);
    constexpr uint64_t kMs = 1'000'000;

    // A pause storm from the peer: a fresh 0xFFFF pause every 10 ms up to 300 ms.
    auto storm_until = [&](uint64_t from_ms, uint64_t to_ms) {
      for (uint64_t ms = from_ms; ms <= to_ms; ms += 10) {
        port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), ms * kMs), ms * kMs);
        pfc.tick(ms * kMs);
      }
    };
    port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), 0), 0);
    port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 0);
    port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 0);
    CHECK(pfc.next_event_ns(0) == 200 * kMs);  // when detection would fire
    storm_until(10, 190);
    pfc.tick(200 * kMs - 1);
    CHECK_FALSE(pfc.watchdog_dropping(0, kPrio));
    CHECK(pfc.eligible(0, kPrio, 200 * kMs - 1));

    pfc.tick(200 * kMs);
    CHECK(pfc.watchdog_dropping(0, kPrio));
    CHECK(port.queued_packets(kPrio) == 0);
    CHECK(port.counters(kPrio, 200 * kMs).drops_watchdog == 2);
    CHECK(pfc.counters(0).priority[kPrio].watchdog_storms_detected == 1);
    CHECK_FALSE(pfc.eligible(0, kPrio, 200 * kMs));
    CHECK(pfc.eligible(0, 0, 200 * kMs));  // lossy traffic keeps the port
    CHECK(port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 205 * kMs) ==
          EgressEnqueueResult::kWatchdogDrop);
    CHECK(port.counters(kPrio, 205 * kMs).drops_watchdog == 3);
    CHECK(pfc.buffered_bytes(0, kPrio) == 0);  // flushed and dropped packets freed the buffer

    // The storm goes on: pauses are ignored, nothing more is logged.
    storm_until(210, 300);
    CHECK_FALSE(port.paused(kPrio, 300 * kMs));
    CHECK(port.pauses_ignored_by_watchdog() == 10);
    CHECK(pfc.next_event_ns(300 * kMs) == 500 * kMs);  // restoration: 200 ms after the last
    pfc.tick(500 * kMs - 1);
    CHECK(pfc.watchdog_dropping(0, kPrio));

    pfc.tick(500 * kMs);
    CHECK_FALSE(pfc.watchdog_dropping(0, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_restorations == 1);
    CHECK(pfc.eligible(0, kPrio, 500 * kMs));
    CHECK(port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 500 * kMs) ==
          EgressEnqueueResult::kQueued);
    CHECK(drain(port, 510 * kMs) == 1);

    const std::string text = log_text.str();
    CHECK(count(text, "pause storm detected on port 0 priority 3") == 1);
    CHECK(count(text, "entering drop mode") == 1);
    CHECK(count(text, "port 0 priority 3 restored") == 1);
    CHECK(count(text, "\n") == 2);  // nothing else was logged
  }
  CHECK(pool.whole());
}

TEST_CASE("The watchdog leaves alone queues that drain, and everything when off") {
  const bool watchdog = GENERATE(false, true);
  TestPool pool;
  {
    PfcStateConfig c = pfc_config(2, 1.0);
    c.watchdog = watchdog;
    PfcState pfc(c, nullptr);  // no logger: nothing is logged, nothing breaks
    EgressPort stuck(egress_config(1.0));
    EgressPort idle(egress_config(1.0));
    pfc.attach_port(0, stuck);
    pfc.attach_port(1, idle);
    constexpr uint64_t kMs = 1'000'000;
    for (uint64_t ms = 0; ms <= 1000; ms += 10) {
      stuck.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), ms * kMs), ms * kMs);
      idle.apply(pfc.on_pfc_frame(1, pause_frame(kPrio, 0xFFFF), ms * kMs), ms * kMs);
      if (ms == 0) stuck.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 0);
      pfc.tick(ms * kMs);
    }
    CHECK(pfc.watchdog_dropping(0, kPrio) == watchdog);
    // Paused with nothing waiting is a storm too (SONiC's empty-queue condition).
    CHECK(pfc.watchdog_dropping(1, kPrio) == watchdog);

    // A class that is paused in short bursts and keeps sending is not stuck.
    EgressPort busy(egress_config(1.0));
    PfcState pfc2(pfc_config(1, 1.0), nullptr);
    pfc2.attach_port(0, busy);
    for (uint64_t ms = 0; ms <= 1000; ms += 1) {
      // 0x4000 quanta at 1 G pause 8.4 ms; a gap of ~1.6 ms lets frames through each 10 ms.
      if (ms % 10 == 0) {
        busy.apply(pfc2.on_pfc_frame(0, pause_frame(kPrio, 0x4000), ms * kMs), ms * kMs);
      }
      busy.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, ms * kMs);
      drain(busy, ms * kMs);
      pfc2.tick(ms * kMs);
    }
    CHECK_FALSE(pfc2.watchdog_dropping(0, kPrio));
    CHECK(pfc2.counters(0).priority[kPrio].watchdog_storms_detected == 0);
    busy.free_all();
    stuck.free_all();
  }
  CHECK(pool.whole());
}

TEST_CASE("The watchdog detects an empty paused queue at the detection time, not before") {
  TestPool pool;
  {
    PfcStateConfig c = pfc_config(1, 1.0);  // at 1 G, 0xFFFF quanta pause 33.55 ms
    PfcState pfc(c, nullptr);
    EgressPort port(egress_config(1.0));
    pfc.attach_port(0, port);
    constexpr uint64_t kMs = 1'000'000;
    const uint64_t t0 = 3 * kMs;  // the storm starts here
    CHECK(pfc.next_event_ns(0) == PfcState::kNever);
    for (uint64_t t = t0; t < t0 + 200 * kMs; t += kMs) {
      if ((t - t0) % (10 * kMs) == 0) {
        port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), t), t);
      }
      pfc.tick(t);
      REQUIRE_FALSE(pfc.watchdog_storming(0, kPrio));
    }
    CHECK(port.queued_packets(kPrio) == 0);  // nothing was ever queued
    CHECK(pfc.next_event_ns(t0 + 199 * kMs) == t0 + 200 * kMs);
    pfc.tick(t0 + 200 * kMs - 1);
    CHECK_FALSE(pfc.watchdog_dropping(0, kPrio));
    pfc.tick(t0 + 200 * kMs);
    CHECK(pfc.watchdog_dropping(0, kPrio));
    CHECK(pfc.watchdog_storming(0, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_storms_detected == 1);
    CHECK(port.counters(kPrio, t0 + 200 * kMs).drops_watchdog == 0);  // nothing to flush

    // A pause that runs out restarts the watch: 0x4000 quanta (8.4 ms) every 10 ms is no storm.
    EgressPort gappy(egress_config(1.0));
    PfcState pfc2(pfc_config(1, 1.0), nullptr);
    pfc2.attach_port(0, gappy);
    for (uint64_t ms = 0; ms <= 1000; ++ms) {
      if (ms % 10 == 0) {
        gappy.apply(pfc2.on_pfc_frame(0, pause_frame(kPrio, 0x4000), ms * kMs), ms * kMs);
      }
      pfc2.tick(ms * kMs);
    }
    CHECK(pfc2.counters(0).priority[kPrio].watchdog_storms_detected == 0);
  }
  CHECK(pool.whole());
}

namespace {

// Every frame due at now_ns for port `port`, and whether any asks something of `prio`.
struct Taken {
  size_t frames = 0;
  bool asks_prio = false;
};
Taken take_for(PfcState& pfc, uint16_t port, uint8_t prio, uint64_t now_ns) {
  Taken t;
  for (const PfcEmission& e : take(pfc, now_ns)) {
    if (e.port != port) continue;
    ++t.frames;
    t.asks_prio = t.asks_prio || e.frame.enabled(prio);
  }
  return t;
}

}  // namespace

TEST_CASE("Drop mode: ingress dropped, no PFC to the storming neighbour, restored on time") {
  TestPool pool;
  {
    PfcStateConfig c = static_config(2, 1.0, 50'000, 16'384);
    c.enabled_priorities = 0b0001'1000;  // 3 and 4
    PfcState pfc(c, nullptr);
    EgressPort port(egress_config(1.0));  // port 0: the storming neighbour's link
    pfc.attach_port(0, port);
    constexpr uint64_t kMs = 1'000'000;
    const uint64_t last_pause = 300 * kMs;
    const auto storm = [&](uint64_t ms) {
      if (ms % 10 == 0 && ms * kMs <= last_pause) {
        port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), ms * kMs), ms * kMs);
      }
      pfc.tick(ms * kMs);
    };
    CHECK_FALSE(pfc.watchdog_ingress_drop(0, kPrio));
    for (uint64_t ms = 0; ms <= 200; ++ms) storm(ms);
    REQUIRE(pfc.watchdog_dropping(0, kPrio));

    // Ingress: priority 3 from the storming port is dropped and counted; priority 4 from it,
    // and priority 3 from another port, are not.
    CHECK(pfc.watchdog_ingress_drop(0, kPrio));
    CHECK(pfc.watchdog_ingress_drop(0, kPrio));
    CHECK_FALSE(pfc.watchdog_ingress_drop(0, 4));
    CHECK_FALSE(pfc.watchdog_ingress_drop(1, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_ingress_drops == 2);
    // Path selection: the port is gone for class 3 only.
    CHECK_FALSE(pfc.eligible(0, kPrio, 200 * kMs));
    CHECK(pfc.eligible(0, 4, 200 * kMs));
    CHECK(pfc.eligible(0, 0, 200 * kMs));

    // Port 0's priority 3 buffer crosses XOFF (packets admitted before the storm, sitting in
    // some queue), and so does its priority 4: only priority 4's XOFF goes to the neighbour.
    const uint64_t t = 201 * kMs;
    pfc.on_enqueue(0, kPrio, static_cast<uint32_t>(c.buffer.static_threshold_bytes), t);
    pfc.on_enqueue(0, 4, static_cast<uint32_t>(c.buffer.static_threshold_bytes), t);
    CHECK(pfc.xoff_asserted(0, kPrio));  // the accounting goes on
    std::vector<PfcEmission> sent = take(pfc, t);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].port == 0);
    CHECK(sent[0].frame.class_enable == 0x10);
    CHECK(pfc.counters(0).priority[kPrio].watchdog_frames_suppressed == 1);
    CHECK(pfc.counters(0).priority[kPrio].xoff_sent == 0);

    // The storm goes on to 300 ms; refreshes of priority 4 go out, of priority 3 never.
    size_t frames = 0;
    for (uint64_t ms = 202; ms < 500; ++ms) {
      storm(ms);
      const Taken got = take_for(pfc, 0, kPrio, ms * kMs);
      frames += got.frames;
      CHECK_FALSE(got.asks_prio);
    }
    CHECK(frames >= 10);  // 4's refreshes, every 16.8 ms
    CHECK(pfc.counters(0).priority[kPrio].watchdog_frames_suppressed == 1 + frames);
    CHECK(pfc.watchdog_dropping(0, kPrio));

    // Restoration exactly the restoration time after the last pause frame: admission and PFC
    // are back, and the XOFF still asserted goes out at once.
    CHECK(pfc.next_event_ns(499 * kMs) == last_pause + c.watchdog_restoration_ns);
    pfc.tick(last_pause + c.watchdog_restoration_ns - 1);
    CHECK(pfc.watchdog_dropping(0, kPrio));
    CHECK(pfc.watchdog_ingress_drop(0, kPrio));
    pfc.tick(last_pause + c.watchdog_restoration_ns);
    CHECK_FALSE(pfc.watchdog_storming(0, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_restorations == 1);
    CHECK_FALSE(pfc.watchdog_ingress_drop(0, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_ingress_drops == 3);
    CHECK(pfc.eligible(0, kPrio, 500 * kMs));
    sent = take(pfc, 500 * kMs);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].frame.enabled(kPrio));
    CHECK(sent[0].frame.quanta[kPrio] == 0xFFFF);
    CHECK(pfc.counters(0).priority[kPrio].xoff_sent == 1);

    // The buffer was never wedged: released bytes are released, XON goes out.
    pfc.on_release(0, kPrio, static_cast<uint32_t>(c.buffer.static_threshold_bytes), 501 * kMs);
    CHECK(pfc.buffered_bytes(0, kPrio) == 0);
    sent = take(pfc, 501 * kMs);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].frame.is_xon(kPrio));
    CHECK(pfc.accounting_underflows() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("A lossless packet its PG's headroom cannot hold is refused at enqueue and counted") {
  TestPool pool;
  {
    PfcStateConfig c = static_config(2, 100.0, 5000, 1000);
    c.buffer.port_headroom_bytes = {4000, 4000};
    PfcState pfc(c, nullptr);
    EgressPort out_port(egress_config(100.0));
    pfc.attach_port(0, out_port);
    out_port.pause(kPrio, 1'000'000'000, 0);  // nothing leaves
    for (int i = 0; i < 9; ++i) {
      REQUIRE(out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, 0) ==
              EgressEnqueueResult::kQueued);
    }
    CHECK(pfc.buffer().shared_bytes(1, kPrio) == 5000);
    CHECK(pfc.buffer().headroom_used_bytes(1, kPrio) == 4000);
    CHECK(out_port.enqueue(make_frame(pool, 1000), kPrio, 1, kPrio, 0) ==
          EgressEnqueueResult::kHeadroomOverflow);
    CHECK(out_port.counters(kPrio, 0).drops_headroom_overflow == 1);
    CHECK(out_port.counters(kPrio, 0).enqueued == 9);
    CHECK(pfc.buffer().headroom_overflows(1, kPrio) == 1);
    CHECK(pfc.buffered_bytes(1, kPrio) == 9000);  // the refused packet was never accounted
    // Lossy traffic from the same port, and locally generated traffic, are not PFC's to refuse.
    CHECK(out_port.enqueue(make_frame(pool, 1000), 0, 1, 0, 0) == EgressEnqueueResult::kQueued);
    CHECK(out_port.enqueue(make_frame(pool, 1000), kPrio, EgressPort::kNoIngressPort, kPrio, 0) ==
          EgressEnqueueResult::kQueued);
    CHECK(pfc.buffered_bytes(1, 0) == 0);
    out_port.free_all();
    CHECK(pfc.buffered_bytes(1, kPrio) == 0);
    CHECK(pfc.buffer().pool_used_bytes() == 0);
    CHECK(pfc.accounting_underflows() == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("Forward action: the stormed queue transmits, nothing is dropped, no PFC is sent") {
  TestPool pool;
  {
    PfcStateConfig c = static_config(1, 1.0, 50'000, 16'384);
    c.watchdog_action = PfcWatchdogAction::kForward;
    PfcState pfc(c, nullptr);
    EgressPort port(egress_config(1.0));
    pfc.attach_port(0, port);
    constexpr uint64_t kMs = 1'000'000;
    size_t delivered = 0;
    for (uint64_t ms = 0; ms <= 300; ++ms) {
      if (ms % 10 == 0) {
        port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), ms * kMs), ms * kMs);
      }
      if (ms == 0) {
        for (int i = 0; i < 3; ++i) port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, 0);
      }
      pfc.tick(ms * kMs);
      if (ms == 250) port.enqueue(make_frame(pool, 1000), kPrio, 0, kPrio, ms * kMs);
      delivered += drain(port, ms * kMs);
      if (ms < 200) REQUIRE(delivered == 0);
    }
    CHECK(pfc.watchdog_storming(0, kPrio));
    CHECK_FALSE(pfc.watchdog_dropping(0, kPrio));
    CHECK(pfc.counters(0).priority[kPrio].watchdog_storms_detected == 1);
    CHECK(delivered == 4);  // the 3 held by the storm, and one sent during it
    CHECK(port.counters(kPrio, 300 * kMs).drops_watchdog == 0);
    CHECK_FALSE(pfc.watchdog_ingress_drop(0, kPrio));
    CHECK(pfc.eligible(0, kPrio, 300 * kMs));        // the class still forwards there
    CHECK(port.pauses_ignored_by_watchdog() == 10);  // 210..300 ms

    // PFC generation is off for that priority on that port here too.
    pfc.on_enqueue(0, kPrio, static_cast<uint32_t>(c.buffer.static_threshold_bytes), 300 * kMs);
    CHECK(take(pfc, 300 * kMs).empty());
    CHECK(pfc.counters(0).priority[kPrio].watchdog_frames_suppressed == 1);
    pfc.on_release(0, kPrio, static_cast<uint32_t>(c.buffer.static_threshold_bytes), 301 * kMs);
    CHECK(take(pfc, 301 * kMs).empty());  // nor the XON
    CHECK(pfc.counters(0).priority[kPrio].watchdog_frames_suppressed == 2);

    pfc.tick(500 * kMs - 1);
    CHECK(pfc.watchdog_storming(0, kPrio));
    pfc.tick(500 * kMs);
    CHECK_FALSE(pfc.watchdog_storming(0, kPrio));
    // Pauses are honoured again.
    port.apply(pfc.on_pfc_frame(0, pause_frame(kPrio, 0xFFFF), 500 * kMs), 500 * kMs);
    CHECK(port.paused(kPrio, 500 * kMs));
  }
  CHECK(pool.whole());
}

TEST_CASE("Dynamic threshold: an asserted port gets XON when other ports drain, not only its own") {
  PfcStateConfig c = pfc_config(3, 100.0);
  c.buffer.pool_bytes = 1'000'000;
  c.buffer.xon_offset_bytes = 16'384;
  PfcState pfc(c, nullptr);
  // Port 2 alone takes half the pool, then port 1 half of what is left.
  while (!pfc.xoff_asserted(2, kPrio)) pfc.on_enqueue(2, kPrio, 1000, 0);
  while (!pfc.xoff_asserted(1, kPrio)) pfc.on_enqueue(1, kPrio, 1000, 0);
  CHECK(pfc.buffered_bytes(2, kPrio) == 500'000);
  CHECK(pfc.buffered_bytes(1, kPrio) == 250'000);
  REQUIRE(take(pfc, 0).size() == 2);  // both XOFFs

  // Port 2 drains; port 1 holds still. Port 1's XON is due once the threshold (750,000 - port
  // 2's bytes) reaches 250,000 + 16,384: at 483,000.
  uint64_t t = 1000;
  while (pfc.buffered_bytes(2, kPrio) > 484'000) {
    pfc.on_release(2, kPrio, 1000, t);
    REQUIRE(take(pfc, t).empty());
    ++t;
  }
  pfc.on_release(2, kPrio, 1000, t);
  const std::vector<PfcEmission> xon = take(pfc, t);
  REQUIRE(xon.size() == 1);
  CHECK(xon[0].port == 1);
  CHECK(xon[0].frame.is_xon(kPrio));
  CHECK_FALSE(pfc.xoff_asserted(1, kPrio));
  CHECK(pfc.xoff_asserted(2, kPrio));
  CHECK(pfc.buffered_bytes(1, kPrio) == 250'000);
  CHECK(pfc.counters(1).priority[kPrio].xon_sent == 1);
}
