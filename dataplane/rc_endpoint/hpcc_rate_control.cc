#include "dataplane/rc_endpoint/hpcc_rate_control.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace spraynet {

namespace {

// W_init in bytes: the configured window, or one BDP (line rate x T), as third.cc's maxBdp.
double window_of(const HpccConfig& c) {
  if (c.w_init_bytes != 0) return static_cast<double>(c.w_init_bytes);
  return std::floor(c.line_rate_gbps * static_cast<double>(c.base_rtt_ns) / 8.0);
}

const HpccConfig& checked(const HpccConfig& c) {
  const std::string err = c.check();
  if (!err.empty()) throw std::invalid_argument("hpcc: " + err);
  return c;
}

}  // namespace

std::string HpccConfig::check() const {
  // Comparisons are written so that NaN fails them too.
  if (!(line_rate_gbps > 0) || !std::isfinite(line_rate_gbps))
    return "line_rate_gbps: must be a finite rate above 0 (> 0)";
  if (base_rtt_ns == 0) return "base_rtt_ns: T must be above 0 (> 0)";
  // The window divides u's queue term: it must be at least a byte, and a double must hold it.
  if (w_init_bytes == 0 && !(window_of(*this) >= 1))
    return "base_rtt_ns: line rate x T must be at least one byte for the BDP window (>= " +
           format_number(std::ceil(8.0 / line_rate_gbps)) + ")";
  if (w_init_bytes > (1ull << 53)) return "w_init_bytes: 0 (one BDP) or a window (0..2^53)";
  if (!(eta > 0 && eta <= 1)) return "eta: the target utilisation (0 < eta <= 1)";
  const double max_mbps = line_rate_gbps * 1000.0;
  if (!(w_ai_mbps >= 0 && w_ai_mbps <= max_mbps))
    return "w_ai_mbps: the additive increase, at most the line rate (0.." +
           format_number(max_mbps) + ")";
  if (!(min_rate_mbps > 0 && min_rate_mbps <= max_mbps))
    return "min_rate_mbps: must be above 0 and at most the line rate (0 < rate <= " +
           format_number(max_mbps) + ")";
  return "";
}

HpccConfig hpcc_ns3_defaults(double line_rate_gbps, uint64_t base_rtt_ns) {
  HpccConfig c;
  c.line_rate_gbps = line_rate_gbps;
  c.base_rtt_ns = base_rtt_ns;
  c.w_init_bytes = 0;                          // one BDP (third.cc: has_win ? maxBdp)
  c.w_ai_mbps = 10.0 * line_rate_gbps / 25.0;  // run.py: ai = 10 * bw / 25 (Mb/s)
  return c;
}

HpccRateControl::HpccRateControl(const HpccConfig& c)
    : PacedRateControl(c.line_rate_gbps), cfg_(checked(c)) {
  max_rate_ = c.line_rate_gbps;
  min_rate_ = c.min_rate_mbps / 1000.0;
  w_ai_ = c.w_ai_mbps / 1000.0;
  win_ = static_cast<uint64_t>(window_of(c));
  cur_rate_ = max_rate_;
  hops_.reserve(8);
}

void HpccRateControl::on_ack(const AckFeedback& ack) {
  pacer_.advance(ack.now_ns);
  ++counters_.acks;
  counters_.int_hops_seen += ack.hops.size();
  if (ack.ack_seq > last_update_seq_) {
    update(ack, false);  // a full RTT of feedback since the last full update
  } else if (cfg_.fast_react) {
    update(ack, true);
  }
}

void HpccRateControl::update(const AckFeedback& ack, bool fast_react) {
  if (last_update_seq_ == 0) {
    // The first RTT: nothing to compare with yet. (ns-3 takes this branch from a fast react too,
    // which can only be an ACK of sequence 0.)
    last_update_seq_ = ack.snd_nxt;
    hops_.assign(ack.hops.begin(), ack.hops.end());
    return;
  }
  if (ack.hops.size() != hops_.size()) {
    // Another path (ns-3 keeps a fixed array and would compare against hops it never stored):
    // start again from these records.
    ++counters_.path_changes;
    hops_.assign(ack.hops.begin(), ack.hops.end());
  } else {
    double U = 0;
    uint64_t dt = 0;
    bool updated_any = false;
    const auto win = static_cast<double>(win_);
    for (size_t i = 0; i < hops_.size(); ++i) {
      const IntHop& h = ack.hops[i];
      IntHop& last = hops_[i];
      if (cfg_.sample_feedback && fast_react && h.qlen_bytes == 0) continue;
      if (h.ts_ns <= last.ts_ns || h.tx_bytes < last.tx_bytes || !(h.line_rate_gbps > 0)) {
        ++counters_.stale_hops;
        continue;
      }
      updated_any = true;
      const uint64_t tau = h.ts_ns - last.ts_ns;
      // Gbit/s are bits per ns.
      const double tx_rate =
          static_cast<double>(h.tx_bytes - last.tx_bytes) * 8.0 / static_cast<double>(tau);
      const double qlen = static_cast<double>(std::min(h.qlen_bytes, last.qlen_bytes));
      const double u = tx_rate / h.line_rate_gbps + qlen * max_rate_ / h.line_rate_gbps / win;
      // Strictly greater, as ns-3: with every u 0, dt stays 0 and the EWMA does not move.
      if (u > U) {
        U = u;
        dt = tau;
      }
      last = h;
    }
    if (updated_any) {
      const uint64_t t = cfg_.base_rtt_ns;
      dt = std::min(dt, t);
      u_ =
          (u_ * static_cast<double>(t - dt) + U * static_cast<double>(dt)) / static_cast<double>(t);
      const double max_c = u_ / cfg_.eta;
      double rate = 0;
      uint32_t stage = 0;
      if (max_c >= 1 || inc_stage_ >= cfg_.max_stage) {
        rate = cur_rate_ / max_c + w_ai_;  // max_c 0 gives +inf, clamped to maxRate below
        stage = 0;
        ++counters_.multiplicative;
      } else {
        rate = cur_rate_ + w_ai_;
        stage = inc_stage_ + 1;
        ++counters_.additive;
      }
      rate = std::clamp(rate, min_rate_, max_rate_);
      pacer_.set_rate(rate);  // ns-3 ChangeRate: the QP sends at it from now on
      if (!fast_react) {
        cur_rate_ = rate;
        inc_stage_ = stage;
      }
    }
  }
  if (fast_react) {
    ++counters_.fast_reacts;
  } else {
    ++counters_.full_updates;
    if (ack.snd_nxt > last_update_seq_) last_update_seq_ = ack.snd_nxt;
  }
}

uint64_t HpccRateControl::window_bytes() const {
  if (!cfg_.var_win) return win_;
  const double w = std::floor(static_cast<double>(win_) * pacer_.rate_gbps() / max_rate_);
  return std::max<uint64_t>(1, static_cast<uint64_t>(w));  // ns-3: "must > 0"
}

std::vector<RateControlFigure> HpccRateControl::figures() const {
  return {{"rate_gbps", pacer_.rate_gbps()},
          {"cur_rate_gbps", cur_rate_},
          {"window_bytes", static_cast<double>(window_bytes())},
          {"u", u_},
          {"inc_stage", static_cast<double>(inc_stage_)},
          {"acks", static_cast<double>(counters_.acks)},
          {"full_updates", static_cast<double>(counters_.full_updates)},
          {"fast_reacts", static_cast<double>(counters_.fast_reacts)},
          {"multiplicative", static_cast<double>(counters_.multiplicative)},
          {"additive", static_cast<double>(counters_.additive)},
          {"int_hops_seen", static_cast<double>(counters_.int_hops_seen)},
          {"path_changes", static_cast<double>(counters_.path_changes)},
          {"stale_hops", static_cast<double>(counters_.stale_hops)}};
}

}  // namespace spraynet
