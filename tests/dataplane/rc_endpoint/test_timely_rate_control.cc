#include "dataplane/rc_endpoint/timely_rate_control.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>

using namespace spraynet;

namespace {

// Every expected value below is computed here from TIMELY's formulas (ns-3 HPCC
// UpdateRateTimely), never by asking the class under test.
constexpr uint64_t kUs = 1'000;

// Window k's ACK: at k ms, acknowledging everything sent (ack_seq = snd_nxt = 10000 k), so each
// window's ACK is past the previous one's snd_nxt and makes a full update. rtt_ns > 0.
AckFeedback window_ack(uint64_t k, uint64_t rtt_ns) {
  AckFeedback a;
  a.now_ns = k * 1'000'000;
  a.ack_seq = 10'000 * k;
  a.snd_nxt = 10'000 * k;
  a.echoed_ts_ns = a.now_ns - rtt_ns;
  return a;
}

}  // namespace

TEST_CASE("timely: defaults and interface") {
  const TimelyConfig c;
  CHECK(c.check() == "");
  CHECK(c.t_low_ns == 50'000);
  CHECK(c.t_high_ns == 500'000);
  CHECK(c.alpha == 0.875);
  CHECK(c.beta == 0.8);
  CHECK(c.min_rtt_ns == 20'000);
  CHECK(c.delta_mbps == 100);
  CHECK(c.hai_delta_mbps == 500);
  CHECK(c.hai_threshold == 5);
  CHECK(c.min_rate_mbps == 1000);
  const TimelyConfig c25 = timely_ns3_defaults(25.0);
  CHECK(c25.check() == "");
  CHECK(c25.delta_mbps == 25.0);       // run.py: 10 * bw / 10
  CHECK(c25.hai_delta_mbps == 125.0);  // run.py: 50 * bw / 10
  CHECK(timely_ns3_defaults(100.0).delta_mbps == c.delta_mbps);

  TimelyRateControl cc(c);
  RateControl& rc = cc;
  CHECK(std::string(rc.name()) == "timely");
  CHECK(rc.rate_gbps() == 100.0);
  CHECK_FALSE(rc.limited());
  CHECK(rc.next_timer_ns() == UINT64_MAX);
  CHECK(rc.window_bytes() == UINT64_MAX);
  rc.on_cnp(1'000);
  CHECK(rc.rate_gbps() == 100.0);
  bool has_rate = false;
  for (const auto& [name, value] : rc.figures())
    if (name == "rate_gbps") has_rate = value == 100.0;
  CHECK(has_rate);
}

TEST_CASE("timely: a rising RTT gradient cuts by beta * gradient; a falling one adds delta") {
  const TimelyConfig c;
  TimelyRateControl cc(c);
  // The first sample only records the RTT.
  cc.on_ack(window_ack(1, 100 * kUs));
  CHECK(cc.rate_gbps() == 100.0);
  CHECK(cc.last_rtt_ns() == 100 * kUs);
  CHECK(cc.counters().rtt_updates == 1);

  // 100 -> 110 us (between T_low and T_high): rtt_diff = alpha * 10 us.
  cc.on_ack(window_ack(2, 110 * kUs));
  double rtt_diff = (1 - c.alpha) * 0 + c.alpha * (10.0 * kUs);
  double gradient = rtt_diff / c.min_rtt_ns;
  REQUIRE(gradient > 0);
  double r = 100.0 * std::max(0.0, 1 - c.beta * gradient);
  CHECK(cc.rtt_diff_ns() == Approx(rtt_diff).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().gradient_decreases == 1);
  CHECK(cc.inc_stage() == 0);

  // 110 -> 100 us: the EWMA turns negative, the rate grows by delta.
  cc.on_ack(window_ack(3, 100 * kUs));
  rtt_diff = (1 - c.alpha) * rtt_diff + c.alpha * (-10.0 * kUs);
  gradient = rtt_diff / c.min_rtt_ns;
  REQUIRE(gradient <= 0);
  r += c.delta_mbps / 1000.0;
  CHECK(cc.rtt_diff_ns() == Approx(rtt_diff).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().increases == 1);
  CHECK(cc.inc_stage() == 1);
}

TEST_CASE("timely: rtt_diff is the EWMA of the per-window RTT differences") {
  const TimelyConfig c;
  TimelyRateControl cc(c);
  // All between T_low and T_high, so every window runs the gradient rule.
  const uint64_t rtts[] = {100, 130, 120, 180, 175, 90, 95, 300};
  double rtt_diff = 0;
  uint64_t last = 0;
  uint64_t k = 1;
  for (const uint64_t us : rtts) {
    const uint64_t rtt = us * kUs;
    if (k > 1) {
      rtt_diff = (1 - c.alpha) * rtt_diff +
                 c.alpha * (static_cast<double>(rtt) - static_cast<double>(last));
    }
    cc.on_ack(window_ack(k, rtt));
    CHECK(cc.rtt_diff_ns() == Approx(rtt_diff).epsilon(1e-12).margin(1e-9));
    CHECK(cc.last_rtt_ns() == rtt);
    // ACKs inside the window (not past this update's snd_nxt) change nothing, whatever they
    // measure.
    AckFeedback inside = window_ack(k, 1'000 * kUs);
    inside.now_ns += 500'000;
    inside.echoed_ts_ns += 500'000;
    cc.on_ack(inside);
    CHECK(cc.rtt_diff_ns() == Approx(rtt_diff).epsilon(1e-12).margin(1e-9));
    CHECK(cc.last_rtt_ns() == rtt);
    last = rtt;
    ++k;
  }
  CHECK(cc.counters().rtt_updates == std::size(rtts));
  CHECK(cc.counters().acks == 2 * std::size(rtts));
}

TEST_CASE("timely: below T_low the rate increases whatever the gradient") {
  TimelyConfig c;
  // alpha 1: rtt_diff is the last difference alone, so a rise below T_low has a positive gradient
  // (with 0.875 the earlier fall would still dominate it).
  c.alpha = 1.0;
  TimelyRateControl cc(c);
  const double delta = c.delta_mbps / 1000.0;
  cc.on_ack(window_ack(1, 600 * kUs));
  cc.on_ack(window_ack(2, 700 * kUs));  // above T_high: a cut, to make room
  double r = 100.0 * (1 - c.beta * (1 - 500.0 / 700.0));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  cc.on_ack(window_ack(3, 10 * kUs));
  r += delta;
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  // 10 -> 40 us: gradient 30 / 20 = 1.5, which would cut to max(0, 1 - 1.2) = the floor.
  const double gradient = (40.0 - 10.0) * kUs / c.min_rtt_ns;
  REQUIRE(gradient > 0);
  cc.on_ack(window_ack(4, 40 * kUs));
  r += delta;
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().increases == 2);
  CHECK(cc.counters().gradient_decreases == 0);
}

TEST_CASE("timely: above T_high the rate drops by beta (1 - T_high / rtt)") {
  const TimelyConfig c;
  TimelyRateControl cc(c);
  cc.on_ack(window_ack(1, 800 * kUs));
  // 800 -> 700 us: the gradient is negative, but 700 us is above T_high.
  const double rtt_diff = c.alpha * (-100.0 * kUs);
  REQUIRE(rtt_diff / c.min_rtt_ns <= 0);
  cc.on_ack(window_ack(2, 700 * kUs));
  double r = 100.0 * (1 - c.beta * (1 - static_cast<double>(c.t_high_ns) / (700.0 * kUs)));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().t_high_decreases == 1);
  // And again at 900 us.
  cc.on_ack(window_ack(3, 900 * kUs));
  r *= 1 - c.beta * (1 - static_cast<double>(c.t_high_ns) / (900.0 * kUs));
  CHECK(cc.rate_gbps() == Approx(r).epsilon(1e-12));
  CHECK(cc.counters().t_high_decreases == 2);
  CHECK(cc.inc_stage() == 0);
}

TEST_CASE("timely: after N increases in a row the increase is hai_delta") {
  const TimelyConfig c;
  TimelyRateControl cc(c);
  const double delta = c.delta_mbps / 1000.0, hai = c.hai_delta_mbps / 1000.0;
  // A cut first, to have room: 100 -> 110 us.
  cc.on_ack(window_ack(1, 100 * kUs));
  cc.on_ack(window_ack(2, 110 * kUs));
  double rate = 100.0 * std::max(0.0, 1 - c.beta * (c.alpha * 10.0 * kUs) / c.min_rtt_ns);
  uint32_t inc_stage = 0;
  REQUIRE(cc.rate_gbps() == Approx(rate).epsilon(1e-12));

  // Ten windows below T_low: the first N = 5 add delta, the next five hai_delta.
  for (uint64_t k = 3; k < 13; ++k) {
    cc.on_ack(window_ack(k, 40 * kUs));
    rate += inc_stage < c.hai_threshold ? delta : hai;
    ++inc_stage;
    CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
    CHECK(cc.inc_stage() == inc_stage);
  }
  CHECK(cc.counters().increases == 5);
  CHECK(cc.counters().hai_increases == 5);

  // A decrease ends HAI mode: the next increase is delta again.
  cc.on_ack(window_ack(13, 600 * kUs));
  rate *= 1 - c.beta * (1 - 500.0 / 600.0);
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.inc_stage() == 0);
  cc.on_ack(window_ack(14, 40 * kUs));
  rate += delta;
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.counters().increases == 6);
}

TEST_CASE("timely: the increase stops at the line rate") {
  TimelyConfig c;
  c.delta_mbps = 90'000;
  TimelyRateControl cc(c);
  cc.on_ack(window_ack(1, 100 * kUs));
  cc.on_ack(window_ack(2, 110 * kUs));  // cut
  const double cut = 100.0 * (1 - c.beta * c.alpha * 10.0 * kUs / c.min_rtt_ns);
  REQUIRE(cc.rate_gbps() == Approx(cut).epsilon(1e-12));
  cc.on_ack(window_ack(3, 40 * kUs));
  CHECK(cc.rate_gbps() == std::min(100.0, cut + 90.0));
  CHECK_FALSE(cc.limited());
}

TEST_CASE("timely: ACKs without a timestamp or from the future are ignored") {
  const TimelyConfig c;
  TimelyRateControl cc(c);
  cc.on_ack(window_ack(1, 100 * kUs));

  AckFeedback none = window_ack(2, 400 * kUs);
  none.echoed_ts_ns = 0;
  cc.on_ack(none);
  CHECK(cc.counters().no_timestamp == 1);
  CHECK(cc.counters().rtt_updates == 1);
  CHECK(cc.last_rtt_ns() == 100 * kUs);
  CHECK(cc.rate_gbps() == 100.0);

  AckFeedback future = window_ack(3, 100 * kUs);
  future.echoed_ts_ns = future.now_ns + 1;
  cc.on_ack(future);
  CHECK(cc.counters().negative_rtt == 1);
  CHECK(cc.counters().rtt_updates == 1);
  CHECK(cc.rate_gbps() == 100.0);

  // The next stamped ACK compares with the last sample taken (100 us), not the ignored ones.
  cc.on_ack(window_ack(4, 110 * kUs));
  const double rtt_diff = c.alpha * 10.0 * kUs;
  CHECK(cc.rtt_diff_ns() == Approx(rtt_diff).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(100.0 * (1 - c.beta * rtt_diff / c.min_rtt_ns)).epsilon(1e-12));
  CHECK(cc.counters().acks == 4);
}

TEST_CASE("timely: never below the min rate") {
  const TimelyConfig c;
  const double floor = c.min_rate_mbps / 1000.0;
  TimelyRateControl cc(c);
  // 100 -> 400 us: gradient 0.875 * 300 / 20 = 13.1, 1 - beta * 13.1 < 0: c = 0, so the floor.
  cc.on_ack(window_ack(1, 100 * kUs));
  cc.on_ack(window_ack(2, 400 * kUs));
  REQUIRE(1 - c.beta * (c.alpha * 300.0 * kUs / c.min_rtt_ns) < 0);
  CHECK(cc.rate_gbps() == std::max(floor, 100.0 * 0.0));
  CHECK(cc.at_min_rate());
  // Above T_high at the floor: stays there.
  cc.on_ack(window_ack(3, 900 * kUs));
  CHECK(cc.rate_gbps() == floor);
  CHECK(cc.at_min_rate());

  // Pacing at the floor: the last send + ceil(wire bits / rate).
  cc.on_sent(1'086, 3'000'500);
  CHECK(cc.next_send_ns() == 3'000'500 + static_cast<uint64_t>(std::ceil(1'086 * 8.0 / floor)));
}

TEST_CASE("timely: config errors name the key and the range") {
  auto error_of = [](auto edit) {
    TimelyConfig c;
    edit(c);
    return c.check();
  };
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  CHECK_THAT(error_of([](TimelyConfig& c) { c.line_rate_gbps = -1; }),
             StartsWith("line_rate_gbps: "));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.t_high_ns = 0; }),
             StartsWith("t_high_ns: ") && Contains("(> 0)"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.t_low_ns = 600'000; }),
             StartsWith("t_low_ns: ") && Contains("(0..500000)"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.alpha = 0; }),
             StartsWith("alpha: ") && Contains("(0, 1]"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.beta = 1.2; }),
             StartsWith("beta: ") && Contains("(0, 1]"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.min_rtt_ns = 0; }),
             StartsWith("min_rtt_ns: ") && Contains("(> 0)"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.delta_mbps = -5; }),
             StartsWith("delta_mbps: ") && Contains("(>= 0)"));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.hai_delta_mbps = INFINITY; }),
             StartsWith("hai_delta_mbps: "));
  CHECK_THAT(error_of([](TimelyConfig& c) { c.min_rate_mbps = 0; }),
             StartsWith("min_rate_mbps: ") && Contains("(0 < rate <= 100000)"));

  TimelyConfig bad;
  bad.beta = 0;
  try {
    TimelyRateControl cc(bad);
    FAIL("accepted beta = 0");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), StartsWith("timely: beta: ") && Contains("(0, 1]"));
  }
}
