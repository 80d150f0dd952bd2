#include "dataplane/rc_endpoint/dctcp_rate_control.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>

using namespace spraynet;

namespace {

// Every expected value below is computed here from DCTCP's formulas (ns-3 HPCC HandleAckDctcp),
// never by asking the class under test.
constexpr uint64_t kMtu = 1000;
constexpr uint64_t kInFlight = 10 * kMtu;

// ACK number i acknowledges i packets of kMtu bytes, with kInFlight more sent beyond it, at
// i us. So the first ACK opens a window ending at 11000 (batch 11000/1000 + 1 = 12 packets), and
// every later window holds (snd_nxt - ack_seq)/1000 + 1 = 11: the ACKs that close one are
// 12, 23, 34, 45, ...
AckFeedback ack_no(uint64_t i, bool marked) {
  AckFeedback a;
  a.now_ns = i * 1'000;
  a.ack_seq = i * kMtu;
  a.snd_nxt = i * kMtu + kInFlight;
  a.ecn_echo = marked;
  return a;
}

void feed(DctcpRateControl& cc, uint64_t from, uint64_t to, const std::set<uint64_t>& marked) {
  for (uint64_t i = from; i <= to; ++i) cc.on_ack(ack_no(i, marked.count(i) != 0));
}

DctcpConfig config() {
  DctcpConfig c;  // ns-3 run.py's dctcp values: g 1/16, rai 615 Mb/s, min 1000 Mb/s, mtu 1000
  c.line_rate_gbps = 100.0;
  return c;
}

}  // namespace

TEST_CASE("dctcp: defaults and interface") {
  const DctcpConfig c;
  CHECK(c.check() == "");
  CHECK(c.g == 1.0 / 16);
  CHECK(c.dctcp_rai_mbps == 615);
  CHECK(c.min_rate_mbps == 1000);
  CHECK(c.mtu_bytes == 1000);
  CHECK(c.initial_alpha == 1.0);

  DctcpRateControl cc(config());
  RateControl& rc = cc;
  CHECK(std::string(rc.name()) == "dctcp");
  CHECK(rc.rate_gbps() == 100.0);
  CHECK_FALSE(rc.limited());
  CHECK_FALSE(rc.at_min_rate());
  CHECK(rc.next_timer_ns() == UINT64_MAX);
  CHECK(rc.window_bytes() == UINT64_MAX);
  CHECK(cc.alpha() == 1.0);
  // CNPs are not DCTCP's signal.
  rc.on_cnp(5'000);
  CHECK(rc.rate_gbps() == 100.0);
  CHECK(rc.last_advance_ns() == 0);
  bool has_alpha = false, has_rate = false, has_cuts = false;
  for (const auto& [name, value] : rc.figures()) {
    if (name == "alpha") has_alpha = value == 1.0;
    if (name == "rate_gbps") has_rate = value == 100.0;
    if (name == "rate_cuts") has_cuts = value == 0.0;
  }
  CHECK(has_alpha);
  CHECK(has_rate);
  CHECK(has_cuts);
}

TEST_CASE("dctcp: alpha is the EWMA of each window's marked share") {
  const DctcpConfig c = config();
  const double g = c.g;
  DctcpRateControl cc(c);

  // Window 1: ACKs 1..12, marks on 1, 5, 9. ACK 1 opens it (no update yet, but its mark counts:
  // ns-3 does not clear the count when the first window opens); ACK 12 closes it, 12 packets.
  feed(cc, 1, 11, {1, 5, 9});
  CHECK(cc.alpha() == 1.0);
  CHECK(cc.counters().alpha_updates == 0);
  feed(cc, 12, 12, {});
  double a = 1.0;
  a = (1 - g) * a + g * (3.0 / 12.0);
  CHECK(cc.alpha() == Approx(a).epsilon(1e-12));
  CHECK(cc.counters().alpha_updates == 1);

  // Window 2: ACKs 13..23, all 11 marked, of 11 packets: F = 1. Nothing changes inside it.
  std::set<uint64_t> all;
  for (uint64_t i = 13; i <= 23; ++i) all.insert(i);
  feed(cc, 13, 22, all);
  CHECK(cc.alpha() == Approx(a).epsilon(1e-12));
  feed(cc, 23, 23, all);
  a = (1 - g) * a + g * 1.0;
  CHECK(cc.alpha() == Approx(a).epsilon(1e-12));

  // Window 3: ACKs 24..34, none marked: F = 0.
  feed(cc, 24, 34, {});
  a = (1 - g) * a;
  CHECK(cc.alpha() == Approx(a).epsilon(1e-12));

  // Window 4: ACKs 35..45, two marked: F = 2/11.
  feed(cc, 35, 45, {40, 41});
  a = (1 - g) * a + g * (2.0 / 11.0);
  CHECK(cc.alpha() == Approx(a).epsilon(1e-12));
  CHECK(cc.counters().alpha_updates == 4);
  CHECK(cc.counters().acks == 45);
  CHECK(cc.counters().marked_acks == 3 + 11 + 2);
}

TEST_CASE("dctcp: F is capped at 1 when a window's marks exceed its packets") {
  DctcpConfig c = config();
  c.initial_alpha = 0.5;
  DctcpRateControl cc(c);
  auto ack = [](uint64_t now, uint64_t seq, bool marked) {
    AckFeedback a;
    a.now_ns = now;
    a.ack_seq = seq;
    a.snd_nxt = seq;  // nothing left in flight
    a.ecn_echo = marked;
    return a;
  };
  // Opens a window ending at 1000 of 1000/1000 + 1 = 2 packets.
  cc.on_ack(ack(1'000, 1'000, false));
  // Five duplicate ACKs (not past 1000) marked, then the one that closes the window: 6 marks.
  for (int i = 0; i < 5; ++i) cc.on_ack(ack(2'000 + i, 1'000, true));
  cc.on_ack(ack(3'000, 2'000, true));
  const double expected = (1 - c.g) * 0.5 + c.g * std::min(1.0, 6.0 / 2.0);
  CHECK(cc.alpha() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("dctcp: one cut per window with marks, by alpha/2; AI per window without") {
  const DctcpConfig c = config();
  const double g = c.g;
  const double rai = c.dctcp_rai_mbps / 1000.0;
  DctcpRateControl cc(c);

  // ACK 1 marked: alpha is still 1, the rate halves; CWR until the ACKs pass 11000 (ACK 12).
  feed(cc, 1, 1, {1});
  double r = 100.0 * (1 - 1.0 / 2);
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.in_cwr());
  CHECK(cc.counters().rate_cuts == 1);
  // Marks inside the same window do not cut again.
  feed(cc, 2, 11, {5, 9});
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().rate_cuts == 1);

  // ACK 12 (unmarked): closes window 1 (alpha), leaves CWR (12000 > 11000), new window: + rai.
  feed(cc, 12, 12, {});
  const double a1 = (1 - g) * 1.0 + g * (3.0 / 12.0);
  r += rai;
  CHECK_FALSE(cc.in_cwr());
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().additive_increases == 1);

  // ACK 13 marked: a cut by the alpha of ACK 12, CWR until ACKs pass 23000. ACKs 14..23 marked:
  // no more cuts, and ACK 23 (a new window, inside CWR) adds nothing.
  std::set<uint64_t> all;
  for (uint64_t i = 13; i <= 23; ++i) all.insert(i);
  feed(cc, 13, 13, all);
  r *= 1 - a1 / 2;
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().rate_cuts == 2);
  feed(cc, 14, 23, all);
  const double a2 = (1 - g) * a1 + g * 1.0;
  CHECK(cc.alpha() == Approx(a2).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().rate_cuts == 2);
  CHECK(cc.counters().additive_increases == 1);
  CHECK(cc.in_cwr());

  // ACK 24 leaves CWR but opens no window: no increase until ACK 34.
  feed(cc, 24, 33, {});
  CHECK_FALSE(cc.in_cwr());
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  feed(cc, 34, 34, {});
  const double a3 = (1 - g) * a2;
  r += rai;
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().additive_increases == 2);

  // ACKs 40 and 41 marked: one cut by alpha a3 (at ACK 40), none at 41; ACK 45 closes the window
  // inside CWR (45000 <= 50000): no increase.
  feed(cc, 35, 45, {40, 41});
  r *= 1 - a3 / 2;
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().rate_cuts == 3);
  CHECK(cc.counters().additive_increases == 2);
  CHECK(cc.alpha() == Approx((1 - g) * a3 + g * (2.0 / 11.0)).epsilon(1e-12));
}

TEST_CASE("dctcp: each new window without marks adds dctcp_rai") {
  const DctcpConfig c = config();
  const double rai = c.dctcp_rai_mbps / 1000.0;
  DctcpRateControl cc(c);
  feed(cc, 1, 1, {1});
  double r = 100.0 / 2;
  // Windows close at ACKs 12, 23, 34, 45, 56: one increase each, none between.
  const uint64_t closes[] = {12, 23, 34, 45, 56};
  uint64_t next = 2;
  for (const uint64_t close : closes) {
    feed(cc, next, close - 1, {});
    CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
    feed(cc, close, close, {});
    r += rai;
    CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
    next = close + 1;
  }
  CHECK(cc.counters().additive_increases == 5);
  CHECK(cc.counters().rate_cuts == 1);
}

TEST_CASE("dctcp: never below the min rate, never above the line rate") {
  SECTION("floor") {
    DctcpConfig c = config();
    c.min_rate_mbps = 20'000;
    DctcpRateControl cc(c);
    // Every ACK marked: alpha stays 1 (F = 1 each window), each window halves the rate once:
    // 100 -> 50 (ACK 1) -> 25 (ACK 12, the first past 11000) -> 12.5 floored at 20 (ACK 23).
    std::set<uint64_t> all;
    for (uint64_t i = 1; i <= 60; ++i) all.insert(i);
    feed(cc, 1, 11, all);
    CHECK(cc.rate_gbps() == 50.0);
    feed(cc, 12, 22, all);
    CHECK(cc.rate_gbps() == 25.0);
    feed(cc, 23, 23, all);
    CHECK(cc.rate_gbps() == std::max(20.0, 25.0 / 2));
    CHECK(cc.at_min_rate());
    feed(cc, 24, 60, all);
    CHECK(cc.rate_gbps() == 20.0);
    CHECK(cc.at_min_rate());
    CHECK(cc.counters().rate_cuts == 6);  // ACKs 1, 12, 23, 34, 45, 56
  }
  SECTION("cap") {
    DctcpConfig c = config();
    c.dctcp_rai_mbps = 80'000;
    DctcpRateControl cc(c);
    // At the line rate a new window raises nothing.
    feed(cc, 1, 1, {});
    CHECK(cc.rate_gbps() == 100.0);
    CHECK(cc.counters().additive_increases == 0);
    feed(cc, 2, 2, {2});  // cut to 50, CWR until ACK 13 (ACK 2's snd_nxt 12000)
    CHECK(cc.rate_gbps() == 50.0);
    feed(cc, 3, 13, {});  // ACK 12 closes window 1 in CWR: nothing; 13 leaves CWR
    CHECK(cc.rate_gbps() == 50.0);
    feed(cc, 14, 23, {});  // ACK 23 closes window 2: min(100, 50 + 80)
    CHECK(cc.rate_gbps() == std::min(100.0, 50.0 + 80.0));
    CHECK_FALSE(cc.limited());
    CHECK(cc.counters().additive_increases == 1);
  }
}

TEST_CASE("dctcp: pacing at the current rate") {
  DctcpRateControl cc(config());
  const uint32_t wire = 1'086;
  // At the line rate: not limited, no wait.
  cc.on_sent(wire, 500);
  CHECK(cc.next_send_ns() == 0);
  feed(cc, 1, 1, {1});  // 50 Gbit/s
  cc.on_sent(wire, 2'000);
  CHECK(cc.next_send_ns() == 2'000 + static_cast<uint64_t>(std::ceil(wire * 8.0 / 50.0)));
  // A second cut, to a rate that does not divide the bits: ACK 12 (+ rai) then ACK 13 marked.
  feed(cc, 2, 13, {13});
  const double a1 = (1 - 1.0 / 16) * 1.0 + (1.0 / 16) * (1.0 / 12.0);
  const double r = (50.0 + 0.615) * (1 - a1 / 2);
  cc.on_sent(wire, 20'000);
  CHECK(cc.next_send_ns() == 20'000 + static_cast<uint64_t>(std::ceil(wire * 8.0 / r)));
  // The rate integral: 100 Gbit/s to 1 us (ACK 1), 50 to 12 us, 50.615 to 13 us, then r.
  cc.advance(30'000);
  const double expected =
      (100.0 * 1'000 + 50.0 * 11'000 + 50.615 * 1'000 + r * (30'000 - 13'000)) / 1e9;
  CHECK(cc.rate_integral_gbit() == Approx(expected).epsilon(1e-12));
  // Time never runs backwards.
  cc.advance(10);
  CHECK(cc.last_advance_ns() == 30'000);
}

TEST_CASE("dctcp: config errors name the key and the range") {
  auto error_of = [](auto edit) {
    DctcpConfig c;
    edit(c);
    return c.check();
  };
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  CHECK_THAT(error_of([](DctcpConfig& c) { c.line_rate_gbps = 0; }),
             StartsWith("line_rate_gbps: ") && Contains("(> 0)"));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.mtu_bytes = 0; }),
             StartsWith("mtu_bytes: ") && Contains("(> 0)"));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.g = 0; }), StartsWith("g: ") && Contains("(0, 1]"));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.g = 1.5; }), StartsWith("g: "));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.g = NAN; }), StartsWith("g: "));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.dctcp_rai_mbps = -1; }),
             StartsWith("dctcp_rai_mbps: ") && Contains("(>= 0)"));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.min_rate_mbps = 0; }),
             StartsWith("min_rate_mbps: ") && Contains("(0 < rate <= 100000)"));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.min_rate_mbps = 100'001; }),
             StartsWith("min_rate_mbps: "));
  CHECK_THAT(error_of([](DctcpConfig& c) { c.initial_alpha = 1.01; }),
             StartsWith("initial_alpha: ") && Contains("(0..1)"));

  DctcpConfig bad;
  bad.g = 2;
  try {
    DctcpRateControl cc(bad);
    FAIL("accepted g = 2");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), StartsWith("dctcp: g: ") && Contains("(0, 1]"));
  }
}
