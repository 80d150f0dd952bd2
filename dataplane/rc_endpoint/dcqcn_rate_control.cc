#include "dataplane/rc_endpoint/dcqcn_rate_control.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace spraynet {

namespace {

// Past this many fast-recovery stages Rc has met Rt to the last bit of a double (each stage halves
// the gap), so a larger F would only postpone additive increase by whole timer periods.
constexpr uint32_t kMaxRpgThreshold = 1000;

// (Rc + Rt) / 2 in doubles can stall one ulp below Rt (round-half-to-even), which would keep the
// rate-increase timer running forever at a rate that is the target in all but the last bit.
constexpr double kSnapRelative = 1e-12;

// Timers far in the future saturate instead of wrapping round to the past.
uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

// The cap in Gbit/s: rpg_max_rate when set and below the line rate.
double max_rate_gbps(const DcqcnConfig& c) {
  const double max_rate = c.rpg_max_rate_mbps / 1000.0;
  return c.rpg_max_rate_mbps > 0 && max_rate < c.line_rate_gbps ? max_rate : c.line_rate_gbps;
}

}  // namespace

std::string DcqcnConfig::check() const {
  // Comparisons are written so that NaN fails them too.
  if (!(line_rate_gbps > 0) || !std::isfinite(line_rate_gbps))
    return "line_rate_gbps: must be a finite rate above 0 (> 0)";
  if (dce_tcp_g > 1023) return "dce_tcp_g: out of range (0..1023)";
  if (dce_tcp_rtt_ns == 0) return "dce_tcp_rtt_ns: the alpha period must be above 0 (> 0)";
  if (initial_alpha_value < 1 || initial_alpha_value > 1024)
    return "initial_alpha_value: out of range (1..1024)";
  if (rate_reduce_monitor_period_ns == 0)
    return "rate_reduce_monitor_period_ns: must be above 0 (> 0)";
  if (rpg_min_dec_fac > 100) return "rpg_min_dec_fac: a percentage (0..100)";
  if (!(rpg_max_rate_mbps >= 0) || !std::isfinite(rpg_max_rate_mbps))
    return "rpg_max_rate_mbps: must be 0 (line rate) or a rate above 0 (>= 0)";
  const double max_mbps = max_rate_gbps(*this) * 1000.0;
  if (!(rpg_min_rate_mbps > 0 && rpg_min_rate_mbps <= max_mbps))
    return "rpg_min_rate_mbps: must be above 0 and at most the max rate (0 < rate <= " +
           num(max_mbps) + ")";
  if (!(rate_to_set_on_first_cnp_mbps >= 0 && rate_to_set_on_first_cnp_mbps <= max_mbps))
    return "rate_to_set_on_first_cnp_mbps: must be 0 (off) or at most the max rate (0.." +
           num(max_mbps) + ")";
  if (rpg_time_reset_ns == 0) return "rpg_time_reset_ns: must be above 0 (> 0)";
  if (rpg_threshold > kMaxRpgThreshold)
    return "rpg_threshold: more fast-recovery stages than a double can tell apart (0..1000)";
  if (!(rpg_ai_rate_mbps >= 0) || !std::isfinite(rpg_ai_rate_mbps))
    return "rpg_ai_rate_mbps: must be a finite rate (>= 0)";
  if (!(rpg_hai_rate_mbps >= 0) || !std::isfinite(rpg_hai_rate_mbps))
    return "rpg_hai_rate_mbps: must be a finite rate (>= 0)";
  if (clamp_tgt_rate > 1) return "clamp_tgt_rate: must be 0 or 1";
  if (clamp_tgt_rate_after_time_inc > 1) return "clamp_tgt_rate_after_time_inc: must be 0 or 1";
  return "";
}

DcqcnConfig dcqcn_connectx_defaults(double line_rate_gbps) {
  // The struct's defaults are ConnectX's (NVIDIA "DCQCN CC Parameters"), except
  // initial_alpha_value: 1024 where ConnectX ships 1023 (see the struct).
  DcqcnConfig c;
  c.line_rate_gbps = line_rate_gbps;
  return c;
}

DcqcnConfig dcqcn_paper_defaults(double line_rate_gbps) {
  // Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015.
  DcqcnConfig c;
  c.line_rate_gbps = line_rate_gbps;
  c.dce_tcp_g = 1020;                        // g = 1/256 = (1024 - 1020) / 1024
  c.dce_tcp_rtt_ns = 55'000;                 // alpha updated every K = 55 us
  c.initial_alpha_value = 1024;              // alpha starts at 1
  c.rate_reduce_monitor_period_ns = 50'000;  // the NP sends at most one CNP per N = 50 us, so
                                             // the RP cuts at most once per 50 us
  c.rpg_time_reset_ns = 55'000;              // rate-increase timer T = 55 us
  c.rpg_byte_reset = 10ull * 1024 * 1024;    // byte counter B = 10 MB
  c.rpg_threshold = 5;                       // F = 5
  c.rpg_ai_rate_mbps = 40;                   // R_AI = 40 Mbit/s
  // R_HAI = 100 Mbit/s: the value of the paper's implementation section, which later simulators
  // (ns-3 HPCC's DCQCN runs among them) use as well.
  c.rpg_hai_rate_mbps = 100;
  // rpg_min_dec_fac 50: the paper's cut Rc (1 - alpha/2) with alpha <= 1 never goes below half.
  // rpg_min_rate: the paper sets none; ConnectX's 1 Mbit/s floor stays.
  return c;
}

DcqcnConfig dcqcn_fabric_defaults(double line_rate_gbps) {
  DcqcnConfig c = dcqcn_connectx_defaults(line_rate_gbps);
  // ConnectX's 4 us lets a burst of CNPs cut a QP tens of times while the queue that marked it
  // drains (the 2-flow and incast runs collapse and idle the link): at most one cut per 50 us,
  // the paper's CNP interval N.
  c.rate_reduce_monitor_period_ns = 50'000;
  // alpha every 4 us with the paper's g = 1/256 (ns-3 HPCC's EWMA_GAIN 0.00390625): it follows
  // the CNPs of the 50 us cut period instead of decaying to nothing between two cuts.
  c.dce_tcp_rtt_ns = 4'000;
  c.dce_tcp_g = 1020;
  // Recovery by the timer alone, as ns-3 HPCC's DCQCN: ConnectX's 32767-byte counter fires
  // every 2.6 us at 100 Gbit/s and brings the rate back before the queue has drained; every
  // 100 us, with F = 7 fast-recovery stages (the paper's 5 left one 16:1 incast run of eight
  // pausing only 3.3x less than without congestion control; 7 keeps every one above 5x).
  c.rpg_time_reset_ns = 100'000;
  c.rpg_byte_reset = 0;
  c.rpg_threshold = 7;
  return c;
}

DcqcnRateControl::DcqcnRateControl(const DcqcnConfig& c) : cfg_(c) {
  const std::string err = c.check();
  if (!err.empty()) throw std::invalid_argument("dcqcn: " + err);
  line_rate_ = c.line_rate_gbps;
  max_rate_ = max_rate_gbps(c);
  min_rate_ = c.rpg_min_rate_mbps / 1000.0;
  g_ = (1024.0 - c.dce_tcp_g) / 1024.0;
  ai_rate_ = c.rpg_ai_rate_mbps / 1000.0;
  hai_rate_ = c.rpg_hai_rate_mbps / 1000.0;
  rc_ = rt_ = max_rate_;
}

void DcqcnRateControl::integrate_to(uint64_t t_ns) {
  // The rate is constant since segment_start_ns_: its integral is added when the rate changes
  // (commit_rate), so it does not depend on how often the caller advanced the QP.
  last_advance_ns_ = t_ns;
}

void DcqcnRateControl::commit_rate() {
  committed_gbit_ += rc_ * static_cast<double>(last_advance_ns_ - segment_start_ns_) / 1e9;
  segment_start_ns_ = last_advance_ns_;
}

double DcqcnRateControl::rate_integral_gbit() const {
  return committed_gbit_ + rc_ * static_cast<double>(last_advance_ns_ - segment_start_ns_) / 1e9;
}

// The alpha timer fires at alpha_next_ns_ (<= limit_ns); then every period up to limit_ns (the
// next other timer or the end of the advance) fires with no CNP in between, so those are done in
// one step, alpha *= (1-g)^n, and a second of idle time costs O(1), not 10^6 updates.
void DcqcnRateControl::update_alpha(uint64_t limit_ns) {
  alpha_ = (1.0 - g_) * alpha_ + (cnp_in_period_ ? g_ : 0.0);
  cnp_in_period_ = false;
  const uint64_t period = cfg_.dce_tcp_rtt_ns;
  alpha_next_ns_ = sat_add(alpha_next_ns_, period);
  if (alpha_next_ns_ <= limit_ns && alpha_next_ns_ != UINT64_MAX) {
    const uint64_t n = (limit_ns - alpha_next_ns_) / period + 1;
    alpha_ *= std::pow(1.0 - g_, static_cast<double>(n));
    alpha_next_ns_ = sat_add(alpha_next_ns_, (n - 1) * period);
    alpha_next_ns_ = sat_add(alpha_next_ns_, period);
  }
}

// CheckRateDecreaseMlx: the target remembers the rate before the cut, and the increase state
// restarts from its first stage.
void DcqcnRateControl::cut(uint64_t t_ns) {
  // ConnectX: the target follows the rate when clamp_tgt_rate is set, or when the rate was
  // raised since the last cut by the byte counter, or (clamp_tgt_rate_after_time_inc, default
  // 1) by the timer too. ns-3 has no byte counter: it clamps after a timer increase
  // (m_rpTimeStage != 0), the same rule.
  const bool raised = byte_stage_ > 0 || (cfg_.clamp_tgt_rate_after_time_inc != 0 && time_stage_ > 0);
  if (cfg_.clamp_tgt_rate != 0 || raised) rt_ = rc_;
  const double factor = std::max(1.0 - alpha_ / 2.0, cfg_.rpg_min_dec_fac / 100.0);
  commit_rate();
  rc_ = std::max(min_rate_, rc_ * factor);
  has_cut_ = true;
  last_cut_ns_ = t_ns;
  time_stage_ = 0;
  byte_stage_ = 0;
  byte_count_ = 0;
  increase_next_ns_ = recovering() ? sat_add(t_ns, cfg_.rpg_time_reset_ns) : UINT64_MAX;
  ++counters_.rate_cuts;
}

// RateIncEventMlx, after the stage counter that fired (T or B) was incremented.
void DcqcnRateControl::increase_event() {
  const uint64_t f = cfg_.rpg_threshold;
  enum { kFast, kAdditive, kHyper } phase;
  if (cfg_.rpg_byte_reset > 0) {
    // The paper: fast recovery until both counters pass F, hyper once both have.
    if (std::max(time_stage_, byte_stage_) <= f) {
      phase = kFast;
    } else if (std::min(time_stage_, byte_stage_) > f) {
      phase = kHyper;
    } else {
      phase = kAdditive;
    }
  } else {
    // ns-3 (timer only): F fast-recovery stages, one additive increase, then hyper increase.
    if (time_stage_ <= f) {
      phase = kFast;
    } else if (time_stage_ == f + 1) {
      phase = kAdditive;
    } else {
      phase = kHyper;
    }
  }
  switch (phase) {
    case kFast:
      ++counters_.fast_recovery;
      break;
    case kAdditive:
      rt_ = std::min(max_rate_, rt_ + ai_rate_);
      ++counters_.additive_increase;
      break;
    case kHyper:
      rt_ = std::min(max_rate_, rt_ + hai_rate_);
      ++counters_.hyper_increase;
      break;
  }
  commit_rate();
  rc_ = std::clamp((rc_ + rt_) / 2.0, min_rate_, max_rate_);
  if (rt_ - rc_ <= rt_ * kSnapRelative) rc_ = rt_;
  if (!recovering()) {
    // Nothing left to increase: the timer stops and the byte counter stops counting until the
    // next cut.
    increase_next_ns_ = UINT64_MAX;
    byte_count_ = 0;
  }
}

void DcqcnRateControl::advance(uint64_t now_ns) {
  now_ns = std::max(now_ns, last_advance_ns_);
  for (;;) {
    const uint64_t cut_ns = cut_pending_ ? cut_due_ns_ : UINT64_MAX;
    const uint64_t t = std::min({alpha_next_ns_, cut_ns, increase_next_ns_});
    if (t == UINT64_MAX || t > now_ns) break;
    integrate_to(t);
    // At one ns: alpha first (the cut uses the updated alpha), then the cut, then the increase.
    if (alpha_next_ns_ == t) {
      update_alpha(std::min({cut_ns, increase_next_ns_, now_ns}));
    } else if (cut_ns == t) {
      cut_pending_ = false;
      cut(t);
    } else {
      ++time_stage_;
      ++counters_.timer_events;
      increase_next_ns_ = sat_add(t, cfg_.rpg_time_reset_ns);
      increase_event();  // stops the timer when the recovery is over
    }
  }
  integrate_to(now_ns);
}

void DcqcnRateControl::on_cnp(uint64_t now_ns) {
  advance(now_ns);
  const uint64_t t = last_advance_ns_;
  ++counters_.cnps;
  cnp_in_period_ = true;
  if (!cnp_seen_) {
    // cnp_received_mlx on the first CNP: alpha starts, and the period that starts now begins
    // without a CNP in it (this one is already paid for by the cut).
    cnp_seen_ = true;
    alpha_ = cfg_.initial_alpha_value / 1024.0;
    cnp_in_period_ = false;
    alpha_next_ns_ = sat_add(t, cfg_.dce_tcp_rtt_ns);
    if (cfg_.rate_to_set_on_first_cnp_mbps > 0) {
      commit_rate();
      rc_ = rt_ = std::min(cfg_.rate_to_set_on_first_cnp_mbps / 1000.0, max_rate_);
    }
  }
  const uint64_t period_end = sat_add(last_cut_ns_, cfg_.rate_reduce_monitor_period_ns);
  if (!has_cut_ || t >= period_end) {
    cut(t);  // no cut can be pending here: advance() ran any due by t
    return;
  }
  // Inside the monitor period: one cut at its end, however many CNPs arrive meanwhile.
  ++counters_.cuts_deferred;
  if (!cut_pending_) {
    cut_pending_ = true;
    cut_due_ns_ = period_end;
  }
}

void DcqcnRateControl::on_sent(uint32_t wire_bytes, uint64_t now_ns) {
  advance(now_ns);
  has_sent_ = true;
  last_send_ns_ = last_advance_ns_;
  last_wire_bytes_ = wire_bytes;
  // The byte counter counts only while there is a rate to recover.
  if (cfg_.rpg_byte_reset == 0 || !recovering()) return;
  byte_count_ += wire_bytes;
  while (byte_count_ >= cfg_.rpg_byte_reset && recovering()) {
    byte_count_ -= cfg_.rpg_byte_reset;
    ++byte_stage_;
    ++counters_.byte_counter_events;
    increase_event();
  }
}

uint64_t DcqcnRateControl::next_send_ns() const {
  if (!limited() || !has_sent_) return 0;
  // Gbit/s is bits per ns.
  const double wait_ns = std::ceil(static_cast<double>(last_wire_bytes_) * 8.0 / rc_);
  return sat_add(last_send_ns_, static_cast<uint64_t>(wait_ns));
}

std::vector<RateControlFigure> DcqcnRateControl::figures() const {
  return {{"rate_gbps", rc_},
          {"target_gbps", rt_},
          {"alpha", alpha_},
          {"cnps", static_cast<double>(counters_.cnps)},
          {"rate_cuts", static_cast<double>(counters_.rate_cuts)},
          {"cuts_deferred", static_cast<double>(counters_.cuts_deferred)},
          {"fast_recovery", static_cast<double>(counters_.fast_recovery)},
          {"additive_increase", static_cast<double>(counters_.additive_increase)},
          {"hyper_increase", static_cast<double>(counters_.hyper_increase)}};
}

uint64_t DcqcnRateControl::next_timer_ns() const {
  return std::min(cut_pending_ ? cut_due_ns_ : UINT64_MAX, increase_next_ns_);
}

}  // namespace spraynet
