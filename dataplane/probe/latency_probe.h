// A latency and jitter probe, the way Pktgen's latency mode does it: timestamped probe packets
// sent at a configured rate alongside the load and recognised on the far side by their payload.
//
// A probe is a genuine Ethernet / [802.1Q] / IPv4 / UDP frame (packet_builder) to the configured
// UDP destination port whose UDP payload starts with
//   bytes 0-7    the signature kSignature ("SPRYPRB1"),
//   bytes 8-15   the sequence number, big endian, 0, 1, 2, ... per LatencyProbe,
//   bytes 16-23  the send timestamp in ns, big endian (the now_ns given to make_probe),
// padded with zeros to the configured frame length.
//
// Receiving. on_receive(m, now_ns) parses the frame (never reading past its data) and says
// whether it was a probe: UDP to the probe port with the signature. Anything else is left alone
// (not counted, not touched); a frame to the probe port that is too short for the probe payload,
// has the wrong signature, or fails IPv4/UDP checks where the port can still be read, is counted
// `malformed` and is not a probe. For each probe: latency = now_ns - sent timestamp (a receive
// time before the send time is clamped to 0 and counted `clock_backwards`).
//
// Sequence. Every sequence number is remembered within the last `sequence_window` numbers below
// the highest seen. A probe with a sequence below the highest seen is out of order: counted AND
// its latency recorded; one already seen is a duplicate: counted, its latency not recorded (it
// is not a new measurement of a probe). One more than sequence_window below the highest cannot be
// told from a duplicate and is taken as out of order. lost = probes sent (or the highest
// sequence seen + 1 if more) - distinct probes received: read it once the probes in flight have
// arrived.
//
// Jitter (RFC 3550 6.4.1), in arrival order: D(i,j) = (R_j - S_j) - (R_i - S_i) for consecutive
// arrivals i, j, J += (|D(i,j)| - J) / 16, as a double in ns; the first probe sets no D.
// changes_over_threshold counts the probes whose latency differs from the previous arrival's by
// more than change_threshold_ns (latency_changes_over() gives the count for any threshold over
// the stored samples).
//
// Percentiles are exact, nearest rank (the value at rank ceil(p x N) of the N sorted samples),
// over the first max_samples latencies stored; min and max are over every probe. report() says
// when the cap was hit.
//
// Time. No clock is read: make_probe/on_receive take now_ns from the caller (runtime's TscClock
// in programs, virtual time in tests); next_send_ns() says when the next probe is due.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

struct LatencyProbeConfig {
  static constexpr std::array<uint8_t, 8> kSignature{'S', 'P', 'R', 'Y', 'P', 'R', 'B', '1'};
  static constexpr size_t kPayloadLength = 24;  // signature, sequence, timestamp
  static constexpr uint64_t kMaxRatePps = 100'000'000;
  static constexpr size_t kMaxSamples = size_t{1} << 28;
  static constexpr uint32_t kMaxSequenceWindow = 1u << 24;

  EthernetSpec eth;              // addresses, optional 802.1Q tag
  uint32_t src_ip = 0x0A0000FE;  // host byte order: 10.0.0.254
  uint32_t dst_ip = 0x0A0001FE;  // 10.0.1.254
  uint16_t src_port = 50000;
  uint16_t dst_port = 7777;  // what on_receive recognises probes by (with the signature)
  uint8_t dscp = 46;         // EF
  uint8_t ttl = 64;
  // Frame length without FCS: from the smallest frame holding the probe payload (66 bytes
  // untagged, 70 tagged; 0 picks it) to 9000.
  uint16_t frame_length = 0;
  uint64_t rate_pps = 1000;  // probes per second: 1 to kMaxRatePps
  uint64_t change_threshold_ns = 10'000;
  size_t max_samples = size_t{1} << 20;  // latencies stored for percentiles: 1 to kMaxSamples
  uint32_t sequence_window = 65536;      // 1 to kMaxSequenceWindow

  // The smallest frame_length allowed with this eth (and the one 0 stands for).
  size_t min_frame_length() const;
  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct LatencyReport {
  uint64_t sent = 0;
  uint64_t count = 0;  // distinct probes received (out-of-order ones included)
  uint64_t lost = 0;
  uint64_t out_of_order = 0;
  uint64_t duplicates = 0;
  uint64_t malformed = 0;
  uint64_t clock_backwards = 0;
  // ns; all 0 when count == 0. Percentiles over the stored samples.
  uint64_t min_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t p999_ns = 0;
  uint64_t max_ns = 0;
  double jitter_ns = 0;
  uint64_t change_threshold_ns = 0;
  uint64_t changes_over_threshold = 0;
  uint64_t samples = 0;         // latencies stored
  bool sample_cap_hit = false;  // more probes arrived than max_samples: percentiles of the first

  std::string to_json() const;  // one object, keys as the fields above
};

class LatencyProbe {
 public:
  // Throws std::invalid_argument with config.check()'s message when invalid.
  explicit LatencyProbe(const LatencyProbeConfig& config);

  const LatencyProbeConfig& config() const { return config_; }

  // Sender. A fresh probe from `pool` stamped with now_ns and the next sequence number, or
  // nullptr when the pool is empty (no sequence number is used up then). Moves next_send_ns()
  // on by one interval (1e9 / rate_pps ns) from when this probe was due, or from now_ns when the
  // sender fell more than an interval behind (no burst to catch up).
  rte_mbuf* make_probe(rte_mempool* pool, uint64_t now_ns);
  // When the next probe is due (0 before the first).
  uint64_t next_send_ns() const { return next_send_ns_; }
  uint64_t interval_ns() const { return interval_ns_; }
  uint64_t sent() const { return next_seq_; }

  // Receiver. True when `m` was a probe (recorded); the mbuf is never modified or freed.
  bool on_receive(const rte_mbuf* m, uint64_t now_ns);
  // The same on a frame in a byte buffer.
  bool on_receive(const uint8_t* frame, size_t len, uint64_t now_ns);

  // Probes, among the stored samples in arrival order, whose latency differs from the previous
  // one's by more than threshold_ns.
  uint64_t latency_changes_over(uint64_t threshold_ns) const;
  // Stored latencies in arrival order.
  const std::vector<uint64_t>& samples() const { return samples_; }
  double jitter_ns() const { return jitter_; }

  LatencyReport report() const;

 private:
  bool record(uint64_t seq, uint64_t sent_ns, uint64_t now_ns);
  bool seen(uint64_t seq) const;
  void mark(uint64_t seq);

  LatencyProbeConfig config_;
  size_t frame_length_;
  uint64_t interval_ns_;
  PacketParser parser_;
  std::vector<uint8_t> payload_;  // template: signature, zeros

  // sender
  uint64_t next_seq_ = 0;
  uint64_t next_send_ns_ = 0;

  // receiver
  bool any_ = false;
  uint64_t highest_seq_ = 0;
  std::vector<uint64_t> seen_bits_;  // sequence_window bits, bit (seq % window)
  uint64_t count_ = 0;
  uint64_t out_of_order_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t malformed_ = 0;
  uint64_t clock_backwards_ = 0;
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  int64_t last_transit_ = 0;  // R - S of the previous arrival
  uint64_t last_latency_ = 0;
  double jitter_ = 0;
  uint64_t changes_over_ = 0;
  bool cap_hit_ = false;
  std::vector<uint64_t> samples_;
};

}  // namespace spraynet
