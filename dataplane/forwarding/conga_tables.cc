#include "dataplane/forwarding/conga_tables.h"

#include <stdexcept>
#include <string>

#include "dataplane/memory_usage.h"

namespace spraynet {

CongaTables::CongaTables(unsigned leaves, uint64_t aging_ns)
    : leaves_(leaves), aging_ns_(aging_ns) {
  if (leaves == 0 || leaves > kMaxLeaves) {
    throw std::invalid_argument("CONGA tables: " + std::to_string(leaves) + " leaves, allowed 1.." +
                                std::to_string(kMaxLeaves));
  }
  from_.resize(size_t{leaves} * kUplinks);
  to_.resize(size_t{leaves} * kUplinks);
  next_fb_.assign(leaves, 0);
}

void CongaTables::record_arrival(uint8_t src_leaf, uint8_t lbtag, uint8_t ce, uint64_t now_ns) {
  if (src_leaf >= leaves_ || lbtag >= kUplinks) {
    ++counters_.bad_leaf;
    return;
  }
  from_[size_t{src_leaf} * kUplinks + lbtag] = Entry{now_ns, ce, true};
  ++counters_.arrivals;
}

void CongaTables::record_feedback(uint8_t leaf, uint8_t lbtag, uint8_t metric, uint64_t now_ns) {
  if (leaf >= leaves_ || lbtag >= kUplinks) {
    ++counters_.bad_leaf;
    return;
  }
  to_[size_t{leaf} * kUplinks + lbtag] = Entry{now_ns, metric, true};
  ++counters_.feedback_received;
}

std::optional<CongaFeedback> CongaTables::next_feedback(uint8_t dst_leaf, uint64_t now_ns) {
  if (dst_leaf >= leaves_) return std::nullopt;
  const Entry* row = &from_[size_t{dst_leaf} * kUplinks];
  uint8_t& next = next_fb_[dst_leaf];
  for (unsigned i = 0; i < kUplinks; ++i) {
    const uint8_t tag = static_cast<uint8_t>((next + i) % kUplinks);
    if (live(row[tag], now_ns)) {
      next = static_cast<uint8_t>((tag + 1) % kUplinks);
      ++counters_.feedback_sent;
      return CongaFeedback{tag, row[tag].metric};
    }
  }
  return std::nullopt;
}

uint8_t CongaTables::remote_metric(uint8_t leaf, uint8_t uplink, uint64_t now_ns) const {
  if (leaf >= leaves_ || uplink >= kUplinks) return 0;
  const Entry& e = to_[size_t{leaf} * kUplinks + uplink];
  return live(e, now_ns) ? e.metric : 0;
}

std::optional<uint8_t> CongaTables::from_leaf_metric(uint8_t leaf, uint8_t lbtag,
                                                     uint64_t now_ns) const {
  if (leaf >= leaves_ || lbtag >= kUplinks) return std::nullopt;
  const Entry& e = from_[size_t{leaf} * kUplinks + lbtag];
  if (!live(e, now_ns)) return std::nullopt;
  return e.metric;
}

uint64_t CongaTables::live_entries(uint64_t now_ns) const {
  uint64_t n = 0;
  for (const Entry& e : from_) n += live(e, now_ns);
  for (const Entry& e : to_) n += live(e, now_ns);
  return n;
}

uint64_t CongaTables::heap_bytes() const {
  return capacity_bytes(from_) + capacity_bytes(to_) + capacity_bytes(next_fb_);
}

}  // namespace spraynet
