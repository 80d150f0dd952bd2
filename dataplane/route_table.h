// IPv4 routes -> ECMP group ids, longest prefix first, over DPDK's rte_lpm (DIR-24-8: one
// memory access for prefixes up to /24, two beyond). rte_lpm holds depths 1..32; the default
// route (depth 0) is kept beside it and answers every lookup that rte_lpm misses.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct rte_lpm;

namespace spraynet {

class RouteTable {
 public:
  // rte_lpm keeps 24 bits of next hop.
  static constexpr uint32_t kMaxGroup = 0xFFFFFF;
  // What lookup_burst writes for a destination without a route.
  static constexpr uint32_t kNoRoute = 0xFFFFFFFF;

  // `name` must be unique among the process's LPM tables and shorter than 32 characters.
  // rte_lpm allocates its 64 MiB tbl24 up front, plus one 1 KiB tbl8 group per /24 that holds
  // longer prefixes (max_routes of them, at most 65536). Throws std::runtime_error on failure.
  RouteTable(std::string_view name, uint32_t max_routes, int socket_id = -1 /*SOCKET_ID_ANY*/);
  ~RouteTable();
  RouteTable(RouteTable&& other) noexcept;
  RouteTable& operator=(RouteTable&& other) noexcept;
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;

  // Adds or replaces the route prefix/depth -> group. prefix is host byte order and must have no
  // bits set beyond `depth` (10.0.0.1/8 is refused, as `ip route` does). Throws
  // std::invalid_argument for depth > 32, host bits set or group > kMaxGroup, and
  // std::runtime_error when the table is full.
  void add(uint32_t prefix, uint8_t depth, uint32_t group);
  // Removes a route; false when there was none.
  bool remove(uint32_t prefix, uint8_t depth);

  std::optional<uint32_t> lookup(uint32_t dst_ip) const;
  // groups[i] = group of dst_ips[i], or kNoRoute, for i below the smaller span's size; entries
  // of `groups` beyond dst_ips.size() are set to kNoRoute. Returns how many had a route.
  unsigned lookup_burst(std::span<const uint32_t> dst_ips, std::span<uint32_t> groups) const;

  const std::string& name() const { return name_; }
  uint32_t route_count() const { return route_count_; }

 private:
  std::string name_;
  rte_lpm* lpm_ = nullptr;
  std::optional<uint32_t> default_group_;
  uint32_t route_count_ = 0;
};

// "a.b.c.d" rendering of a host-order address, for error messages.
std::string ipv4_to_string(uint32_t ip);

}  // namespace spraynet
