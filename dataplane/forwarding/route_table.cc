#include "dataplane/forwarding/route_table.h"

#include <rte_common.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_mempool.h>
#include <rte_rib.h>
#include <rte_ring.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <utility>

#include "dataplane/forwarding/route_cache.h"

namespace spraynet {

namespace {

uint32_t depth_mask(uint8_t depth) {
  return depth == 0 ? 0 : ~uint32_t{0} << (32 - depth);
}

std::string route_string(uint32_t prefix, uint8_t depth) {
  return ipv4_to_string(prefix) + "/" + std::to_string(depth);
}

}  // namespace

std::string_view to_string(RouteTableBackend backend) {
  switch (backend) {
    case RouteTableBackend::kLpm:
      return "lpm";
    case RouteTableBackend::kRib:
      return "rib";
    case RouteTableBackend::kHash:
      return "hash";
  }
  return "?";
}

std::optional<RouteTableBackend> parse_route_table_backend(std::string_view name) {
  if (name == "lpm") return RouteTableBackend::kLpm;
  if (name == "rib") return RouteTableBackend::kRib;
  if (name == "hash") return RouteTableBackend::kHash;
  return std::nullopt;
}

std::string ipv4_to_string(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
         std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
}

static_assert(RouteTable::kMaxLpmNameLength == RTE_LPM_NAMESIZE - 1);

namespace {

// rte_lpm_create's tbl8 groups for max_routes (the constructor's choice).
uint32_t lpm_tbl8_groups(uint32_t max_routes) {
  return std::clamp<uint32_t>(max_routes, 16, 65536);
}

}  // namespace

RouteTable::RouteTable(std::string_view name, uint32_t max_routes, int socket_id,
                       RouteTableBackend backend)
    : name_(name), backend_(backend), max_routes_(max_routes) {
  // kHash has no DPDK name; it takes rte_lpm's limit so that a name fits any backend's swap.
  const size_t max_name =
      backend_ == RouteTableBackend::kRib ? kMaxRibNameLength : kMaxLpmNameLength;
  if (name_.empty() || name_.size() > max_name) {
    throw std::invalid_argument("route table name '" + name_ + "' must be 1 to " +
                                std::to_string(max_name) + " characters (" +
                                std::string(to_string(backend_)) + " backend)");
  }
  if (max_routes == 0) {
    throw std::invalid_argument("route table '" + name_ + "': max_routes must be at least 1");
  }
  if (backend_ == RouteTableBackend::kLpm) {
    rte_lpm_config config{};
    config.max_rules = max_routes;
    config.number_tbl8s = lpm_tbl8_groups(max_routes);
    lpm_ = rte_lpm_create(name_.c_str(), socket_id, &config);
    if (lpm_ == nullptr) {
      throw std::runtime_error("route table '" + name_ +
                               "': rte_lpm_create failed: " + rte_strerror(rte_errno));
    }
    return;
  }
  if (backend_ == RouteTableBackend::kHash) return;  // nothing to allocate up front
  if (max_routes > INT_MAX / 2) {
    throw std::invalid_argument("route table '" + name_ + "': max_routes " +
                                std::to_string(max_routes) + " is above " +
                                std::to_string(INT_MAX / 2) + " for the rib backend");
  }
  // Every trie node without a route of its own branches two ways, so n routes take at most
  // 2n - 1 nodes: with 2 * max_routes nodes an insert below max_routes never runs out.
  rte_rib_conf config{};
  config.ext_sz = 0;
  config.max_nodes = static_cast<int>(2 * max_routes);
  rib_ = rte_rib_create(name_.c_str(), socket_id, &config);
  if (rib_ == nullptr) {
    throw std::runtime_error("route table '" + name_ +
                             "': rte_rib_create failed: " + rte_strerror(rte_errno));
  }
}

uint64_t RouteTable::memory_bytes() const {
  uint64_t b = sizeof(*this) + (name_.capacity() > 15 ? name_.capacity() + 1 : 0);
  if (lpm_ != nullptr) {
    // rte_lpm_create: the table with its tbl24 (struct rte_lpm, 2^24 4-byte entries), max_rules
    // rules of 8 bytes, number_tbl8s groups of 256 4-byte entries.
    b += sizeof(rte_lpm) + uint64_t{max_routes_} * 8 +
         uint64_t{lpm_tbl8_groups(max_routes_)} * RTE_LPM_TBL8_GROUP_NUM_ENTRIES * 4;
  }
  if (rib_ != nullptr) {
    // rte_rib_create: the rib (a cache line) and its node pool "MP_<name>" of max_nodes objects,
    // each with the mempool's object header and padding (read from the pool), the pool's ring
    // of the next power of two above max_nodes pointers, and the pool's own header.
    b += 64;
    const std::string pool_name = "MP_" + name_;
    if (const rte_mempool* mp = rte_mempool_lookup(pool_name.c_str())) {
      b += uint64_t{mp->size} * (mp->header_size + mp->elt_size + mp->trailer_size);
      b += static_cast<uint64_t>(rte_ring_get_memsize(rte_align32pow2(mp->size + 1)));
      b += sizeof(rte_mempool) + mp->private_data_size;
    }
  }
  // kHash: libstdc++'s unordered_map, a bucket array of pointers and a node per route (the next
  // pointer, the key and value, the cached hash is not kept for integer keys).
  b += hash_.capacity() * sizeof(hash_[0]);
  for (const auto& [depth, routes] : hash_) {
    b += routes.bucket_count() * sizeof(void*) +
         routes.size() * (sizeof(void*) + sizeof(std::pair<const uint32_t, uint32_t>));
  }
  return b;
}

void RouteTable::release() {
  rte_lpm_free(lpm_);
  rte_rib_free(rib_);
  lpm_ = nullptr;
  rib_ = nullptr;
  hash_.clear();
}

RouteTable::~RouteTable() {
  release();
}

RouteTable::RouteTable(RouteTable&& other) noexcept
    : name_(std::move(other.name_)),
      backend_(other.backend_),
      lpm_(std::exchange(other.lpm_, nullptr)),
      rib_(std::exchange(other.rib_, nullptr)),
      hash_(std::move(other.hash_)),
      max_routes_(std::exchange(other.max_routes_, 0)),
      default_group_(std::exchange(other.default_group_, std::nullopt)),
      route_count_(std::exchange(other.route_count_, 0)) {}

RouteTable& RouteTable::operator=(RouteTable&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    backend_ = other.backend_;
    lpm_ = std::exchange(other.lpm_, nullptr);
    rib_ = std::exchange(other.rib_, nullptr);
    hash_ = std::move(other.hash_);
    other.hash_.clear();
    max_routes_ = std::exchange(other.max_routes_, 0);
    default_group_ = std::exchange(other.default_group_, std::nullopt);
    route_count_ = std::exchange(other.route_count_, 0);
    // Other routes at the same address: a cache this table filled must not answer for them.
    version_ = std::max(version_, other.version_) + 1;
  }
  return *this;
}

void RouteTable::add(uint32_t prefix, uint8_t depth, uint32_t group) {
  ++version_;  // before anything can fail: a cached answer never outlives a change
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
  if (lpm_ != nullptr) {
    uint32_t existing;
    const bool replacing = rte_lpm_is_rule_present(lpm_, prefix, depth, &existing) == 1;
    const int rc = rte_lpm_add(lpm_, prefix, depth, group);
    if (rc < 0) {
      throw std::runtime_error("route table '" + name_ + "': cannot add " +
                               route_string(prefix, depth) + ": " + rte_strerror(-rc) +
                               (rc == -ENOSPC ? " (table full)" : ""));
    }
    if (!replacing) ++route_count_;
    return;
  }
  if (backend_ == RouteTableBackend::kHash) {
    // Kept longest first: the first depth at or below this one is where it goes.
    auto at =
        std::find_if(hash_.begin(), hash_.end(), [&](const auto& d) { return d.first <= depth; });
    if (at == hash_.end() || at->first != depth) {
      at = hash_.emplace(at, depth, std::unordered_map<uint32_t, uint32_t>{});
    }
    if (!at->second.contains(prefix)) {
      // Same capacity as the other backends: max_routes routes of depth 1..32.
      if (route_count_ - (default_group_ ? 1 : 0) >= max_routes_) {
        if (at->second.empty()) hash_.erase(at);
        throw std::runtime_error("route table '" + name_ + "': cannot add " +
                                 route_string(prefix, depth) + ": " + rte_strerror(ENOSPC) +
                                 " (table full)");
      }
      ++route_count_;
    }
    at->second[prefix] = group;
    return;
  }
  rte_rib_node* node = rte_rib_lookup_exact(rib_, prefix, depth);
  if (node == nullptr) {
    // Same capacity as rte_lpm's max_rules: max_routes routes of depth 1..32.
    const uint32_t backend_routes = route_count_ - (default_group_ ? 1 : 0);
    if (backend_routes >= max_routes_) {
      throw std::runtime_error("route table '" + name_ + "': cannot add " +
                               route_string(prefix, depth) + ": " + rte_strerror(ENOSPC) +
                               " (table full)");
    }
    node = rte_rib_insert(rib_, prefix, depth);
    if (node == nullptr) {
      throw std::runtime_error("route table '" + name_ + "': cannot add " +
                               route_string(prefix, depth) + ": " + rte_strerror(rte_errno));
    }
    ++route_count_;
  }
  rte_rib_set_nh(node, group);
}

bool RouteTable::remove(uint32_t prefix, uint8_t depth) {
  ++version_;
  if (depth > 32 || (prefix & ~depth_mask(depth)) != 0) return false;
  if (depth == 0) {
    if (!default_group_) return false;
    default_group_.reset();
    --route_count_;
    return true;
  }
  if (lpm_ != nullptr) {
    if (rte_lpm_delete(lpm_, prefix, depth) != 0) return false;
  } else if (backend_ == RouteTableBackend::kHash) {
    const auto at =
        std::find_if(hash_.begin(), hash_.end(), [&](const auto& d) { return d.first == depth; });
    if (at == hash_.end() || at->second.erase(prefix) == 0) return false;
    if (at->second.empty()) hash_.erase(at);  // one probe less per lookup
  } else {
    if (rte_rib_lookup_exact(rib_, prefix, depth) == nullptr) return false;
    rte_rib_remove(rib_, prefix, depth);
  }
  --route_count_;
  return true;
}

std::optional<uint32_t> RouteTable::lookup(uint32_t dst_ip) const {
  if (lpm_ != nullptr) {
    uint32_t group;
    if (rte_lpm_lookup(lpm_, dst_ip, &group) == 0) return group;
    return default_group_;
  }
  if (backend_ == RouteTableBackend::kHash) {
    for (const auto& [depth, routes] : hash_) {
      if (const auto it = routes.find(dst_ip & depth_mask(depth)); it != routes.end()) {
        return it->second;
      }
    }
    return default_group_;
  }
  if (const rte_rib_node* node = rte_rib_lookup(rib_, dst_ip)) {
    uint64_t nh;
    rte_rib_get_nh(node, &nh);
    return static_cast<uint32_t>(nh);
  }
  return default_group_;
}

unsigned RouteTable::lookup_burst(std::span<const uint32_t> dst_ips,
                                  std::span<uint32_t> groups) const {
  const size_t n = std::min(dst_ips.size(), groups.size());
  const uint32_t miss = default_group_.value_or(kNoRoute);
  unsigned hits = 0;
  if (lpm_ != nullptr) {
    // rte_lpm_lookup_bulk keeps a variable-length array of n indexes on the stack: feed it
    // bounded, non-empty chunks. It marks hits with RTE_LPM_LOOKUP_SUCCESS beside the next hop.
    constexpr size_t kChunk = 64;
    for (size_t start = 0; start < n; start += kChunk) {
      const size_t count = std::min(kChunk, n - start);
      rte_lpm_lookup_bulk(lpm_, dst_ips.data() + start, groups.data() + start,
                          static_cast<unsigned>(count));
    }
    for (size_t i = 0; i < n; ++i) {
      if (groups[i] & RTE_LPM_LOOKUP_SUCCESS) {
        groups[i] &= kMaxGroup;
        ++hits;
      } else {
        groups[i] = miss;
        if (default_group_) ++hits;
      }
    }
  } else if (backend_ == RouteTableBackend::kHash) {
    for (size_t i = 0; i < n; ++i) {
      const std::optional<uint32_t> group = lookup(dst_ips[i]);  // the default route included
      groups[i] = group.value_or(kNoRoute);
      hits += group.has_value();
    }
  } else {
    // rte_rib has no bulk lookup (rte_fib's RTE_FIB_DUMMY loops over rte_rib_lookup too).
    for (size_t i = 0; i < n; ++i) {
      if (const rte_rib_node* node = rte_rib_lookup(rib_, dst_ips[i])) {
        uint64_t nh;
        rte_rib_get_nh(node, &nh);
        groups[i] = static_cast<uint32_t>(nh);
        ++hits;
      } else {
        groups[i] = miss;
        if (default_group_) ++hits;
      }
    }
  }
  for (size_t i = n; i < groups.size(); ++i) groups[i] = kNoRoute;
  return hits;
}

}  // namespace spraynet

namespace spraynet {

unsigned RouteTable::lookup_burst(std::span<const uint32_t> dst_ips, std::span<uint32_t> groups,
                                  RouteCache& cache) const {
  // rte_lpm answers a burst in one or two memory accesses a key: a cache in front would cost
  // more than it saves, most of all with more destinations than it holds (100K flows).
  if (lpm_ != nullptr) return lookup_burst(dst_ips, groups);
  if (cache.owner() != this) cache.reset(this);
  const size_t n = std::min(dst_ips.size(), groups.size());
  constexpr size_t kChunk = 64;
  unsigned hits = 0;
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    uint32_t ask[kChunk], answer[kChunk];
    uint8_t at[kChunk];
    size_t asked = 0;
    for (size_t i = start; i < start + count; ++i) {
      if (const uint32_t* group = cache.find(version_, dst_ips[i])) {
        groups[i] = *group;
      } else {
        at[asked] = static_cast<uint8_t>(i - start);
        ask[asked++] = dst_ips[i];
      }
    }
    if (asked != 0) {
      lookup_burst(std::span<const uint32_t>(ask, asked), std::span<uint32_t>(answer, asked));
      for (size_t k = 0; k < asked; ++k) {
        groups[start + at[k]] = answer[k];
        cache.store(version_, ask[k], answer[k]);
      }
    }
    for (size_t i = start; i < start + count; ++i) hits += groups[i] != kNoRoute;
  }
  for (size_t i = n; i < groups.size(); ++i) groups[i] = kNoRoute;
  return hits;
}

}  // namespace spraynet
