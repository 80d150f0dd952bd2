#include "dataplane/rc_endpoint/dcqcn_rate_control.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spraynet;

namespace {

// Every expected value below is computed here from the algorithm's formulas, never by asking the
// class under test.
constexpr uint64_t kUs = 1'000;

double gain(uint32_t dce_tcp_g) {
  return (1024.0 - dce_tcp_g) / 1024.0;
}

bool close_rel(double a, double b, double rel = 1e-9) {
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// A config whose increases are all timer-driven (ns-3's rule).
DcqcnConfig timer_only(uint32_t threshold) {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);
  c.rpg_byte_reset = 0;
  c.rpg_threshold = threshold;
  return c;
}

}  // namespace

TEST_CASE("dcqcn: the first CNP halves the rate; a second inside the monitor period waits") {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);
  DcqcnRateControl rp(c);
  REQUIRE(rp.rate_gbps() == 100.0);
  REQUIRE(rp.target_gbps() == 100.0);
  REQUIRE_FALSE(rp.limited());
  REQUIRE(rp.next_timer_ns() == UINT64_MAX);

  const uint64_t t0 = 10 * kUs;
  rp.on_cnp(t0);
  // alpha = 1 on the first CNP: Rc (1 - 1/2).
  CHECK(rp.alpha() == 1.0);
  CHECK(rp.rate_gbps() == 50.0);
  CHECK(rp.target_gbps() == 100.0);
  CHECK(rp.limited());
  CHECK(rp.counters().rate_cuts == 1);
  CHECK(rp.next_timer_ns() == t0 + c.rpg_time_reset_ns);

  // 1 us later: the alpha timer fires first at t0 + 1 us (no CNP in that period), then the CNP
  // lands in the next period and its cut waits for t0 + 4 us.
  rp.on_cnp(t0 + 1 * kUs);
  CHECK(rp.rate_gbps() == 50.0);
  CHECK(rp.counters().rate_cuts == 1);
  CHECK(rp.counters().cuts_deferred == 1);
  CHECK(rp.next_timer_ns() == t0 + 4 * kUs);
  // More CNPs meanwhile merge with the waiting cut.
  rp.on_cnp(t0 + 3 * kUs);
  CHECK(rp.counters().cuts_deferred == 2);
  CHECK(rp.next_timer_ns() == t0 + 4 * kUs);

  rp.advance(t0 + 4 * kUs - 1);
  CHECK(rp.rate_gbps() == 50.0);
  rp.advance(t0 + 4 * kUs);
  const double g = gain(c.dce_tcp_g);
  double a = 1.0;
  a = (1 - g) * a;      // t0+1us: period without a CNP
  a = (1 - g) * a + g;  // t0+2us: the CNP at t0+1us
  a = (1 - g) * a;      // t0+3us
  a = (1 - g) * a + g;  // t0+4us: the CNP at t0+3us; alpha updates before the cut at that ns
  CHECK(rp.alpha() == Approx(a).epsilon(1e-12));
  CHECK(rp.counters().rate_cuts == 2);
  // clamp_tgt_rate 0 (ConnectX's default, ns-3's CLAMP_TARGET_RATE 0): no increase since the
  // first cut, so the target stays the rate before the burst of cuts.
  CHECK(rp.target_gbps() == 100.0);
  CHECK(rp.rate_gbps() == Approx(50.0 * (1 - a / 2)).epsilon(1e-12));
  CHECK(rp.counters().cnps == 3);
  // The cut restarted the increase timer.
  CHECK(rp.next_timer_ns() == t0 + 4 * kUs + c.rpg_time_reset_ns);
}

TEST_CASE("dcqcn: alpha decays by (1-g) per period without a CNP, in closed form") {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);
  c.dce_tcp_g = 1023;  // g = 1/1024, so 10^5 periods stay well above the smallest double
  const double g = gain(c.dce_tcp_g);
  for (uint64_t n : {1ull, 10ull, 1000ull, 100'000ull}) {
    DcqcnRateControl rp(c);
    rp.on_cnp(0);
    rp.advance(n * c.dce_tcp_rtt_ns - 1);
    CHECK(close_rel(rp.alpha(), std::pow(1 - g, static_cast<double>(n - 1))));
    rp.advance(n * c.dce_tcp_rtt_ns);
    INFO("n = " << n);
    CHECK(close_rel(rp.alpha(), std::pow(1 - g, static_cast<double>(n))));
  }

  // 10^6 periods in one advance.
  {
    DcqcnRateControl rp(c);
    rp.on_cnp(0);
    rp.advance(1'000'000 * c.dce_tcp_rtt_ns);
    CHECK(rp.alpha() == std::pow(1 - g, 1e6));  // underflows to 0 either way
  }
  // Idle time is O(1): 10^12 alpha periods (about 11.6 days of virtual time) once the rate has
  // recovered (the target stayed at the line rate, so halving the gap ends the recovery).
  {
    DcqcnRateControl rp(c);
    rp.on_cnp(0);
    rp.advance(100 * c.rpg_time_reset_ns);
    REQUIRE_FALSE(rp.limited());
    const auto start = std::chrono::steady_clock::now();
    rp.advance(1'000'000'000'000ull * c.dce_tcp_rtt_ns);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took < std::chrono::milliseconds(100));
    CHECK(rp.alpha() == 0.0);
  }
}

TEST_CASE("dcqcn: each fast-recovery stage halves the distance to the target") {
  DcqcnConfig c = timer_only(3);
  DcqcnRateControl rp(c);
  rp.on_cnp(0);
  double gap = 100.0 - 50.0;
  REQUIRE(rp.target_gbps() - rp.rate_gbps() == gap);
  for (int k = 1; k <= 3; ++k) {
    rp.advance(k * c.rpg_time_reset_ns - 1);
    CHECK(rp.counters().timer_events == static_cast<uint64_t>(k - 1));
    rp.advance(k * c.rpg_time_reset_ns);
    gap /= 2;
    CHECK(rp.target_gbps() == 100.0);
    CHECK(rp.target_gbps() - rp.rate_gbps() == Approx(gap).epsilon(1e-12));
  }
  CHECK(rp.counters().fast_recovery == 3);
  CHECK(rp.counters().additive_increase == 0);
}

TEST_CASE("dcqcn: after fast recovery the target grows by Rai, then Rhai") {
  SECTION("byte counter off (ns-3): F fast-recovery stages, one additive, then hyper") {
    DcqcnConfig c = timer_only(3);
    c.rate_to_set_on_first_cnp_mbps = 40'000;  // leave room below the line rate
    DcqcnRateControl rp(c);
    rp.on_cnp(0);
    double rt = 40.0, rc = 20.0;
    CHECK(rp.target_gbps() == rt);
    CHECK(rp.rate_gbps() == rc);
    const double rai = c.rpg_ai_rate_mbps / 1000, rhai = c.rpg_hai_rate_mbps / 1000;
    for (uint64_t k = 1; k <= 8; ++k) {
      rp.advance(k * c.rpg_time_reset_ns);
      if (k == 4) {
        rt += rai;
      } else if (k > 4) {
        rt += rhai;
      }
      rc = (rc + rt) / 2;
      INFO("timer event " << k);
      CHECK(rp.target_gbps() == Approx(rt).epsilon(1e-12));
      CHECK(rp.rate_gbps() == Approx(rc).epsilon(1e-12));
    }
    CHECK(rp.counters().fast_recovery == 3);
    CHECK(rp.counters().additive_increase == 1);
    CHECK(rp.counters().hyper_increase == 4);
  }
  SECTION("byte counter on but never reached: additive increase on every timer event") {
    DcqcnConfig c = dcqcn_connectx_defaults(100.0);
    c.rpg_threshold = 3;
    c.rpg_byte_reset = 1ull << 50;
    c.rate_to_set_on_first_cnp_mbps = 40'000;
    DcqcnRateControl rp(c);
    rp.on_cnp(0);
    double rt = 40.0, rc = 20.0;
    const double rai = c.rpg_ai_rate_mbps / 1000;
    for (uint64_t k = 1; k <= 8; ++k) {
      rp.advance(k * c.rpg_time_reset_ns);
      if (k > 3) rt += rai;  // max(T, B) > F but min(T, B) = B = 0 <= F
      rc = (rc + rt) / 2;
      CHECK(rp.target_gbps() == Approx(rt).epsilon(1e-12));
      CHECK(rp.rate_gbps() == Approx(rc).epsilon(1e-12));
    }
    CHECK(rp.counters().fast_recovery == 3);
    CHECK(rp.counters().additive_increase == 5);
    CHECK(rp.counters().hyper_increase == 0);
  }
}

TEST_CASE("dcqcn: the byte counter") {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);  // rpg_byte_reset 32767, F = 1
  c.rate_to_set_on_first_cnp_mbps = 40'000;
  DcqcnRateControl rp(c);

  // Not limited: bytes are not counted.
  for (int i = 0; i < 100; ++i) rp.on_sent(4096, 100 + i);
  CHECK(rp.counters().byte_counter_events == 0);

  const uint64_t t0 = 1 * kUs;
  rp.on_cnp(t0);
  double rt = 40.0, rc = 20.0;
  REQUIRE(rp.rate_gbps() == rc);
  // 7 * 4096 + 4095 = 32767 = rpg_byte_reset: exactly one event, on the last byte.
  uint64_t t = t0 + 1;
  for (int i = 0; i < 7; ++i) rp.on_sent(4096, t++);
  CHECK(rp.counters().byte_counter_events == 0);
  rp.on_sent(4095, t++);
  CHECK(rp.counters().byte_counter_events == 1);
  rc = (rc + rt) / 2;  // B = 1, T = 0: max(T, B) <= F, fast recovery
  CHECK(rp.rate_gbps() == rc);
  CHECK(rp.counters().fast_recovery == 1);
  rp.on_sent(4096, t++);
  CHECK(rp.counters().byte_counter_events == 1);

  // Two timer events: T = 1 (max(1, 1) <= 1: fast recovery), T = 2 (min(2, 1) = 1: additive).
  const double rai = c.rpg_ai_rate_mbps / 1000, rhai = c.rpg_hai_rate_mbps / 1000;
  rp.advance(t0 + c.rpg_time_reset_ns);
  rc = (rc + rt) / 2;
  rp.advance(t0 + 2 * c.rpg_time_reset_ns);
  rt += rai;
  rc = (rc + rt) / 2;
  CHECK(rp.counters().timer_events == 2);
  CHECK(rp.counters().fast_recovery == 2);
  CHECK(rp.counters().additive_increase == 1);
  CHECK(rp.target_gbps() == Approx(rt).epsilon(1e-12));

  // B = 2: min(T, B) = 2 > F: hyper increase. 4096 bytes are already counted since the event.
  t = t0 + 2 * c.rpg_time_reset_ns + 1;
  rp.on_sent(32'767 - 4096, t);
  CHECK(rp.counters().byte_counter_events == 2);
  CHECK(rp.counters().hyper_increase == 1);
  rt += rhai;
  rc = (rc + rt) / 2;
  CHECK(rp.target_gbps() == Approx(rt).epsilon(1e-12));
  CHECK(rp.rate_gbps() == Approx(rc).epsilon(1e-12));
}

TEST_CASE("dcqcn: never below the min rate, never above the line rate") {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);
  c.rpg_min_rate_mbps = 1'000;
  DcqcnRateControl rp(c);
  for (int i = 0; i < 200; ++i) {
    rp.on_cnp(i * c.rate_reduce_monitor_period_ns);
    CHECK(rp.rate_gbps() >= 1.0);
  }
  CHECK(rp.at_min_rate());
  CHECK(rp.rate_gbps() == 1.0);

  // Recovery from the floor: the rate climbs to exactly the line rate and stays there.
  uint64_t t = 200 * c.rate_reduce_monitor_period_ns;
  double last = rp.rate_gbps();
  for (int i = 0; i < 30'000 && rp.limited(); ++i) {
    t += c.rpg_time_reset_ns;
    rp.advance(t);
    CHECK(rp.rate_gbps() <= 100.0);
    CHECK(rp.target_gbps() <= 100.0);
    CHECK(rp.rate_gbps() >= last);
    last = rp.rate_gbps();
  }
  CHECK(rp.rate_gbps() == 100.0);
  CHECK(rp.target_gbps() == 100.0);
  CHECK_FALSE(rp.limited());
  CHECK(rp.next_timer_ns() == UINT64_MAX);
  CHECK(rp.next_send_ns() == 0);
  const uint64_t events = rp.counters().timer_events;
  rp.advance(t + 1'000'000'000);
  CHECK(rp.counters().timer_events == events);
  CHECK(rp.rate_gbps() == 100.0);

  // rpg_max_rate caps below the line rate: the QP starts there, paced.
  DcqcnConfig capped = dcqcn_connectx_defaults(100.0);
  capped.rpg_max_rate_mbps = 25'000;
  DcqcnRateControl cp(capped);
  CHECK(cp.rate_gbps() == 25.0);
  CHECK(cp.limited());
  cp.on_cnp(0);
  cp.advance(1'000'000'000);
  CHECK(cp.rate_gbps() == 25.0);
  CHECK(cp.next_timer_ns() == UINT64_MAX);
}

TEST_CASE("dcqcn: pacing at the current rate") {
  DcqcnConfig c = timer_only(1);
  DcqcnRateControl fresh(c);
  fresh.on_sent(4096, 500);
  CHECK(fresh.next_send_ns() == 0);  // not limited

  DcqcnRateControl rp(c);
  rp.on_cnp(0);
  REQUIRE(rp.rate_gbps() == 50.0);
  const uint64_t t = 1 * kUs;
  rp.on_sent(4096, t);
  const uint64_t at_50 = static_cast<uint64_t>(std::ceil(4096.0 * 8 / 50));  // 655.36 -> 656
  CHECK(at_50 == 656);
  CHECK(rp.next_send_ns() == t + at_50);

  // Sent just before the fast-recovery event: the increase to 75 shortens the wait.
  const uint64_t ts = c.rpg_time_reset_ns - 100;
  rp.on_sent(4096, ts);
  CHECK(rp.next_send_ns() == ts + at_50);
  rp.advance(c.rpg_time_reset_ns);
  REQUIRE(rp.rate_gbps() == 75.0);
  CHECK(rp.next_send_ns() == ts + static_cast<uint64_t>(std::ceil(4096.0 * 8 / 75)));
}

namespace {

// A fixed pseudo-random script of CNPs, sends and advances.
void drive(DcqcnRateControl& rp, uint64_t seed) {
  uint64_t x = seed, t = 0;
  for (int i = 0; i < 20'000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t += (x >> 33) % 3'000;
    const uint64_t what = (x >> 20) % 100;
    if (what < 3) {
      rp.on_cnp(t);
    } else if (what < 90) {
      rp.on_sent(64 + static_cast<uint32_t>((x >> 40) % 4096), t);
    } else {
      rp.advance(t);
    }
  }
}

}  // namespace

TEST_CASE("dcqcn: two instances fed the same calls agree exactly") {
  DcqcnRateControl a(dcqcn_connectx_defaults(100.0)), b(dcqcn_connectx_defaults(100.0));
  drive(a, 7);
  drive(b, 7);
  CHECK(a.rate_gbps() == b.rate_gbps());
  CHECK(a.target_gbps() == b.target_gbps());
  CHECK(a.alpha() == b.alpha());
  CHECK(a.rate_integral_gbit() == b.rate_integral_gbit());
  CHECK(a.next_send_ns() == b.next_send_ns());
  CHECK(a.next_timer_ns() == b.next_timer_ns());
  CHECK(a.last_advance_ns() == b.last_advance_ns());
  CHECK(a.counters().rate_cuts == b.counters().rate_cuts);
  CHECK(a.counters().byte_counter_events == b.counters().byte_counter_events);
  CHECK(a.counters().rate_cuts > 10);
  CHECK(a.counters().byte_counter_events > 10);
}

TEST_CASE("dcqcn: lazy advance equals many small steps") {
  for (const DcqcnConfig& c : {dcqcn_connectx_defaults(100.0), dcqcn_paper_defaults(40.0)}) {
    DcqcnRateControl lazy(c), stepped(c);
    const std::vector<uint64_t> cnps = {0, 2 * kUs, 10 * kUs, 60 * kUs, 61 * kUs, 400 * kUs};
    const uint64_t end = 5'000 * kUs;
    for (uint64_t t : cnps) lazy.on_cnp(t);
    lazy.advance(end);
    size_t next = 0;
    for (uint64_t t = 0; t <= end; t += 777) {
      while (next < cnps.size() && cnps[next] <= t) stepped.on_cnp(cnps[next++]);
      stepped.advance(t);
    }
    stepped.advance(end);
    CHECK(close_rel(lazy.rate_gbps(), stepped.rate_gbps()));
    CHECK(close_rel(lazy.target_gbps(), stepped.target_gbps()));
    CHECK(close_rel(lazy.alpha(), stepped.alpha()));
    CHECK(close_rel(lazy.rate_integral_gbit(), stepped.rate_integral_gbit()));
    CHECK(lazy.counters().rate_cuts == stepped.counters().rate_cuts);
    CHECK(lazy.counters().cuts_deferred == stepped.counters().cuts_deferred);
    CHECK(lazy.counters().timer_events == stepped.counters().timer_events);
    CHECK(lazy.counters().fast_recovery == stepped.counters().fast_recovery);
    CHECK(lazy.counters().additive_increase == stepped.counters().additive_increase);
    CHECK(lazy.counters().hyper_increase == stepped.counters().hyper_increase);
    CHECK(lazy.next_timer_ns() == stepped.next_timer_ns());
    CHECK(lazy.counters().timer_events > 0);
  }
}

TEST_CASE("dcqcn: the rate integral") {
  DcqcnConfig c = dcqcn_connectx_defaults(100.0);
  DcqcnRateControl rp(c);
  rp.advance(1'000'000);  // 1 ms at 100 Gbit/s
  CHECK(rp.rate_integral_gbit() == Approx(100.0 * 1e-3).epsilon(1e-12));
  CHECK(rp.last_advance_ns() == 1'000'000);
  rp.on_cnp(1'000'000);
  rp.advance(1'000'000 + 250 * kUs);  // 250 us at 50 Gbit/s, before the first increase
  CHECK(rp.rate_integral_gbit() == Approx(100.0 * 1e-3 + 50.0 * 250e-6).epsilon(1e-12));
  // Time never runs backwards.
  rp.advance(10);
  CHECK(rp.last_advance_ns() == 1'000'000 + 250 * kUs);
}

TEST_CASE("dcqcn: config errors name the key; the presets are valid") {
  CHECK(dcqcn_connectx_defaults(100.0).check() == "");
  CHECK(dcqcn_paper_defaults(40.0).check() == "");
  const DcqcnConfig p = dcqcn_paper_defaults(40.0);
  CHECK(gain(p.dce_tcp_g) == 1.0 / 256);
  CHECK(p.rpg_byte_reset == 10u * 1024 * 1024);
  CHECK(p.rpg_threshold == 5);

  auto error_of = [](auto edit) {
    DcqcnConfig c = dcqcn_connectx_defaults(100.0);
    edit(c);
    return c.check();
  };
  using Catch::Matchers::StartsWith;
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rpg_min_rate_mbps = 0; }),
             StartsWith("rpg_min_rate_mbps: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rpg_min_rate_mbps = 200'000; }),
             StartsWith("rpg_min_rate_mbps: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.dce_tcp_g = 1024; }), StartsWith("dce_tcp_g: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.initial_alpha_value = 0; }),
             StartsWith("initial_alpha_value: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rpg_min_dec_fac = 101; }),
             StartsWith("rpg_min_dec_fac: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rpg_threshold = 1001; }),
             StartsWith("rpg_threshold: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rpg_time_reset_ns = 0; }),
             StartsWith("rpg_time_reset_ns: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.rate_to_set_on_first_cnp_mbps = 100'001; }),
             StartsWith("rate_to_set_on_first_cnp_mbps: "));
  CHECK_THAT(error_of([](DcqcnConfig& c) { c.line_rate_gbps = 0; }),
             StartsWith("line_rate_gbps: "));

  DcqcnConfig bad = dcqcn_connectx_defaults(100.0);
  bad.rpg_ai_rate_mbps = -1;
  try {
    DcqcnRateControl rp(bad);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), StartsWith("dcqcn: rpg_ai_rate_mbps: "));
  }
}

TEST_CASE("dcqcn: clamp_tgt_rate says whether a cut without an increase since moves the target") {
  for (const uint32_t clamp : {0u, 1u}) {
    DcqcnConfig c = dcqcn_connectx_defaults(100.0);
    c.clamp_tgt_rate = clamp;
    c.rpg_byte_reset = 0;
    DcqcnRateControl rp(c);
    rp.on_cnp(1000);                    // 100 -> 50, Rt 100 either way (it was at line rate)
    CHECK(rp.target_gbps() == 100.0);
    rp.on_cnp(1000 + 10 * 1000);        // a second cut, no increase event in between
    CHECK(rp.target_gbps() == (clamp == 1 ? 50.0 : 100.0));
    const double before = rp.rate_gbps();
    rp.advance(1000 + 10 * 1000 + c.rpg_time_reset_ns);  // one fast-recovery step
    const double rt = rp.target_gbps();
    CHECK(rp.rate_gbps() == Approx((before + rt) / 2).epsilon(1e-12));
    const double rc = rp.rate_gbps();
    rp.on_cnp(1000 + 10 * 1000 + c.rpg_time_reset_ns + 5 * 1000);  // after an increase: clamps
    CHECK(rp.target_gbps() == rc);
  }
}
