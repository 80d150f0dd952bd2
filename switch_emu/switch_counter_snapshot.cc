#include "switch_emu/switch_counter_snapshot.h"

#include <cstring>

namespace spraynet::switch_emu {

namespace {

constexpr size_t kHeadWords =
    (sizeof(uint64_t) + sizeof(SwitchDropCounters) + sizeof(SwitchCounters)) / sizeof(uint64_t);
constexpr size_t kPortWords = sizeof(SwitchPortSnapshot) / sizeof(uint64_t);
static_assert(sizeof(SwitchDropCounters) % sizeof(uint64_t) == 0 &&
              sizeof(SwitchCounters) % sizeof(uint64_t) == 0);

// A reader gives up after this many overlapping tries (it yields between the later ones).
constexpr unsigned kReadTries = 100'000;

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
  const EgressPort& e = node.egress(port);
  SwitchPortSnapshot s{};
  s.counters = node.port_counters(port);
  s.egress = e.accounting();
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    s.classes[tc] = e.counters(tc, now_ns);
    s.class_queued_bytes[tc] = e.queued_bytes(tc);
  }
  s.queued_bytes = e.queued_bytes();
  s.link_up = e.link_up() ? 1 : 0;
  s.rate_gbps = e.link().rate_gbps();
  return s;
}

void fill_counter_view(const SwitchNode& node, uint64_t now_ns, SwitchCounterView& view) {
  view.published_ns = now_ns;
  view.drops = node.drops();
  view.counters = node.counters();
  view.ports.resize(node.port_count());
  for (uint16_t p = 0; p < node.port_count(); ++p) view.ports[p] = port_snapshot(node, p, now_ns);
}

SwitchCounterSnapshot::SwitchCounterSnapshot(size_t ports)
    : ports_(ports),
      cell_(kHeadWords + ports * kPortWords),
      words_(kHeadWords + ports * kPortWords) {}

void SwitchCounterSnapshot::publish(const SwitchNode& node, uint64_t now_ns) {
  fill_counter_view(node, now_ns, view_);
  auto* bytes = reinterpret_cast<unsigned char*>(words_.data());
  std::memcpy(bytes, &view_.published_ns, sizeof(uint64_t));
  bytes += sizeof(uint64_t);
  std::memcpy(bytes, &view_.drops, sizeof(SwitchDropCounters));
  bytes += sizeof(SwitchDropCounters);
  std::memcpy(bytes, &view_.counters, sizeof(SwitchCounters));
  bytes += sizeof(SwitchCounters);
  std::memcpy(bytes, view_.ports.data(), ports_ * sizeof(SwitchPortSnapshot));
  cell_.publish(words_.data());
}

std::optional<SwitchCounterView> SwitchCounterSnapshot::read() const {
  std::vector<uint64_t> words(cell_.size());
  if (!cell_.read(words.data(), kReadTries)) return std::nullopt;
  SwitchCounterView v;
  v.ports.resize(ports_);
  const auto* bytes = reinterpret_cast<const unsigned char*>(words.data());
  std::memcpy(&v.published_ns, bytes, sizeof(uint64_t));
  bytes += sizeof(uint64_t);
  std::memcpy(&v.drops, bytes, sizeof(SwitchDropCounters));
  bytes += sizeof(SwitchDropCounters);
  std::memcpy(&v.counters, bytes, sizeof(SwitchCounters));
  bytes += sizeof(SwitchCounters);
  std::memcpy(v.ports.data(), bytes, ports_ * sizeof(SwitchPortSnapshot));
  return v;
}

}  // namespace spraynet::switch_emu
