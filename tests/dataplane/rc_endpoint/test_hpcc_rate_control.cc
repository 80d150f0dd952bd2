#include "dataplane/rc_endpoint/hpcc_rate_control.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spraynet;

namespace {

// Every expected value below is computed here from HPCC's formulas (ns-3 UpdateRateHp), never by
// asking the class under test.
constexpr double kLine = 100.0;   // Gbit/s
constexpr uint64_t kT = 10'000;   // T = 10 us
constexpr double kWin = 125'000;  // one BDP: 100 Gbit/s x 10 us / 8
constexpr double kAi = 0.04;      // W_AI: 40 Mbit/s
constexpr double kMinRate = 1.0;  // 1000 Mbit/s

HpccConfig config() {
  HpccConfig c;
  c.line_rate_gbps = kLine;
  c.base_rtt_ns = kT;
  c.w_init_bytes = 0;
  c.eta = 0.95;
  c.max_stage = 5;
  c.w_ai_mbps = 40;
  c.min_rate_mbps = 1000;
  c.fast_react = true;
  c.sample_feedback = false;
  c.var_win = true;
  return c;
}

IntHop record(double line_rate_gbps, uint64_t ts_ns, uint64_t tx_bytes, uint64_t qlen_bytes) {
  IntHop h;
  h.line_rate_gbps = line_rate_gbps;
  h.ts_ns = ts_ns;
  h.tx_bytes = tx_bytes;
  h.qlen_bytes = qlen_bytes;
  return h;
}

// The record the same egress writes tau ns later, having sent at tx_gbps meanwhile.
IntHop later(const IntHop& prev, uint64_t tau, double tx_gbps, uint64_t qlen_bytes) {
  return record(prev.line_rate_gbps, prev.ts_ns + tau,
                prev.tx_bytes + static_cast<uint64_t>(tx_gbps * static_cast<double>(tau) / 8.0),
                qlen_bytes);
}

AckFeedback ack(uint64_t now_ns, uint64_t ack_seq, uint64_t snd_nxt,
                const std::vector<IntHop>& hops) {
  AckFeedback a;
  a.now_ns = now_ns;
  a.ack_seq = ack_seq;
  a.snd_nxt = snd_nxt;
  a.hops = hops;
  return a;
}

// u of one hop from its previous record `a` and its new one `b`:
//   txRate / B + min(qlen, qlen') * maxRate / B / W_init.
double hop_u(const IntHop& a, const IntHop& b) {
  const double tau = static_cast<double>(b.ts_ns - a.ts_ns);
  const double tx_rate = static_cast<double>(b.tx_bytes - a.tx_bytes) * 8.0 / tau;
  const double qlen = static_cast<double>(std::min(a.qlen_bytes, b.qlen_bytes));
  return tx_rate / b.line_rate_gbps + qlen * kLine / b.line_rate_gbps / kWin;
}

// The EWMA with dt clamped to T.
double ewma(double u, double U, uint64_t dt, uint64_t t = kT) {
  dt = std::min(dt, t);
  return (u * static_cast<double>(t - dt) + U * static_cast<double>(dt)) / static_cast<double>(t);
}

double clamp_rate(double r) {
  return std::clamp(r, kMinRate, kLine);
}

uint64_t var_window(double rate) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::floor(kWin * rate / kLine)));
}

}  // namespace

TEST_CASE("hpcc: the first ACK stores the records; the next one measures u from one hop") {
  HpccConfig c = config();
  c.fast_react = false;
  HpccRateControl cc(c);
  REQUIRE(cc.rate_gbps() == kLine);
  REQUIRE(cc.w_init_bytes() == 125'000);
  REQUIRE(cc.window_bytes() == 125'000);
  REQUIRE_FALSE(cc.limited());

  const IntHop h0 = record(kLine, 1'000'000, 5'000'000, 20'000);
  cc.on_ack(ack(1'000'000, 1'000, 64'000, {h0}));
  CHECK(cc.rate_gbps() == kLine);
  CHECK(cc.u() == 1.0);
  CHECK(cc.last_update_seq() == 64'000);
  CHECK(cc.counters().full_updates == 0);

  // 80 Gbit/s over 5 us, queues of 20 KB then 30 KB: u = 80/100 + 20000 * 100/100 / 125000.
  const IntHop h1 = later(h0, 5'000, 80.0, 30'000);
  const double U = hop_u(h0, h1);
  CHECK(U == Approx(0.8 + 20'000.0 / kWin));
  cc.on_ack(ack(1'006'000, 64'001, 128'000, {h1}));
  const double u = ewma(1.0, U, 5'000);
  const double max_c = u / 0.95;
  REQUIRE(max_c >= 1);
  const double rate = clamp_rate(kLine / max_c + kAi);
  CHECK(cc.u() == Approx(u).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.cur_rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.inc_stage() == 0);
  CHECK(cc.last_update_seq() == 128'000);
  CHECK(cc.counters().full_updates == 1);
  CHECK(cc.counters().multiplicative == 1);
  CHECK(cc.counters().int_hops_seen == 2);
  CHECK(cc.window_bytes() == var_window(rate));
}

TEST_CASE("hpcc: with two hops the larger u is taken, with its own dt") {
  for (const bool second_is_bottleneck : {true, false}) {
    // Hop 0 at 100 Gbit/s, hop 1 at 25 Gbit/s; hop 0's records are 4 us apart, hop 1's 8 us.
    std::vector<IntHop> first = {record(kLine, 500'000, 1'000'000, 0),
                                 record(25.0, 500'100, 9'000'000, 10'000)};
    std::vector<IntHop> next;
    if (second_is_bottleneck) {
      // Hop 0: 80 of 100 Gbit/s, no queue: 0.8. Hop 1: 24 of 25 Gbit/s with a 10 KB queue:
      // 0.96 + 10000 * 100/25 / 125000 = 1.28.
      next = {later(first[0], 4'000, 80.0, 0), later(first[1], 8'000, 24.0, 12'000)};
    } else {
      // Hop 0 queues 60 KB: 0.8 + 0.48 = 1.28; hop 1 idles: 0.
      first[0].qlen_bytes = 60'000;
      next = {later(first[0], 4'000, 80.0, 60'000), later(first[1], 8'000, 0.0, 0)};
    }
    HpccRateControl cc(config());
    cc.on_ack(ack(510'000, 1'000, 50'000, first));
    const double u0 = hop_u(first[0], next[0]);
    const double u1 = hop_u(first[1], next[1]);
    const double U = std::max(u0, u1);
    const uint64_t dt = u1 > u0 ? next[1].ts_ns - first[1].ts_ns : next[0].ts_ns - first[0].ts_ns;
    INFO("bottleneck hop " << (second_is_bottleneck ? 1 : 0) << ": u0 " << u0 << " u1 " << u1);
    CHECK((second_is_bottleneck ? u1 > u0 : u0 > u1));
    CHECK(U == Approx(1.28));
    CHECK(dt == (second_is_bottleneck ? 8'000u : 4'000u));
    cc.on_ack(ack(520'000, 50'001, 90'000, next));
    const double u = ewma(1.0, U, dt);
    CHECK(cc.u() == Approx(u).epsilon(1e-12));
    CHECK(cc.rate_gbps() == Approx(clamp_rate(kLine / (u / 0.95) + kAi)).epsilon(1e-12));
    CHECK(cc.counters().int_hops_seen == 4);
  }
}

TEST_CASE("hpcc: one multiplicative step, then one additive step: rate and window") {
  HpccRateControl cc(config());
  IntHop h = record(kLine, 0, 0, 37'500);
  uint64_t seq = 10'000;
  cc.on_ack(ack(1'000, 1, seq, {h}));

  // u = 0.9 + 37500/125000 = 1.2 over 2T: dt clamps to T, so the EWMA is U itself.
  IntHop n = later(h, 2 * kT, 90.0, 37'500);
  double U = hop_u(h, n);
  double u = ewma(1.0, U, 2 * kT);
  CHECK(u == Approx(1.2));
  cc.on_ack(ack(30'000, seq + 1, seq + 10'000, {n}));
  seq += 10'000;
  const double rate1 = clamp_rate(kLine / (u / 0.95) + kAi);
  CHECK(cc.rate_gbps() == Approx(rate1).epsilon(1e-12));
  CHECK(cc.inc_stage() == 0);
  CHECK(cc.counters().multiplicative == 1);
  CHECK(cc.window_bytes() == var_window(rate1));
  CHECK(cc.limited());

  // u = 0.5 over T, no queue: max_c = 0.5/0.95 < 1 and incStage 0 < maxStage 5: additive.
  h = n;
  n = later(h, kT, 50.0, 0);
  U = hop_u(h, n);
  u = ewma(u, U, kT);
  CHECK(u == Approx(0.5));
  REQUIRE(u / 0.95 < 1);
  cc.on_ack(ack(40'000, seq + 1, seq + 10'000, {n}));
  const double rate2 = clamp_rate(rate1 + kAi);
  CHECK(cc.rate_gbps() == Approx(rate2).epsilon(1e-12));
  CHECK(cc.cur_rate_gbps() == Approx(rate2).epsilon(1e-12));
  CHECK(cc.inc_stage() == 1);
  CHECK(cc.counters().additive == 1);
  CHECK(cc.window_bytes() == var_window(rate2));
}

TEST_CASE("hpcc: incStage reaching maxStage forces a multiplicative step") {
  HpccConfig c = config();
  c.max_stage = 2;
  HpccRateControl cc(c);
  // A cut first, so that there is room to grow: u = 1.5 (a 62.5 KB queue at full rate).
  IntHop h = record(kLine, 0, 0, 62'500);
  uint64_t seq = 1'000, now = 0;
  cc.on_ack(ack(now, 1, seq, {h}));
  double u = 1.0, rate = kLine;
  auto step = [&](double tx_gbps, uint64_t qlen) {
    const IntHop n = later(h, kT, tx_gbps, qlen);
    u = ewma(u, hop_u(h, n), kT);
    h = n;
    now += kT;
    cc.on_ack(ack(now, seq + 1, seq + 1'000, {n}));
    seq += 1'000;
  };
  step(100.0, 62'500);
  rate = clamp_rate(rate / (u / 0.95) + kAi);
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.inc_stage() == 0);

  // Now 60% busy, no queue: max_c < 1. Two additive steps (stages 1, 2), then, with incStage
  // at maxStage, a multiplicative one: curRate / max_c + W_AI, which with max_c < 1 is a rise.
  for (uint32_t k = 1; k <= 2; ++k) {
    step(60.0, 0);
    REQUIRE(u / 0.95 < 1);
    rate = clamp_rate(rate + kAi);
    CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
    CHECK(cc.inc_stage() == k);
  }
  step(60.0, 0);
  REQUIRE(u / 0.95 < 1);
  rate = clamp_rate(rate / (u / 0.95) + kAi);
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.inc_stage() == 0);
  CHECK(cc.counters().additive == 2);
  CHECK(cc.counters().multiplicative == 2);

  // maxStage 0 (run.py's default): every step is multiplicative.
  HpccConfig c0 = config();
  c0.max_stage = 0;
  HpccRateControl mi(c0);
  IntHop a = record(kLine, 0, 0, 0);
  mi.on_ack(ack(0, 1, 1'000, {a}));
  const IntHop b = later(a, kT, 60.0, 0);
  mi.on_ack(ack(kT, 1'001, 2'000, {b}));
  const double u0 = ewma(1.0, hop_u(a, b), kT);
  CHECK(mi.rate_gbps() == Approx(clamp_rate(kLine / (u0 / 0.95) + kAi)).epsilon(1e-12));
  CHECK(mi.counters().multiplicative == 1);
  CHECK(mi.counters().additive == 0);
}

TEST_CASE("hpcc: the EWMA weighs U by dt / T, and dt is clamped to T") {
  HpccRateControl cc(config());
  IntHop h = record(kLine, 100, 0, 25'000);
  cc.on_ack(ack(100, 1, 1'000, {h}));
  // dt = T/4: u = (1 * 3T/4 + U T/4) / T.
  const IntHop n1 = later(h, kT / 4, 100.0, 25'000);
  const double U1 = hop_u(h, n1);  // 1 + 0.2
  cc.on_ack(ack(n1.ts_ns, 1'001, 2'000, {n1}));
  const double u1 = (1.0 * 0.75 * kT + U1 * 0.25 * kT) / kT;
  CHECK(cc.u() == Approx(u1).epsilon(1e-12));
  CHECK(cc.u() == Approx(ewma(1.0, U1, kT / 4)).epsilon(1e-12));
  // dt = 3T: clamped, so u is U2 alone.
  const IntHop n2 = later(n1, 3 * kT, 30.0, 0);
  const double U2 = hop_u(n1, n2);
  CHECK(U2 == Approx(0.3));
  cc.on_ack(ack(n2.ts_ns, 2'001, 3'000, {n2}));
  CHECK(cc.u() == Approx(U2).epsilon(1e-12));
  // Every hop at u = 0: ns-3 keeps dt 0 (it takes a hop only when u > U), so u stays.
  const IntHop n3 = later(n2, kT, 0.0, 0);
  cc.on_ack(ack(n3.ts_ns, 3'001, 4'000, {n3}));
  CHECK(cc.u() == Approx(U2).epsilon(1e-12));
}

TEST_CASE("hpcc: a fast react changes the rate but not curRate, incStage or lastUpdateSeq") {
  HpccRateControl cc(config());
  const IntHop h0 = record(kLine, 0, 0, 50'000);
  cc.on_ack(ack(0, 1'000, 64'000, {h0}));
  // An ACK of less than lastUpdateSeq (64000): fast react from curRate (100).
  const IntHop h1 = later(h0, 2'000, 100.0, 50'000);
  cc.on_ack(ack(2'000, 32'000, 70'000, {h1}));
  double u = ewma(1.0, hop_u(h0, h1), 2'000);
  const double fast_rate = clamp_rate(kLine / (u / 0.95) + kAi);
  CHECK(cc.rate_gbps() == Approx(fast_rate).epsilon(1e-12));
  CHECK(cc.rate_gbps() < kLine);
  CHECK(cc.cur_rate_gbps() == kLine);
  CHECK(cc.inc_stage() == 0);
  CHECK(cc.last_update_seq() == 64'000);
  CHECK(cc.u() == Approx(u).epsilon(1e-12));  // ns-3 commits the EWMA on a fast react too
  CHECK(cc.counters().fast_reacts == 1);
  CHECK(cc.counters().full_updates == 0);
  CHECK(cc.window_bytes() == var_window(fast_rate));

  // The full update one RTT on starts from curRate and from the records the fast react stored.
  const IntHop h2 = later(h1, 3'000, 90.0, 10'000);
  cc.on_ack(ack(5'000, 64'001, 80'000, {h2}));
  u = ewma(u, hop_u(h1, h2), 3'000);
  const double rate = clamp_rate(kLine / (u / 0.95) + kAi);
  CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.cur_rate_gbps() == Approx(rate).epsilon(1e-12));
  CHECK(cc.last_update_seq() == 80'000);

  // fast_react off: such an ACK changes nothing.
  HpccConfig c = config();
  c.fast_react = false;
  HpccRateControl slow(c);
  slow.on_ack(ack(0, 1'000, 64'000, {h0}));
  slow.on_ack(ack(2'000, 32'000, 70'000, {h1}));
  CHECK(slow.rate_gbps() == kLine);
  CHECK(slow.u() == 1.0);
  CHECK(slow.counters().fast_reacts == 0);
  CHECK(slow.counters().acks == 2);

  // sample_feedback: a fast react skips a hop with an empty queue (a full update does not).
  HpccConfig s = config();
  s.sample_feedback = true;
  HpccRateControl sampled(s);
  const IntHop e0 = record(kLine, 0, 0, 0);
  sampled.on_ack(ack(0, 1'000, 64'000, {e0}));
  const IntHop e1 = later(e0, 2'000, 99.0, 0);
  sampled.on_ack(ack(2'000, 32'000, 70'000, {e1}));
  CHECK(sampled.rate_gbps() == kLine);
  CHECK(sampled.u() == 1.0);
  sampled.on_ack(ack(3'000, 64'001, 70'000, {e1}));
  const double us = ewma(1.0, hop_u(e0, e1), 2'000);
  CHECK(sampled.u() == Approx(us).epsilon(1e-12));
}

TEST_CASE("hpcc: the rate stays within [minRate, maxRate]") {
  HpccConfig c = config();
  c.max_stage = 0;  // every step multiplicative, so that one idle RTT can reach the cap
  HpccRateControl cc(c);
  IntHop h = record(kLine, 0, 0, 25'000'000);
  cc.on_ack(ack(0, 1, 1'000, {h}));
  // A 25 MB queue: u = 1 + 200; 100 / (201 / 0.95) + 0.04 is below 1 Gbit/s.
  IntHop n = later(h, kT, 100.0, 25'000'000);
  const double u = ewma(1.0, hop_u(h, n), kT);
  REQUIRE(kLine / (u / 0.95) + kAi < kMinRate);
  cc.on_ack(ack(kT, 1'001, 2'000, {n}));
  CHECK(cc.rate_gbps() == kMinRate);
  CHECK(cc.at_min_rate());
  CHECK(cc.window_bytes() == var_window(kMinRate));
  // Nearly idle (0.1% busy): 1 / (0.001 / 0.95) + 0.04 = 950 Gbit/s, capped at the line rate.
  h = n;
  n = later(h, kT, 0.1, 0);
  const double u2 = ewma(u, hop_u(h, n), kT);
  REQUIRE(kMinRate / (u2 / 0.95) + kAi > kLine);
  cc.on_ack(ack(2 * kT, 2'001, 3'000, {n}));
  CHECK(cc.rate_gbps() == kLine);
  CHECK_FALSE(cc.limited());
  CHECK(cc.next_send_ns() == 0);
  CHECK(cc.window_bytes() == 125'000);
}

TEST_CASE("hpcc: the window: W_init, or W_init x rate / maxRate with var_win") {
  for (const bool var_win : {false, true}) {
    HpccConfig c = config();
    c.var_win = var_win;
    c.w_init_bytes = 100'000;
    HpccRateControl cc(c);
    CHECK(cc.window_bytes() == 100'000);
    const IntHop h = record(kLine, 0, 0, 50'000);
    cc.on_ack(ack(0, 1, 1'000, {h}));
    const IntHop n = later(h, kT, 100.0, 50'000);
    cc.on_ack(ack(kT, 1'001, 2'000, {n}));
    // The queue term divides by W_init = 100000 here.
    const double tx = static_cast<double>(n.tx_bytes - h.tx_bytes) * 8.0 / kT;
    const double U = tx / kLine + 50'000.0 * kLine / kLine / 100'000.0;
    const double rate = clamp_rate(kLine / (ewma(1.0, U, kT) / 0.95) + kAi);
    CHECK(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
    const auto expected =
        var_win ? static_cast<uint64_t>(std::floor(100'000.0 * cc.rate_gbps() / kLine)) : 100'000u;
    CHECK(cc.window_bytes() == expected);
  }
}

TEST_CASE("hpcc: a different hop count (path change) re-stores the records and skips the update") {
  HpccRateControl cc(config());
  const std::vector<IntHop> two = {record(kLine, 0, 0, 0), record(kLine, 10, 0, 0)};
  cc.on_ack(ack(0, 1, 1'000, two));
  const std::vector<IntHop> one = {record(kLine, 5'000, 62'500, 100'000)};
  cc.on_ack(ack(5'000, 1'001, 2'000, one));
  CHECK(cc.counters().path_changes == 1);
  CHECK(cc.rate_gbps() == kLine);
  CHECK(cc.u() == 1.0);
  CHECK(cc.last_update_seq() == 2'000);  // the full update's bookkeeping still runs
  // The next ACK on the new path compares with the record stored on the change.
  const std::vector<IntHop> next = {later(one[0], kT, 100.0, 100'000)};
  cc.on_ack(ack(15'000, 2'001, 3'000, next));
  const double u = ewma(1.0, hop_u(one[0], next[0]), kT);
  CHECK(cc.u() == Approx(u).epsilon(1e-12));
  CHECK(cc.rate_gbps() == Approx(clamp_rate(kLine / (u / 0.95) + kAi)).epsilon(1e-12));
  // No INT at all on a path with hops: a change too, never a read past the ACK's records.
  cc.on_ack(ack(16'000, 3'001, 4'000, {}));
  CHECK(cc.counters().path_changes == 2);
}

TEST_CASE("hpcc: a record not after the stored one is skipped and the stored one kept") {
  HpccRateControl cc(config());
  const IntHop h = record(kLine, 10'000, 1'000'000, 0);
  cc.on_ack(ack(0, 1, 1'000, {h}));
  // Same timestamp, older timestamp, fewer bytes, no line rate.
  for (const IntHop& bad : {record(kLine, 10'000, 1'000'100, 0), record(kLine, 9'000, 1'000'100, 0),
                            record(kLine, 11'000, 999'000, 0), record(0.0, 11'000, 1'000'100, 0)}) {
    cc.on_ack(ack(1, 1'001, 1'000, {bad}));
  }
  CHECK(cc.counters().stale_hops == 4);
  CHECK(cc.rate_gbps() == kLine);
  CHECK(cc.u() == 1.0);
  const IntHop n = later(h, kT, 100.0, 0);
  cc.on_ack(ack(2, 1'002, 1'000, {n}));
  CHECK(cc.u() == Approx(ewma(1.0, hop_u(h, n), kT)).epsilon(1e-12));
}

TEST_CASE("hpcc: pacing and the rate integral follow the rate") {
  HpccRateControl cc(config());
  cc.on_sent(1'000, 0);
  CHECK(cc.next_send_ns() == 0);  // at the line rate: not limited
  cc.advance(1'000'000);          // 1 ms at 100 Gbit/s
  CHECK(cc.rate_integral_gbit() == Approx(0.1).epsilon(1e-12));
  const IntHop h = record(kLine, 0, 0, 125'000);
  cc.on_ack(ack(1'000'000, 1, 1'000, {h}));
  const IntHop n = later(h, kT, 100.0, 125'000);  // u = 2: the rate roughly halves
  cc.on_ack(ack(1'000'000, 1'001, 2'000, {n}));
  const double rate = clamp_rate(kLine / (ewma(1.0, hop_u(h, n), kT) / 0.95) + kAi);
  REQUIRE(cc.rate_gbps() == Approx(rate).epsilon(1e-12));
  cc.on_sent(4'096, 1'000'500);
  CHECK(cc.next_send_ns() ==
        1'000'500 + static_cast<uint64_t>(std::ceil(4'096.0 * 8.0 / cc.rate_gbps())));
  cc.advance(2'000'000);
  CHECK(cc.rate_integral_gbit() == Approx(0.1 + rate * 1e-3).epsilon(1e-9));
  CHECK(cc.last_advance_ns() == 2'000'000);
}

TEST_CASE("hpcc: name, no CNP reaction, no timer, figures") {
  HpccRateControl cc(config());
  const RateControl& rc = cc;
  CHECK(std::string(rc.name()) == "hpcc");
  CHECK(rc.next_timer_ns() == UINT64_MAX);
  cc.on_cnp(100);
  CHECK(cc.rate_gbps() == kLine);
  std::map<std::string, double> f;
  for (const auto& [k, v] : rc.figures()) f[k] = v;
  for (const char* key :
       {"rate_gbps", "window_bytes", "u", "inc_stage", "acks", "full_updates", "fast_reacts",
        "multiplicative", "additive", "int_hops_seen", "path_changes"}) {
    INFO(key);
    CHECK(f.count(key) == 1);
  }
  CHECK(f["rate_gbps"] == kLine);
  CHECK(f["window_bytes"] == kWin);
  CHECK(f["u"] == 1.0);
}

TEST_CASE("hpcc: run.py's defaults; config errors name the key and the range") {
  const HpccConfig d;
  CHECK(d.check() == "");
  CHECK(d.eta == 0.95);
  CHECK(d.max_stage == 0);
  CHECK(d.fast_react);
  CHECK_FALSE(d.sample_feedback);
  CHECK(d.var_win);
  // mix/fat.txt: T = 12240 ns; W_init = one BDP at 100 Gbit/s = 153000 bytes (third.cc's maxBdp).
  CHECK(HpccRateControl(d).w_init_bytes() == 12'240 * 100 / 8);
  const HpccConfig p = hpcc_ns3_defaults(25.0, 8'000);
  CHECK(p.check() == "");
  CHECK(p.w_ai_mbps == Approx(10.0 * 25 / 25));
  CHECK(HpccRateControl(p).w_init_bytes() == 25 * 8'000 / 8);

  auto error_of = [](auto edit) {
    HpccConfig c = config();
    edit(c);
    return c.check();
  };
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {error_of([](HpccConfig& c) { c.eta = 0; }), "eta: "},
      {error_of([](HpccConfig& c) { c.eta = 1.5; }), "eta: "},
      {error_of([](HpccConfig& c) { c.eta = std::nan(""); }), "eta: "},
      {error_of([](HpccConfig& c) { c.base_rtt_ns = 0; }), "base_rtt_ns: "},
      {error_of([](HpccConfig& c) { c.line_rate_gbps = 0; }), "line_rate_gbps: "},
      {error_of([](HpccConfig& c) {
         c.line_rate_gbps = 1e-3, c.min_rate_mbps = 1e-3, c.w_ai_mbps = 0, c.base_rtt_ns = 10;
       }),
       "base_rtt_ns: "},
      {error_of([](HpccConfig& c) { c.w_ai_mbps = -1; }), "w_ai_mbps: "},
      {error_of([](HpccConfig& c) { c.w_ai_mbps = 100'001; }), "w_ai_mbps: "},
      {error_of([](HpccConfig& c) { c.min_rate_mbps = 0; }), "min_rate_mbps: "},
      {error_of([](HpccConfig& c) { c.min_rate_mbps = 100'001; }), "min_rate_mbps: "},
      {error_of([](HpccConfig& c) { c.w_init_bytes = (1ull << 53) + 1; }), "w_init_bytes: "},
  };
  for (const auto& [err, key] : bad) {
    INFO(err);
    CHECK_THAT(err, StartsWith(key));
    CHECK_THAT(err, Contains("("));  // the allowed range
  }

  HpccConfig c = config();
  c.eta = 2;
  try {
    HpccRateControl cc(c);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), StartsWith("hpcc: eta: "));
    CHECK_THAT(std::string(e.what()), Contains("(0 < eta <= 1)"));
  }
}
