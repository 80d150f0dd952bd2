#include "dataplane/nic/ppcid_anomaly_detector.h"

#include <stdexcept>

namespace spraynet {

std::string_view to_string(AnomalyReason reason) {
#define SPRAYNET_ANOMALY_REASON_CASE(name) \
  case AnomalyReason::name:                \
    return #name;
  switch (reason) { SPRAYNET_PPCID_ANOMALY_REASONS(SPRAYNET_ANOMALY_REASON_CASE) }
#undef SPRAYNET_ANOMALY_REASON_CASE
  return "unknown";
}

std::string PpcidAnomalyConfig::check() const {
  if (qp_table_size < 1 || qp_table_size > kMaxQps) {
    return "qp_table_size must be 1.." + std::to_string(kMaxQps);
  }
  if (threshold < 1 || threshold > kMaxThreshold) {
    return "threshold must be 1.." + std::to_string(kMaxThreshold) +
           " (a QP must be flagged within 3 forged packets)";
  }
  return "";
}

PpcidAnomalyDetector::PpcidAnomalyDetector(PpcidAnomalyConfig config) : config_(std::move(config)) {
  if (const std::string why = config_.check(); !why.empty()) {
    throw std::invalid_argument("ppcid anomaly detector: " + why);
  }
  size_t n = 2;
  while (n < size_t{2} * config_.qp_table_size) n <<= 1;
  slots_.resize(n);
  flagged_.reserve(config_.qp_table_size);
}

size_t PpcidAnomalyDetector::home(uint32_t dest_qp) const {
  // Fibonacci hashing: consecutive QP numbers (how QPs are handed out) spread over the table.
  const uint64_t h = uint64_t{dest_qp} * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> 32) & (slots_.size() - 1);
}

PpcidAnomalyDetector::Slot* PpcidAnomalyDetector::slot_for(uint32_t dest_qp) {
  const size_t mask = slots_.size() - 1;
  for (size_t i = home(dest_qp);; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.used && s.qp.dest_qp == dest_qp) return &s;
    if (!s.used) {
      // The table is at most half full, so an empty slot ends every probe.
      if (used_ >= config_.qp_table_size) return nullptr;
      s.used = true;
      s.qp.dest_qp = dest_qp;
      ++used_;
      return &s;
    }
  }
}

const AnomalyQp* PpcidAnomalyDetector::find(uint32_t dest_qp) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = home(dest_qp);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.used) return nullptr;
    if (s.qp.dest_qp == dest_qp) return &s.qp;
  }
}

const AnomalyQp* PpcidAnomalyDetector::observe(uint32_t dest_qp, uint16_t uplink,
                                               const PpcidReading& reading, uint32_t psn,
                                               uint64_t now_ns) {
  ++counters_.packets;
  Slot* s = slot_for(dest_qp);
  if (s == nullptr) {
    ++counters_.qp_table_overflow;
    return nullptr;
  }
  AnomalyQp& qp = s->qp;
  const bool present = reading.verdict != PpcidVerdict::kAbsent;
  if (qp.packets++ == 0) s->sprayed = present;
  const bool readable =
      reading.verdict == PpcidVerdict::kOk || reading.verdict == PpcidVerdict::kLayoutMismatch;
  const Layout layout = reading.verdict == PpcidVerdict::kOk ? Layout::kConfigured : Layout::kOther;
  if (readable && s->layout == Layout::kUnset) s->layout = layout;

  bool evidence = true;
  AnomalyReason reason = AnomalyReason::wrong_uplink;
  if (reading.verdict == PpcidVerdict::kOk && uplink < config_.uplink_path_ids.size() &&
      reading.path_id != config_.uplink_path_ids[uplink]) {
    reason = AnomalyReason::wrong_uplink;
  } else if (reading.verdict == PpcidVerdict::kBadCheck) {
    reason = AnomalyReason::bad_check;
  } else if (reading.verdict == PpcidVerdict::kUnknownPath) {
    reason = AnomalyReason::unknown_path;
  } else if (!present && s->sprayed) {
    reason = AnomalyReason::ppcid_missing;
  } else if (present && !s->sprayed) {
    reason = AnomalyReason::ppcid_unexpected;
  } else if (readable && s->layout != layout) {
    reason = AnomalyReason::layout_flip;
  } else {
    evidence = false;
  }
  if (!evidence) return nullptr;

  switch (reason) {
#define SPRAYNET_ANOMALY_REASON_COUNT(name) \
  case AnomalyReason::name:                 \
    ++counters_.anomalous_##name;           \
    break;
    SPRAYNET_PPCID_ANOMALY_REASONS(SPRAYNET_ANOMALY_REASON_COUNT)
#undef SPRAYNET_ANOMALY_REASON_COUNT
  }
  ++qp.by_reason[static_cast<size_t>(reason)];
  if (qp.evidence++ == 0) qp.first_ns = now_ns;
  qp.last_ns = now_ns;
  if (qp.flagged || qp.evidence < config_.threshold) return nullptr;
  qp.flagged = true;
  qp.reason = reason;
  qp.uplink = uplink;
  qp.psn = psn;
  qp.flagged_ns = now_ns;
  flagged_.push_back(static_cast<uint32_t>(s - slots_.data()));
  ++counters_.qps_flagged;
  return &qp;
}

}  // namespace spraynet
