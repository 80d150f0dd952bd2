// TIMELY as a per-QP rate controller: RTT-gradient congestion control (Mittal et al., "TIMELY:
// RTT-based Congestion Control for the Datacenter", SIGCOMM 2015), as the ns-3 HPCC simulator
// codes it for cc mode 7 (alibaba-edu/High-Precision-Congestion-Control, commit 9f4be2a,
// simulation/src/point-to-point/model/rdma-hw.cc: HandleAckTimely, UpdateRateTimely). Each ACK
// echoes its data packet's send time; once per window of data (when the ACKs pass what was sent
// at the previous update) the sender takes that ACK's RTT and
//   new_rtt_diff = rtt - prev_rtt
//   rtt_diff     = (1 - alpha) rtt_diff + alpha new_rtt_diff        (EWMA)
//   gradient     = rtt_diff / min_rtt
//   rtt < T_low:   rate += delta                      (increase, whatever the gradient)
//   rtt > T_high:  rate *= 1 - beta (1 - T_high / rtt)
//   gradient <= 0: rate += delta, or += hai_delta after N increases in a row (HAI mode)
//   else:          rate *= max(0, 1 - beta gradient)
// capped at the line rate, floored at the min rate. The ACKs in between change nothing (ns-3's
// FastReactTimely is empty).
//
// Parameters carry the paper's names (T_low, T_high, alpha, beta, min_rtt, delta, N) with ns-3's
// names and defaults beside them (see TimelyConfig). Where ns-3's DataRate rounds to whole bits
// per second, the rate here stays a double.
//
// Pure logic: no clock, thread or global. Every call takes the virtual time; there are no timers
// (the algorithm is ACK-clocked), so next_timer_ns() is always UINT64_MAX.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rate_control.h"

namespace spraynet {

struct TimelyConfig {
  // The QP's port rate: the cap, the starting rate (ns-3 rdma-hw.cc:381 tmly.m_curRate =
  // dev->GetDataRate()), and the rate at which the QP counts as not limited (no pacing).
  double line_rate_gbps = 100.0;
  // T_low: below it the RTT is no sign of a queue, the rate increases (ns-3 m_tmly_TLow,
  // "TimelyTLow" default 50000 ns, rdma-hw.cc:154; the paper's 50 us).
  uint64_t t_low_ns = 50'000;
  // T_high: above it the rate decreases in proportion to the excess, whatever the gradient (ns-3
  // m_tmly_THigh, "TimelyTHigh" default 500000 ns, rdma-hw.cc:159; the paper's 500 us).
  uint64_t t_high_ns = 500'000;
  // alpha: the EWMA weight of the newest RTT difference (ns-3 m_tmly_alpha, "TimelyAlpha"
  // default 0.875, rdma-hw.cc:144).
  double alpha = 0.875;
  // beta: the multiplicative decrease factor (ns-3 m_tmly_beta, "TimelyBeta" default 0.8,
  // rdma-hw.cc:149).
  double beta = 0.8;
  // min_rtt: the RTT difference is normalised by it into the gradient (ns-3 m_tmly_minRtt,
  // "TimelyMinRtt" default 20000 ns, rdma-hw.cc:164).
  uint64_t min_rtt_ns = 20'000;
  // delta: the additive increase (ns-3 m_rai). ns-3's run.py sets RATE_AI 10 * bw / 10 Mb/s for
  // timely (run.py:133): bw Mb/s on a bw Gbit/s NIC, 100 Mb/s at the 100 Gbit/s default here (the
  // "RateAI" attribute's own default is 5 Mb/s, rdma-hw.cc:94, DCQCN's value).
  double delta_mbps = 100;
  // The HAI-mode increase (ns-3 m_rhai): run.py's RATE_HAI 50 * bw / 10 Mb/s for timely
  // (run.py:134), 500 Mb/s at 100 Gbit/s (the "RateHAI" attribute's default is 50 Mb/s,
  // rdma-hw.cc:99).
  double hai_delta_mbps = 500;
  // N: the increase after N consecutive increases is hai_delta (ns-3 hard-codes
  // tmly.m_incStage < 5, rdma-hw.cc:960; the paper's N = 5).
  uint32_t hai_threshold = 5;
  // Floor of the rate (ns-3 m_minRate): run.py sets MIN_RATE 1000Mb/s for every cc (run.py:28);
  // the "MinRate" attribute default is 100 Mb/s (rdma-hw.cc:24).
  double min_rate_mbps = 1000;

  // "" when valid, else "key: reason (allowed range)" for the first bad key.
  std::string check() const;
};

// ns-3 HPCC's run.py timely config on this port rate: the struct's defaults with delta and
// hai_delta scaled as run.py scales them with the NIC's bandwidth (bw and 5 bw Mb/s).
TimelyConfig timely_ns3_defaults(double line_rate_gbps);

struct TimelyCounters {
  uint64_t acks = 0;                // on_ack calls
  uint64_t no_timestamp = 0;        // ACKs without an echoed send time (echoed_ts_ns 0): ignored
  uint64_t negative_rtt = 0;        // ACKs echoing a send time after their arrival: ignored
  uint64_t rtt_updates = 0;         // full updates: the first RTT sample, then one per window
  uint64_t increases = 0;           // by delta
  uint64_t hai_increases = 0;       // by hai_delta (HAI mode)
  uint64_t gradient_decreases = 0;  // by 1 - beta gradient
  uint64_t t_high_decreases = 0;    // by 1 - beta (1 - T_high / rtt)
};

class TimelyRateControl final : public PacedRateControl {
 public:
  // Throws std::invalid_argument("timely: " + c.check()) when the config is invalid.
  explicit TimelyRateControl(const TimelyConfig& c);

  const char* name() const override { return "timely"; }
  // CNPs are DCQCN's signal: TIMELY reads the RTT on the ACKs instead.
  void on_cnp(uint64_t /*now_ns*/) override {}
  // HandleAckTimely: advances to ack.now_ns first, then rtt = that time - ack.echoed_ts_ns and,
  // when the ACK is past the window of the last update, UpdateRateTimely. An snd_nxt below
  // ack_seq counts as ack_seq (the QP cannot have had more acknowledged than it sent).
  void on_ack(const AckFeedback& ack) override;

  uint64_t window_bytes() const override { return UINT64_MAX; }

  bool at_min_rate() const override { return pacer_.rate_gbps() <= min_rate_; }
  // rate_gbps, rtt_diff_ns, last_rtt_ns, inc_stage and the counters.
  std::vector<RateControlFigure> figures() const override;

  double rtt_diff_ns() const { return rtt_diff_; }  // the EWMA of the RTT differences
  uint64_t last_rtt_ns() const { return last_rtt_; }
  uint32_t inc_stage() const { return inc_stage_; }  // increases in a row
  const TimelyCounters& counters() const { return counters_; }
  const TimelyConfig& config() const { return cfg_; }

 private:
  void update_rate(uint64_t rtt, uint64_t snd_nxt);
  void set_rate(double rate_gbps);

  TimelyConfig cfg_;
  double min_rate_ = 0;               // Gbit/s
  double delta_ = 0, hai_delta_ = 0;  // Gbit/s

  // ns-3's qp->tmly state, by its names.
  bool has_rtt_ = false;          // m_lastUpdateSeq != 0: the first sample is taken
  uint64_t last_update_seq_ = 0;  // m_lastUpdateSeq: the next update waits for ACKs past it
  uint32_t inc_stage_ = 0;        // m_incStage
  uint64_t last_rtt_ = 0;         // lastRtt
  double rtt_diff_ = 0;           // rttDiff, ns
  TimelyCounters counters_;
};

}  // namespace spraynet
