// DCTCP as a per-QP rate controller: the sender half of DCTCP (Alizadeh et al., "Data Center
// TCP", SIGCOMM 2010) in the rate-based form the ns-3 HPCC simulator runs it as cc mode 8
// (alibaba-edu/High-Precision-Congestion-Control, commit 9f4be2a, simulation/src/point-to-point/
// model/rdma-hw.cc: HandleAckDctcp). The receiver echoes CE on each ACK; once per window of data
// (a "batch": the bytes sent when the previous window's end was acknowledged) the sender folds the
// share of marked ACKs into alpha, and it cuts its rate by alpha/2 at most once per window (CWR);
// a window without a cut adds DctcpRateAI, DCTCP's one MSS per RTT expressed as a rate.
//
// Parameters carry ns-3's names (m_g, m_dctcp_rai, m_minRate, m_mtu) and its defaults for the
// DCTCP runs of its run.py (see DctcpConfig). Where ns-3's DataRate rounds to whole bits per
// second, the rate here stays a double.
//
// Pure logic: no clock, thread or global. Every call takes the virtual time; there are no timers
// (the algorithm is ACK-clocked), so next_timer_ns() is always UINT64_MAX.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rate_control.h"

namespace spraynet {

struct DctcpConfig {
  // The QP's port rate: the cap, the starting rate (ns-3 rdma-hw.cc:240 qp->m_rate = m_bps), and
  // the rate at which the QP counts as not limited (no pacing).
  double line_rate_gbps = 100.0;
  // The payload bytes of one packet, the unit a batch is counted in: batch = bytes / mtu + 1
  // packets (ns-3 m_mtu, "Mtu" attribute default 1000, rdma-hw.cc:29, set from run.py's
  // PACKET_PAYLOAD_SIZE 1000, run.py:8, by third.cc:874). The caller sets its QP's payload MTU.
  uint32_t mtu_bytes = 1000;
  // g, the EWMA gain of alpha: alpha = (1 - g) alpha + g F once per batch (ns-3 m_g, "EwmaGain"
  // default 1/16, rdma-hw.cc:58; run.py's dctcp runs set EWMA_GAIN 0.0625, run.py:131; the DCTCP
  // paper's g = 1/16).
  double g = 1.0 / 16;
  // Additive increase per batch without a cut (ns-3 m_dctcp_rai): run.py's dctcp runs set
  // DCTCP_RATE_AI 615 Mb/s (run.py:127, "calculated from RTT=13us and MTU=1KB, because DCTCP add 1
  // MTU per RTT": 8000 bits / 13 us). The attribute's own default is 1000 Mb/s (rdma-hw.cc:169),
  // a placeholder every other cc mode's config carries.
  double dctcp_rai_mbps = 615;
  // Floor of the rate (ns-3 m_minRate): run.py sets MIN_RATE 1000Mb/s for every cc (run.py:28);
  // the "MinRate" attribute default is 100 Mb/s (rdma-hw.cc:24).
  double min_rate_mbps = 1000;
  // alpha before the first update (ns-3 rdma-queue-pair.cc:63 dctcp.m_alpha = 1, as the DCTCP
  // paper's sender): the first marked ACK halves the rate.
  double initial_alpha = 1.0;

  // "" when valid, else "key: reason (allowed range)" for the first bad key.
  std::string check() const;
};

struct DctcpCounters {
  uint64_t acks = 0;         // on_ack calls
  uint64_t marked_acks = 0;  // of them with ecn_echo
  // Batches closed: alpha folded in a window's marks (the first ACK past ack 0 only opens one).
  uint64_t alpha_updates = 0;
  uint64_t rate_cuts = 0;  // marked ACKs outside CWR: rate * (1 - alpha/2)
  // New batches outside CWR that raised the rate by dctcp_rai (not counted at the line rate).
  uint64_t additive_increases = 0;
};

class DctcpRateControl final : public PacedRateControl {
 public:
  // Throws std::invalid_argument("dctcp: " + c.check()) when the config is invalid.
  explicit DctcpRateControl(const DctcpConfig& c);

  const char* name() const override { return "dctcp"; }
  // CNPs are DCQCN's signal: DCTCP reads the ECN echo on the ACKs instead.
  void on_cnp(uint64_t /*now_ns*/) override {}
  // HandleAckDctcp, in ns-3's order: count the mark, close a batch (alpha), leave CWR, cut,
  // additive increase. Advances to ack.now_ns first. An snd_nxt below ack_seq counts as ack_seq
  // (the QP cannot have had more acknowledged than it sent; ns-3's unsigned batch arithmetic
  // would wrap).
  void on_ack(const AckFeedback& ack) override;

  // A rate-based sender here: no window beyond the QP's own. (ns-3's run.py runs DCTCP with
  // HAS_WIN 1 / VAR_WIN 1, a BDP window scaled by rate / line rate; that is the engine's to add.)
  uint64_t window_bytes() const override { return UINT64_MAX; }

  bool at_min_rate() const override { return pacer_.rate_gbps() <= min_rate_; }
  // alpha, rate_gbps, in_cwr and the counters.
  std::vector<RateControlFigure> figures() const override;

  double alpha() const { return alpha_; }
  bool in_cwr() const { return in_cwr_; }
  const DctcpCounters& counters() const { return counters_; }
  const DctcpConfig& config() const { return cfg_; }

 private:
  void set_rate(double rate_gbps);

  DctcpConfig cfg_;
  double min_rate_ = 0;  // Gbit/s
  double rai_ = 0;       // Gbit/s

  // ns-3's qp->dctcp state, by its names.
  double alpha_ = 1.0;            // m_alpha
  bool batch_open_ = false;       // m_lastUpdateSeq != 0: the first batch has started
  uint64_t last_update_seq_ = 0;  // m_lastUpdateSeq: the batch closes when ACKs pass it
  uint64_t ecn_cnt_ = 0;          // m_ecnCnt: marked ACKs since the last alpha update
  uint64_t batch_size_ = 0;       // m_batchSizeOfAlpha, in packets of mtu_bytes
  bool in_cwr_ = false;           // m_caState == 1
  uint64_t high_seq_ = 0;         // m_highSeq: CWR ends when ACKs pass it
  DctcpCounters counters_;
};

}  // namespace spraynet
