// Where a node's memory goes, in bytes, by part: what SwitchNode::memory_usage() and
// NicNode::memory_usage() report and fabric_emu sums over its nodes (RunResult::memory). Counted
// from the data structures as they stand (a container's capacity x its element size, a DPDK
// object from what it was created with), never from the process's RSS: the same run gives the
// same numbers. The mbufs are not in it (their pools are the program's).
//
//   tcam     the TCAM: rte_acl contexts (measured as the rte_malloc heap they took when built),
//            the rules and the lanes' decision caches
//   routes   the route table (rte_lpm / rte_rib as created), the lanes' route caches, and the
//            groups' path selection state (bucket tables, flowlet tables, DRILL)
//   queues   egress ports: the class and control queues and the delay line (ring capacity x
//            entry), the link emulator; PFC state and the shared buffer; the lanes' handoff rings
//   rc       the RoCE RC traffic engine: per-QP requester / responder / placement / DCQCN state
//   reorder  the NIC's receive-side reorder engine: contexts, rings, hold records, lookup table
//   other    the node object itself and everything else (spray engine, parser, counters, heat
//            map, anomaly detector, probe, scratch vectors)
//
// Approximations are on the side of what is allocated, not what is used: a node-based container
// (std::map, std::unordered_map, std::deque) is counted as its nodes plus the usual libstdc++
// overhead per node, not what malloc rounds each allocation up to.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spraynet {

struct MemoryUsage {
  uint64_t tcam = 0;
  uint64_t routes = 0;
  uint64_t queues = 0;
  uint64_t rc = 0;
  uint64_t reorder = 0;
  uint64_t other = 0;

  MemoryUsage& operator+=(const MemoryUsage& o) {
    tcam += o.tcam;
    routes += o.routes;
    queues += o.queues;
    rc += o.rc;
    reorder += o.reorder;
    other += o.other;
    return *this;
  }
  uint64_t total() const { return tcam + routes + queues + rc + reorder + other; }
};

// A contiguous container's heap bytes: capacity x element size (std::vector, std::string's
// heap buffer is not counted by this).
template <class Container>
uint64_t capacity_bytes(const Container& c) {
  return static_cast<uint64_t>(c.capacity()) * sizeof(typename Container::value_type);
}

// libstdc++'s std::deque<T>: a map of at least 8 node pointers and 512-byte nodes (one node per
// 512 / sizeof(T) elements, at least one element per node), one node allocated even when empty.
template <class T>
uint64_t deque_bytes(size_t size) {
  constexpr size_t kNodeBytes = 512;
  constexpr size_t per_node = sizeof(T) < kNodeBytes ? kNodeBytes / sizeof(T) : 1;
  const size_t nodes = size / per_node + 1;
  const size_t map = nodes + 2 > 8 ? nodes + 2 : 8;
  return static_cast<uint64_t>(nodes) * per_node * sizeof(T) + map * sizeof(void*);
}

// libstdc++'s std::unordered_map<K, V> (hash not cached): the bucket array and one node per
// element (a next pointer and the pair).
template <class Map>
uint64_t unordered_map_bytes(const Map& m) {
  return static_cast<uint64_t>(m.bucket_count()) * sizeof(void*) +
         static_cast<uint64_t>(m.size()) * (sizeof(void*) + sizeof(typename Map::value_type));
}

// libstdc++'s std::map / std::set node: colour, parent, left, right (32 bytes) and the value.
template <class Value>
constexpr uint64_t rb_tree_node_bytes() {
  return 4 * sizeof(void*) + sizeof(Value);
}

}  // namespace spraynet
