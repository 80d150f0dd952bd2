#include "nic_emu/qp_heat_map.h"

#include <stdexcept>
#include <string>

#include "dataplane/memory_usage.h"

namespace spraynet::nic_emu {
namespace {

uint16_t checked_uplinks(uint16_t uplinks) {
  if (uplinks == 0 || uplinks > 16) {
    throw std::invalid_argument("heat map: 1 to 16 uplinks, got " + std::to_string(uplinks));
  }
  return uplinks;
}

}  // namespace

QpHeatMap::QpHeatMap(uint16_t uplinks, size_t max_qps)
    : uplinks_(checked_uplinks(uplinks)), max_qps_(max_qps) {}

QpHeatMap::QpHeatMap(uint16_t uplinks, std::vector<QpArrivals> entries,
                     std::vector<uint64_t> counts)
    : uplinks_(checked_uplinks(uplinks)),
      max_qps_(entries.size()),
      entries_(std::move(entries)),
      counts_(std::move(counts)) {
  if (counts_.size() != entries_.size() * uplinks_) {
    throw std::invalid_argument("heat map: " + std::to_string(counts_.size()) + " counts for " +
                                std::to_string(entries_.size()) + " QPs x " +
                                std::to_string(uplinks_) + " uplinks");
  }
  index_.reserve(entries_.size());
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    if (!index_.emplace(key(entries_[i].src_ip, entries_[i].dest_qp), i).second) {
      throw std::invalid_argument("heat map: a QP listed twice");
    }
  }
}

bool QpHeatMap::count(uint32_t src_ip, uint32_t dest_qp, uint16_t uplink) {
  if (uplink >= uplinks_) throw std::out_of_range("heat map: uplink " + std::to_string(uplink));
  auto it = index_.find(key(src_ip, dest_qp));
  if (it == index_.end()) {
    if (entries_.size() >= max_qps_) return false;
    it = index_.emplace(key(src_ip, dest_qp), static_cast<uint32_t>(entries_.size())).first;
    entries_.push_back({src_ip, dest_qp});
    counts_.resize(counts_.size() + uplinks_, 0);
  }
  ++counts_[size_t{it->second} * uplinks_ + uplink];
  return true;
}

std::optional<size_t> QpHeatMap::find(uint32_t src_ip, uint32_t dest_qp) const {
  const auto it = index_.find(key(src_ip, dest_qp));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

uint64_t QpHeatMap::memory_bytes() const {
  return capacity_bytes(entries_) + capacity_bytes(counts_) + unordered_map_bytes(index_);
}

}  // namespace spraynet::nic_emu
