#include "dataplane/rc_endpoint/dctcp_rate_control.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace spraynet {

std::string DctcpConfig::check() const {
  // Comparisons are written so that NaN fails them too.
  if (!(line_rate_gbps > 0) || !std::isfinite(line_rate_gbps))
    return "line_rate_gbps: must be a finite rate above 0 (> 0)";
  if (mtu_bytes == 0) return "mtu_bytes: a batch is counted in packets of this size (> 0)";
  // g = 0 would freeze alpha at initial_alpha: every cut the same, whatever the marks say.
  if (!(g > 0 && g <= 1)) return "g: the EWMA gain must be in (0, 1]";
  if (!(dctcp_rai_mbps >= 0) || !std::isfinite(dctcp_rai_mbps))
    return "dctcp_rai_mbps: must be a finite rate (>= 0)";
  const double line_mbps = line_rate_gbps * 1000.0;
  if (!(min_rate_mbps > 0 && min_rate_mbps <= line_mbps))
    return "min_rate_mbps: must be above 0 and at most the line rate (0 < rate <= " +
           format_number(line_mbps) + ")";
  if (!(initial_alpha >= 0 && initial_alpha <= 1)) return "initial_alpha: out of range (0..1)";
  return "";
}

DctcpRateControl::DctcpRateControl(const DctcpConfig& c)
    : PacedRateControl(c.line_rate_gbps), cfg_(c) {
  const std::string err = c.check();
  if (!err.empty()) throw std::invalid_argument("dctcp: " + err);
  min_rate_ = c.min_rate_mbps / 1000.0;
  rai_ = c.dctcp_rai_mbps / 1000.0;
  alpha_ = c.initial_alpha;
}

void DctcpRateControl::set_rate(double rate_gbps) {
  if (rate_gbps != pacer_.rate_gbps()) pacer_.set_rate(rate_gbps);
}

void DctcpRateControl::on_ack(const AckFeedback& ack) {
  pacer_.advance(ack.now_ns);
  ++counters_.acks;
  const uint64_t ack_seq = ack.ack_seq;
  const uint64_t snd_nxt = std::max(ack.snd_nxt, ack_seq);
  const uint64_t mtu = cfg_.mtu_bytes;
  bool new_batch = false;

  // Every marked ACK counts towards the batch under way, including those before the first batch
  // opens: ns-3 does not clear m_ecnCnt when it opens the first one, so they land in it.
  if (ack.ecn_echo) {
    ++ecn_cnt_;
    ++counters_.marked_acks;
  }
  if (ack_seq > last_update_seq_) {
    // The ACKs have passed the end of the window the last update saw sent: its feedback is in.
    new_batch = true;
    if (!batch_open_) {
      // The first window: nothing to average yet, only where it ends and how many packets it
      // holds (everything sent so far, + 1 as ns-3 counts).
      batch_open_ = true;
      last_update_seq_ = snd_nxt;
      batch_size_ = snd_nxt / mtu + 1;
    } else {
      const double frac =
          std::min(1.0, static_cast<double>(ecn_cnt_) / static_cast<double>(batch_size_));
      alpha_ = (1.0 - cfg_.g) * alpha_ + cfg_.g * frac;
      last_update_seq_ = snd_nxt;
      ecn_cnt_ = 0;
      // The next window: what is in flight now.
      batch_size_ = (snd_nxt - ack_seq) / mtu + 1;
      ++counters_.alpha_updates;
    }
  }

  // CWR lasts until everything sent at the cut is acknowledged: marks on those packets were
  // caused by the rate before the cut, so they must not cut again.
  if (in_cwr_ && ack_seq > high_seq_) in_cwr_ = false;

  if (ack.ecn_echo && !in_cwr_) {
    set_rate(std::max(min_rate_, pacer_.rate_gbps() * (1.0 - alpha_ / 2.0)));
    in_cwr_ = true;
    high_seq_ = snd_nxt;
    ++counters_.rate_cuts;
  }

  // One increase per window (DCTCP's one MSS per RTT), never in the window of a cut.
  if (!in_cwr_ && new_batch && pacer_.rate_gbps() < cfg_.line_rate_gbps) {
    set_rate(std::min(cfg_.line_rate_gbps, pacer_.rate_gbps() + rai_));
    ++counters_.additive_increases;
  }
}

std::vector<RateControlFigure> DctcpRateControl::figures() const {
  return {
      {"alpha", alpha_},
      {"rate_gbps", pacer_.rate_gbps()},
      {"in_cwr", in_cwr_ ? 1.0 : 0.0},
      {"acks", static_cast<double>(counters_.acks)},
      {"marked_acks", static_cast<double>(counters_.marked_acks)},
      {"alpha_updates", static_cast<double>(counters_.alpha_updates)},
      {"rate_cuts", static_cast<double>(counters_.rate_cuts)},
      {"additive_increases", static_cast<double>(counters_.additive_increases)},
  };
}

}  // namespace spraynet
