#include "dataplane/egress/pfc_state.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace spraynet {

std::string_view to_string(PfcWatchdogAction action) {
  switch (action) {
    case PfcWatchdogAction::kDrop:
      return "drop";
    case PfcWatchdogAction::kForward:
      return "forward";
  }
  return "?";
}

std::optional<PfcWatchdogAction> parse_pfc_watchdog_action(std::string_view name) {
  for (auto a : {PfcWatchdogAction::kDrop, PfcWatchdogAction::kForward}) {
    if (to_string(a) == name) return a;
  }
  return std::nullopt;
}

std::string PfcStateConfig::check() const {
  if (auto r = buffer.check(); !r.empty()) return "buffer." + r;
  if (buffer.port_headroom_bytes.size() != port_link_gbps.size()) {
    return "buffer.port_headroom_bytes: one per port (" + std::to_string(port_link_gbps.size()) +
           "), got " + std::to_string(buffer.port_headroom_bytes.size());
  }
  if (xoff_quanta == 0) return "xoff_quanta: must be > 0 (0 is XON)";
  if (watchdog && watchdog_detection_ns == 0) return "watchdog_detection_ns: must be > 0";
  if (watchdog && watchdog_restoration_ns == 0) return "watchdog_restoration_ns: must be > 0";
  if (watchdog_action != PfcWatchdogAction::kDrop &&
      watchdog_action != PfcWatchdogAction::kForward) {
    return "watchdog_action: drop | forward";
  }
  if (port_link_gbps.size() >= EgressPort::kNoIngressPort) return "port_link_gbps: too many ports";
  for (size_t p = 0; p < port_link_gbps.size(); ++p) {
    const double g = port_link_gbps[p];
    if (!std::isfinite(g) || g <= 0.0) {
      return "port_link_gbps[" + std::to_string(p) + "]: must be > 0";
    }
  }
  return {};
}

namespace {

const PfcStateConfig& checked(const PfcStateConfig& config) {
  if (auto r = config.check(); !r.empty()) throw std::invalid_argument("pfc: " + r);
  return config;
}

}  // namespace

PfcState::PfcState(PfcStateConfig config, std::shared_ptr<spdlog::logger> logger)
    : config_(checked(config)),
      logger_(std::move(logger)),
      buffer_(config_.buffer),
      ports_(config_.port_link_gbps.size()) {}

void PfcState::attach_port(uint16_t port, EgressPort& egress) {
  if (port >= ports_.size()) {
    throw std::out_of_range("pfc: attach_port: port " + std::to_string(port) + " of " +
                            std::to_string(ports_.size()));
  }
  ports_[port].egress = &egress;
  egress.set_listener(this);
}

double PfcState::port_link_gbps(uint16_t port) const {
  const PortState& s = ports_.at(port);
  return s.egress != nullptr ? s.egress->link().rate_gbps() : config_.port_link_gbps[port];
}

uint64_t PfcState::pause_duration_ns(uint16_t port, uint16_t quanta) const {
  return pfc_quanta_to_ns(quanta, port_link_gbps(port));
}

uint64_t PfcState::xoff_refresh_interval_ns(uint16_t port) const {
  // Half the pause asked for: a refresh that is delayed behind a full control queue, or lost,
  // still lands before the upstream sender's timer runs out.
  return std::max<uint64_t>(1, pause_duration_ns(port, config_.xoff_quanta) / 2);
}

PfcState::PriorityState* PfcState::accounted(uint16_t port, uint8_t priority) {
  if (port == EgressPort::kNoIngressPort) return nullptr;
  if (port >= ports_.size() || priority >= kPriorities) {
    ++unknown_port_events_;
    return nullptr;
  }
  if (!enabled(priority)) return nullptr;
  return &ports_[port].priority[priority];
}

void PfcState::make_due(uint16_t port, uint8_t priority, uint16_t quanta, bool refresh) {
  PortState& p = ports_[port];
  if (p.due_classes == 0) ++ports_with_frames_due_;
  const uint8_t bit = static_cast<uint8_t>(1u << priority);
  p.due_classes |= bit;
  // The latest wish wins: an XOFF followed by an XON before sending is sent as XON.
  p.due_quanta[priority] = quanta;
  if (refresh) {
    p.due_refreshes |= bit;
  } else {
    p.due_refreshes &= static_cast<uint8_t>(~bit);
  }
}

bool PfcState::admit(uint16_t ingress_port, uint8_t priority, uint32_t bytes, uint64_t /*now_ns*/) {
  // Unknown ports are counted by on_enqueue, which follows an admission.
  if (ingress_port >= ports_.size() || priority >= kPriorities || !enabled(priority)) return true;
  return buffer_.admit(ingress_port, priority, bytes);
}

void PfcState::on_enqueue(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                          uint64_t now_ns) {
  PriorityState* s = accounted(ingress_port, priority);
  if (s == nullptr) return;
  if (buffer_.add(ingress_port, priority, bytes)) {
    s->next_refresh_ns = now_ns + xoff_refresh_interval_ns(ingress_port);
    make_due(ingress_port, priority, config_.xoff_quanta, false);
  }
}

void PfcState::on_release(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                          uint64_t now_ns) {
  (void)now_ns;  // the XON goes out with the next take_frames
  if (accounted(ingress_port, priority) == nullptr) return;
  if (buffer_.release(ingress_port, priority, bytes)) make_due(ingress_port, priority, 0, false);
  // Freed pool raises a dynamic threshold: other asserted PGs may now be below their XON point.
  send_due_xons();
}

void PfcState::send_due_xons() {
  buffer_.release_due_xoffs([this](uint16_t port, uint8_t pg) { make_due(port, pg, 0, false); });
}

void PfcState::on_pause(uint8_t /*tc*/, uint64_t until_ns) {
  pause_horizon_ns_ = std::max(pause_horizon_ns_, until_ns);
}

void PfcState::queue_refreshes(uint64_t now_ns) {
  send_due_xons();  // before refreshing what may no longer be asserted
  if (buffer_.xoff_asserted() == 0) return;
  for (uint16_t port = 0; port < ports_.size(); ++port) {
    for (uint8_t prio = 0; prio < kPriorities; ++prio) {
      PriorityState& s = ports_[port].priority[prio];
      if (!buffer_.xoff(port, prio) || now_ns < s.next_refresh_ns) continue;
      s.next_refresh_ns = now_ns + xoff_refresh_interval_ns(port);
      make_due(port, prio, config_.xoff_quanta, true);
    }
  }
}

size_t PfcState::take_frames(uint64_t now_ns, std::span<PfcEmission> out) {
  queue_refreshes(now_ns);
  size_t n = 0;
  for (uint16_t port = 0; port < ports_.size() && ports_with_frames_due_ > 0; ++port) {
    PortState& p = ports_[port];
    if (p.due_classes == 0) continue;
    // PFC is off for a stormed priority on this port (SONiC clears it from the port's PFC
    // mask): whatever its accounting asks, nothing goes to the storming neighbour.
    if (const uint8_t suppressed = p.due_classes & p.storm_classes; suppressed != 0) {
      for (uint8_t prio = 0; prio < kPriorities; ++prio) {
        if ((suppressed >> prio) & 1) ++p.counters.priority[prio].watchdog_frames_suppressed;
      }
      p.due_classes &= static_cast<uint8_t>(~suppressed);
      p.due_refreshes &= static_cast<uint8_t>(~suppressed);
      if (p.due_classes == 0) {
        --ports_with_frames_due_;
        continue;
      }
    }
    if (n == out.size()) break;
    PfcEmission& e = out[n++];
    e.port = port;
    e.frame = PfcFrame{};
    e.frame.class_enable = p.due_classes;
    for (uint8_t prio = 0; prio < kPriorities; ++prio) {
      if (!((p.due_classes >> prio) & 1)) continue;
      e.frame.quanta[prio] = p.due_quanta[prio];
      PfcPriorityCounters& c = p.counters.priority[prio];
      if (p.due_quanta[prio] == 0) {
        ++c.xon_sent;
      } else {
        ++c.xoff_sent;
        if ((p.due_refreshes >> prio) & 1) ++c.xoff_refreshes_sent;
      }
    }
    ++p.counters.frames_sent;
    p.due_classes = 0;
    p.due_refreshes = 0;
    --ports_with_frames_due_;
  }
  return n;
}

PfcPauseUpdate PfcState::on_pfc_frame(uint16_t port, const PfcFrame& frame, uint64_t now_ns) {
  PfcPauseUpdate update;
  if (port >= ports_.size()) {
    ++unknown_port_events_;
    return update;
  }
  PortState& p = ports_[port];
  ++p.counters.frames_received;
  const double gbps = port_link_gbps(port);
  for (uint8_t prio = 0; prio < kPriorities; ++prio) {
    if (!frame.enabled(prio)) continue;
    if (!enabled(prio)) {
      ++p.counters.ignored_priority_pauses;
      continue;
    }
    const uint8_t bit = static_cast<uint8_t>(1u << prio);
    if (frame.quanta[prio] == 0) {
      update.resume_classes |= bit;
      ++p.counters.priority[prio].xon_received;
    } else {
      update.pause_classes |= bit;
      update.pause_until_ns[prio] = now_ns + pfc_quanta_to_ns(frame.quanta[prio], gbps);
      ++p.counters.priority[prio].xoff_received;
      p.priority[prio].last_pause_received_ns = now_ns;
    }
  }
  return update;
}

uint64_t PfcState::restoration_deadline_ns(const PriorityState& s) const {
  return std::max(s.drop_mode_since_ns, s.last_pause_received_ns) + config_.watchdog_restoration_ns;
}

void PfcState::enter_storm(uint16_t port, uint8_t prio, uint64_t now_ns) {
  PortState& p = ports_[port];
  const uint8_t bit = static_cast<uint8_t>(1u << prio);
  const size_t queued = p.egress->queued_packets(prio);
  const bool drop = config_.watchdog_action == PfcWatchdogAction::kDrop;
  if (drop) {
    p.egress->set_drop_mode(prio, true, now_ns);
    p.ingress_drop_classes |= bit;
  } else {
    p.egress->set_forward_mode(prio, true, now_ns);
  }
  p.storm_classes |= bit;
  ++storms_;
  ++eligibility_changes_;
  p.priority[prio].drop_mode_since_ns = now_ns;
  ++p.counters.priority[prio].watchdog_storms_detected;
  if (logger_) {
    logger_->warn(
        "PFC watchdog: pause storm detected on port {} priority {}: paused for {} ms with {} "
        "packets queued and nothing sent; {} until no pause frame arrives for {} ms",
        port, prio, config_.watchdog_detection_ns / 1'000'000, queued,
        drop ? "entering drop mode (queue flushed, new packets dropped at egress and at ingress, "
               "pause frames ignored, no PFC sent)"
             : "forwarding (pause frames ignored, no PFC sent, nothing dropped)",
        config_.watchdog_restoration_ns / 1'000'000);
  }
}

void PfcState::restore(uint16_t port, uint8_t prio, uint64_t now_ns) {
  PortState& p = ports_[port];
  const uint8_t bit = static_cast<uint8_t>(1u << prio);
  // Leaving drop mode leaves forward mode too: one call for either action.
  p.egress->set_drop_mode(prio, false, now_ns);
  p.storm_classes &= static_cast<uint8_t>(~bit);
  p.ingress_drop_classes &= static_cast<uint8_t>(~bit);
  if (storms_ > 0) --storms_;
  ++eligibility_changes_;
  ++p.counters.priority[prio].watchdog_restorations;
  // PFC is back on: an XOFF the accounting still asserts goes out now, not at the next refresh.
  PriorityState& s = p.priority[prio];
  if (buffer_.xoff(port, prio)) {
    s.next_refresh_ns = now_ns + xoff_refresh_interval_ns(port);
    make_due(port, prio, config_.xoff_quanta, false);
  }
  if (logger_) {
    logger_->info(
        "PFC watchdog: port {} priority {} restored: no pause frame for {} ms, leaving {} mode",
        port, prio, config_.watchdog_restoration_ns / 1'000'000,
        to_string(config_.watchdog_action));
  }
}

void PfcState::tick(uint64_t now_ns) {
  if (!config_.watchdog) return;
  // A class can only be stalled while paused, and every pause of an attached port is reported
  // (on_pause): past the last one's end, with no class in watchdog mode, there is nothing to
  // watch.
  if (storms_ == 0 && now_ns >= pause_horizon_ns_) return;
  for (uint16_t port = 0; port < ports_.size(); ++port) {
    PortState& p = ports_[port];
    if (p.egress == nullptr) continue;
    for (uint8_t prio = 0; prio < kPriorities; ++prio) {
      if (!enabled(prio)) continue;
      if (!((p.storm_classes >> prio) & 1)) {
        const uint64_t since = p.egress->stalled_since_ns(prio, now_ns);
        if (since == EgressPort::kNever || now_ns < since ||
            now_ns - since < config_.watchdog_detection_ns) {
          continue;
        }
        enter_storm(port, prio, now_ns);
      } else if (now_ns >= restoration_deadline_ns(p.priority[prio])) {
        restore(port, prio, now_ns);
      }
    }
  }
}

uint64_t PfcState::next_event_ns(uint64_t now_ns) const {
  if (ports_with_frames_due_ > 0) return now_ns;
  // The same shortcut as tick(), and no refresh timers without an XOFF asserted: an idle or
  // unpaused switch answers without a scan.
  const bool watch = config_.watchdog && (storms_ > 0 || now_ns < pause_horizon_ns_);
  if (buffer_.xoff_asserted() == 0 && !watch) return kNever;
  uint64_t next = kNever;
  for (uint16_t port = 0; port < ports_.size(); ++port) {
    const PortState& p = ports_[port];
    for (uint8_t prio = 0; prio < kPriorities; ++prio) {
      if (!enabled(prio)) continue;
      const PriorityState& s = p.priority[prio];
      if (buffer_.xoff(port, prio)) next = std::min(next, s.next_refresh_ns);
      if (!watch || p.egress == nullptr) continue;
      if ((p.storm_classes >> prio) & 1) {
        next = std::min(next, restoration_deadline_ns(s));
      } else if (uint64_t since = p.egress->stalled_since_ns(prio, now_ns);
                 since != EgressPort::kNever) {
        next = std::min(next, since + config_.watchdog_detection_ns);
      }
    }
  }
  return next;
}

bool PfcState::eligible(uint16_t port, uint8_t tc, uint64_t now_ns) const {
  if (port >= ports_.size()) return false;
  const EgressPort* egress = ports_[port].egress;
  if (egress == nullptr) return true;
  if (!egress->link_up()) return false;
  if (!lossless(tc)) return true;
  if (egress->drop_mode(tc)) return false;
  return !(config_.fast_feedback && egress->paused(tc, now_ns));
}

PathLoad PfcState::path_load(uint16_t port, uint8_t tc, uint64_t now_ns) const {
  PathLoad load;
  load.eligible = eligible(port, tc, now_ns);
  if (port < ports_.size() && ports_[port].egress != nullptr) {
    load.queued_bytes = ports_[port].egress->queued_bytes();
  }
  return load;
}

uint64_t PfcState::buffered_bytes(uint16_t port, uint8_t priority) const {
  return buffer_.occupancy_bytes(port, priority);
}

bool PfcState::xoff_asserted(uint16_t port, uint8_t priority) const {
  return buffer_.xoff(port, priority);
}

bool PfcState::watchdog_dropping(uint16_t port, uint8_t priority) const {
  if (port >= ports_.size() || priority >= kPriorities) return false;
  const EgressPort* egress = ports_[port].egress;
  return egress != nullptr && egress->drop_mode(priority);
}

bool PfcState::watchdog_storming(uint16_t port, uint8_t priority) const {
  if (port >= ports_.size() || priority >= kPriorities) return false;
  return (ports_[port].storm_classes >> priority) & 1;
}

}  // namespace spraynet
