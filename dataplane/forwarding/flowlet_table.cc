#include "dataplane/forwarding/flowlet_table.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dataplane/memory_usage.h"
#include "dataplane/splitmix64.h"

namespace spraynet {

uint16_t least_loaded_eligible(std::span<const PathLoad> members, uint32_t tie_break) {
  uint64_t fewest = UINT64_MAX;
  uint32_t ties = 0;
  for (const PathLoad& m : members) {
    if (!m.eligible) continue;
    if (m.queued_bytes < fewest) {
      fewest = m.queued_bytes;
      ties = 1;
    } else if (m.queued_bytes == fewest) {
      ++ties;
    }
  }
  if (ties == 0) return FlowletTable::kNoMember;
  uint32_t pick = scale_to_range(tie_break, ties);
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].eligible && members[i].queued_bytes == fewest && pick-- == 0) {
      return static_cast<uint16_t>(i);
    }
  }
  return FlowletTable::kNoMember;  // not reached
}

uint16_t least_metric_eligible(std::span<const PathLoad> members, std::span<const uint8_t> metrics,
                               uint32_t draw) {
  unsigned least = 256;
  uint32_t ties = 0;
  for (size_t i = 0; i < members.size() && i < metrics.size(); ++i) {
    if (!members[i].eligible) continue;
    if (metrics[i] < least) {
      least = metrics[i];
      ties = 1;
    } else if (metrics[i] == least) {
      ++ties;
    }
  }
  if (ties == 0) return FlowletTable::kNoMember;
  uint32_t pick = scale_to_range(draw, ties);
  for (size_t i = 0; i < members.size() && i < metrics.size(); ++i) {
    if (members[i].eligible && metrics[i] == least && pick-- == 0) return static_cast<uint16_t>(i);
  }
  return FlowletTable::kNoMember;  // not reached
}

uint16_t random_eligible(std::span<const PathLoad> members, uint32_t draw) {
  uint32_t eligible = 0;
  for (const PathLoad& m : members) eligible += m.eligible;
  if (eligible == 0) return FlowletTable::kNoMember;
  uint32_t pick = scale_to_range(draw, eligible);
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].eligible && pick-- == 0) return static_cast<uint16_t>(i);
  }
  return FlowletTable::kNoMember;  // not reached
}

namespace {

// Checked before the table is allocated: a bad size must not cost gigabytes first.
uint32_t validated_entries(uint32_t entries) {
  if (entries == 0 || entries > FlowletTable::kMaxEntries || (entries & (entries - 1)) != 0) {
    throw std::invalid_argument("flowlet table: " + std::to_string(entries) +
                                " entries; must be a power of two from 1 to 16777216");
  }
  return entries;
}

}  // namespace

FlowletTable::FlowletTable(uint32_t entries, uint64_t gap_ns, uint64_t seed)
    : pages_((validated_entries(entries) + kPageEntries - 1) / kPageEntries),
      mask_(entries - 1),
      gap_ns_(gap_ns),
      random_state_(seed) {}

uint32_t FlowletTable::next_random() {
  return static_cast<uint32_t>(splitmix64_next(random_state_) >> 32);
}

void FlowletTable::make_page(std::unique_ptr<Entry[]>& page) {
  page = std::make_unique<Entry[]>(std::min(kPageEntries, mask_ + 1));
  ++pages_made_;
}

void FlowletTable::clear() {
  for (auto& page : pages_) page.reset();
  pages_made_ = 0;
}

uint64_t FlowletTable::heap_bytes() const {
  return capacity_bytes(pages_) +
         pages_made_ * std::min(kPageEntries, mask_ + 1) * sizeof(Entry);
}

uint16_t FlowletTable::select(uint32_t flow_hash, uint64_t now_ns,
                              std::span<const PathLoad> members) {
  // Low hash bits chose the entry; the tie-break comes from all bits (a Fibonacci multiply
  // moves them to the top, where scale_to_range looks).
  return select_with(flow_hash, now_ns, members, [flow_hash](std::span<const PathLoad> m) {
    return least_loaded_eligible(m, flow_hash * 0x9E3779B1u);
  });
}

uint16_t FlowletTable::select_random(uint32_t flow_hash, uint64_t now_ns,
                                     std::span<const PathLoad> members) {
  return select_with(flow_hash, now_ns, members, [this](std::span<const PathLoad> m) {
    return random_eligible(m, next_random());
  });
}

uint16_t FlowletTable::select_least_congested(uint32_t flow_hash, uint64_t now_ns,
                                              std::span<const PathLoad> members,
                                              std::span<const uint8_t> metrics) {
  return select_with(flow_hash, now_ns, members, [this, metrics](std::span<const PathLoad> m) {
    return least_metric_eligible(m, metrics, next_random());
  });
}

template <class Place>
uint16_t FlowletTable::select_with(uint32_t flow_hash, uint64_t now_ns,
                                   std::span<const PathLoad> members, Place place) {
  Entry& e = entry(flow_hash & mask_);
  const bool used = e.member != kNoMember;
  // A clock that steps back (another lcore's timestamp) counts as no idle time at all.
  const uint64_t idle_ns = now_ns > e.last_seen_ns ? now_ns - e.last_seen_ns : 0;
  const bool active = used && idle_ns <= gap_ns_;
  const bool member_ok = used && e.member < members.size() && members[e.member].eligible;
  const uint16_t tag = flow_tag(flow_hash);
  if (active && tag != e.flow_tag) ++counters_.collisions;
  if (active && member_ok) {
    e.last_seen_ns = now_ns;
    e.flow_tag = tag;
    return e.member;
  }
  const uint16_t chosen = place(members);
  if (chosen == kNoMember) {
    ++counters_.no_eligible_member;
    return kNoMember;
  }
  if (active) {
    ++counters_.rerouted_ineligible;
  } else {
    ++counters_.flowlets_started;
    if (used) ++counters_.flowlets_expired;
    if (used && chosen != e.member) ++counters_.flowlets_moved;
  }
  e.member = chosen;
  e.last_seen_ns = now_ns;
  e.flow_tag = tag;
  return chosen;
}

}  // namespace spraynet
