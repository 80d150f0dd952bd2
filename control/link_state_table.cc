#include "control/link_state_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "dataplane/egress/egress_port.h"
#include "dataplane/egress/link_emulator.h"
#include "dataplane/egress/pfc_state.h"
#include "dataplane/wire/ppcid.h"

namespace spraynet::control {

namespace {

// Counter difference that never wraps: a counter that went backwards reads as no traffic.
uint64_t since(uint64_t now, uint64_t before) {
  return now >= before ? now - before : 0;
}

}  // namespace

std::string identity_string(const LinkIdentity& id) {
  if (id.peer_mac) {
    const auto& m = *id.peer_mac;
    char mac[18];
    std::snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                  m[5]);
    return id.node_name + ">" + mac;
  }
  return id.node_name + "/" + id.port_name;
}

uint64_t link_fingerprint(std::string_view identity) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime (64-bit)
  for (unsigned char c : identity) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint8_t fold_path_id(uint64_t fingerprint, unsigned bits) {
  bits = std::clamp(bits, 1u, 8u);
  // XOR of every `bits`-wide slice: each bit of the fingerprint moves the id.
  uint64_t folded = 0;
  for (unsigned shift = 0; shift < 64; shift += bits) folded ^= fingerprint >> shift;
  return static_cast<uint8_t>(folded & ((1u << bits) - 1));
}

std::vector<LinkIdentity> link_identities(const SwitchConfig& config) {
  std::vector<LinkIdentity> ids;
  ids.reserve(config.ports.size());
  for (const PortSettings& p : config.ports) ids.push_back({config.name, p.name, p.peer_mac});
  return ids;
}

unsigned path_id_bits(const SwitchConfig& config) {
  const auto layout = parse_ppcid_layout(config.ppcid_layout).value_or(PpcidLayout::kTsHigh);
  // max_path_id is 2^bits - 1: 15 -> 4 bits, 255 -> 8 bits.
  return static_cast<unsigned>(std::bit_width(max_path_id(layout)));
}

PortSample sample_port(const EgressPort& egress, uint8_t lossless_classes, uint64_t now_ns) {
  PortSample s;
  s.up = egress.link_up();
  s.rate_gbps = egress.link().rate_gbps();
  s.queued_bytes = egress.load_bytes();  // a wire port's PMD backlog too
  s.watchdog_dropping = egress.any_drop_mode();
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    if (egress.drop_mode(tc)) s.watchdog_classes |= static_cast<uint8_t>(1u << tc);
  }
  s.paused = egress.any_paused(now_ns, lossless_classes);
  auto add = [&s](const EgressClassCounters& c) {
    s.tx_bytes += c.transmitted_bytes;
    s.tx_packets += c.transmitted_packets;
    s.bit_error_frames += c.drops_bit_error;
    s.lost_frames += c.drops_loss;
  };
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    const EgressClassCounters c = egress.counters(tc, now_ns);
    add(c);
    if ((lossless_classes >> tc) & 1) s.paused_ns += c.paused_ns;
  }
  add(egress.control_counters());  // PFC frames use the wire too
  return s;
}

void sample_ports(std::span<const EgressPort* const> ports, const PfcState* pfc, uint64_t now_ns,
                  std::vector<PortSample>& out) {
  const uint8_t lossless = pfc != nullptr ? pfc->config().enabled_priorities : 0;
  out.resize(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) out[i] = sample_port(*ports[i], lossless, now_ns);
}

std::string LinkStateTableConfig::check() const {
  if (!(utilisation_weight > 0.0 && utilisation_weight <= 1.0)) {
    return "utilisation_weight: must be in (0, 1]";
  }
  if (!(ber_floor >= 0.0 && ber_floor < 1.0)) return "ber_floor: must be in [0, 1)";
  if (!(loss_memory >= 0.0 && loss_memory < 1.0)) return "loss_memory: must be in [0, 1)";
  if (path_id_bits < 1 || path_id_bits > 8) return "path_id_bits: must be in [1, 8]";
  return {};
}

uint8_t link_health(bool up, bool watchdog_dropping, double frame_loss_ratio,
                    double paused_fraction, double utilisation) {
  if (!up || watchdog_dropping) return 0;
  auto unit = [](double x) { return std::isnan(x) ? 1.0 : std::clamp(x, 0.0, 1.0); };
  const double loss = std::max(0.0, 1.0 - 10.0 * unit(frame_loss_ratio));
  const double pause = 1.0 - 0.5 * unit(paused_fraction);
  const double load = 1.0 - 0.5 * unit(utilisation);
  return static_cast<uint8_t>(std::lround(255.0 * loss * pause * load));
}

LinkStateTable::LinkStateTable(std::vector<LinkIdentity> links, const LinkStateTableConfig& config)
    : config_(config), links_(links.size()), windows_(links.size()) {
  if (const std::string reason = config_.check(); !reason.empty()) {
    throw std::invalid_argument("link state: " + reason);
  }
  for (size_t i = 0; i < links.size(); ++i) {
    links_[i].identity = identity_string(links[i]);
    links_[i].fingerprint = link_fingerprint(links_[i].identity);
    links_[i].ber = config_.ber_floor;
    fixed_ids_.push_back(links[i].path_id);
  }
  assign_path_ids();
}

void LinkStateTable::assign_path_ids() {
  const unsigned ids = 1u << config_.path_id_bits;
  // Fingerprint order (identity, then index, only to break exact ties), never port order: the
  // result must not change when the same links are renumbered.
  std::vector<size_t> order(links_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    const LinkState& x = links_[a];
    const LinkState& y = links_[b];
    if (x.fingerprint != y.fingerprint) return x.fingerprint < y.fingerprint;
    if (x.identity != y.identity) return x.identity < y.identity;
    return a < b;
  });
  std::vector<size_t> holder(ids, SIZE_MAX);
  for (size_t link = 0; link < links_.size(); ++link) {
    if (const auto& fixed = fixed_ids_[link]; fixed && *fixed < ids && holder[*fixed] == SIZE_MAX) {
      holder[*fixed] = link;
      links_[link].path_id = *fixed;
    }
  }
  for (size_t link : order) {
    if (fixed_ids_[link] && holder[*fixed_ids_[link] % ids] == link) continue;
    const uint8_t folded = fold_path_id(links_[link].fingerprint, config_.path_id_bits);
    if (holder[folded] == SIZE_MAX) {
      holder[folded] = link;
      links_[link].path_id = folded;
      continue;
    }
    uint8_t assigned = folded;
    for (unsigned k = 1; k < ids; ++k) {
      const unsigned candidate = (folded + k) % ids;
      if (holder[candidate] == SIZE_MAX) {
        assigned = static_cast<uint8_t>(candidate);
        holder[candidate] = link;
        break;
      }
    }
    links_[link].path_id = assigned;
    collisions_.push_back({link, holder[folded], folded, assigned});
  }
}

void LinkStateTable::update(std::span<const PortSample> samples, uint64_t now_ns) {
  if (samples.size() != links_.size()) {
    throw std::invalid_argument("link state: " + std::to_string(samples.size()) + " samples for " +
                                std::to_string(links_.size()) + " links");
  }
  const bool interval = have_baseline_ && now_ns > last_ns_;
  const double dt_ns = interval ? static_cast<double>(now_ns - last_ns_) : 0.0;
  for (size_t i = 0; i < links_.size(); ++i) {
    const PortSample& s = samples[i];
    LinkState& l = links_[i];
    Window& w = windows_[i];
    l.up = s.up;
    l.rate_gbps = s.rate_gbps;
    l.queued_bytes = s.queued_bytes;
    l.paused = s.paused;
    l.watchdog_dropping = s.watchdog_dropping;
    l.watchdog_classes = s.watchdog_classes;
    l.updated_ns = now_ns;
    if (interval) {
      const uint64_t packets = since(s.tx_packets, w.last.tx_packets);
      const uint64_t bytes = since(s.tx_bytes, w.last.tx_bytes);
      // gbps is bits per ns: rate x interval is what the line could have carried.
      const double capacity_bits = s.rate_gbps * dt_ns;
      const double wire_bits =
          8.0 * (static_cast<double>(bytes) +
                 static_cast<double>(packets) * LinkEmulator::kWireOverheadBytes);
      l.last_utilisation = capacity_bits > 0.0 ? wire_bits / capacity_bits : 0.0;
      l.utilisation = config_.utilisation_weight * l.last_utilisation +
                      (1.0 - config_.utilisation_weight) * l.utilisation;
      l.paused_fraction =
          std::min(1.0, static_cast<double>(since(s.paused_ns, w.last.paused_ns)) / dt_ns);

      const double m = config_.loss_memory;
      w.bits = m * w.bits + 8.0 * (static_cast<double>(bytes) +
                                   static_cast<double>(packets) * LinkEmulator::kFcsBytes);
      w.bit_errors = m * w.bit_errors +
                     static_cast<double>(since(s.bit_error_frames, w.last.bit_error_frames));
      w.frames = m * w.frames + static_cast<double>(packets);
      w.frames_lost = m * w.frames_lost +
                      static_cast<double>(since(s.bit_error_frames, w.last.bit_error_frames) +
                                          since(s.lost_frames, w.last.lost_frames));
      l.ber = std::max(config_.ber_floor, w.bits > 0.0 ? w.bit_errors / w.bits : 0.0);
      l.frame_loss_ratio = w.frames > 0.0 ? std::min(1.0, w.frames_lost / w.frames) : 0.0;
    }
    // Drop mode is per class: it does not take the link's health from the other classes.
    l.health = link_health(l.up, false, l.frame_loss_ratio, l.paused_fraction, l.utilisation);
    w.last = s;
  }
  if (now_ns > last_ns_ || !have_baseline_) last_ns_ = now_ns;
  have_baseline_ = true;
  ++updates_;
}

void LinkStateTable::mark_down(size_t link, uint64_t now_ns) {
  LinkState& l = links_.at(link);
  l.up = false;
  l.health = 0;
  l.updated_ns = now_ns;
}

}  // namespace spraynet::control
