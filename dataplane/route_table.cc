#include "dataplane/route_table.h"

#include <rte_errno.h>
#include <rte_lpm.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace spraynet {

namespace {

uint32_t depth_mask(uint8_t depth) {
  return depth == 0 ? 0 : ~uint32_t{0} << (32 - depth);
}

std::string route_string(uint32_t prefix, uint8_t depth) {
  return ipv4_to_string(prefix) + "/" + std::to_string(depth);
}

}  // namespace

std::string ipv4_to_string(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
         std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
}

RouteTable::RouteTable(std::string_view name, uint32_t max_routes, int socket_id) : name_(name) {
  if (name_.empty() || name_.size() >= RTE_LPM_NAMESIZE) {
    throw std::invalid_argument("route table name '" + name_ + "' must be 1 to " +
                                std::to_string(RTE_LPM_NAMESIZE - 1) + " characters");
  }
  if (max_routes == 0) {
    throw std::invalid_argument("route table '" + name_ + "': max_routes must be at least 1");
  }
  rte_lpm_config config{};
  config.max_rules = max_routes;
  config.number_tbl8s = std::clamp<uint32_t>(max_routes, 16, 65536);
  lpm_ = rte_lpm_create(name_.c_str(), socket_id, &config);
  if (lpm_ == nullptr) {
    throw std::runtime_error("route table '" + name_ +
                             "': rte_lpm_create failed: " + rte_strerror(rte_errno));
  }
}

RouteTable::~RouteTable() {
  rte_lpm_free(lpm_);
}

RouteTable::RouteTable(RouteTable&& other) noexcept
    : name_(std::move(other.name_)),
      lpm_(std::exchange(other.lpm_, nullptr)),
      default_group_(std::exchange(other.default_group_, std::nullopt)),
      route_count_(std::exchange(other.route_count_, 0)) {}

RouteTable& RouteTable::operator=(RouteTable&& other) noexcept {
  if (this != &other) {
    rte_lpm_free(lpm_);
    name_ = std::move(other.name_);
    lpm_ = std::exchange(other.lpm_, nullptr);
    default_group_ = std::exchange(other.default_group_, std::nullopt);
    route_count_ = std::exchange(other.route_count_, 0);
  }
  return *this;
}

void RouteTable::add(uint32_t prefix, uint8_t depth, uint32_t group) {
  if (depth > 32) {
    throw std::invalid_argument("route table '" + name_ + "': prefix length " +
                                std::to_string(depth) + " is beyond /32");
  }
  if ((prefix & ~depth_mask(depth)) != 0) {
    throw std::invalid_argument("route table '" + name_ + "': " + route_string(prefix, depth) +
                                " has host bits set (did you mean " +
                                route_string(prefix & depth_mask(depth), depth) + "?)");
  }
  if (group > kMaxGroup) {
    throw std::invalid_argument("route table '" + name_ + "': group " + std::to_string(group) +
                                " for " + route_string(prefix, depth) + " is above " +
                                std::to_string(kMaxGroup));
  }
  if (depth == 0) {
    if (!default_group_) ++route_count_;
    default_group_ = group;
    return;
  }
  uint32_t existing;
  const bool replacing = rte_lpm_is_rule_present(lpm_, prefix, depth, &existing) == 1;
  const int rc = rte_lpm_add(lpm_, prefix, depth, group);
  if (rc < 0) {
    throw std::runtime_error("route table '" + name_ + "': cannot add " +
                             route_string(prefix, depth) + ": " + rte_strerror(-rc) +
                             (rc == -ENOSPC ? " (table full)" : ""));
  }
  if (!replacing) ++route_count_;
}

bool RouteTable::remove(uint32_t prefix, uint8_t depth) {
  if (depth > 32 || (prefix & ~depth_mask(depth)) != 0) return false;
  if (depth == 0) {
    if (!default_group_) return false;
    default_group_.reset();
    --route_count_;
    return true;
  }
  if (rte_lpm_delete(lpm_, prefix, depth) != 0) return false;
  --route_count_;
  return true;
}

std::optional<uint32_t> RouteTable::lookup(uint32_t dst_ip) const {
  uint32_t group;
  if (rte_lpm_lookup(lpm_, dst_ip, &group) == 0) return group;
  return default_group_;
}

unsigned RouteTable::lookup_burst(std::span<const uint32_t> dst_ips,
                                  std::span<uint32_t> groups) const {
  const size_t n = std::min(dst_ips.size(), groups.size());
  // rte_lpm_lookup_bulk keeps a variable-length array of n indexes on the stack: feed it
  // bounded, non-empty chunks. It marks hits with RTE_LPM_LOOKUP_SUCCESS beside the next hop.
  constexpr size_t kChunk = 64;
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    rte_lpm_lookup_bulk(lpm_, dst_ips.data() + start, groups.data() + start,
                        static_cast<unsigned>(count));
  }
  const uint32_t miss = default_group_.value_or(kNoRoute);
  unsigned hits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (groups[i] & RTE_LPM_LOOKUP_SUCCESS) {
      groups[i] &= kMaxGroup;
      ++hits;
    } else {
      groups[i] = miss;
      if (default_group_) ++hits;
    }
  }
  for (size_t i = n; i < groups.size(); ++i) groups[i] = kNoRoute;
  return hits;
}

}  // namespace spraynet
