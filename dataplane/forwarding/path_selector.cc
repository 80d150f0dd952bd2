#include "dataplane/forwarding/path_selector.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dataplane/memory_usage.h"

namespace spraynet {

namespace {

const PathGroupConfig& validated(const PathGroupConfig& config) {
  const auto& ports = config.member_ports;
  if (ports.empty()) throw std::invalid_argument("path group: no member ports");
  if (ports.size() > PathSelector::kMaxMembers) {
    throw std::invalid_argument("path group: " + std::to_string(ports.size()) +
                                " member ports, at most " +
                                std::to_string(PathSelector::kMaxMembers));
  }
  std::vector<uint16_t> sorted = ports;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    throw std::invalid_argument("path group: port " + std::to_string(*dup) +
                                " is a member twice (use weights to favour a port)");
  }
  if (sorted.back() == PathSelector::kNoPort) {
    throw std::invalid_argument("path group: port id 65535 is reserved (kNoPort)");
  }
  if (config.spray_path_divisor < 1 || config.spray_path_divisor > 256) {
    throw std::invalid_argument("path group: spray_path_divisor " +
                                std::to_string(config.spray_path_divisor) + ", allowed 1..256");
  }
  return config;
}

// The step between consecutive path ids' buckets: the odd number nearest table_size / phi
// (Fibonacci hashing). Odd, so that path ids 0..P-1 hit every residue modulo any power of two
// P: a table that rebuild() grew by tiling repeats its old layout with period P, and the path
// ids still cover all of it. Near size / phi, so that on contiguous runs of buckets the points
// spread evenly (three-distance theorem) and each member gets path ids in proportion to its
// buckets. (Powers-of-two strides fail the first case: they alias with the tiling period.)
uint32_t spray_stride(uint32_t table_size) {
  if (table_size < 2) return 0;
  const uint32_t near = static_cast<uint32_t>(table_size * 0.6180339887498949 + 0.5);
  return near | 1;
}

}  // namespace

std::string_view to_string(LbMode mode) {
  switch (mode) {
    case LbMode::kEcmp:
      return "ecmp";
    case LbMode::kWeighted:
      return "weighted";
    case LbMode::kDlb:
      return "dlb";
    case LbMode::kDrill:
      return "drill";
    case LbMode::kLetflow:
      return "letflow";
    case LbMode::kConga:
      return "conga";
    case LbMode::kConweave:
      return "conweave";
  }
  return "?";
}

std::optional<LbMode> parse_lb_mode(std::string_view name) {
  if (name == "ecmp") return LbMode::kEcmp;
  if (name == "weighted") return LbMode::kWeighted;
  if (name == "dlb") return LbMode::kDlb;
  if (name == "drill") return LbMode::kDrill;
  if (name == "letflow") return LbMode::kLetflow;
  if (name == "conga") return LbMode::kConga;
  if (name == "conweave") return LbMode::kConweave;
  return std::nullopt;
}

PathSelector::PathSelector(const PathGroupConfig& config)
    : mode_(config.mode),
      members_(validated(config).member_ports),
      owned_(std::make_unique<const BucketTable>(
          BucketTable::build(std::vector<uint32_t>(members_.size(), 1)))),
      table_(owned_.get()),
      // LetFlow's draws and DRILL's from different streams of the one seed.
      flowlets_(config.dlb_table_entries, config.dlb_gap_ns, config.seed ^ 0x4C6574466C6F77ull),
      drill_(config.seed),
      member_loads_(members_.size()),
      member_packets_(members_.size(), 0),
      excluded_(members_.size(), false),
      max_member_(*std::max_element(members_.begin(), members_.end())),
      multiply_shift_(config.ecmp_multiply_shift),
      path_divisor_(config.spray_path_divisor) {}

std::unique_ptr<const BucketTable> PathSelector::make_table(
    std::span<const uint32_t> weights) const {
  if (weights.size() != members_.size()) {
    throw std::invalid_argument("path group: " + std::to_string(weights.size()) + " weights for " +
                                std::to_string(members_.size()) + " members");
  }
  return std::make_unique<const BucketTable>(BucketTable::rebuild(*owned_, weights));
}

std::unique_ptr<const BucketTable> PathSelector::publish_table(
    std::unique_ptr<const BucketTable> table) {
  if (table == nullptr) throw std::invalid_argument("path group: null bucket table");
  if (table->member_count() != members_.size()) {
    throw std::invalid_argument("path group: bucket table for " +
                                std::to_string(table->member_count()) + " members, group has " +
                                std::to_string(members_.size()));
  }
  std::unique_ptr<const BucketTable> old = std::move(owned_);
  owned_ = std::move(table);
  table_.store(owned_.get(), std::memory_order_release);
  return old;
}

void PathSelector::follow(const PathSelector& primary) {
  if (primary.members_ != members_) {
    throw std::invalid_argument("path group: a replica must have its primary's members");
  }
  mode_src_ = &primary.mode_;
  table_src_ = &primary.table_;
}

void PathSelector::set_weights(std::span<const uint32_t> weights) {
  publish_table(make_table(weights));  // the old table is freed here: no reader on this path
}

uint32_t PathSelector::gather_loads(std::span<const PathLoad> port_loads) {
  uint32_t eligible = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] < port_loads.size()) {
      member_loads_[i] = port_loads[members_[i]];
      member_loads_[i].eligible = member_loads_[i].eligible && !excluded_[i];
    } else {
      member_loads_[i] = PathLoad{0, false};
      ++counters_.missing_load;
    }
    eligible += member_loads_[i].eligible;
  }
  return eligible;
}

uint16_t PathSelector::nth_eligible(uint32_t k) const {
  for (size_t i = 0; i < member_loads_.size(); ++i) {
    if (member_loads_[i].eligible && k-- == 0) return static_cast<uint16_t>(i);
  }
  return BucketTable::kNoMember;  // not reached while k < the eligible count
}

uint16_t PathSelector::hash_over_eligible(uint32_t hash, uint32_t eligible) const {
  const uint32_t k = multiply_shift_ ? scale_to_range(hash, eligible) : hash % eligible;
  if (eligible == members_.size()) return static_cast<uint16_t>(k);
  return nth_eligible(k);
}

uint16_t PathSelector::from_bucket(const BucketTable& table, uint32_t index, uint32_t fallback_key,
                                   uint32_t eligible, bool all) {
  uint16_t member = table.select(index);
  if (member != BucketTable::kNoMember && (all || member_loads_[member].eligible)) return member;
  if (member == BucketTable::kNoMember) {
    ++counters_.empty_table;  // every weight 0 (all paths saturated?): still forward
  } else {
    ++counters_.rehashed_ineligible;
  }
  // Not fallback_key % eligible: the packets that get here share the low bits that chose the
  // ineligible member's buckets, and % of an even count would inherit that pattern (with 2 of
  // 8 down, only every other survivor would take their traffic). The top bits of a Fibonacci
  // product depend on every bit of the key.
  const uint32_t k = scale_to_range(fallback_key * 0x9E3779B1u, eligible);
  return eligible == members_.size() ? static_cast<uint16_t>(k) : nth_eligible(k);
}

uint16_t PathSelector::to_port(uint16_t member) {
  if (member == BucketTable::kNoMember) {
    ++counters_.no_eligible_port;
    return kNoPort;
  }
  ++member_packets_[member];
  return members_[member];
}

uint16_t PathSelector::select(uint32_t flow_hash, uint64_t now_ns,
                              std::span<const PathLoad> port_loads, bool all_eligible) {
  const LbMode m = mode();
  if ((m == LbMode::kEcmp || m == LbMode::kWeighted || m == LbMode::kConweave) &&
      all_members_eligible(port_loads, all_eligible)) {
    const auto n = static_cast<uint32_t>(members_.size());
    const uint16_t member = m != LbMode::kWeighted
                                ? hash_over_eligible(flow_hash, n)
                                : from_bucket(bucket_table(), flow_hash, flow_hash, n, true);
    ++counters_.selected;
    return to_port(member);
  }
  const uint32_t eligible = gather_loads(port_loads);
  if (eligible == 0) return to_port(BucketTable::kNoMember);
  uint16_t member = BucketTable::kNoMember;
  switch (m) {
    case LbMode::kEcmp:
    case LbMode::kConweave:
      member = hash_over_eligible(flow_hash, eligible);
      break;
    case LbMode::kWeighted:
      member = from_bucket(bucket_table(), flow_hash, flow_hash, eligible);
      break;
    case LbMode::kDlb:
      member = flowlets_.select(flow_hash, now_ns, member_loads_);
      break;
    case LbMode::kDrill:
      member = drill_.select(member_loads_);
      break;
    case LbMode::kLetflow:
    case LbMode::kConga:
      member = flowlets_.select_random(flow_hash, now_ns, member_loads_);
      break;
  }
  if (member != BucketTable::kNoMember) ++counters_.selected;
  return to_port(member);
}

uint16_t PathSelector::select_conga(uint32_t flow_hash, uint64_t now_ns,
                                    std::span<const PathLoad> port_loads,
                                    std::span<const uint8_t> metrics) {
  const uint32_t eligible = gather_loads(port_loads);
  if (eligible == 0) return to_port(BucketTable::kNoMember);
  const uint16_t member =
      flowlets_.select_least_congested(flow_hash, now_ns, member_loads_, metrics);
  if (member != BucketTable::kNoMember) ++counters_.selected;
  return to_port(member);
}

uint16_t PathSelector::select_sprayed(uint32_t flow_hash, uint8_t path_id, uint64_t /*now_ns*/,
                                      std::span<const PathLoad> port_loads,
                                      bool all_eligible) {
  const bool all = all_members_eligible(port_loads, all_eligible);
  const uint32_t eligible =
      all ? static_cast<uint32_t>(members_.size()) : gather_loads(port_loads);
  if (eligible == 0) return to_port(BucketTable::kNoMember);
  // One load of the published table per packet: its size and its buckets belong together.
  const BucketTable& table = bucket_table();
  // This group's digit of the path id (the whole id unless a tier below chose by its low part).
  const uint32_t p = path_divisor_ == 1 ? path_id : path_id / path_divisor_;
  const uint32_t index = flow_hash + p * spray_stride(table.size());
  const uint16_t member = from_bucket(table, index, flow_hash + p, eligible, all);
  ++counters_.sprayed;
  return to_port(member);
}

void PathSelector::set_member_excluded(uint16_t member, bool excluded) {
  if (excluded_.at(member) == excluded) return;
  excluded_[member] = excluded;
  excluded_count_ = excluded ? excluded_count_ + 1 : excluded_count_ - 1;
}

uint64_t PathSelector::memory_bytes() const {
  uint64_t b = sizeof(*this) + capacity_bytes(members_) + capacity_bytes(member_loads_) +
               capacity_bytes(member_packets_) + excluded_.capacity() / 8 +
               flowlets_.heap_bytes() + drill_.heap_bytes();
  if (owned_ != nullptr) b += sizeof(BucketTable) + owned_->heap_bytes();
  return b;
}

}  // namespace spraynet
