// The switch's counters as lock-free readers (telemetry) see them: a copy of every counter the
// read-only telemetry commands report, published by the lcores and read without the node lock.
//
// One copy per lane. A lane running in parallel with others publishes what it alone writes: its
// own counters, and the egress of the ports it owns (zero for the others); a reader adds the
// lanes' copies up, 64-bit word by word (every field is written by one lane only where it is not
// a counter, so a double such as a link's rate is added to zeros). Serialised lanes (PFC) and a
// single lane publish the whole node into lane 0's copy.
//
// Consistency: each copy is taken between two calls into the node by the lane that owns what
// it holds, so each lane's own identity (received + generated + taken from other lanes =
// consumed + dropped + handed to other lanes + offered to its ports) holds in it, and therefore
// the node's in their sum (SwitchCounterView::accounting().balanced()), whatever moments the
// copies are from. A copy is at most one publish period old while the node changes
// (program/node_lcore.h says when lcores publish).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "dataplane/runtime/seqlock_snapshot.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

// One port: its pipeline counters, the drops of what arrived on it (by cause), its egress
// accounting and per-class counters, and its link.
struct SwitchPortSnapshot {
  SwitchPortCounters counters;
  SwitchDropCounters drops;  // as ingress port (SwitchNode::port_drops)
  EgressAccounting egress;
  std::array<EgressClassCounters, EgressPort::kClasses> classes;
  std::array<uint64_t, EgressPort::kClasses> class_queued_bytes;
  EgressIntCounters int_records;  // INT records pushed (an int: block), or refused (E, M)
  uint64_t queued_bytes;
  uint64_t link_up;
  double rate_gbps;
};
static_assert(std::is_trivially_copyable_v<SwitchPortSnapshot> &&
                  sizeof(SwitchPortSnapshot) % sizeof(uint64_t) == 0,
              "a port snapshot is copied as 64-bit words");

// PFC at one port: its counters and, per priority, its buffer and watchdog state (0/1 flags).
struct SwitchPfcPrioritySnapshot {
  uint64_t buffered_bytes;
  uint64_t shared_bytes;
  uint64_t headroom_used_bytes;
  uint64_t headroom_peak_bytes;
  uint64_t headroom_overflows;
  uint64_t xoff_asserted;
  uint64_t watchdog_dropping;
  uint64_t watchdog_storming;
};
struct SwitchPfcPortSnapshot {
  PfcPortCounters counters;
  uint64_t headroom_bytes;
  std::array<SwitchPfcPrioritySnapshot, kPriorities> priority;
};
// The shared lossless pool as a whole.
struct SwitchPfcBufferSnapshot {
  uint64_t pool_used_bytes;
  uint64_t pool_peak_bytes;
  uint64_t threshold_bytes;
  uint64_t headroom_used_bytes;
  uint64_t headroom_overflows;
  uint64_t xoff_asserted;
};
static_assert(std::is_trivially_copyable_v<SwitchPfcPortSnapshot> &&
              std::is_trivially_copyable_v<SwitchPfcBufferSnapshot> &&
              std::is_trivially_copyable_v<PathSelectorCounters>);

// One group's packet counters (its mode, members and buckets are the control side's).
struct SwitchGroupSnapshot {
  PathSelectorCounters counters;
  FlowletCounters flowlets;              // the DLB flowlet table's (zero in other modes)
  std::vector<uint64_t> member_packets;  // by member index
};

// CONGA's counters (all zero without a conga: block).
struct SwitchCongaSnapshot {
  CongaCounters counters;
  CongaTableCounters tables;  // a leaf's
  uint64_t table_entries;     // live entries in both tables at publication
};

// ConWeave's counters (all zero without a conweave: block).
struct SwitchConweaveSnapshot {
  ConweaveTxCounters tx;
  ConweaveRxCounters rx;
  uint64_t held_now;  // packets in the reorder queues at publication
};

struct SwitchCounterView {
  uint64_t published_ns = 0;  // the now_ns of the call that published it
  SwitchDropCounters drops;
  SwitchCounters counters;
  std::vector<SwitchPortSnapshot> ports;
  std::vector<SwitchGroupSnapshot> groups;
  std::vector<SwitchPfcPortSnapshot> pfc;  // by port; empty without PFC
  SwitchPfcBufferSnapshot pfc_buffer{};    // zero without PFC
  SwitchCongaSnapshot conga{};
  SwitchConweaveSnapshot conweave{};
  // The identity over this copy (the same terms as SwitchNode::accounting()).
  SwitchAccounting accounting() const;
};

SwitchPortSnapshot port_snapshot(const SwitchNode& node, uint16_t port, uint64_t now_ns);
// The same into `out` (publication fills its view in place: no 1 KB temporary per port).
void fill_port_snapshot(const SwitchNode& node, uint16_t port, uint64_t now_ns,
                        SwitchPortSnapshot& out);
SwitchGroupSnapshot group_snapshot(const SwitchNode& node, size_t group);
// Needs PFC on (node.pfc() not null).
SwitchPfcPortSnapshot pfc_port_snapshot(const SwitchNode& node, uint16_t port);
SwitchPfcBufferSnapshot pfc_buffer_snapshot(const PfcState& pfc);
SwitchCongaSnapshot conga_snapshot(const SwitchNode& node, uint64_t now_ns);
SwitchConweaveSnapshot conweave_snapshot(const SwitchNode& node);
// Every counter of `node` now, into `view` (its vectors resized to the node's).
void fill_counter_view(const SwitchNode& node, uint64_t now_ns, SwitchCounterView& view);

// The lane's part of the node (see the header) into `view`, which has the node's layout (as
// fill_counter_view leaves it).
void fill_lane_counter_view(const SwitchNode& node, unsigned lane, uint64_t now_ns,
                            SwitchCounterView& view);

class SwitchCounterSnapshot {
 public:
  static constexpr unsigned kMaxLanes = 128;

  // The layout (ports, group members, PFC on or off) is `node`'s, fixed for its life; a copy
  // for each of its lanes.
  explicit SwitchCounterSnapshot(const SwitchNode& node);

  // Copies for lanes the node has gained since (call before such a lane publishes; readers may
  // be reading meanwhile). Throws std::length_error past kMaxLanes.
  void add_lanes(const SwitchNode& node);
  // Publishes `lane`'s part (the whole node when its lanes do not run in parallel). Callers are
  // serialised per copy: the lane's lcore, or whoever has every lane stopped.
  void publish(const SwitchNode& node, unsigned lane, uint64_t now_ns);
  // Every lane's part: with every lane stopped (the node gate held, or no lcore running).
  void publish(const SwitchNode& node, uint64_t now_ns);
  // The latest publications, added up; published_ns is the latest of them. nullopt before the
  // first, or when every try overlapped a publication (the publishing lcore preempted mid-copy).
  std::optional<SwitchCounterView> read() const;
  uint64_t publications() const;

 private:
  struct Cell {
    explicit Cell(size_t words) : seq(words), words(words) {}
    runtime::SeqlockSnapshot seq;
    SwitchCounterView view;       // the writer's scratch
    std::vector<uint64_t> words;  // the writer's scratch
  };
  void publish_view(Cell& cell);

  SwitchCounterView layout_;  // sizes only: what read() fills
  size_t words_ = 0;
  std::array<std::unique_ptr<Cell>, kMaxLanes> cells_;
  std::atomic<unsigned> lanes_{0};  // cells made (readers read cells_[0, lanes_))
};

}  // namespace spraynet::switch_emu
