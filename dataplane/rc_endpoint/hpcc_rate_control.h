// HPCC's sender (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019), as the
// authors' ns-3 simulator runs it (alibaba-edu/High-Precision-Congestion-Control,
// simulation/src/point-to-point/model/rdma-hw.cc: HandleAckHp, UpdateRateHp, FastReactHp, cc mode
// 3; rdma-queue-pair.cc: GetWin), on its single-rate path (MultiRate off, as run.py runs it).
//
// Each ACK echoes the INT records the data packet collected, one per egress on its path. Against
// the record of the same hop kept from the previous ACK, hop i yields
//   tau   = ts - ts'                                   (ns)
//   txRate = (bytes - bytes') * 8 / tau                (Gbit/s)
//   u_i   = txRate / B_i + min(qlen, qlen') * maxRate / B_i / W_init
// (B_i: the hop's line rate, maxRate: the QP's, W_init: its window in bytes, one BDP), and
// U = max_i u_i with dt = the tau of that hop. Then, with T the base RTT,
//   dt = min(dt, T);  u = (u (T - dt) + U dt) / T;  max_c = u / eta
//   max_c >= 1 or incStage >= maxStage:  rate = curRate / max_c + W_AI;  incStage = 0
//   otherwise:                           rate = curRate + W_AI;          incStage += 1
// clamped to [minRate, maxRate]. W_AI is a rate here (ns-3's RateAI; the paper's W_AI bytes are
// W_AI x T). A full update (the ACK acknowledges past lastUpdateSeq, i.e. one RTT after the last
// one) commits curRate and incStage and moves lastUpdateSeq to snd_nxt; every other ACK, with
// fast_react, computes the same from curRate but commits only the rate the QP sends at (and,
// as ns-3 does, the EWMA u and the stored records). The QP is paced at `rate` and, with var_win,
// may have W_init x rate / maxRate bytes in flight (ns-3 GetWin); else W_init.
//
// Pure logic, as DcqcnRateControl: no clock, thread or global; every call takes the virtual time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rate_control.h"

namespace spraynet {

// Defaults: ns-3 HPCC's run.py with `--cc hp` (the configuration its published runs use), on
// mix/fat.txt at 100 Gbit/s. Where RdmaHw's own TypeId default differs it is given too.
struct HpccConfig {
  // maxRate: the QP's port rate; the QP starts there (ns-3 AddQueuePair: m_rate = curRate =
  // the NIC's rate) and never exceeds it.
  double line_rate_gbps = 100.0;
  // T, the base RTT (ns): the EWMA's horizon. ns-3 (GLOBAL_T 1) uses the largest host-to-host
  // base RTT of the topology, 2 x propagation + one MTU's serialisation per link
  // (scratch/third.cc:919); 12240 ns on mix/fat.txt.
  uint64_t base_rtt_ns = 12'240;
  // W_init, the window in bytes; 0: one BDP, line rate x T (third.cc:921, HAS_WIN 1 with
  // GLOBAL_T 1 hands every QP maxBdp: 153000 bytes on mix/fat.txt).
  uint64_t w_init_bytes = 0;
  // eta, the target utilisation (run.py --utgt 95; RdmaHw TargetUtil 0.95), (0, 1].
  double eta = 0.95;
  // maxStage: additive steps before a multiplicative one is forced (run.py --mi 0, so every
  // update is multiplicative; RdmaHw MiThresh 5).
  uint32_t max_stage = 0;
  // W_AI as a rate, Mbit/s (run.py: 10 x bw / 25 Mb/s for bw Gbit/s NICs, 40 at 100 Gbit/s;
  // RdmaHw RateAI 5 Mb/s).
  double w_ai_mbps = 40.0;
  // minRate, Mbit/s (run.py MIN_RATE 1000Mb/s; RdmaHw MinRate 100 Mb/s).
  double min_rate_mbps = 1'000.0;
  // React to every ACK, not only once per RTT (run.py FAST_REACT 1; RdmaHw FastReact true).
  bool fast_react = true;
  // Fast reacts skip hops whose queue is empty (run.py SAMPLE_FEEDBACK 0; RdmaHw false).
  bool sample_feedback = false;
  // The window follows the rate (run.py VAR_WIN 1; RdmaHw VarWin false).
  bool var_win = true;

  // "" when valid, else "key: reason (allowed range)" for the first bad key.
  std::string check() const;
};

// run.py's `--cc hp` on a NIC of line_rate_gbps with base RTT T: W_AI = 10 x bw / 25 Mbit/s,
// W_init one BDP, the rest as HpccConfig's defaults.
HpccConfig hpcc_ns3_defaults(double line_rate_gbps, uint64_t base_rtt_ns);

struct HpccCounters {
  uint64_t acks = 0;  // on_ack calls
  // ACKs past lastUpdateSeq that ran a full update (not the first ACK, which only stores its
  // records), and ACKs that ran a fast react; with or without a rate step.
  uint64_t full_updates = 0;
  uint64_t fast_reacts = 0;
  // Rate steps (full updates and fast reacts) by kind.
  uint64_t multiplicative = 0, additive = 0;
  uint64_t int_hops_seen = 0;  // INT records on the ACKs
  // ACKs whose hop count differs from the stored records' (the path changed): the records are
  // stored afresh and the update skipped.
  uint64_t path_changes = 0;
  // Records that could not be compared with the stored one: a timestamp not after it, fewer
  // bytes than it (an older ACK overtaken by a newer one), or no line rate. Skipped, the stored
  // record kept. (ns-3 would divide by zero or read a wrap.)
  uint64_t stale_hops = 0;
};

class HpccRateControl final : public PacedRateControl {
 public:
  // Throws std::invalid_argument("hpcc: " + c.check()) when the config is invalid.
  explicit HpccRateControl(const HpccConfig& c);

  const char* name() const override { return "hpcc"; }
  void on_cnp(uint64_t /*now_ns*/) override {}  // HPCC reads INT, not CNPs
  // HandleAckHp: a full update when ack.ack_seq > lastUpdateSeq, else a fast react (when on).
  void on_ack(const AckFeedback& ack) override;
  // ACK-clocked: no timer
  // ns-3 GetWin: W_init x rate / maxRate (at least 1) with var_win, else W_init.
  uint64_t window_bytes() const override;

  bool at_min_rate() const override { return pacer_.rate_gbps() <= min_rate_; }
  std::vector<RateControlFigure> figures() const override;

  double cur_rate_gbps() const { return cur_rate_; }  // curRate: the last full update's rate
  uint32_t inc_stage() const { return inc_stage_; }
  double u() const { return u_; }  // the EWMA of the bottleneck's utilisation
  uint64_t last_update_seq() const { return last_update_seq_; }
  uint64_t w_init_bytes() const { return win_; }
  const HpccCounters& counters() const { return counters_; }
  const HpccConfig& config() const { return cfg_; }

 private:
  void update(const AckFeedback& ack, bool fast_react);  // UpdateRateHp

  HpccConfig cfg_;
  double max_rate_ = 0, min_rate_ = 0, w_ai_ = 0;  // Gbit/s
  uint64_t win_ = 0;                               // W_init, bytes

  double cur_rate_ = 0;  // Gbit/s
  uint32_t inc_stage_ = 0;
  double u_ = 1.0;  // ns-3 starts hp.u at 1 (rdma-queue-pair.cc)
  uint64_t last_update_seq_ = 0;
  std::vector<IntHop> hops_;  // the last record of each hop, in path order
  HpccCounters counters_;
};

}  // namespace spraynet
