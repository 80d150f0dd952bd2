#include "switch_emu/switch_counter_snapshot.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace spraynet::switch_emu {

namespace {

// A reader gives up after this many overlapping tries (it yields between the later ones).
constexpr unsigned kReadTries = 100'000;

// A view as 64-bit words, in one order for writing and reading: the head, then each port,
// each group (its counters, then its members), each port's PFC, the PFC pool.
template <class Visit>
void visit_words(SwitchCounterView& v, Visit&& visit) {
  visit(&v.published_ns, sizeof v.published_ns);
  visit(&v.drops, sizeof v.drops);
  visit(&v.counters, sizeof v.counters);
  visit(v.ports.data(), v.ports.size() * sizeof(SwitchPortSnapshot));
  for (auto& g : v.groups) {
    visit(&g.counters, sizeof g.counters);
    visit(&g.flowlets, sizeof g.flowlets);
    visit(g.member_packets.data(), g.member_packets.size() * sizeof(uint64_t));
  }
  visit(v.pfc.data(), v.pfc.size() * sizeof(SwitchPfcPortSnapshot));
  visit(&v.pfc_buffer, sizeof v.pfc_buffer);
  visit(&v.conga, sizeof v.conga);
  visit(&v.conweave, sizeof v.conweave);
}

size_t words_of(SwitchCounterView& v) {
  size_t bytes = 0;
  visit_words(v, [&bytes](void*, size_t n) {
    // Every part is whole 64-bit words (the structs are all uint64_t fields).
    if (n % sizeof(uint64_t) != 0) throw std::logic_error("a counter snapshot part is not words");
    bytes += n;
  });
  return bytes / sizeof(uint64_t);
}

}  // namespace

SwitchAccounting SwitchCounterView::accounting() const {
  std::vector<SwitchPortCounters> port_counters;
  port_counters.reserve(ports.size());
  EgressAccounting egress;
  for (const auto& p : ports) {
    port_counters.push_back(p.counters);
    egress += p.egress;
  }
  return SwitchAccounting::of(drops, counters, port_counters, egress);
}

SwitchPortSnapshot port_snapshot(const SwitchNode& node, uint16_t port, uint64_t now_ns) {
  SwitchPortSnapshot s{};
  fill_port_snapshot(node, port, now_ns, s);
  return s;
}

void fill_port_snapshot(const SwitchNode& node, uint16_t port, uint64_t now_ns,
                        SwitchPortSnapshot& s) {
  const EgressPort& e = node.egress(port);
  s.counters = node.port_counters(port);
  s.drops = node.port_drops(port);
  s.egress = node.port_egress_accounting(port);
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    s.classes[tc] = node.port_class_counters(port, tc, now_ns);
    s.class_queued_bytes[tc] = node.port_queued_bytes(port, tc);
  }
  s.queued_bytes = node.port_queued_bytes(port);
  s.int_records = e.int_counters();
  s.link_up = e.link_up() ? 1 : 0;
  s.rate_gbps = e.link().rate_gbps();
}

namespace {

// A lane's own queue of a port with one per lane: its egress only. The link's state and the
// pause times (which do not add up) are the owner's to publish; the others leave them 0.
void fill_lane_queue_snapshot(const SwitchNode& node, unsigned lane, uint16_t port, uint64_t now_ns,
                              SwitchPortSnapshot& s) {
  const EgressPort& e = node.egress(lane, port);
  const bool owner = node.lane_of_port(port) == lane;
  s.egress = e.accounting();
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    s.classes[tc] = e.counters(tc, now_ns);
    if (!owner) {
      s.classes[tc].first_pause_ns = s.classes[tc].last_pause_end_ns = 0;
      s.classes[tc].longest_pause_ns = 0;
    }
    s.class_queued_bytes[tc] = e.queued_bytes(tc);
  }
  s.queued_bytes = e.queued_bytes();
  s.int_records = e.int_counters();
  s.link_up = owner && e.link_up() ? 1 : 0;
  s.rate_gbps = owner ? e.link().rate_gbps() : 0.0;
}

}  // namespace

SwitchGroupSnapshot group_snapshot(const SwitchNode& node, size_t group) {
  return {node.group_counters(group), node.group_flowlet_counters(group),
          node.group_member_packets(group)};
}

SwitchPfcPortSnapshot pfc_port_snapshot(const SwitchNode& node, uint16_t port) {
  const PfcState& pfc = *node.pfc();
  const SharedBuffer& b = pfc.buffer();
  SwitchPfcPortSnapshot s{};
  s.counters = pfc.counters(port);
  s.headroom_bytes = b.headroom_bytes(port);
  for (uint8_t p = 0; p < kPriorities; ++p) {
    s.priority[p] = {pfc.buffered_bytes(port, p),
                     b.shared_bytes(port, p),
                     b.headroom_used_bytes(port, p),
                     b.peak_headroom_used_bytes(port, p),
                     b.headroom_overflows(port, p),
                     pfc.xoff_asserted(port, p) ? 1u : 0u,
                     pfc.watchdog_dropping(port, p) ? 1u : 0u,
                     pfc.watchdog_storming(port, p) ? 1u : 0u};
  }
  return s;
}

SwitchPfcBufferSnapshot pfc_buffer_snapshot(const PfcState& pfc) {
  const SharedBuffer& b = pfc.buffer();
  return {b.pool_used_bytes(),     b.pool_peak_bytes(),    b.threshold_bytes(),
          b.headroom_used_bytes(), b.headroom_overflows(), b.xoff_asserted()};
}

void fill_counter_view(const SwitchNode& node, uint64_t now_ns, SwitchCounterView& view) {
  view.published_ns = now_ns;
  view.drops = node.drops();
  view.counters = node.counters();
  view.ports.resize(node.port_count());
  for (uint16_t p = 0; p < node.port_count(); ++p)
    fill_port_snapshot(node, p, now_ns, view.ports[p]);
  view.groups.resize(node.group_count());
  for (size_t g = 0; g < node.group_count(); ++g) {
    // In place: the member vectors keep their storage from one publication to the next.
    view.groups[g].counters = node.group_counters(g);
    view.groups[g].flowlets = node.group_flowlet_counters(g);
    node.group_member_packets(g, view.groups[g].member_packets);
  }
  if (node.pfc() != nullptr) {
    view.pfc.resize(node.port_count());
    for (uint16_t p = 0; p < node.port_count(); ++p) view.pfc[p] = pfc_port_snapshot(node, p);
    view.pfc_buffer = pfc_buffer_snapshot(*node.pfc());
  } else {
    view.pfc.clear();
    view.pfc_buffer = {};
  }
  view.conga = conga_snapshot(node, now_ns);
  view.conweave = conweave_snapshot(node);
}

SwitchConweaveSnapshot conweave_snapshot(const SwitchNode& node) {
  SwitchConweaveSnapshot s{};
  if (const ConweaveTx* tx = node.conweave_tx()) s.tx = tx->counters();
  if (const ConweaveRx* rx = node.conweave_rx()) {
    s.rx = rx->counters();
    s.held_now = rx->held_now();
  }
  return s;
}

SwitchCongaSnapshot conga_snapshot(const SwitchNode& node, uint64_t now_ns) {
  SwitchCongaSnapshot s{};
  s.counters = node.conga_counters();
  if (const CongaTables* t = node.conga_tables()) {
    s.tables = t->counters();
    s.table_entries = t->live_entries(now_ns);
  }
  return s;
}

void fill_lane_counter_view(const SwitchNode& node, unsigned lane, uint64_t now_ns,
                            SwitchCounterView& view) {
  if (!node.lanes_run_in_parallel()) {
    // One lane, or lanes that take turns: lane 0's copy is the whole node, the others' stay
    // empty (`view` has the node's layout: every part is zeroed in place).
    if (lane == 0) {
      fill_counter_view(node, now_ns, view);
    } else {
      visit_words(view, [](void* part, size_t n) {
        if (n != 0) std::memset(part, 0, n);
      });
    }
    return;
  }
  // Parallel lanes have no PFC: its parts stay empty.
  view.published_ns = now_ns;
  view.drops = node.lane_drops(lane);
  view.counters = node.lane_counters(lane);
  view.ports.resize(node.port_count());
  for (uint16_t p = 0; p < node.port_count(); ++p) {
    SwitchPortSnapshot& s = view.ports[p];
    if (node.port_per_lane(p)) {
      s = SwitchPortSnapshot{};
      fill_lane_queue_snapshot(node, lane, p, now_ns, s);
    } else if (node.lane_of_port(p) == lane) {
      fill_port_snapshot(node, p, now_ns, s);
    } else {
      s = SwitchPortSnapshot{};
    }
    s.counters = node.lane_port_counters(lane, p);
    s.drops = node.lane_port_drops(lane, p);
  }
  view.groups.resize(node.group_count());
  for (size_t g = 0; g < node.group_count(); ++g) {
    const PathSelector& sel = node.lane_group(lane, g);
    view.groups[g].counters = sel.counters();
    view.groups[g].flowlets = sel.flowlet_table().counters();
    view.groups[g].member_packets.assign(sel.member_packets().begin(), sel.member_packets().end());
  }
  view.pfc.clear();
  view.pfc_buffer = {};
  view.conga = {};     // a CONGA switch has one lane
  view.conweave = {};  // as a ConWeave one
}

SwitchCounterSnapshot::SwitchCounterSnapshot(const SwitchNode& node)
    : layout_([&node] {
        SwitchCounterView v;
        fill_counter_view(node, 0, v);
        return v;
      }()),
      words_(words_of(layout_)) {
  add_lanes(node);
}

void SwitchCounterSnapshot::add_lanes(const SwitchNode& node) {
  unsigned n = lanes_.load(std::memory_order_relaxed);
  if (node.lane_count() > kMaxLanes) throw std::length_error("counter snapshot: too many lanes");
  for (; n < node.lane_count(); ++n) {
    cells_[n] = std::make_unique<Cell>(words_);
    cells_[n]->view = layout_;
    // Readers add it up from now on: empty until the lane publishes (read() needs every copy).
    std::fill(cells_[n]->words.begin(), cells_[n]->words.end(), 0);
    cells_[n]->seq.publish(cells_[n]->words.data());
    lanes_.store(n + 1, std::memory_order_release);
  }
}

void SwitchCounterSnapshot::publish(const SwitchNode& node, unsigned lane, uint64_t now_ns) {
  // Lanes that take turns publish the whole node, into lane 0's copy (they are serialised).
  if (!node.lanes_run_in_parallel()) lane = 0;
  Cell& cell = *cells_.at(lane);
  fill_lane_counter_view(node, lane, now_ns, cell.view);
  publish_view(cell);
}

void SwitchCounterSnapshot::publish(const SwitchNode& node, uint64_t now_ns) {
  const unsigned n = lanes_.load(std::memory_order_acquire);
  for (unsigned lane = 0; lane < n; ++lane) {
    Cell& cell = *cells_[lane];
    fill_lane_counter_view(node, lane, now_ns, cell.view);
    publish_view(cell);
  }
}

void SwitchCounterSnapshot::publish_view(Cell& cell) {
  auto* out = reinterpret_cast<unsigned char*>(cell.words.data());
  const auto* end = out + cell.words.size() * sizeof(uint64_t);
  visit_words(cell.view, [&out, end](const void* part, size_t n) {
    // A group whose members changed would not fit the layout: never copied past it. An empty
    // part (no PFC, a group of none) may have no storage at all: memcpy must not see its null.
    if (n == 0 || out + n > end) return;
    std::memcpy(out, part, n);
    out += n;
  });
  cell.seq.publish(cell.words.data());
}

uint64_t SwitchCounterSnapshot::publications() const {
  uint64_t total = 0;
  const unsigned n = lanes_.load(std::memory_order_acquire);
  // Each copy starts with one empty publication of its own (add_lanes).
  for (unsigned lane = 0; lane < n; ++lane) total += cells_[lane]->seq.publications() - 1;
  return total;
}

std::optional<SwitchCounterView> SwitchCounterSnapshot::read() const {
  if (publications() == 0) return std::nullopt;
  const unsigned n = lanes_.load(std::memory_order_acquire);
  std::vector<uint64_t> sum(words_, 0), words(words_);
  uint64_t latest = 0;
  for (unsigned lane = 0; lane < n; ++lane) {
    if (!cells_[lane]->seq.read(words.data(), kReadTries)) return std::nullopt;
    // Word 0 is published_ns (visit_words' order): the latest, not the sum.
    latest = std::max(latest, words[0]);
    for (size_t i = 1; i < words_; ++i) sum[i] += words[i];
  }
  sum[0] = latest;
  SwitchCounterView v = layout_;
  const auto* in = reinterpret_cast<const unsigned char*>(sum.data());
  visit_words(v, [&in](void* part, size_t n) {
    if (n == 0) return;  // an empty part may have no storage (see publish)
    std::memcpy(part, in, n);
    in += n;
  });
  return v;
}

}  // namespace spraynet::switch_emu
