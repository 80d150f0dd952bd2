// What a poll-mode lcore runs for a switch: the common node driver (program/node_lcore.h) on a
// SwitchNode. The switch adds no stop rule of its own; it adds the published copy of its
// counters that read-only telemetry reads without the node lock.
#pragma once

#include <cstdint>
#include <memory>

#include "program/node_lcore.h"
#include "switch_emu/switch_counter_snapshot.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

struct SwitchShared : program::NodeShared<SwitchNode> {
  // Made by publish_counters(); null before (read-only telemetry then answers an error).
  std::unique_ptr<SwitchCounterSnapshot> counters;

  // After `node` is set: makes `counters` for its ports and lanes, publishes them once (readers
  // never see an empty copy) and has the lcores publish them (NodeShared::publish), each lane
  // its own part.
  void publish_counters(uint64_t now_ns) {
    counters = std::make_unique<SwitchCounterSnapshot>(*node);
    counters->publish(*node, now_ns);
    publish = [c = counters.get()](const SwitchNode& n, unsigned lane, uint64_t t) {
      c->publish(n, lane, t);
    };
    // A lane made after this gets its own copy (SwitchLcore makes it before the lcores run).
    lane_added = [this](unsigned) { counters->add_lanes(*node); };
  }
};

using SwitchLcore = program::NodeLcore<SwitchNode>;

}  // namespace spraynet::switch_emu
