// What a per-QP congestion control is to the RC engine that drives it: DCQCN
// (DcqcnRateControl), DCTCP (DctcpRateControl), TIMELY (TimelyRateControl) and HPCC
// (HpccRateControl) behind one interface, so that the same engine, fabric and workload run under
// each (issue 44). The algorithms follow ns-3 HPCC's rdma-hw.cc (cc modes 1, 8, 7 and 3), where
// all four are rate-based senders: a QP sends its next packet no sooner than its last one's wire
// bits at the current rate; HPCC also bounds the bytes in flight by a window.
//
// Pure logic, as DcqcnRateControl: no clock, thread or global; every call takes the virtual time.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace spraynet {

// One switch egress's in-band telemetry record, as HPCC's INT header carries it per hop (ns-3
// HPCC int-header.h: lineRate, time, bytes, qlen). The units are the engine's, not the wire's.
struct IntHop {
  double line_rate_gbps = 0;  // the egress port's rate
  uint64_t ts_ns = 0;         // when the packet left that egress
  uint64_t tx_bytes = 0;      // bytes that egress had sent by then (wraps are the caller's)
  uint64_t qlen_bytes = 0;    // its queue as the packet left
};

// What an ACK tells the sender's congestion control. The byte sequence is the QP's own (ns-3's
// seq numbers): ack_seq is how far the QP is acknowledged, snd_nxt how far it has sent.
struct AckFeedback {
  uint64_t now_ns = 0;
  uint64_t ack_seq = 0;  // bytes acknowledged, cumulatively (ns-3 ch.ack.seq)
  uint64_t snd_nxt = 0;  // bytes sent so far when the ACK arrives (ns-3 qp->snd_nxt)
  // DCTCP: the receiver saw CE on the packet this ACK acknowledges (ns-3 sets the ACK's CNP flag
  // from the data packet's ECN bits when cc mode 8 runs).
  bool ecn_echo = false;
  // TIMELY: the send time of the acknowledged packet, echoed back by the receiver (ns-3 ih.ts);
  // 0: none.
  uint64_t echoed_ts_ns = 0;
  // HPCC: the INT records the data packet collected, one per hop in path order, echoed back.
  std::span<const IntHop> hops;
};

// One figure a congestion control reports (JSON `cc` figures), by name.
using RateControlFigure = std::pair<std::string, double>;

class RateControl {
 public:
  virtual ~RateControl() = default;

  // "dcqcn", "dctcp", "timely", "hpcc".
  virtual const char* name() const = 0;
  // Runs whatever is due at or before now_ns (timers); a now_ns before the last one counts as it.
  virtual void advance(uint64_t now_ns) = 0;
  // A CNP for this QP arrived (DCQCN's signal; the others ignore it).
  virtual void on_cnp(uint64_t /*now_ns*/) {}
  // An ACK arrived (DCTCP, TIMELY, HPCC react here; DCQCN ignores it).
  virtual void on_ack(const AckFeedback& /*ack*/) {}
  // A packet of wire_bytes (frame + preamble, IFG, FCS) started at now_ns: pacing.
  virtual void on_sent(uint32_t wire_bytes, uint64_t now_ns) = 0;

  // When the next packet may start: 0 while not limited, else the last send time + its wire bits
  // at the current rate.
  virtual uint64_t next_send_ns() const = 0;
  // The earliest timer that can change the rate; UINT64_MAX when none.
  virtual uint64_t next_timer_ns() const { return UINT64_MAX; }
  // Bytes the QP may have in flight; UINT64_MAX: no bound beyond the QP's own window.
  virtual uint64_t window_bytes() const { return UINT64_MAX; }

  virtual double rate_gbps() const = 0;
  virtual bool limited() const = 0;  // below the line rate
  virtual bool at_min_rate() const = 0;
  // The integral of the rate from construction to the last advance, in Gbit (Gbit/s * ns / 1e9).
  virtual double rate_integral_gbit() const = 0;
  virtual uint64_t last_advance_ns() const = 0;
  // The algorithm's own counters and state (cuts, marks seen, INT records...), for the report.
  virtual std::vector<RateControlFigure> figures() const = 0;
};

// The pacing every rate-based sender shares: the next packet waits for the last one's wire bits
// at the current rate. Keeps the rate integral in segments of constant rate, so the sum is the
// same however often it is advanced.
class RatePacer {
 public:
  RatePacer(double line_rate_gbps, double rate_gbps)
      : line_rate_(line_rate_gbps), rate_(rate_gbps) {}

  void advance(uint64_t now_ns) {
    if (now_ns > last_ns_) last_ns_ = now_ns;
  }
  // Changes the rate at the last advance (the integral up to then at the old one).
  void set_rate(double rate_gbps) {
    committed_gbit_ += rate_ * static_cast<double>(last_ns_ - segment_start_ns_) / 1e9;
    segment_start_ns_ = last_ns_;
    rate_ = rate_gbps;
  }
  void on_sent(uint32_t wire_bytes, uint64_t now_ns) {
    advance(now_ns);
    has_sent_ = true;
    last_send_ns_ = last_ns_;
    last_wire_bytes_ = wire_bytes;
  }
  uint64_t next_send_ns() const {
    if (!limited() || !has_sent_) return 0;
    const double wait_ns = std::ceil(static_cast<double>(last_wire_bytes_) * 8.0 / rate_);
    const auto wait = static_cast<uint64_t>(wait_ns);
    return last_send_ns_ > UINT64_MAX - wait ? UINT64_MAX : last_send_ns_ + wait;
  }
  double rate_gbps() const { return rate_; }
  double line_rate_gbps() const { return line_rate_; }
  bool limited() const { return rate_ < line_rate_; }
  uint64_t last_ns() const { return last_ns_; }
  double integral_gbit() const {
    return committed_gbit_ + rate_ * static_cast<double>(last_ns_ - segment_start_ns_) / 1e9;
  }

 private:
  double line_rate_;
  double rate_;
  uint64_t last_ns_ = 0;
  bool has_sent_ = false;
  uint64_t last_send_ns_ = 0;
  uint32_t last_wire_bytes_ = 0;
  double committed_gbit_ = 0;
  uint64_t segment_start_ns_ = 0;
};

// The half every ACK-clocked control shares (DCTCP, TIMELY, HPCC): paced by a RatePacer that
// starts at the line rate, no timers. A subclass changes the rate with pacer_.set_rate().
class PacedRateControl : public RateControl {
 public:
  void advance(uint64_t now_ns) override { pacer_.advance(now_ns); }
  void on_sent(uint32_t wire_bytes, uint64_t now_ns) override {
    pacer_.on_sent(wire_bytes, now_ns);
  }
  // The last send time + ceil(its wire bits / the current rate); 0 while not limited.
  uint64_t next_send_ns() const override { return pacer_.next_send_ns(); }
  // ACK-clocked: no timer ever changes the rate.
  uint64_t next_timer_ns() const override { return UINT64_MAX; }
  double rate_gbps() const override { return pacer_.rate_gbps(); }
  bool limited() const override { return pacer_.limited(); }
  double rate_integral_gbit() const override { return pacer_.integral_gbit(); }
  uint64_t last_advance_ns() const override { return pacer_.last_ns(); }

 protected:
  explicit PacedRateControl(double line_rate_gbps) : pacer_(line_rate_gbps, line_rate_gbps) {}
  RatePacer pacer_;
};

// A number in a config error ("... (0 < rate <= 100000)"): up to 12 significant digits.
inline std::string format_number(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

}  // namespace spraynet
