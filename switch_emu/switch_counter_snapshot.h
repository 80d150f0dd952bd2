// The switch's counters as lock-free readers (telemetry) see them: a copy of every counter the
// read-only telemetry commands report, published by the lcores and read without the node lock.
//
// Consistency: a copy is taken at one moment between two calls into the node (the lcore that
// publishes holds the node lock, or is the node's only caller), so the accounting identity holds
// for every copy a reader gets (SwitchCounterView::accounting().balanced()). The copy is at most
// one publish period old while the node changes (program/node_lcore.h says when lcores publish).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "dataplane/runtime/seqlock_snapshot.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

// One port: its pipeline counters, its egress accounting and per-class counters, and its link.
struct SwitchPortSnapshot {
  SwitchPortCounters counters;
  EgressAccounting egress;
  std::array<EgressClassCounters, EgressPort::kClasses> classes;
  std::array<uint64_t, EgressPort::kClasses> class_queued_bytes;
  uint64_t queued_bytes;
  uint64_t link_up;
  double rate_gbps;
};
static_assert(std::is_trivially_copyable_v<SwitchPortSnapshot> &&
                  sizeof(SwitchPortSnapshot) % sizeof(uint64_t) == 0,
              "a port snapshot is copied as 64-bit words");

struct SwitchCounterView {
  uint64_t published_ns = 0;  // the now_ns of the call that published it
  SwitchDropCounters drops;
  SwitchCounters counters;
  std::vector<SwitchPortSnapshot> ports;
  // The identity over this copy (the same terms as SwitchNode::accounting()).
  SwitchAccounting accounting() const;
};

SwitchPortSnapshot port_snapshot(const SwitchNode& node, uint16_t port, uint64_t now_ns);
// Every counter of `node` now, into `view` (its ports resized to the node's).
void fill_counter_view(const SwitchNode& node, uint64_t now_ns, SwitchCounterView& view);

class SwitchCounterSnapshot {
 public:
  explicit SwitchCounterSnapshot(size_t ports);

  // Publishes `node`'s counters. Callers are serialised (the node lock, or one lcore).
  void publish(const SwitchNode& node, uint64_t now_ns);
  // The latest publication; nullopt before the first, or when every try overlapped a
  // publication (the publishing lcore preempted mid-copy).
  std::optional<SwitchCounterView> read() const;
  uint64_t publications() const { return cell_.publications(); }

 private:
  size_t ports_;
  runtime::SeqlockSnapshot cell_;
  SwitchCounterView view_;       // the writer's scratch
  std::vector<uint64_t> words_;  // the writer's scratch
};

}  // namespace spraynet::switch_emu
