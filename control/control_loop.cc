#include "control/control_loop.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "dataplane/egress/pfc_state.h"
#include "dataplane/forwarding/path_selector.h"
#include "dataplane/runtime/node_gate.h"

namespace spraynet::control {

namespace {

LinkStateTableConfig table_config(const ControlLoopConfig& config, const ControlTarget& target) {
  LinkStateTableConfig c = config.links;
  c.path_id_bits = target.path_id_bits;
  return c;
}

ControlTarget checked(ControlTarget target, const ControlLoopConfig& config) {
  if (const std::string reason = config.check(); !reason.empty()) {
    throw std::invalid_argument("control loop: " + reason);
  }
  if (target.links.size() != target.ports.size()) {
    throw std::invalid_argument("control loop: " + std::to_string(target.links.size()) +
                                " link identities for " + std::to_string(target.ports.size()) +
                                " ports");
  }
  for (const EgressPort* p : target.ports) {
    if (p == nullptr) throw std::invalid_argument("control loop: null egress port");
  }
  for (const PathSelector* g : target.groups) {
    if (g == nullptr) throw std::invalid_argument("control loop: null path group");
  }
  return target;
}

}  // namespace

std::string ControlLoopConfig::check() const {
  if (period_ns == 0) return "period_ns: must be > 0";
  if (std::string r = links.check(); !r.empty()) return "links." + r;
  if (std::string r = reweight.check(); !r.empty()) return "reweight." + r;
  return {};
}

ControlLoop::ControlLoop(ControlTarget target, uint64_t start_ns, const ControlLoopConfig& config,
                         std::shared_ptr<spdlog::logger> logger)
    : target_(checked(std::move(target), config)),
      config_(config),
      logger_(std::move(logger)),
      table_(target_.links, table_config(config_, target_)),
      reweighter_(config_.reweight),
      publisher_(target_.rcu),
      next_tick_ns_(start_ns + config_.period_ns) {
  // Baseline: the first tick then measures a whole period.
  sample(start_ns);
  table_.update(samples_, start_ns);
  if (logger_) {
    for (const PathIdCollision& c : table_.collisions()) {
      const auto& links = table_.links();
      if (c.shared()) {
        logger_->warn("path id {}: links {} and {} fold to it and no id is free: shared",
                      c.folded_id, links[c.link].identity, links[c.other].identity);
      } else {
        logger_->warn("path id {}: links {} and {} fold to it; {} takes path id {} instead",
                      c.folded_id, links[c.link].identity, links[c.other].identity,
                      links[c.link].identity, c.assigned_id);
      }
    }
  }
}

bool ControlLoop::tick(uint64_t now_ns) {
  if (now_ns < next_tick_ns_) return false;
  const uint64_t late = now_ns - next_tick_ns_;
  counters_.missed_periods += late / config_.period_ns;
  next_tick_ns_ += (late / config_.period_ns + 1) * config_.period_ns;
  ++counters_.ticks;

  sample(now_ns);
  table_.update(samples_, now_ns);
  publish(compute(now_ns, false));
  return true;
}

void ControlLoop::on_link_down(uint16_t port, uint64_t now_ns) {
  if (port >= table_.size()) {
    throw std::out_of_range("control loop: link down on unknown port " + std::to_string(port));
  }
  table_.mark_down(port, now_ns);
  publish(compute(now_ns, true));
  if (logger_) {
    logger_->info("link {} ({}) down: new bucket tables published at once", port,
                  table_.at(port).identity);
  }
}

std::shared_ptr<const ControlSnapshot> ControlLoop::compute(uint64_t now_ns, bool immediate) const {
  auto s = std::make_shared<ControlSnapshot>();
  s->sequence = counters_.publications + 1;
  s->computed_ns = now_ns;
  s->immediate = immediate;
  s->links.assign(table_.links().begin(), table_.links().end());
  s->group_weights.reserve(target_.groups.size());
  for (size_t gi = 0; gi < target_.groups.size(); ++gi) {
    std::vector<uint32_t> w = reweighter_.weights(s->links, target_.groups[gi]->member_ports());
    if (gi < target_.configured_weights.size() && target_.configured_weights[gi].size() == w.size()) {
      const std::vector<uint32_t>& cfg = target_.configured_weights[gi];
      const uint32_t top = *std::max_element(cfg.begin(), cfg.end());
      for (size_t m = 0; m < w.size() && top > 0; ++m) {
        const uint64_t scaled = (uint64_t{w[m]} * cfg[m] + top / 2) / top;
        // A path the operator weighted and the link state keeps stays in, however small.
        w[m] = static_cast<uint32_t>(scaled == 0 && w[m] > 0 && cfg[m] > 0 ? 1 : scaled);
      }
    }
    s->group_weights.push_back(std::move(w));
  }
  return s;
}

void ControlLoop::sample(uint64_t now_ns) {
  std::unique_lock<runtime::NodeGate> lock;
  if (target_.node_lock != nullptr) lock = std::unique_lock<runtime::NodeGate>(*target_.node_lock);
  sample_ports(target_.ports, target_.pfc, now_ns, samples_);
  const uint8_t lossless = target_.pfc != nullptr ? target_.pfc->config().enabled_priorities : 0;
  for (size_t p = 0; target_.more_queues && p < samples_.size(); ++p) {
    for (const EgressPort* q : target_.more_queues(static_cast<uint16_t>(p))) {
      const PortSample more = sample_port(*q, lossless, now_ns);
      PortSample& s = samples_[p];
      s.tx_bytes += more.tx_bytes;
      s.tx_packets += more.tx_packets;
      s.bit_error_frames += more.bit_error_frames;
      s.lost_frames += more.lost_frames;
      s.queued_bytes += more.queued_bytes;
    }
  }
  if (target_.adjust_sample) {
    for (size_t p = 0; p < samples_.size(); ++p) {
      target_.adjust_sample(static_cast<uint16_t>(p), now_ns, samples_[p]);
    }
  }
}

void ControlLoop::publish(std::shared_ptr<const ControlSnapshot> snapshot) {
  publisher_.publish(target_.groups, snapshot->group_weights);
  if (target_.on_publish) target_.on_publish(*snapshot);
  ++counters_.publications;
  if (snapshot->immediate) ++counters_.immediate_publications;
  current_ = std::move(snapshot);
}

}  // namespace spraynet::control
