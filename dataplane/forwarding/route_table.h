// IPv4 routes -> ECMP group ids, longest prefix first, over one of two DPDK backends:
//
//  - kLpm: rte_lpm (DIR-24-8). One memory access per lookup for prefixes up to /24, two
//    beyond; the fastest lookup, but its tbl24 costs 64 MiB per table whatever the route count.
//    For a real switch: one or a few tables per process, lookups on the packet path.
//  - kRib: rte_rib, a binary (path-compressed) trie. A lookup walks the trie, one node per
//    branching point on the way to the longest match, so it is slower; memory is a few hundred
//    bytes per route (a node pool of 2 * max_routes nodes). For fabrics of many switches in one
//    process (fabric_emu: hundreds of SwitchNodes under EAL --no-huge).
//  - kHash: no DPDK memory, a hash map per prefix length in use; a lookup probes the lengths
//    present, longest first (fabric_emu's switches hold 3: /32, /24, /16). rte_rib_create takes
//    three EAL memzones (its node mempool's), and DPDK 22.11 has RTE_MAX_MEMZONE 2560 fixed at
//    build time, so a process cannot hold much more than 800 ribs: fabric_emu's three-tier
//    fabrics of more switches (1280 with 32 spines per pod) take this one.
//
// Both give the same answers: depths 1..32 live in the backend, the default route (depth 0) is
// kept beside it and answers every lookup that the backend misses; host bits are refused, a
// re-add replaces, max_routes bounds the routes of depth 1..32.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

struct rte_lpm;
struct rte_rib;

namespace spraynet {

class RouteCache;

enum class RouteTableBackend : uint8_t { kLpm, kRib, kHash };

std::string_view to_string(RouteTableBackend backend);  // "lpm" | "rib" | "hash"
std::optional<RouteTableBackend> parse_route_table_backend(std::string_view name);

class RouteTable {
 public:
  // rte_lpm keeps 24 bits of next hop; the rib backend keeps the same limit.
  static constexpr uint32_t kMaxGroup = 0xFFFFFF;
  // What lookup_burst writes for a destination without a route.
  static constexpr uint32_t kNoRoute = 0xFFFFFFFF;
  // Longest name each backend takes: rte_lpm's 32-byte name; rte_rib names its node mempool
  // "MP_<name>", whose own ring and memzone names must fit 32 bytes ("RG_MP_MP_<name>").
  static constexpr size_t kMaxLpmNameLength = 31;
  static constexpr size_t kMaxRibNameLength = 22;

  // `name` must be unique among the process's tables of the same backend and at most
  // kMaxLpmNameLength / kMaxRibNameLength characters. max_routes bounds the routes of depth
  // 1..32 (the default route does not count). kLpm allocates its 64 MiB tbl24 up front, plus
  // one 1 KiB tbl8 group per /24 that holds longer prefixes (max_routes of them, at most 65536);
  // kRib allocates a pool of 2 * max_routes trie nodes (a trie of n routes needs at most
  // 2n - 1). Throws std::invalid_argument for a bad name or max_routes, std::runtime_error when
  // DPDK cannot create the table (no memory, name taken).
  RouteTable(std::string_view name, uint32_t max_routes, int socket_id = -1 /*SOCKET_ID_ANY*/,
             RouteTableBackend backend = RouteTableBackend::kLpm);
  RouteTable(std::string_view name, uint32_t max_routes, RouteTableBackend backend)
      : RouteTable(name, max_routes, -1, backend) {}
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
  // The same through the caller's cache (see route_cache.h): destinations it holds for this
  // version of the table skip the backend; the answers are the same either way.
  unsigned lookup_burst(std::span<const uint32_t> dst_ips, std::span<uint32_t> groups,
                        RouteCache& cache) const;
  // Changes with every add() and remove() (attempted or done): what a RouteCache answer is for.
  uint64_t version() const { return version_; }

  const std::string& name() const { return name_; }
  RouteTableBackend backend() const { return backend_; }
  uint32_t route_count() const { return route_count_; }
  uint32_t max_routes() const { return max_routes_; }
  // Bytes the table holds, as DPDK 22.11 allocates its backend (see route_table.cc): kLpm, the
  // 64 MiB tbl24 with its tbl8 groups and rule table; kRib, the trie's node pool (every node,
  // used or not, with its mempool header and the pool's ring) and the rib itself.
  uint64_t memory_bytes() const;

 private:
  void release();

  std::string name_;
  RouteTableBackend backend_ = RouteTableBackend::kLpm;
  rte_lpm* lpm_ = nullptr;  // kLpm
  rte_rib* rib_ = nullptr;  // kRib
  // kHash: (depth, prefix -> group) for each depth 1..32 that has a route, longest first.
  std::vector<std::pair<uint8_t, std::unordered_map<uint32_t, uint32_t>>> hash_;
  uint32_t max_routes_ = 0;
  std::optional<uint32_t> default_group_;
  uint32_t route_count_ = 0;
  uint64_t version_ = 0;
};

// "a.b.c.d" rendering of a host-order address, for error messages.
std::string ipv4_to_string(uint32_t ip);

}  // namespace spraynet
