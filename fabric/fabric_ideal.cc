// Measurement: what each message would take alone on an idle fabric (the ideal FCT over the
// fastest path, or over the flow's own path) and the FCT slowdown the papers report.
#include "fabric/fabric.h"

#include <algorithm>

#include <cmath>

#include "dataplane/egress/link_emulator.h"
#include "fabric/fabric_detail.h"
#include "fabric/flow_size_cdf.h"

namespace spraynet::fabric {

using detail::kNever;

uint32_t Fabric::path_hops(uint32_t src, uint32_t dst) const {
  const HostSpec& a = topology_.hosts()[src];
  const HostSpec& b = topology_.hosts()[dst];
  if (a.leaf == b.leaf) return 2;
  return a.pod == b.pod ? 4 : 6;  // across pods: up to a super-spine and down again
}

std::vector<uint32_t> Fabric::build_ideal_paths() {
  // Every cable's own delay (--cable-spread-ns included) and rate, from its lower end's port.
  const auto& hosts = topology_.hosts();
  const auto& switches = topology_.switches();
  const auto H = static_cast<uint32_t>(hosts.size());
  const uint32_t planes = config_.planes;
  const uint32_t L = config_.total_leaves();
  const uint32_t S = config_.spines;
  const uint32_t M = config_.tiers == 3 ? config_.super_spines : 0;
  const uint32_t pods = config_.tiers == 3 ? config_.pods : 1;
  const auto link_of = [&](uint32_t node, uint16_t port) -> const control::LinkSettings& {
    return node < H ? hosts[node].nic.uplinks.at(port).link
                    : switches[node - H].config.ports.at(port).link;
  };
  host_cable_delay_.assign(H, std::vector<uint64_t>(planes, kNever));
  // Per plane: leaf (global) x spine of its pod, and pod x spine x super-spine of that column:
  // the least delay over their parallel cables.
  std::vector<uint64_t> leaf_spine(uint64_t{planes} * L * S, kNever);
  std::vector<uint64_t> spine_super(uint64_t{planes} * pods * S * std::max<uint32_t>(M, 1), kNever);
  host_gbps_ = leaf_spine_gbps_ = spine_super_gbps_ = 0;
  const auto slowest = [](double& r, double gbps) { r = r == 0 ? gbps : std::min(r, gbps); };
  std::vector<uint32_t> cable_delay;
  cable_delay.reserve(topology_.cables().size());
  for (const Cable& c : topology_.cables()) {
    const control::LinkSettings& link = link_of(c.a_node, c.a_port);
    cable_delay.push_back(static_cast<uint32_t>(std::min<uint64_t>(link.delay_ns, UINT32_MAX - 1)));
    if (!c.fabric) {
      const bool a_host = c.a_node < H;
      const uint32_t host = a_host ? c.a_node : c.b_node;
      const uint16_t port = a_host ? c.a_port : c.b_port;
      const control::LinkSettings& hl = link_of(host, port);
      const uint32_t plane = port < planes ? port : 0;
      host_cable_delay_[host][plane] = std::min(host_cable_delay_[host][plane], hl.delay_ns);
      slowest(host_gbps_, hl.rate_gbps);
      continue;
    }
    const SwitchSpec& lower = switches[c.a_node - H];
    const SwitchSpec& upper = switches[c.b_node - H];
    if (c.upper == Tier::kSpine) {
      uint64_t& d = leaf_spine[(uint64_t{lower.plane} * L + lower.index) * S + upper.index];
      d = std::min(d, link.delay_ns);
      slowest(leaf_spine_gbps_, link.rate_gbps);
    } else {
      uint64_t& d = spine_super[((uint64_t{lower.plane} * pods + lower.pod) * S + lower.index) * M +
                                upper.index];
      d = std::min(d, link.delay_ns);
      slowest(spine_super_gbps_, link.rate_gbps);
    }
  }
  if (leaf_spine_gbps_ == 0) leaf_spine_gbps_ = host_gbps_;
  if (spine_super_gbps_ == 0) spine_super_gbps_ = leaf_spine_gbps_;
  const uint32_t per_pod = config_.leaves;
  leaf_pair_delay_.assign(planes, std::vector<uint64_t>(uint64_t{L} * L, kNever));
  for (uint32_t p = 0; p < planes; ++p) {
    const auto ls = [&](uint32_t leaf, uint32_t s) {
      return leaf_spine[(uint64_t{p} * L + leaf) * S + s];
    };
    for (uint32_t a = 0; a < L; ++a) {
      for (uint32_t b = 0; b < L; ++b) {
        uint64_t best = a == b ? 0 : kNever;
        for (uint32_t s = 0; a != b && s < S; ++s) {
          if (ls(a, s) == kNever || ls(b, s) == kNever) continue;
          if (a / per_pod == b / per_pod) {
            best = std::min(best, ls(a, s) + ls(b, s));
            continue;
          }
          // Across pods: up to a super-spine of spine s's column and down to the other pod's s.
          for (uint32_t m = 0; m < M; ++m) {
            const uint64_t up = spine_super[((uint64_t{p} * pods + a / per_pod) * S + s) * M + m];
            const uint64_t down = spine_super[((uint64_t{p} * pods + b / per_pod) * S + s) * M + m];
            if (up == kNever || down == kNever) continue;
            best = std::min(best, ls(a, s) + up + down + ls(b, s));
          }
        }
        leaf_pair_delay_[p][uint64_t{a} * L + b] = best;
      }
    }
  }
  // A sprayed QP's packets take every plane and every uplink at once, DRILL's and oblivious
  // entropy spraying's every uplink.
  const bool spray = is_spray(mode_);
  const bool per_packet = spreads_per_packet(mode_);
  host_lanes_ = spray ? planes : 1;
  leaf_spine_lanes_ = per_packet ? (spray ? planes : 1) * config_.leaf_uplinks() : 1;
  spine_super_lanes_ = per_packet ? leaf_spine_lanes_ * config_.spine_uplinks() : 1;
  return cable_delay;
}

uint64_t Fabric::pair_delay_ns(uint32_t src, uint32_t dst) const {
  const HostSpec& a = topology_.hosts()[src];
  const HostSpec& b = topology_.hosts()[dst];
  const uint32_t L = config_.total_leaves();
  uint64_t delay = kNever;
  for (uint32_t p = 0; p < config_.planes; ++p) {
    const uint64_t up = host_cable_delay_[src][p], down = host_cable_delay_[dst][p];
    const uint64_t mid = leaf_pair_delay_[p][uint64_t{a.leaf} * L + b.leaf];
    if (up == kNever || down == kNever || mid == kNever) continue;
    delay = std::min(delay, up + mid + down);
  }
  return delay == kNever ? 0 : delay;
}

size_t Fabric::rate_hops(uint32_t src, uint32_t dst, std::array<PathHop, 6>& hops) const {
  const HostSpec& a = topology_.hosts()[src];
  const HostSpec& b = topology_.hosts()[dst];
  size_t n = 0;
  hops[n++] = {host_gbps_, 0, host_lanes_};
  if (a.leaf != b.leaf) {
    hops[n++] = {leaf_spine_gbps_, 0, leaf_spine_lanes_};
    if (a.pod != b.pod) {
      hops[n++] = {spine_super_gbps_, 0, spine_super_lanes_};
      hops[n++] = {spine_super_gbps_, 0, spine_super_lanes_};
    }
    hops[n++] = {leaf_spine_gbps_, 0, leaf_spine_lanes_};
  }
  hops[n++] = {host_gbps_, 0, host_lanes_};
  return n;
}

double Fabric::serialisation_fct_ns(uint64_t bytes, uint32_t src, uint32_t dst) const {
  // The path's hops at their rates, no cable delay (the callers add the path's).
  std::array<PathHop, 6> hops{};
  const size_t n = rate_hops(src, dst, hops);
  return spraynet::fabric::ideal_fct_ns(bytes, config_.mtu, hops.data(), n);
}

double Fabric::ideal_fct_ns(uint64_t bytes, uint32_t src, uint32_t dst) const {
  return serialisation_fct_ns(bytes, src, dst) + 2.0 * static_cast<double>(pair_delay_ns(src, dst));
}

double Fabric::flow_ideal_fct_ns(uint64_t bytes, size_t flow) const {
  const QpFlow& f = plan_.flows()[flow];
  // Each way, the least cable delay the flow's packets met (their own path: ECMP's hashed
  // spine, the uplinks a sprayed QP used); the fastest path of the pair for a way no packet
  // has come back from yet (a flow unfinished at the end).
  const uint64_t pair = pair_delay_ns(f.src, f.dst);
  const uint32_t fwd = path_delays_->forward_ns(flow);
  const uint32_t rev = path_delays_->reverse_ns(flow);
  const uint64_t there = fwd == FlowPathDelays::kUnknown ? pair : std::max<uint64_t>(fwd, pair);
  const uint64_t back = rev == FlowPathDelays::kUnknown ? pair : std::max<uint64_t>(rev, pair);
  std::array<PathHop, 6> hops{};
  const size_t n = rate_hops(f.src, f.dst, hops);
  double ideal = spraynet::fabric::ideal_fct_ns(bytes, config_.mtu, hops.data(), n) +
                 static_cast<double>(there + back);
  // A flow of one message: its packets on slower lanes (spraying) end no earlier than the
  // slowest one's way there after the packets ahead of it, plus one packet's hops and the way
  // back (FlowPathDelays::forward_tail_ns).
  const uint32_t tail = path_delays_->forward_tail_ns(flow);
  if (tail != FlowPathDelays::kUnknown && sender_spec(f).one_shot) {
    ideal = std::max(ideal, static_cast<double>(tail) + ack_return_ns(hops.data(), n) +
                                static_cast<double>(back));
  }
  return ideal;
}


const RcQpSpec& Fabric::sender_spec(const QpFlow& f) const {
  return nodes_[f.src].nic->rc_engine()->config().qp_specs.at(f.src_qp_index);
}

std::optional<Post> Fabric::single_message(size_t flow) const {
  const QpFlow& f = plan_.flows()[flow];
  const RcQpSpec& spec = sender_spec(f);
  if (spec.posted) {
    if (flow_initial_posts_[flow] != 1 || flow_fct_[flow].dynamic_posts != 0) return std::nullopt;
    return plan_.initial_posts()[static_cast<size_t>(flow_first_post_[flow])];
  }
  if (spec.messages != 1) return std::nullopt;
  return Post{f.src, f.src_qp_index, spec.message_bytes, 0};
}

template <class Fn>
void Fabric::for_each_unfinished(uint64_t end_ns, Fn fn) const {
  // A QP completes its messages in order: its k-th post is done when it completed more than k.
  std::vector<uint32_t> seen(plan_.flows().size(), 0);
  for (const Post& p : plan_.initial_posts()) {
    const int32_t fi = flow_of(p.host, p.qp_index);
    if (fi < 0) continue;
    const auto i = static_cast<size_t>(fi);
    if (seen[i]++ >= flow_fct_[i].messages && p.at_ns < end_ns) fn(i, p.at_ns, p.bytes);
  }
  for (const DynamicPost& d : dynamic_posts_) {
    const uint64_t rank = flow_initial_posts_[d.flow] + d.seq;
    if (rank >= flow_fct_[d.flow].messages && d.at_ns < end_ns) fn(d.flow, d.at_ns, d.bytes);
  }
  // Messages the engine sends by itself (alltoall, incast: all due at 0); an unlimited stream
  // (permutation) always has one under way when the run stops: none of them counts.
  for (size_t i = 0; i < plan_.flows().size(); ++i) {
    const QpFlow& f = plan_.flows()[i];
    const RcQpSpec& spec = sender_spec(f);
    if (spec.posted || spec.messages == 0) continue;
    for (uint64_t k = flow_fct_[i].messages; k < spec.messages; ++k) fn(i, 0, spec.message_bytes);
  }
}

void Fabric::collect_slowdown(RunResult& r) {
  const size_t flows = plan_.flows().size();
  flow_initial_posts_.assign(flows, 0);
  flow_first_post_.assign(flows, -1);
  for (size_t j = 0; j < plan_.initial_posts().size(); ++j) {
    const Post& p = plan_.initial_posts()[j];
    const int32_t fi = flow_of(p.host, p.qp_index);
    if (fi < 0) continue;
    if (flow_initial_posts_[static_cast<size_t>(fi)]++ == 0) {
      flow_first_post_[static_cast<size_t>(fi)] = static_cast<int64_t>(j);
    }
  }
  SlowdownReport& s = r.slowdown;
  s.warmup_ns = config_.slowdown_warmup();
  s.end_ns = r.virtual_ns;
  s.excluded_warmup = excluded_warmup_;
  std::vector<SlowdownSample> samples = std::move(sized_fct_);
  sized_fct_.clear();
  for_each_unfinished(r.virtual_ns, [&](size_t fi, uint64_t at_ns, uint32_t bytes) {
    if (at_ns < s.warmup_ns) {
      ++s.excluded_warmup;
      return;
    }
    // Censored: its FCT is at least the time it had.
    const double had = static_cast<double>(r.virtual_ns - at_ns);
    samples.push_back(SlowdownSample{had / flow_ideal_fct_ns(bytes, fi), bytes, 1});
    ++s.unfinished;
  });
  if (samples.empty() && s.excluded_warmup == 0) return;  // a workload without messages
  SlowdownBinSpec spec;
  if (!config_.slowdown_bins.empty()) {
    spec = parse_slowdown_bins(config_.slowdown_bins);
  } else if (config_.workload == Workload::kCdf && cdf_ != nullptr) {
    spec.kind = SlowdownBinning::kDeciles;
  }
  s.binning = spec.kind;
  switch (spec.kind) {
    case SlowdownBinning::kSingle: {
      uint64_t largest = 1;
      for (const SlowdownSample& m : samples) largest = std::max<uint64_t>(largest, m.bytes);
      s.edges = {largest};
      break;
    }
    case SlowdownBinning::kDeciles:
      if (cdf_ != nullptr) s.edges = cdf_->bin_edges(10);
      break;
    case SlowdownBinning::kVentiles:
      break;
    case SlowdownBinning::kBdp:
      s.edges = {config_.longest_path_bdp_bytes()};
      if (s.edges.back() < kMaxMessageBytes) s.edges.push_back(kMaxMessageBytes);
      break;
    case SlowdownBinning::kList:
      s.edges = spec.edges;
      if (s.edges.back() < kMaxMessageBytes) s.edges.push_back(kMaxMessageBytes);
      break;
  }
  s.bins = bin_slowdowns(samples, s.binning, s.edges);
  s.samples = std::move(samples);
}

}  // namespace spraynet::fabric
