// PPCID anomaly detection at the receiving NIC: per RoCE QP, evidence that packets arriving for
// it were not written by the sprayer that owns the QP's traffic (forged or injected), and a flag
// on the QP once the evidence reaches a threshold.
//
// Fed once per received RoCEv2 packet with its DestQP, the uplink it came in on, the PpcidReading
// of its UDP checksum (ppcid_read) and its PSN. A packet is evidence, under exactly one reason
// (the first that applies, in this order), when:
//   wrong_uplink      the PPCID reads ok but its path id is not the one of the uplink it arrived
//                     on (only when uplink_path_ids is given: with fabric paths a path id names
//                     a path through the fabric, not a cable, so any uplink may carry any id);
//   bad_check         the check nibble does not match DestQP xor PSN;
//   unknown_path      the path id names no path this NIC knows, under either layout;
//   ppcid_missing     the UDP checksum is 0 on a QP whose first packet carried a PPCID;
//   ppcid_unexpected  a PPCID on a QP whose first packet carried none;
//   layout_flip       a PPCID readable only under the other layout on a QP whose first PPCID
//                     read under the configured one, or the reverse.
// layout_flip is the path pattern rule: a sender's layout is its configuration, so one QP cannot
// show both. The PPCID timestamp is deliberately not judged: it is an XOR-fold of the time since
// the sender's last weight publication (ppcid_timestamp_hash), so it is not monotone in send
// time (10 ns after fold 0xFF comes fold 0x01) and it restarts at every publication (each
// reweight, each link flap); every "moves backwards beyond a tolerance" rule on it fires on
// clean traffic, so no such rule is false-positive-free and none is used.
//
// Why clean sprayed traffic raises nothing: no rule looks at PSN order, arrival times or which
// of the known paths a packet took, so reordering, a path vanishing and returning (link flap)
// and a changed path mix (reweight) are invisible to it; each rule needs a packet that a
// correctly configured sprayer never writes (a path id other than its cable's, a wrong check,
// an unknown id, a switch between PPCID and none, or between layouts), or a bit error (the
// link's BER) in the 16-bit field. Tests run clean traffic through all three and count 0 flags.
//
// Within 3 packets: every evidence packet adds exactly one point to its QP and points never
// decay, and a QP is flagged on the packet that brings it to `threshold` (1..3): so the 3rd
// forged packet that carries evidence flags the QP however many clean packets come between.
// (A forged packet that carries a valid PPCID for its uplink cannot be told from a real one by
// this stage; it is not evidence.) A QP is flagged once: the caller logs, counts and reports it
// when observe() says so.
//
// State: a table of qp_table_size QPs, preallocated (open addressing on DestQP, never resized,
// never freed per packet: a QP once seen keeps its slot). Packets of QPs beyond the table are
// counted (qp_table_overflow) and not judged. The key is the DestQP alone: a forger who varies
// the source address still lands on the QP it attacks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/wire/counter_list.h"
#include "dataplane/wire/ppcid.h"

namespace spraynet {

// The kinds of evidence, in the order they are tested: X(name).
#define SPRAYNET_PPCID_ANOMALY_REASONS(X) \
  X(wrong_uplink)                         \
  X(bad_check)                            \
  X(unknown_path)                         \
  X(ppcid_missing)                        \
  X(ppcid_unexpected)                     \
  X(layout_flip)

#define SPRAYNET_ANOMALY_REASON_ENUM(name) name,
enum class AnomalyReason : uint8_t { SPRAYNET_PPCID_ANOMALY_REASONS(SPRAYNET_ANOMALY_REASON_ENUM) };
#undef SPRAYNET_ANOMALY_REASON_ENUM
inline constexpr size_t kAnomalyReasonCount =
    SPRAYNET_COUNTER_COUNT(SPRAYNET_PPCID_ANOMALY_REASONS);
std::string_view to_string(AnomalyReason reason);

// The detector's counters: packets judged, QPs flagged, table overflow, then evidence packets by
// reason (anomalous_<reason>).
#define SPRAYNET_PPCID_ANOMALY_COUNTERS(X)                                 \
  X(packets)           /* RoCEv2 packets judged */                         \
  X(qps_flagged)       /* QPs whose evidence reached the threshold */      \
  X(qp_table_overflow) /* packets of QPs the full table had no slot for */ \
  X(anomalous_wrong_uplink)                                                \
  X(anomalous_bad_check)                                                   \
  X(anomalous_unknown_path)                                                \
  X(anomalous_ppcid_missing)                                               \
  X(anomalous_ppcid_unexpected)                                            \
  X(anomalous_layout_flip)

struct PpcidAnomalyCounters {
  SPRAYNET_PPCID_ANOMALY_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(PpcidAnomalyCounters, SPRAYNET_PPCID_ANOMALY_COUNTERS)
};
static_assert(sizeof(PpcidAnomalyCounters) ==
              sizeof(uint64_t) * SPRAYNET_COUNTER_COUNT(SPRAYNET_PPCID_ANOMALY_COUNTERS));
static_assert(PpcidAnomalyCounters::kCounters == 3 + kAnomalyReasonCount,
              "one anomalous_<reason> counter per SPRAYNET_PPCID_ANOMALY_REASONS entry");

struct PpcidAnomalyConfig {
  static constexpr uint32_t kMaxThreshold = 3;  // the "within 3 forged packets" guarantee
  static constexpr uint32_t kMaxQps = 1u << 20;
  uint32_t qp_table_size = 4096;  // QPs tracked, 1..kMaxQps
  uint32_t threshold = 3;         // evidence packets that flag a QP, 1..kMaxThreshold
  // Path id of each uplink's cable, by uplink index; empty: no wrong_uplink rule (fabric paths).
  std::vector<uint8_t> uplink_path_ids;
  std::string check() const;  // "" when valid, else why not
};

// One QP the detector has seen. first_ns / last_ns: its first and latest evidence packet.
struct AnomalyQp {
  uint32_t dest_qp = 0;
  bool flagged = false;
  AnomalyReason reason = AnomalyReason::wrong_uplink;  // of the packet that flagged it
  uint16_t uplink = 0;                                 // that packet's uplink
  uint32_t psn = 0;                                    // and PSN
  uint32_t evidence = 0;                               // evidence packets so far
  uint64_t packets = 0;                                // every packet judged for it
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  uint64_t flagged_ns = 0;
  std::array<uint32_t, kAnomalyReasonCount> by_reason{};
};

class PpcidAnomalyDetector {
 public:
  explicit PpcidAnomalyDetector(PpcidAnomalyConfig config);  // std::invalid_argument if !check()

  // Judges one received RoCEv2 packet. Returns the QP when this packet flagged it (once per
  // QP), nullptr otherwise. The pointer stays valid for the detector's life.
  const AnomalyQp* observe(uint32_t dest_qp, uint16_t uplink, const PpcidReading& reading,
                           uint32_t psn, uint64_t now_ns);

  const PpcidAnomalyCounters& counters() const { return counters_; }
  // Bytes of the detector: the object, its QP table and its flagged list.
  uint64_t memory_bytes() const {
    return sizeof(*this) + slots_.capacity() * sizeof(Slot) +
           flagged_.capacity() * sizeof(uint32_t);
  }
  const PpcidAnomalyConfig& config() const { return config_; }
  // Flagged QPs in the order they were flagged.
  size_t flagged_count() const { return flagged_.size(); }
  const AnomalyQp& flagged(size_t i) const { return slots_[flagged_[i]].qp; }
  size_t qps_tracked() const { return used_; }
  const AnomalyQp* find(uint32_t dest_qp) const;

 private:
  // What the QP's first packet showed (PPCID or none), and its first readable PPCID's layout.
  enum class Layout : uint8_t { kUnset, kConfigured, kOther };
  struct Slot {
    bool used = false;
    bool sprayed = false;
    Layout layout = Layout::kUnset;
    AnomalyQp qp;
  };

  Slot* slot_for(uint32_t dest_qp);  // nullptr when the table is full
  size_t home(uint32_t dest_qp) const;

  PpcidAnomalyConfig config_;
  std::vector<Slot> slots_;        // power of two >= 2 x qp_table_size: probes stay short
  std::vector<uint32_t> flagged_;  // slot indexes, reserved to qp_table_size
  size_t used_ = 0;
  PpcidAnomalyCounters counters_;
};

}  // namespace spraynet
