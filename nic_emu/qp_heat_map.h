// The spraying heat map of a NIC: per QP (source IP, destination QP), how many packets arrived
// on each uplink. Counts are kept flat, entries x uplinks, rather than in an array sized for the
// most uplinks a NIC may have: a fabric host with one uplink and 100,000 flows keeps 16 bytes
// per flow, not 136 (issue 39: the 128-host cdf runs grew by the heat map more than by any other
// per-flow state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace spraynet::nic_emu {

// A QP the map counts: the source of its packets and the QP they are for.
struct QpArrivals {
  uint32_t src_ip = 0;
  uint32_t dest_qp = 0;
};

class QpHeatMap {
 public:
  // `uplinks`: 1..16; at most `max_qps` entries (later QPs are not counted: count() says so).
  QpHeatMap(uint16_t uplinks, size_t max_qps);
  // Entries and counts as entries() and counts() gave them (another process's copy); throws
  // std::invalid_argument when they do not fit together.
  QpHeatMap(uint16_t uplinks, std::vector<QpArrivals> entries, std::vector<uint64_t> counts);

  // One packet of (src_ip, dest_qp) on `uplink` (< uplinks()). False, counting nothing, when the
  // QP is new and the map already holds max_qps.
  bool count(uint32_t src_ip, uint32_t dest_qp, uint16_t uplink);

  uint16_t uplinks() const { return uplinks_; }
  size_t size() const { return entries_.size(); }
  const std::vector<QpArrivals>& entries() const { return entries_; }  // in order of first arrival
  const std::vector<uint64_t>& counts() const { return counts_; }      // size() x uplinks()
  // Entry i's packets per uplink.
  std::span<const uint64_t> per_uplink(size_t i) const {
    return {counts_.data() + i * uplinks_, uplinks_};
  }
  // The entry of (src_ip, dest_qp), if counted.
  std::optional<size_t> find(uint32_t src_ip, uint32_t dest_qp) const;
  uint64_t memory_bytes() const;

 private:
  static uint64_t key(uint32_t src_ip, uint32_t dest_qp) {
    return (uint64_t{src_ip} << 24) | (dest_qp & 0xFFFFFFu);
  }
  uint16_t uplinks_;
  size_t max_qps_;
  std::vector<QpArrivals> entries_;
  std::vector<uint64_t> counts_;
  std::unordered_map<uint64_t, uint32_t> index_;  // key -> entry
};

}  // namespace spraynet::nic_emu
