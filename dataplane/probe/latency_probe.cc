#include "dataplane/probe/latency_probe.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

namespace {

constexpr size_t kUdpHeaders = 20 + 8;  // IPv4 without options, UDP

// Nearest rank: the value at rank ceil(num / den x n) (1-based) of n sorted samples.
uint64_t nearest_rank(const std::vector<uint64_t>& sorted, uint64_t num, uint64_t den) {
  const uint64_t n = sorted.size();
  uint64_t rank = (num * n + den - 1) / den;
  rank = std::clamp<uint64_t>(rank, 1, n);
  return sorted[rank - 1];
}

}  // namespace

size_t LatencyProbeConfig::min_frame_length() const {
  return (eth.vlan ? 18 : 14) + kUdpHeaders + kPayloadLength;
}

std::string LatencyProbeConfig::check() const {
  if (frame_length != 0 && (frame_length < min_frame_length() || frame_length > 9000))
    return "frame_length: must be 0 or from " + std::to_string(min_frame_length()) + " to 9000";
  if (dscp > 63) return "dscp: must be from 0 to 63";
  if (dst_port == 0) return "dst_port: must not be 0";
  if (rate_pps < 1 || rate_pps > kMaxRatePps)
    return "rate_pps: must be from 1 to " + std::to_string(kMaxRatePps);
  if (max_samples < 1 || max_samples > kMaxSamples)
    return "max_samples: must be from 1 to " + std::to_string(kMaxSamples);
  if (sequence_window < 1 || sequence_window > kMaxSequenceWindow)
    return "sequence_window: must be from 1 to " + std::to_string(kMaxSequenceWindow);
  return {};
}

LatencyProbe::LatencyProbe(const LatencyProbeConfig& config) : config_(config) {
  if (const std::string err = config_.check(); !err.empty()) throw std::invalid_argument(err);
  frame_length_ = config_.frame_length == 0 ? config_.min_frame_length() : config_.frame_length;
  interval_ns_ = std::max<uint64_t>(1, 1'000'000'000 / config_.rate_pps);
  payload_.assign(frame_length_ - (config_.eth.vlan ? 18 : 14) - kUdpHeaders, 0);
  std::copy(LatencyProbeConfig::kSignature.begin(), LatencyProbeConfig::kSignature.end(),
            payload_.begin());
  seen_bits_.assign((config_.sequence_window + 63) / 64, 0);
  samples_.reserve(std::min<size_t>(config_.max_samples, size_t{1} << 16));
}

rte_mbuf* LatencyProbe::make_probe(rte_mempool* pool, uint64_t now_ns) {
  store_be64(payload_.data() + 8, next_seq_);
  store_be64(payload_.data() + 16, now_ns);
  FrameSpec f;
  f.eth = config_.eth;
  f.ip.src = config_.src_ip;
  f.ip.dst = config_.dst_ip;
  f.ip.tos = static_cast<uint8_t>(config_.dscp << 2);
  f.ip.ttl = config_.ttl;
  f.ip.id = static_cast<uint16_t>(next_seq_);
  f.udp.src_port = config_.src_port;
  f.udp.dst_port = config_.dst_port;
  f.payload = payload_;
  rte_mbuf* m = build_udp_mbuf(pool, f);
  if (m == nullptr) return nullptr;
  ++next_seq_;
  const uint64_t due = next_send_ns_;
  next_send_ns_ = now_ns >= due + interval_ns_ ? now_ns + interval_ns_ : due + interval_ns_;
  return m;
}

bool LatencyProbe::on_receive(const rte_mbuf* m, uint64_t now_ns) {
  if (m->nb_segs != 1) {
    // Chained: the parser takes single segments only. Count it if its first segment says probe.
    ParsedPacket p;
    if (parser_.parse(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, p) == ParseStatus::kOk &&
        p.kind == PacketKind::kUdp && p.dst_port == config_.dst_port)
      ++malformed_;
    return false;
  }
  return on_receive(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, now_ns);
}

bool LatencyProbe::on_receive(const uint8_t* frame, size_t len, uint64_t now_ns) {
  ParsedPacket p;
  const ParseStatus st = parser_.parse(frame, len, p);
  if (st != ParseStatus::kOk) {
    // A broken IPv4/UDP frame whose UDP destination port can still be read: malformed when it is
    // the probe port.
    if (st == ParseStatus::kBadTotalLength || st == ParseStatus::kBadIpChecksum ||
        st == ParseStatus::kUdpLengthMismatch || st == ParseStatus::kTruncatedUdp) {
      const size_t l3 = p.l3_offset;
      if (l3 == 0 || l3 + 20 > len) return false;
      const uint8_t* ip = frame + l3;
      const size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
      if (ip[9] != 17 || ihl < 20 || l3 + ihl + 4 > len) return false;
      if (load_be16(ip + ihl + 2) == config_.dst_port) ++malformed_;
    }
    return false;
  }
  if (p.kind != PacketKind::kUdp || p.dst_port != config_.dst_port) return false;
  const size_t payload_off = static_cast<size_t>(p.l4_offset) + 8;
  const size_t payload_len = p.udp_length >= 8 ? p.udp_length - 8u : 0;
  if (payload_len < LatencyProbeConfig::kPayloadLength || payload_off + payload_len > len ||
      std::memcmp(frame + payload_off, LatencyProbeConfig::kSignature.data(), 8) != 0) {
    ++malformed_;
    return false;
  }
  const uint8_t* pl = frame + payload_off;
  return record(load_be64(pl + 8), load_be64(pl + 16), now_ns);
}

bool LatencyProbe::seen(uint64_t seq) const {
  const uint64_t bit = seq % config_.sequence_window;
  return (seen_bits_[bit / 64] >> (bit % 64)) & 1;
}

void LatencyProbe::mark(uint64_t seq) {
  const uint64_t bit = seq % config_.sequence_window;
  seen_bits_[bit / 64] |= uint64_t{1} << (bit % 64);
}

bool LatencyProbe::record(uint64_t seq, uint64_t sent_ns, uint64_t now_ns) {
  const uint64_t window = config_.sequence_window;
  if (!any_) {
    highest_seq_ = seq;
    mark(seq);
  } else if (seq > highest_seq_) {
    // Forget the bits of the numbers the window slides over (those become highest + 1 .. seq).
    const uint64_t slide = seq - highest_seq_;
    if (slide >= window) {
      std::fill(seen_bits_.begin(), seen_bits_.end(), 0);
    } else {
      for (uint64_t s = highest_seq_ + 1; s <= seq; ++s) {
        const uint64_t bit = s % window;
        seen_bits_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
      }
    }
    highest_seq_ = seq;
    mark(seq);
  } else {
    const bool in_window = highest_seq_ - seq < window;
    if (in_window && seen(seq)) {
      ++duplicates_;
      return true;
    }
    ++out_of_order_;
    if (in_window) mark(seq);
  }

  uint64_t latency = 0;
  if (now_ns >= sent_ns) {
    latency = now_ns - sent_ns;
  } else {
    ++clock_backwards_;
  }
  const int64_t transit = static_cast<int64_t>(now_ns - sent_ns);  // R - S, may be negative
  if (count_ == 0) {
    min_ = max_ = latency;
  } else {
    min_ = std::min(min_, latency);
    max_ = std::max(max_, latency);
    // Modular, as int64_t: the same as transit - last_transit_ without its overflow on a
    // timestamp from some other clock.
    const auto diff =
        static_cast<int64_t>(static_cast<uint64_t>(transit) - static_cast<uint64_t>(last_transit_));
    const double d = static_cast<double>(diff);
    jitter_ += (std::fabs(d) - jitter_) / 16.0;
    const uint64_t change =
        latency > last_latency_ ? latency - last_latency_ : last_latency_ - latency;
    if (change > config_.change_threshold_ns) ++changes_over_;
  }
  last_transit_ = transit;
  last_latency_ = latency;
  any_ = true;
  ++count_;
  if (samples_.size() < config_.max_samples) {
    samples_.push_back(latency);
  } else {
    cap_hit_ = true;
  }
  return true;
}

uint64_t LatencyProbe::latency_changes_over(uint64_t threshold_ns) const {
  uint64_t n = 0;
  for (size_t i = 1; i < samples_.size(); ++i) {
    const uint64_t a = samples_[i - 1], b = samples_[i];
    if ((a > b ? a - b : b - a) > threshold_ns) ++n;
  }
  return n;
}

LatencyReport LatencyProbe::report() const {
  LatencyReport r;
  r.sent = next_seq_;
  r.count = count_;
  const uint64_t expected = std::max(next_seq_, any_ ? highest_seq_ + 1 : 0);
  r.lost = expected > count_ ? expected - count_ : 0;
  r.out_of_order = out_of_order_;
  r.duplicates = duplicates_;
  r.malformed = malformed_;
  r.clock_backwards = clock_backwards_;
  r.jitter_ns = jitter_;
  r.change_threshold_ns = config_.change_threshold_ns;
  r.changes_over_threshold = changes_over_;
  r.samples = samples_.size();
  r.sample_cap_hit = cap_hit_;
  if (count_ > 0) {
    std::vector<uint64_t> sorted = samples_;
    std::sort(sorted.begin(), sorted.end());
    r.min_ns = min_;
    r.max_ns = max_;
    r.p50_ns = nearest_rank(sorted, 50, 100);
    r.p99_ns = nearest_rank(sorted, 99, 100);
    r.p999_ns = nearest_rank(sorted, 999, 1000);
  }
  return r;
}

std::string LatencyReport::to_json() const {
  char buf[1024];  // the longest report (every number at 20 digits) is under 700
  std::snprintf(buf, sizeof buf,
                "{\"sent\": %" PRIu64 ", \"count\": %" PRIu64 ", \"lost\": %" PRIu64
                ", \"out_of_order\": %" PRIu64 ", \"duplicates\": %" PRIu64
                ", \"malformed\": %" PRIu64 ", \"clock_backwards\": %" PRIu64
                ", \"min_ns\": %" PRIu64 ", \"p50_ns\": %" PRIu64 ", \"p99_ns\": %" PRIu64
                ", \"p999_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64
                ", \"jitter_ns\": %.3f, \"change_threshold_ns\": %" PRIu64
                ", \"changes_over_threshold\": %" PRIu64 ", \"samples\": %" PRIu64
                ", \"sample_cap_hit\": %s}",
                sent, count, lost, out_of_order, duplicates, malformed, clock_backwards, min_ns,
                p50_ns, p99_ns, p999_ns, max_ns, jitter_ns, change_threshold_ns,
                changes_over_threshold, samples, sample_cap_hit ? "true" : "false");
  return buf;
}

}  // namespace spraynet
