#include "dataplane/rc_endpoint/timely_rate_control.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace spraynet {

namespace {

bool finite_rate(double mbps) {
  return mbps >= 0 && std::isfinite(mbps);
}

}  // namespace

std::string TimelyConfig::check() const {
  // Comparisons are written so that NaN fails them too.
  if (!(line_rate_gbps > 0) || !std::isfinite(line_rate_gbps))
    return "line_rate_gbps: must be a finite rate above 0 (> 0)";
  if (t_high_ns == 0) return "t_high_ns: must be above 0 (> 0)";
  // T_low is tested first: with T_low above T_high an RTT between them would count as both no
  // queue and too much queue.
  if (t_low_ns > t_high_ns)
    return "t_low_ns: must not exceed t_high_ns (0.." + std::to_string(t_high_ns) + ")";
  if (!(alpha > 0 && alpha <= 1)) return "alpha: the EWMA weight must be in (0, 1]";
  // beta above 1 would turn a decrease above T_high negative (ns-3 clamps only the gradient's).
  if (!(beta > 0 && beta <= 1)) return "beta: the decrease factor must be in (0, 1]";
  if (min_rtt_ns == 0) return "min_rtt_ns: the gradient's divisor must be above 0 (> 0)";
  if (!finite_rate(delta_mbps)) return "delta_mbps: must be a finite rate (>= 0)";
  if (!finite_rate(hai_delta_mbps)) return "hai_delta_mbps: must be a finite rate (>= 0)";
  const double line_mbps = line_rate_gbps * 1000.0;
  if (!(min_rate_mbps > 0 && min_rate_mbps <= line_mbps))
    return "min_rate_mbps: must be above 0 and at most the line rate (0 < rate <= " +
           format_number(line_mbps) + ")";
  return "";
}

TimelyConfig timely_ns3_defaults(double line_rate_gbps) {
  TimelyConfig c;
  c.line_rate_gbps = line_rate_gbps;
  // run.py:133-134 (bw in Gbit/s, rates in Mb/s): ai = 10 * bw / 10, hai = 50 * bw / 10.
  c.delta_mbps = 10 * line_rate_gbps / 10;
  c.hai_delta_mbps = 50 * line_rate_gbps / 10;
  return c;
}

TimelyRateControl::TimelyRateControl(const TimelyConfig& c)
    : PacedRateControl(c.line_rate_gbps), cfg_(c) {
  const std::string err = c.check();
  if (!err.empty()) throw std::invalid_argument("timely: " + err);
  min_rate_ = c.min_rate_mbps / 1000.0;
  delta_ = c.delta_mbps / 1000.0;
  hai_delta_ = c.hai_delta_mbps / 1000.0;
}

void TimelyRateControl::set_rate(double rate_gbps) {
  if (rate_gbps != pacer_.rate_gbps()) pacer_.set_rate(rate_gbps);
}

void TimelyRateControl::on_ack(const AckFeedback& ack) {
  pacer_.advance(ack.now_ns);
  ++counters_.acks;
  if (ack.echoed_ts_ns == 0) {
    // No send time to measure from (not a TIMELY-stamped packet).
    ++counters_.no_timestamp;
    return;
  }
  const uint64_t now = pacer_.last_ns();
  if (ack.echoed_ts_ns > now) {
    // Sent after it was acknowledged: a clock mix-up upstream, not an RTT. ns-3's unsigned
    // subtraction would turn it into an RTT of centuries and a cut above T_high.
    ++counters_.negative_rtt;
    return;
  }
  // HandleAckTimely: a full update once the ACKs pass the window of the last one; the ACKs in
  // between would go to FastReactTimely, which does nothing.
  if (ack.ack_seq > last_update_seq_)
    update_rate(now - ack.echoed_ts_ns, std::max(ack.snd_nxt, ack.ack_seq));
}

// UpdateRateTimely with us = false (the full update; the fast-react path is empty in ns-3).
void TimelyRateControl::update_rate(uint64_t rtt, uint64_t snd_nxt) {
  ++counters_.rtt_updates;
  if (has_rtt_) {
    const double new_rtt_diff =
        static_cast<double>(static_cast<int64_t>(rtt) - static_cast<int64_t>(last_rtt_));
    const double rtt_diff = (1.0 - cfg_.alpha) * rtt_diff_ + cfg_.alpha * new_rtt_diff;
    const double gradient = rtt_diff / static_cast<double>(cfg_.min_rtt_ns);
    const double rate = pacer_.rate_gbps();
    bool inc = false;
    double c = 0;
    if (rtt < cfg_.t_low_ns) {
      inc = true;
    } else if (rtt > cfg_.t_high_ns) {
      c = 1.0 - cfg_.beta * (1.0 - static_cast<double>(cfg_.t_high_ns) / static_cast<double>(rtt));
      ++counters_.t_high_decreases;
    } else if (gradient <= 0) {
      inc = true;
    } else {
      c = std::max(0.0, 1.0 - cfg_.beta * gradient);
      ++counters_.gradient_decreases;
    }
    if (inc) {
      const bool hai = inc_stage_ >= cfg_.hai_threshold;
      if (rate < cfg_.line_rate_gbps) {
        set_rate(std::min(cfg_.line_rate_gbps, rate + (hai ? hai_delta_ : delta_)));
        ++(hai ? counters_.hai_increases : counters_.increases);
      }
      // As ns-3's m_incStage, every increase decision counts, one the cap swallowed too
      // (saturating: a QP held at the line rate for 2^32 windows stays in HAI mode).
      if (inc_stage_ < UINT32_MAX) ++inc_stage_;
    } else {
      set_rate(std::max(min_rate_, rate * c));
      inc_stage_ = 0;
    }
    rtt_diff_ = rtt_diff;
  }
  // The next update waits for the ACK of what is sent by now: one update per RTT.
  has_rtt_ = true;
  last_update_seq_ = snd_nxt;
  last_rtt_ = rtt;
}

std::vector<RateControlFigure> TimelyRateControl::figures() const {
  return {
      {"rate_gbps", pacer_.rate_gbps()},
      {"rtt_diff_ns", rtt_diff_},
      {"last_rtt_ns", static_cast<double>(last_rtt_)},
      {"inc_stage", static_cast<double>(inc_stage_)},
      {"acks", static_cast<double>(counters_.acks)},
      {"no_timestamp", static_cast<double>(counters_.no_timestamp)},
      {"negative_rtt", static_cast<double>(counters_.negative_rtt)},
      {"rtt_updates", static_cast<double>(counters_.rtt_updates)},
      {"increases", static_cast<double>(counters_.increases)},
      {"hai_increases", static_cast<double>(counters_.hai_increases)},
      {"gradient_decreases", static_cast<double>(counters_.gradient_decreases)},
      {"t_high_decreases", static_cast<double>(counters_.t_high_decreases)},
  };
}

}  // namespace spraynet
