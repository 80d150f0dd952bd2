// DCQCN's reaction point (RP): the per-QP rate controller a sender runs on CNPs, in the ConnectX
// variant as the ns-3 HPCC simulator implements it (src/point-to-point/model/rdma-hw.cc:
// cnp_received_mlx, UpdateAlphaMlx, CheckRateDecreaseMlx, RateIncEventTimerMlx, FastRecoveryMlx,
// ActiveIncreaseMlx, HyperIncreaseMlx), plus the byte counter of the DCQCN paper (Zhu et al.,
// "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015), which ns-3 leaves out.
// Parameters carry ConnectX's names (mlx5 sysfs roce_rp / mlxconfig) and units, so a config can
// be read against NVIDIA's "DCQCN CC Parameters" page.
//
// Pure logic: no clock, thread or global. Every call takes the virtual time now_ns, and the
// object runs the timers due by then itself (advance), so a caller only has to call it at
// next_timer_ns() or whenever a CNP arrives or a packet leaves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rate_control.h"

namespace spraynet {

struct DcqcnConfig {
  // The QP's port rate: the cap (rpg_max_rate_mbps 0 = line rate), and the rate at which the QP
  // counts as not limited (no pacing).
  double line_rate_gbps = 100.0;
  // Alpha (ConnectX roce_rp dce_tcp_g): after each dce_tcp_rtt period,
  //   alpha = (dce_tcp_g/1024) alpha + (1024 - dce_tcp_g)/1024   if a CNP arrived in it,
  //   alpha = (dce_tcp_g/1024) alpha                              if not.
  // So the paper's gain g = (1024 - dce_tcp_g) / 1024. ConnectX default 1019: g = 5/1024.
  uint32_t dce_tcp_g = 1019;
  // Alpha update period (ConnectX dce_tcp_rtt, default 1 us).
  uint64_t dce_tcp_rtt_ns = 1'000;
  // Alpha set on the first CNP, in 1/1024 (1..1024). ConnectX ships 1023; the default here is
  // 1024 (alpha = 1, the first cut halves the rate) as in ns-3 (cnp_received_mlx sets alpha 1)
  // and the paper (alpha starts at 1).
  uint32_t initial_alpha_value = 1024;
  // At most one rate cut per period (ConnectX rate_reduce_monitor_period, default 4 us); a CNP
  // inside it defers its cut to the period's end.
  uint64_t rate_reduce_monitor_period_ns = 4'000;
  // Rate set on the first CNP before its cut (ConnectX rate_to_set_on_first_cnp, default 0);
  // 0: the cut starts from the current rate.
  double rate_to_set_on_first_cnp_mbps = 0;
  // %, 0..100: one cut never leaves less than this share of the rate (ConnectX rpg_min_dec_fac,
  // default 50: with alpha <= 1 the paper's Rc (1 - alpha/2) never goes below half anyway).
  uint32_t rpg_min_dec_fac = 50;
  // Floor of the rate (ConnectX rpg_min_rate, default 1 Mbit/s).
  double rpg_min_rate_mbps = 1;
  // Cap of the rate (ConnectX rpg_max_rate, default 0 = the port's line rate).
  double rpg_max_rate_mbps = 0;
  // Rate-increase timer period (ConnectX rpg_time_reset, default 300 us).
  uint64_t rpg_time_reset_ns = 300'000;
  // Byte counter: one increase event per this many bytes sent while recovering (ConnectX
  // rpg_byte_reset, default 32767 bytes); 0 turns the byte counter off (ns-3 has none).
  uint64_t rpg_byte_reset = 32'767;
  // F: the number of fast-recovery stages (ConnectX rpg_threshold, default 1).
  uint32_t rpg_threshold = 1;
  // Additive increase of the target per event (ConnectX rpg_ai_rate, default 5 Mbit/s).
  double rpg_ai_rate_mbps = 5;
  // Hyper increase of the target per event (ConnectX rpg_hai_rate, default 50 Mbit/s).
  double rpg_hai_rate_mbps = 50;
  // Whether a cut sets the target to the current rate (Rt = Rc): always with clamp_tgt_rate 1;
  // with 0 (ConnectX's default) only when the rate was raised since the previous cut, by the
  // byte counter or, with clamp_tgt_rate_after_time_inc 1 (ConnectX's default), by the timer
  // too. ns-3 (CheckRateDecreaseMlx, CLAMP_TARGET_RATE 0) clamps after a timer increase
  // (m_rpTimeStage != 0). So a burst of cuts with no increase between keeps the rate the QP had
  // before the burst as the target, and fast recovery climbs back towards it.
  uint32_t clamp_tgt_rate = 0;
  uint32_t clamp_tgt_rate_after_time_inc = 1;

  // "" when valid, else "key: reason (allowed range)" for the first bad key.
  std::string check() const;
};

// ConnectX's defaults (NVIDIA "DCQCN CC Parameters"; the struct's defaults) on this port rate.
DcqcnConfig dcqcn_connectx_defaults(double line_rate_gbps);
// The DCQCN paper's parameters (Zhu et al., SIGCOMM 2015) on this port rate.
DcqcnConfig dcqcn_paper_defaults(double line_rate_gbps);
// fabric_emu's and the NIC config's `dcqcn`: ConnectX's algorithm, names and defaults, except
// the six that ConnectX's own values fail at 100 Gbit/s with HPCC's ECN thresholds (measured in
// docs/congestion-control.md): cuts at most every 50 us and alpha every 4 us with g = 1/256
// (the paper's and ns-3 HPCC's g), the rate raised by a 100 us timer alone (no byte counter, as
// ns-3's) after F = 7 fast-recovery stages.
DcqcnConfig dcqcn_fabric_defaults(double line_rate_gbps);

struct DcqcnCounters {
  uint64_t cnps = 0;       // on_cnp calls
  uint64_t rate_cuts = 0;  // decreases applied
  // CNPs that arrived inside the monitor period: their cut waited for its end, or merged with
  // the one already waiting.
  uint64_t cuts_deferred = 0;
  // Increase events by the phase they ran.
  uint64_t fast_recovery = 0, additive_increase = 0, hyper_increase = 0;
  // Increase events by what triggered them.
  uint64_t timer_events = 0, byte_counter_events = 0;
};

class DcqcnRateControl final : public RateControl {
 public:
  // Throws std::invalid_argument("dcqcn: " + c.check()) when the config is invalid.
  explicit DcqcnRateControl(const DcqcnConfig& c);

  // Runs every timer due at or before now_ns, in time order (at one ns: the alpha update, then a
  // deferred cut, then a rate-increase event). A now_ns before last_advance_ns() counts as
  // last_advance_ns(): virtual time never runs backwards here.
  void advance(uint64_t now_ns) override;
  // A CNP for this QP arrived at now_ns (advances to now_ns first).
  void on_cnp(uint64_t now_ns) override;
  // A packet of wire_bytes started at now_ns (advances to now_ns first): pacing and byte counter.
  void on_sent(uint32_t wire_bytes, uint64_t now_ns) override;

  // When the next packet may start: 0 while not limited; else the last send time + ceil(its wire
  // bits / the current rate) ns. Uses the current rate, so an increase shortens the wait.
  uint64_t next_send_ns() const override;
  // The earliest timer that can change the rate (a deferred cut, or the rate-increase timer while
  // recovering); UINT64_MAX when none. The alpha timer is not one: it changes only alpha, which
  // advance() catches up on lazily.
  uint64_t next_timer_ns() const override;

  const char* name() const override { return "dcqcn"; }
  bool limited() const override { return rc_ < line_rate_; }  // current rate below line rate
  double rate_gbps() const override { return rc_; }           // Rc, the current rate
  double target_gbps() const { return rt_; }         // Rt, the target rate
  double alpha() const { return alpha_; }
  bool at_min_rate() const override { return rc_ <= min_rate_; }
  // The integral of Rc over time from construction to last_advance_ns(), in Gbit (Gbit/s * ns /
  // 1e9): a caller divides by the elapsed seconds for the mean rate.
  double rate_integral_gbit() const override;
  uint64_t last_advance_ns() const override { return last_advance_ns_; }
  std::vector<RateControlFigure> figures() const override;
  const DcqcnCounters& counters() const { return counters_; }
  const DcqcnConfig& config() const { return cfg_; }

 private:
  // Something left to increase: the rate-increase timer runs and the byte counter counts.
  bool recovering() const { return rc_ < max_rate_ || rt_ < max_rate_; }
  void integrate_to(uint64_t t_ns);
  void update_alpha(uint64_t limit_ns);
  void cut(uint64_t t_ns);
  void increase_event();

  DcqcnConfig cfg_;
  double line_rate_ = 0, max_rate_ = 0, min_rate_ = 0;  // Gbit/s
  double g_ = 0;
  double ai_rate_ = 0, hai_rate_ = 0;  // Gbit/s

  double rc_ = 0, rt_ = 0;  // Gbit/s
  double alpha_ = 1.0;
  bool cnp_seen_ = false;       // any CNP yet: the alpha timer runs from the first one
  bool cnp_in_period_ = false;  // a CNP arrived in the current alpha period
  uint64_t alpha_next_ns_ = UINT64_MAX;

  bool has_cut_ = false;
  uint64_t last_cut_ns_ = 0;
  bool cut_pending_ = false;  // a deferred cut, due at cut_due_ns_
  uint64_t cut_due_ns_ = 0;

  uint64_t increase_next_ns_ = UINT64_MAX;  // rate-increase timer; UINT64_MAX when stopped
  uint64_t time_stage_ = 0;                 // T
  uint64_t byte_stage_ = 0;                 // B
  uint64_t byte_count_ = 0;

  bool has_sent_ = false;
  uint64_t last_send_ns_ = 0;
  uint32_t last_wire_bytes_ = 0;

  uint64_t last_advance_ns_ = 0;
  // The rate integral: whole segments of constant rate, and the one under way since
  // segment_start_ns_ (so the sum is the same however often advance() is called).
  double committed_gbit_ = 0;
  uint64_t segment_start_ns_ = 0;
  void commit_rate();  // before rc_ changes (at last_advance_ns_)
  DcqcnCounters counters_;
};

}  // namespace spraynet
