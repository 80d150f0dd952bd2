#include "fabric/fabric.h"

#include <rte_mempool.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "dataplane/egress/link_emulator.h"
#include "fabric/flow_size_cdf.h"
#include "fabric/frame_packer.h"
#include "fabric/kernel/rank_bytes.h"

namespace spraynet::fabric {

namespace {

constexpr uint64_t kNever = UINT64_MAX;
constexpr uint16_t kBurst = 64;

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  const size_t i = std::min(v.size() - 1, k == 0 ? 0 : k - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace

Fabric::Fabric(const FabricConfig& config, FabricMode mode, uint64_t seed, rte_mempool* pool,
               const FlowSizeCdf* cdf, rte_mempool* segment_pool)
    : config_(config),
      mode_(mode),
      seed_(seed),
      pool_(pool),
      segment_pool_(segment_pool),
      cdf_(cdf),
      topology_(config, mode, seed),
      plan_(config, topology_, seed, cdf),
      payload_store_(segment_pool) {
  install_spray_rules();
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  // Each NIC's reorder engine holds what its own QPs need, not nic_emu's 4096 QPs x 256 PSNs
  // (4 MB a NIC, gigabytes for a thousand hosts): the QPs that send to it, and a window each.
  std::vector<uint32_t> incoming(hosts, 0);
  for (const QpFlow& f : plan_.flows()) ++incoming[f.dst];
  if (plan_.posts_arrive()) {
    // cdf: flows come and go; a context is made at a flow's first packet and an idle one reused
    // (ReorderEngine::set_first_psn), so what a NIC holds is for the flows in flight: at most
    // two from every other host at once before the least recently used idle one is taken.
    for (uint32_t& n : incoming) n = std::min(n, 2 * hosts);
  }
  for (uint32_t h = 0; h < hosts; ++h) {
    control::NicReorderSettings& r = topology_.hosts()[h].nic.reorder;
    r.max_qps = std::clamp<uint32_t>(2 * incoming[h] + 8, 16, 4096);
    r.max_buffered = std::clamp<uint32_t>(r.window * (incoming[h] + 1), 1024, 65536);
  }
  if (topology_.node_count() >= DueQueue::kMaxNodes) {
    throw std::invalid_argument("the fabric has " + std::to_string(topology_.node_count()) +
                                " nodes; fabric_emu drives at most " +
                                std::to_string(DueQueue::kMaxNodes - 1));
  }
  nodes_.resize(topology_.node_count());
  // One sink for every NIC's logger, each named by its host: what they log lands in the report
  // (a NIC logs a layout mismatch or a failed PPCID check once, so a few lines per host at most).
  for (uint32_t h = 0; h < hosts; ++h) {
    nic_log_.push_back(std::make_shared<spdlog::sinks::ringbuffer_sink_st>(4));
    nic_log_.back()->set_pattern("%n: %v");
  }
  for (uint32_t h = 0; h < hosts; ++h) {
    const HostSpec& spec = topology_.hosts()[h];
    std::vector<MacAddress> macs(spec.nic.uplinks.size(), spec.mac);
    // The plan says who talks to whom; the receive model is the NIC's (topology) choice.
    RcTrafficEngineConfig engine = plan_.take_engine(h);
    engine.ooo_placement = spec.nic.receive == control::ReceiveModel::kOooPlacement;
    engine.placement_window = spec.nic.placement.window;
    engine.placement_nak_delay_ns = spec.nic.placement.nak_delay_ns;
    if (config.payload == "shared") engine.payload_store = &payload_store_;
    auto logger = std::make_shared<spdlog::logger>(spec.name, nic_log_[h]);
    logger->set_level(spdlog::level::info);
    nodes_[h].nic = std::make_unique<nic_emu::NicNode>(spec.nic, engine, pool, macs, logger);
    // A fabric that sprays nothing has NICs that write no PPCID: its RoCEv2 packets cross it
    // with the UDP checksum 0, as plain RoCE NICs send them.
    nodes_[h].nic->set_host_side({is_spray(mode), config.nic_restore_checksum, false});
    nodes_[h].peers.resize(nodes_[h].nic->port_count());
    background_.resize(topology_.node_count());  // before any control loop samples
    background_[h].resize(nodes_[h].nic->port_count());
  }
  for (uint32_t s = 0; s < topology_.switches().size(); ++s) {
    Node& n = nodes_[topology_.switch_node(s)];
    n.sw = std::make_unique<switch_emu::SwitchNode>(topology_.switches()[s].config, pool);
    n.peers.resize(n.sw->port_count());
    background_[topology_.switch_node(s)].resize(n.sw->port_count());
    if (mode == FabricMode::kWeighted) {
      control::ControlLoopConfig cc;
      cc.period_ns = config.control_period_ns;
      control::ControlTarget target = control::control_target_of(*n.sw);
      const uint32_t id = topology_.switch_node(s);
      target.adjust_sample = [this, id](uint16_t port, uint64_t now_ns, control::PortSample& ps) {
        add_background(id, port, now_ns, ps);
      };
      n.control = std::make_unique<control::ControlLoop>(std::move(target), 0, cc);
    }
  }
  if (is_spray(mode) && config.spray_policy == "weighted") {
    for (uint32_t h = 0; h < hosts; ++h) add_nic_control(h);
  }
  // TCAM spray rules that did not fit: those QPs fall back to ECMP (one path for the QP).
  if (is_spray(mode)) {
    for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
      const SwitchSpec& s = topology_.switches()[si];
      if (!s.leaf) continue;
      const Tcam& tcam = nodes_[topology_.switch_node(si)].sw->tcam();
      for (const auto& rule : s.config.tcam.rules) {
        // Even ids are the data direction (one per sprayed QP), odd ones its ACKs.
        const auto refusal = tcam.refusal_of(rule.id);
        if (rule.id % 2 == 0 && refusal && *refusal != TcamRefusal::kNone) ++tcam_fallback_qps_;
      }
    }
  }
  for (uint32_t c = 0; c < topology_.cables().size(); ++c) {
    const Cable& cable = topology_.cables()[c];
    nodes_[cable.a_node].peers.at(cable.a_port) = Peer{cable.b_node, cable.b_port, c};
    nodes_[cable.b_node].peers.at(cable.b_port) = Peer{cable.a_node, cable.a_port, c};
    if (cable.fabric) {
      // Both directions of every switch-switch cable: leaf-spine (tier 1) and spine-super-spine
      // (tier 2), each at its own rate.
      const std::string& lower = topology_.node_name(cable.a_node);
      const std::string& upper = topology_.node_name(cable.b_node);
      const std::string k = cable.name.substr(cable.name.rfind('#'));
      const uint8_t tier = cable.upper == Tier::kSuper ? 2 : 1;
      const double gbps = tier == 2 ? config.spine_super_rate() : config.leaf_spine_rate();
      watched_.push_back(Watched{cable.a_node, cable.a_port, 0, 0, true, tier, gbps});
      link_names_.push_back(lower + ">" + upper + k);
      watched_.push_back(Watched{cable.b_node, cable.b_port, 0, 0, false, tier, gbps});
      link_names_.push_back(upper + ">" + lower + k);
    }
  }
  down_since_ns_.assign(topology_.cables().size(), kNever);
  flow_fct_.assign(plan_.flows().size(), {});
  {
    std::vector<uint32_t> cable_delay = build_ideal_paths();
    std::vector<uint32_t> ips(hosts), first_qpn(hosts), qps(hosts);
    for (uint32_t h = 0; h < hosts; ++h) {
      ips[h] = topology_.hosts()[h].ip;
      first_qpn[h] = nodes_[h].nic->rc_engine()->config().first_local_qp;
      qps[h] = nodes_[h].nic->rc_engine()->qps();
    }
    // A full frame on the host's link: how long each packet ahead of another holds it when the
    // NIC has one link (with several planes it may send packets side by side: 0).
    const double packet_ns =
        config_.planes == 1
            ? static_cast<double>(LinkEmulator::wire_bits(roce_frame_bytes(config_.mtu, false))) /
                  host_gbps_
            : 0.0;
    std::vector<float> ns_per_bit(plan_.flows().size());
    for (size_t i = 0; i < ns_per_bit.size(); ++i) {
      std::array<PathHop, 6> hops{};
      const size_t k = rate_hops(plan_.flows()[i].src, plan_.flows()[i].dst, hops);
      double sum = 0;
      for (size_t j = 0; j < k; ++j) sum += 1.0 / hops[j].gbps;
      // Rounded down: the bound stays one.
      ns_per_bit[i] = std::nextafter(static_cast<float>(sum), 0.0F);
    }
    path_delays_ = std::make_unique<FlowPathDelays>(plan_.flows(), ips, first_qpn, qps,
                                                    std::move(cable_delay), plan_.first_psn(),
                                                    packet_ns, std::move(ns_per_bit));
  }
  cable_filter_.assign(topology_.cables().size(), 0);

  // The receiving NICs own their QPs' contexts: their reorder engines know the first PSNs.
  if (plan_.posts_arrive()) {
    for (uint32_t h = 0; h < hosts; ++h) {
      if (ReorderEngine* r = nodes_[h].nic->reorder()) r->set_first_psn(plan_.first_psn());
    }
  } else {
    for (const QpFlow& f : plan_.flows()) {
      if (ReorderEngine* r = nodes_[f.dst].nic->reorder()) {
        r->expect(topology_.hosts()[f.src].ip, f.dst_qpn, plan_.first_psn());
      }
    }
  }
  if (plan_.posts_arrive()) {
    // Each host's posts (in time order) wait for their time: a flow's QP is made when it starts.
    const std::vector<Post>& posts = plan_.initial_posts();
    post_next_.assign(topology_.hosts().size(), 0);
    post_end_.assign(topology_.hosts().size(), 0);
    for (size_t i = posts.size(); i-- > 0;) post_next_[posts[i].host] = i;
    for (size_t i = 0; i < posts.size(); ++i) post_end_[posts[i].host] = i + 1;
  } else {
    for (const Post& p : plan_.initial_posts()) post(p);
  }

  // A toggling background is its square wave written out: on at at_ns, off toggle_ns later,
  // on again, ... up to the end of the run.
  const uint64_t run_end = config_.workload == Workload::kCdf ? config_.duration_ns * 5 + 1'000'000
                                                              : config_.duration_ns;
  for (const FabricEvent& e : config.events) {
    if (e.toggle_ns == 0) {
      events_.push_back(e);
      continue;
    }
    for (uint64_t k = 0, t = e.at_ns; t <= run_end; ++k, t += e.toggle_ns) {
      FabricEvent step = e;
      step.at_ns = t;
      step.toggle_ns = 0;
      if (k % 2 == 1) step.value = 0;
      events_.push_back(step);
    }
  }
  std::stable_sort(events_.begin(), events_.end(),
                   [](const FabricEvent& a, const FabricEvent& b) { return a.at_ns < b.at_ns; });
  for (const FabricEvent& e : events_) {
    // Refuse a name that matches nothing before running, not halfway through.
    if (e.kind == FabricEvent::Kind::kBackground) {
      if (!topology_.find_switch(e.target) && topology_.find_cables(e.target).empty()) {
        throw std::invalid_argument("event '" + e.text + "': no switch or link named '" + e.target +
                                    "' (a switch like spine2 or p1.leaf0, a link " +
                                    "like leaf0-spine3 or h0-p1.leaf0)");
      }
    } else if (e.kind == FabricEvent::Kind::kFilter && topology_.find_host(e.target)) {
      // A host: the filter sits between its NIC and the host.
    } else if (e.target.find('>') != std::string::npos ? topology_.find_link_ends(e.target).empty()
                                                       : topology_.find_cables(e.target).empty()) {
      throw std::invalid_argument(
          "event '" + e.text + "': no link named '" + e.target +
          "' (links are LEAF-SPINE[#k], SPINE-SUPER[#k] or hN-LEAF, e.g. leaf0-spine3, "
          "pod0.leaf1-pod0.spine3, pod0.spine3-super3.1" +
          (e.kind == FabricEvent::Kind::kFilter      ? "; a filter may also name a host, e.g. h3)"
           : e.target.find('>') != std::string::npos ? "; one direction: A>B, e.g. spine3>leaf1)"
                                                     : ")"));
    }
  }
  partition();
  for (uint32_t id = 0; id < nodes_.size(); ++id) schedule_at(id, 0);
}

void Fabric::partition() {
  // A rack per leaf index (its leaf in every plane, and its hosts), a spine each, a super-spine
  // each; an LP's cut ports are its switches' ports on leaf-spine and spine-super-spine cables.
  // The lookahead is the smallest delay of those cables; with none, or one of 0 ns (nothing to
  // run apart by), the fabric is one LP.
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  lp_of_.assign(nodes_.size(), 0);
  uint32_t lps = config_.total_leaves();
  for (uint32_t h = 0; h < hosts; ++h) lp_of_[h] = topology_.hosts()[h].leaf;
  for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
    const SwitchSpec& s = topology_.switches()[si];
    lp_of_[topology_.switch_node(si)] = s.leaf ? s.index : lps++;
  }
  lookahead_ns_ = kNever;
  for (const Cable& c : topology_.cables()) {
    if (lp_of_[c.a_node] == lp_of_[c.b_node]) continue;
    for (const auto& [node, port] : c.ends()) {
      if (!nodes_[node].sw) throw std::logic_error("fabric: a NIC on a cable between LPs");
      lookahead_ns_ =
          std::min(lookahead_ns_, nodes_[node].sw->egress(port).link().propagation_delay_ns());
    }
  }
  if (lookahead_ns_ == 0) {
    lp_of_.assign(nodes_.size(), 0);
    lps = 1;
    lookahead_ns_ = kNever;
  }
  lps_.clear();
  for (uint32_t i = 0; i < lps; ++i) {
    lps_.push_back(std::make_unique<Lp>());
    lps_.back()->index = i;
  }
  kernel_ = std::make_unique<Kernel>(lps, static_cast<Kernel::Model&>(*this));
  for (const Cable& c : topology_.cables()) {
    if (lp_of_[c.a_node] == lp_of_[c.b_node]) continue;
    for (const auto& [node, port] : c.ends()) {
      lps_[lp_of_[node]]->cut_ports.emplace_back(node, port);
    }
  }
  for (auto& lp : lps_) std::sort(lp->cut_ports.begin(), lp->cut_ports.end());
}

void Fabric::add_nic_control(uint32_t host) {
  // The NIC's control loop, as nic_emu runs it: its uplinks' link-state table every
  // nic_control_period, and spray weights from the bucket formula over it (the NIC has one
  // "group": its uplinks). The weights reach the spray engine at once (virtual time: no grace
  // period), and stay in force until the next period, however stale they are by then.
  nic_emu::NicNode& nic = *nodes_[host].nic;
  const control::NicConfig& nc = nic.config();
  control::ControlTarget target;
  target.links = control::uplink_identities(nc);
  for (size_t u = 0; u < nc.uplinks.size(); ++u) target.links[u].path_id = nc.uplinks[u].path_id;
  target.path_id_bits = control::path_id_bits(nc);
  for (uint16_t u = 0; u < nc.uplinks.size(); ++u) target.ports.push_back(&nic.egress(u));
  target.adjust_sample = [this, host](uint16_t port, uint64_t now_ns, control::PortSample& ps) {
    add_background(host, port, now_ns, ps);
  };
  target.on_publish = [this, host](const control::ControlSnapshot& snap) {
    nic_emu::NicNode& n = *nodes_[host].nic;
    std::vector<uint16_t> members(n.uplink_count());
    for (uint16_t u = 0; u < members.size(); ++u) members[u] = u;
    auto w = std::make_unique<SprayWeights>();
    w->weights = control::BucketReweighter().weights(snap.links, members);
    w->updated_ns = snap.computed_ns;
    n.spray().publish_weights(std::move(w));  // the old table: nobody else reads it
  };
  control::ControlLoopConfig cc;
  cc.period_ns = config_.nic_control_period_ns;
  nodes_[host].control = std::make_unique<control::ControlLoop>(std::move(target), 0, cc);
}

void Fabric::set_background(uint32_t node, uint16_t port, double fraction) {
  Background& b = background_[node][port];
  if (b.line_gbps > 0) {
    b.wire_bytes += b.fraction * b.line_gbps / 8.0 * static_cast<double>(now_ - b.since_ns);
  }
  b.line_gbps = config_.link_gbps;
  b.fraction = fraction;
  b.since_ns = now_;
}

double Fabric::background_wire_bytes(uint32_t node, uint16_t port, uint64_t now_ns) const {
  const Background& b = background_[node][port];
  if (b.line_gbps <= 0) return 0;
  return b.wire_bytes + b.fraction * b.line_gbps / 8.0 *
                            static_cast<double>(now_ns - std::min(now_ns, b.since_ns));
}

void Fabric::add_background(uint32_t node, uint16_t port, uint64_t now_ns,
                            control::PortSample& sample) const {
  // On real hardware the background traffic is frames through this very port: its counters
  // count them and its line rate is the whole link's. The emulated port only carries the
  // experiment's frames at the rate the background leaves, so its sample is completed here:
  // background bytes as MTU-sized RoCE frames (whole frames, so the wire overhead per frame the
  // table adds comes out right), and the rate back at the line rate. A link 85% taken by
  // background then reads 85% utilised plus the experiment's own share, as the leaf would see.
  const Background& b = background_[node][port];
  if (b.line_gbps <= 0) return;
  const double wire = background_wire_bytes(node, port, now_ns);
  const uint64_t frame = roce_frame_bytes(config_.mtu, false);
  const auto frames =
      static_cast<uint64_t>(wire / static_cast<double>(frame + LinkEmulator::kWireOverheadBytes));
  sample.tx_packets += frames;
  sample.tx_bytes += frames * frame;
  if (b.fraction > 0 && b.fraction < 1) sample.rate_gbps /= 1.0 - b.fraction;
}

Fabric::~Fabric() {
  free_mail();
  for (Node& n : nodes_) {
    if (n.sw) n.sw->free_all();
    if (n.nic) n.nic->free_all();
  }
}

void Fabric::install_spray_rules() {
  if (!is_spray(mode_)) return;
  // One spray rule per sprayed QP at its sender's leaf in every plane (and one for its ACKs at
  // the receiver's leaf): the leaf then picks the uplink per packet from the PPCID's path id.
  std::vector<uint32_t> next_id(topology_.switches().size(), 0);
  const auto add = [&](uint32_t host, uint32_t src_ip, uint32_t dst_ip, uint32_t qpn, uint32_t parity) {
    for (uint32_t p = 0; p < config_.planes; ++p) {
      SwitchSpec& s = topology_.switches()[topology_.leaf_index(p, topology_.hosts()[host].leaf)];
      control::TcamRuleSettings r;
      uint32_t& id = next_id[static_cast<size_t>(&s - topology_.switches().data())];
      if (id % 2 != parity) ++id;
      r.id = id++;
      r.priority = 10;
      r.src = {src_ip, 32};
      r.dst = {dst_ip, 32};
      r.proto = 17;
      r.proto_mask = 0xFF;
      r.dst_port = {4791, 4791};
      r.dest_qp = {qpn, qpn};
      r.action = "spray";
      if (config_.tcam_roce_partition > 0) r.partition = "roce";
      s.config.tcam.rules.push_back(r);
    }
  };
  for (const QpFlow& f : plan_.flows()) {
    const uint32_t sip = topology_.hosts()[f.src].ip;
    const uint32_t dip = topology_.hosts()[f.dst].ip;
    add(f.src, sip, dip, f.dst_qpn, 0);
    add(f.dst, dip, sip, f.src_qpn, 1);
  }
}

void Fabric::post(const Post& p) {
  nodes_[p.host].nic->rc_engine()->post(p.qp_index, p.bytes, p.at_ns);
}

void Fabric::post_dynamic(Lp& lp, const Post& p) {
  // The flow's sender is p.host: only the LP that runs it writes the flow's entry.
  if (const int32_t fi = flow_of(p.host, p.qp_index); fi >= 0) {
    FlowFct& ff = flow_fct_[static_cast<size_t>(fi)];
    lp.dynamic_posts.push_back(
        DynamicPost{static_cast<uint32_t>(fi), p.bytes, ff.dynamic_posts++, p.at_ns});
  }
  post(p);
}

uint64_t Fabric::node_next(uint32_t id, uint64_t now_ns) const {
  const Node& n = nodes_[id];
  if (n.sw) {
    uint64_t t = n.sw->next_event_ns(now_ns);
    if (n.control) t = std::min(t, n.control->next_event_ns());
    return t;
  }
  uint64_t t = n.nic->next_event_ns(now_ns);
  if (id < post_next_.size() && post_next_[id] < post_end_[id]) {
    t = std::min(t, plan_.initial_posts()[post_next_[id]].at_ns);
  }
  return n.control ? std::min(t, n.control->next_event_ns()) : t;
}

void Fabric::post_arrived(uint32_t host, uint64_t now_ns) {
  if (host >= post_next_.size()) return;
  const std::vector<Post>& posts = plan_.initial_posts();
  size_t& i = post_next_[host];
  for (; i < post_end_[host] && posts[i].at_ns <= now_ns; ++i) post(posts[i]);
}

void Fabric::schedule(Lp& lp, uint32_t id, bool served) {
  Node& n = nodes_[id];
  const uint64_t now = now_of(lp);
  uint64_t next = node_next(id, now);
  if (next == kNever) return;
  // A node just served that says "now" again waits a nanosecond: its egress starts frames at
  // their exact times whenever it is called, so this changes no schedule and ends any loop.
  if (next <= now) next = served ? now + 1 : now;
  if (next < n.scheduled) {
    n.scheduled = next;
    lp.queue.push(next, id);
  }
}

void Fabric::schedule_at(uint32_t id, uint64_t now_ns) {
  if (!node_mine(id)) return;
  Lp& lp = *lps_[lp_of_[id]];
  kernel_->advance(lp.index, now_ns);
  schedule(lp, id, false);
}

void Fabric::deliver(Lp& lp, const Peer& to, rte_mbuf** frames, uint16_t n) {
  if (to.node == UINT32_MAX) {
    rte_pktmbuf_free_bulk(frames, n);
    return;
  }
  if (cable_filter_[to.cable]) {
    n = filter_frames(lp, frames, n);
    if (n == 0) return;
  }
  lp.hops += n;
  path_delays_->cross(to.cable, frames, n);
  if (const uint64_t down = down_since_ns_[to.cable]; down != kNever) {
    // A frame that crossed a cable after it failed: what the dead-link check counts.
    lp.dead_link_frames += n;
    if (now_of(lp) > down + 1'000'000) lp.dead_link_frames_late += n;
  }
  Node& node = nodes_[to.node];
  if (node.sw) {
    node.sw->receive(to.port, frames, n, now_of(lp));
  } else {
    path_delays_->arrive(to.node, frames, n);
    node.nic->receive(to.port, frames, n, now_of(lp));
  }
  if (!node.dirty) {
    node.dirty = true;
    lp.touched.push_back(to.node);
  }
}

uint16_t Fabric::filter_frames(Lp& lp, rte_mbuf** frames, uint16_t n) {
  // What the security group of pitfall 5 does: a UDP packet to port 4791 (RoCEv2) whose
  // checksum is not 0 looks malformed to it and is dropped. PFC frames and other traffic pass.
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = frames[i];
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint32_t len = rte_pktmbuf_data_len(m);
    bool drop = false;
    if (len >= 14 + 20 + 8 && f[12] == 0x08 && f[13] == 0x00 && f[14 + 9] == 17) {
      const uint32_t l4 = 14 + 4u * (f[14] & 0xF);
      if (l4 + 8 <= len) {
        const uint16_t dport = static_cast<uint16_t>(f[l4 + 2] << 8 | f[l4 + 3]);
        const uint16_t csum = static_cast<uint16_t>(f[l4 + 6] << 8 | f[l4 + 7]);
        drop = dport == 4791 && csum != 0;
      }
    }
    if (drop) {
      ++lp.checksum_filter_drops;
      rte_pktmbuf_free(m);
    } else {
      frames[kept++] = m;
    }
  }
  return kept;
}

void Fabric::serve(Lp& lp, uint32_t id) {
  Node& n = nodes_[id];
  n.scheduled = kNever;
  const uint64_t now = now_of(lp);
  rte_mbuf* buf[kBurst];
  if (n.sw) {
    switch_emu::SwitchNode& sw = *n.sw;
    if (n.control && n.control->next_event_ns() <= now && n.control->tick(now) &&
        window_started_) {
      const auto& weights = n.control->current()->group_weights;
      n.weight_sums.resize(weights.size());
      n.util_sums.resize(weights.size());
      for (size_t g = 0; g < weights.size(); ++g) {
        const auto members = sw.group(g).member_ports();
        n.weight_sums[g].resize(weights[g].size(), 0.0);
        n.util_sums[g].resize(weights[g].size(), 0.0);
        for (size_t m = 0; m < weights[g].size(); ++m) {
          n.weight_sums[g][m] += weights[g][m];
          n.util_sums[g][m] += n.control->table().at(members[m]).utilisation;
        }
      }
      ++n.weight_ticks;
    }
    sw.poll(now);
    // Transmitting on one port changes no other port's next event: the due set is taken once.
    lp.due_ports.clear();
    sw.append_due_ports(now, lp.due_ports);
    for (const uint16_t p : lp.due_ports) {
      // Fewer than a burst: nothing more is due on the port now (no second, empty dequeue).
      uint16_t k;
      do {
        k = sw.transmit(p, now, buf, kBurst);
        if (k != 0) deliver(lp, n.peers[p], buf, k);
      } while (k == kBurst);
    }
  } else {
    nic_emu::NicNode& nic = *n.nic;
    if (n.control && n.control->next_event_ns() <= now) n.control->tick(now);
    const auto ports = static_cast<uint16_t>(nic.port_count());
    for (uint16_t p = 0; p < ports; ++p) {
      if (nic.egress(p).next_event_ns() > now) continue;
      uint16_t k;
      do {
        k = nic.transmit(p, now, buf, kBurst);
        if (k == 0) break;
        path_delays_->depart(id, buf, k);
        deliver(lp, n.peers[p], buf, k);
      } while (k == kBurst);
    }
    post_arrived(id, now);
    nic.poll(now);
    take_completions(lp, id);
  }
  schedule(lp, id, true);
  settle(lp);
}

void Fabric::settle(Lp& lp) {
  for (size_t i = 0; i < lp.touched.size(); ++i) {
    const uint32_t t = lp.touched[i];
    nodes_[t].dirty = false;
    if (nodes_[t].nic) take_completions(lp, t);
    schedule(lp, t, false);
  }
  lp.touched.clear();
}

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
  // A sprayed QP's packets take every plane and every uplink at once, DRILL's every uplink.
  const bool spray = is_spray(mode_);
  const bool per_packet = spray || mode_ == FabricMode::kDrill;
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

uint64_t Fabric::slowdown_bdp_bytes() const {
  const uint32_t L = config_.total_leaves();
  const uint64_t cable = config_.delay_ns + config_.cable_spread_ns;
  std::vector<PathHop> hops = {{host_gbps_, cable}};
  if (L > 1) {
    hops.push_back({leaf_spine_gbps_, cable});
    if (config_.tiers == 3 && config_.pods > 1) {
      hops.push_back({spine_super_gbps_, cable});
      hops.push_back({spine_super_gbps_, cable});
    }
    hops.push_back({leaf_spine_gbps_, cable});
  }
  hops.push_back({host_gbps_, cable});
  const double rtt_ns = spraynet::fabric::ideal_fct_ns(config_.mtu, config_.mtu, hops);
  return static_cast<uint64_t>(std::llround(host_gbps_ * rtt_ns / 8.0));
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
      s.edges = {slowdown_bdp_bytes()};
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

void Fabric::take_completions(Lp& lp, uint32_t host) {
  RcTrafficEngine* rc = nodes_[host].nic->rc_engine();
  lp.completions.clear();
  if (rc->take_completions(lp.completions) == 0) return;
  const uint64_t warmup = config_.slowdown_warmup();
  for (const MessageCompletion& c : lp.completions) {
    const uint64_t fct = c.completed_ns - c.post_ns;
    lp.fct_ns.push_back(fct);
    const int32_t fi = flow_of(host, c.qp_index);
    // A requester QP is always a flow's; were one not, its peer would be on another leaf.
    const uint32_t dst = fi >= 0 ? plan_.flows()[static_cast<size_t>(fi)].dst
                                 : (host + config_.hosts_per_leaf) % config_.hosts();
    const double ideal = fi >= 0 ? flow_ideal_fct_ns(c.bytes, static_cast<size_t>(fi))
                                 : ideal_fct_ns(c.bytes, host, dst);
    const double slowdown = static_cast<double>(fct) / ideal;
    if (c.post_ns >= warmup) {
      lp.sized_fct.push_back(SizedFct{slowdown, c.bytes, 0});
    } else {
      ++lp.excluded_warmup;
    }
    if (fi >= 0) {
      // The flow's sender is this host: only this LP writes its entry.
      FlowFct& ff = flow_fct_[static_cast<size_t>(fi)];
      ++ff.messages;
      ff.bytes += c.bytes;
      ff.fct_sum_ns += static_cast<double>(fct);
      ff.fct_max_ns = std::max(ff.fct_max_ns, static_cast<double>(fct));
      ff.slowdown_sum += slowdown;
      ff.first_start_ns = std::min(ff.first_start_ns, c.post_ns);
      ff.last_end_ns = c.completed_ns;
    }
    ++lp.completed;
    lp.last_completion_ns = now_of(lp);
    if (fi >= 0 && plan_.posts_arrive()) retire_receiver(lp, plan_.flows()[static_cast<size_t>(fi)]);
    lp.due_posts.clear();
    plan_.on_completion(host, c.qp_index, now_of(lp), lp.due_posts);
    for (const Post& p : lp.due_posts) {
      if (lookahead_ns_ == kNever) {  // one LP: nothing runs apart, the next rank posts now
        post_dynamic(lp, p);
        schedule(lp, p.host, false);
        continue;
      }
      // The next rank hears of it one lookahead (the shortest fabric cable's delay) later, as a
      // notification would, in its rack or another (an LP's mail to itself goes the same way):
      // the same for every rank, and a rank in another LP can be told without reaching back
      // into its past.
      FabricMessage m;
      m.node = p.host;
      m.cable_or_qp = p.qp_index;
      m.bytes = p.bytes;
      send(lp, lp_of_[p.host], now_of(lp) + lookahead_ns_, m);
    }
  }
}

void Fabric::retire_receiver(Lp& lp, const QpFlow& f) {
  // Its one message is acknowledged: the receiving QP has nothing more to answer. Told as an
  // all-reduce step is (one lookahead later), so another LP is never reached into.
  if (lookahead_ns_ == kNever) {
    nodes_[f.dst].nic->rc_engine()->retire_responder(f.dst_qp_index);
    return;
  }
  FabricMessage m;
  m.node = f.dst;
  m.cable_or_qp = f.dst_qp_index;
  m.bytes = 0;
  send(lp, lp_of_[f.dst], now_of(lp) + lookahead_ns_, m);
}

void Fabric::set_cable_up(uint32_t c, bool up) {
  const Cable& cable = topology_.cables()[c];
  for (const auto& [node, port] : cable.ends()) {
    Node& n = nodes_[node];
    if (n.sw) {
      n.sw->set_link_up(port, up, now_);
      if (!up && n.control) n.control->on_link_down(port, now_);
    } else {
      n.nic->set_link_up(port, up, now_);
    }
  }
  down_since_ns_[c] = up ? kNever : std::min(down_since_ns_[c], now_);
}

namespace {

// Takes the members of `sel` on ports first..first+n-1 out of the group (or back).
void exclude_ports(PathSelector& sel, uint32_t first, uint32_t n, bool withdrawn) {
  const auto members = sel.member_ports();
  for (uint16_t m = 0; m < members.size(); ++m) {
    if (members[m] >= first && members[m] < first + n) sel.set_member_excluded(m, withdrawn);
  }
}

}  // namespace

void Fabric::withdraw(uint32_t plane, uint32_t leaf, uint32_t spine, bool withdrawn) {
  // Every other leaf of the pod stops (or resumes) using this spine towards `leaf` (global).
  const uint32_t K = config_.links_per_spine;
  const uint32_t H = config_.hosts_per_leaf;
  const uint32_t first = leaf - leaf % config_.leaves;
  for (uint32_t l = first; l < first + config_.leaves; ++l) {
    if (l == leaf) continue;
    const uint32_t si = topology_.leaf_index(plane, l);
    const int32_t g = topology_.switches()[si].leaf_group[leaf];
    if (g < 0) continue;
    PathSelector& sel = nodes_[topology_.switch_node(si)].sw->group(static_cast<size_t>(g));
    exclude_ports(sel, H + spine * K, K, withdrawn);
  }
}

void Fabric::withdraw_across_pods(uint32_t plane) {
  // Three tiers: a super-spine that has no link left to pod r's spine is withdrawn from the
  // other pods' spines' routes to r, and a spine from its pod's leaves' routes to a leaf d of
  // pod r when it has no super-spine left that reaches r, or when pod r's spine of its plane has
  // no link left to d (the only way down to d in that plane), as BGP withdraws them, at once.
  // Within a pod withdraw() does it.
  const uint32_t K = config_.links_per_spine;
  const uint32_t K2 = config_.links_per_super;
  const uint32_t H = config_.hosts_per_leaf;
  const uint32_t L = config_.leaves;
  const uint32_t M = config_.super_spines;
  const auto up = [&](uint32_t switch_index, uint32_t port) {
    const switch_emu::SwitchNode& sw = *nodes_[topology_.switch_node(switch_index)].sw;
    return sw.egress(static_cast<uint16_t>(port)).link_up();
  };
  for (uint32_t sp = 0; sp < config_.spines; ++sp) {
    // has_leaf[d]: global leaf d has a link up to its pod's spine sp (a cable down is down at
    // both ends).
    std::vector<uint8_t> has_leaf(config_.total_leaves(), 0);
    for (uint32_t d = 0; d < config_.total_leaves(); ++d) {
      for (uint32_t k = 0; k < K; ++k) {
        has_leaf[d] = has_leaf[d] || up(topology_.leaf_index(plane, d), H + sp * K + k);
      }
    }
    // reaches[m][r]: super-spine sp.m has a link up to pod r's spine sp.
    std::vector<std::vector<uint8_t>> reaches(M, std::vector<uint8_t>(config_.pods, 0));
    for (uint32_t m = 0; m < M; ++m) {
      const uint32_t u = topology_.super_index(plane, sp, m);
      for (uint32_t r = 0; r < config_.pods; ++r) {
        for (uint32_t k = 0; k < K2; ++k) reaches[m][r] = reaches[m][r] || up(u, r * K2 + k);
      }
    }
    for (uint32_t q = 0; q < config_.pods; ++q) {
      const uint32_t si = topology_.spine_index(plane, sp, q);
      switch_emu::SwitchNode& spine = *nodes_[topology_.switch_node(si)].sw;
      for (uint32_t r = 0; r < config_.pods; ++r) {
        const int32_t g = topology_.switches()[si].pod_group[r];
        if (g < 0) continue;
        bool spine_reaches = false;
        for (uint32_t m = 0; m < M; ++m) {
          exclude_ports(spine.group(static_cast<size_t>(g)), L * K + m * K2, K2, !reaches[m][r]);
          bool link = false;
          for (uint32_t k = 0; k < K2; ++k) link = link || up(si, L * K + m * K2 + k);
          spine_reaches = spine_reaches || (link && reaches[m][r]);
        }
        for (uint32_t l = 0; l < L; ++l) {
          const uint32_t li = topology_.leaf_index(plane, q * L + l);
          switch_emu::SwitchNode& leaf = *nodes_[topology_.switch_node(li)].sw;
          for (uint32_t d = r * L; d < (r + 1) * L; ++d) {
            const int32_t lg = topology_.switches()[li].leaf_group[d];
            if (lg < 0) continue;
            exclude_ports(leaf.group(static_cast<size_t>(lg)), H + sp * K, K,
                          !(spine_reaches && has_leaf[d]));
          }
        }
      }
    }
  }
}

void Fabric::apply_event(const FabricEvent& e) {
  if (e.kind == FabricEvent::Kind::kFilter) {
    const bool on = e.value != 0;
    if (const auto h = topology_.find_host(e.target)) {
      nic_emu::NicHostSide side = nodes_[*h].nic->host_side();
      side.filter_nonzero_udp_checksum = on;
      nodes_[*h].nic->set_host_side(side);
    } else {
      for (const uint32_t c : topology_.find_cables(e.target)) cable_filter_[c] = on;
    }
    return;
  }
  if (e.kind == FabricEvent::Kind::kBackground) {
    // Traffic outside the experiment takes `value` of each of the switch's links, both ways:
    // what is left for the fabric's own traffic is the rest of the line rate.
    // A switch: both directions of every link of it (a host's NIC uplink too). A link
    // (h0-p1.leaf0, leaf0-spine2): one direction, from its first-named end, so that a host's
    // other traffic loads its uplink and not what it receives. The background's bytes count in
    // the ports' link state (add_background), as they would in real port counters.
    const double rate = config_.link_gbps * (1.0 - e.value);
    const auto take = [&](uint32_t nid, uint16_t port) {
      if (nodes_[nid].sw) {
        nodes_[nid].sw->set_link_rate_gbps(port, rate, now_);
      } else {
        nodes_[nid].nic->set_link_rate_gbps(port, rate, now_);
      }
      set_background(nid, port, e.value);
    };
    if (const auto s = topology_.find_switch(e.target)) {
      const uint32_t node = topology_.switch_node(*s);
      for (const Cable& cable : topology_.cables()) {
        if (cable.a_node != node && cable.b_node != node) continue;
        for (const auto& [nid, port] : cable.ends()) take(nid, port);
      }
    } else {
      for (const uint32_t c : topology_.find_cables(e.target)) {
        take(topology_.cables()[c].a_node, topology_.cables()[c].a_port);
      }
    }
    for (uint32_t id = 0; id < nodes_.size(); ++id) schedule_at(id, now_);
    return;
  }
  if (e.kind == FabricEvent::Kind::kBer || e.kind == FabricEvent::Kind::kRate) {
    // Both directions of a link, or one ("spine3>leaf1": what spine3 sends to leaf1).
    for (const auto& [nid, port] : topology_.find_link_ends(e.target)) {
      Node& n = nodes_[nid];
      if (!n.sw) continue;  // a NIC's side of a host cable keeps its settings
      if (e.kind == FabricEvent::Kind::kBer) n.sw->set_link_ber(port, e.value, now_);
      if (e.kind == FabricEvent::Kind::kRate) n.sw->set_link_rate_gbps(port, e.value, now_);
    }
  }
  for (const uint32_t c : topology_.find_cables(e.target)) {
    if (e.kind == FabricEvent::Kind::kLinkDown) {
      set_cable_up(c, false);
      drop_mail_on_cable(c);
    }
    if (e.kind == FabricEvent::Kind::kLinkUp) set_cable_up(c, true);
  }
  if (e.kind == FabricEvent::Kind::kLinkDown || e.kind == FabricEvent::Kind::kLinkUp) {
    // Routing: a spine that has no link left to a leaf is withdrawn from the other leaves'
    // routes to it (and comes back with its first link).
    const uint32_t K = config_.links_per_spine;
    for (uint32_t p = 0; p < config_.planes; ++p) {
      if (config_.tiers == 3) withdraw_across_pods(p);
      for (uint32_t l = 0; l < config_.total_leaves(); ++l) {
        for (uint32_t sp = 0; sp < config_.spines; ++sp) {
          const uint32_t leaf_node = topology_.switch_node(topology_.leaf_index(p, l));
          bool any_up = false;
          for (uint32_t k = 0; k < K; ++k) {
            const uint16_t port = static_cast<uint16_t>(config_.hosts_per_leaf + sp * K + k);
            any_up = any_up || nodes_[leaf_node].sw->egress(port).link_up();
          }
          withdraw(p, l, sp, !any_up);
        }
      }
    }
  }
  for (uint32_t id = 0; id < nodes_.size(); ++id) schedule_at(id, now_);
}

void Fabric::sample() {
  // Every reading is taken where its node runs (gather): on one rank or several, the same.
  const double dt_s = static_cast<double>(config_.sample_ns) * 1e-9;
  struct LinkReading {
    uint64_t tx = 0, queue = 0;
    bool paused = false;
  };
  const std::vector<LinkReading> links = gather<LinkReading>(
      watched_.size(), [&](size_t i) { return watched_[i].node; },
      [&](size_t i) {
        const switch_emu::SwitchNode& sw = *nodes_[watched_[i].node].sw;
        const uint16_t p = watched_[i].port;
        return LinkReading{sw.port_counters(p).tx_bytes, sw.egress(p).queued_bytes(),
                           sw.egress(p).any_paused(now_)};
      });
  for (uint32_t i = 0; i < watched_.size(); ++i) {
    Watched& w = watched_[i];
    const uint64_t tx = links[i].tx;
    const double rate = w.gbps * 1e9;
    if (record_timeseries_) {
      LinkSample s;
      s.t_ns = now_;
      s.link = i;
      s.util = static_cast<float>(static_cast<double>(tx - w.last_tx_bytes) * 8.0 / (rate * dt_s));
      s.queue_bytes = links[i].queue;
      s.paused = links[i].paused;
      samples_.push_back(s);
    }
    w.last_tx_bytes = tx;
  }
  struct NodeReading {
    uint64_t paused_ports = 0, acked = 0;
  };
  const std::vector<NodeReading> per_node = gather<NodeReading>(
      nodes_.size(), [](size_t id) { return static_cast<uint32_t>(id); },
      [&](size_t id) {
        const Node& n = nodes_[id];
        NodeReading k;
        if (n.sw) {
          for (uint16_t p = 0; p < n.sw->port_count(); ++p) {
            k.paused_ports += n.sw->egress(p).any_paused(now_);
          }
        } else {
          for (uint16_t p = 0; p < n.nic->uplink_count(); ++p) {
            k.paused_ports += n.nic->egress(p).any_paused(now_);
          }
          k.acked = n.nic->rc_engine()->requester_totals().bytes_acked;
        }
        return k;
      });
  uint64_t paused = 0;
  for (const NodeReading& k : per_node) paused += k.paused_ports;
  pfc_timeline_.emplace_back(static_cast<double>(now_) / 1000.0, paused);
  sample_nic_split(static_cast<double>(config_.sample_ns));
  uint64_t acked = 0;
  for (const NodeReading& k : per_node) acked += k.acked;
  const double capacity = static_cast<double>(config_.hosts()) * config_.planes * config_.link_gbps * 1e9 * dt_s;
  goodput_timeline_.emplace_back(static_cast<double>(now_) / 1000.0,
                                 static_cast<double>(acked - last_sample_acked_bytes_) * 8.0 / capacity);
  last_sample_acked_bytes_ = acked;
}

void Fabric::sample_cc() {
  cc_sample_t_ns_.push_back(now_);
  const std::vector<uint32_t> queues = gather<uint32_t>(
      queue_series_.size(), [&](size_t i) { return queue_series_[i].node; },
      [&](size_t i) {
        const QueueSeries& q = queue_series_[i];
        const uint64_t b = nodes_[q.node].sw->egress(q.port).queued_bytes(3);
        return static_cast<uint32_t>(std::min<uint64_t>(b, UINT32_MAX));
      });
  for (size_t i = 0; i < queue_series_.size(); ++i) queue_series_[i].bytes.push_back(queues[i]);
  const std::vector<float> rates = gather<float>(
      rate_series_.size(), [&](size_t i) { return rate_series_[i].host; },
      [&](size_t i) {
        const DcqcnRateControl* rc =
            nodes_[rate_series_[i].host].nic->rc_engine()->rate_control(rate_series_[i].qp_index);
        return rc != nullptr ? static_cast<float>(rc->rate_gbps()) : 0.0f;
      });
  for (size_t i = 0; i < rate_series_.size(); ++i) rate_series_[i].gbps.push_back(rates[i]);
}

void Fabric::collect_cc(RunResult& r) {
  r.cc_mode = std::string(control::to_string(config_.cc.mode));
  double rate_sum = 0;
  for (const NodeFigures& f : figures_) {
    if (f.is_switch) {
      for (const NodeFigures::Port& port : f.ports) {
        for (const EgressClassCounters& c : port.classes) r.ecn_marked += c.ecn_marked;
      }
      continue;
    }
    const nic_emu::NicCounters& k = f.nic_counters;
    r.ce_received += k.ce_received;
    r.cnps_sent += k.cnps_sent;
    r.cnps_suppressed += k.cnps_suppressed;
    r.cnps_received += k.cnps_received;
    const RcCcSummary& s = f.cc;
    r.rate_cuts += s.rate_cuts;
    r.cc_qps += s.qps;
    r.qps_at_min_rate += s.qps_at_min_rate;
    r.qps_limited_at_end += s.qps_limited;
    rate_sum += s.rate_fraction_sum;
  }
  r.mean_rate_fraction = r.cc_qps > 0 ? rate_sum / static_cast<double>(r.cc_qps) : 0.0;
  // The busiest lossless queue over the window: the port with the highest mean depth.
  size_t first = 0;
  while (first < cc_sample_t_ns_.size() && cc_sample_t_ns_[first] < fair_start_ns_) ++first;
  const size_t n = cc_sample_t_ns_.size() - first;
  const QueueSeries* busiest = nullptr;
  double busiest_mean = -1;
  for (const QueueSeries& q : queue_series_) {
    double sum = 0;
    for (size_t i = first; i < q.bytes.size(); ++i) sum += q.bytes[i];
    const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
    if (mean > busiest_mean) {
      busiest_mean = mean;
      busiest = &q;
    }
  }
  if (busiest != nullptr && n > 0) {
    std::vector<double> v(busiest->bytes.begin() + static_cast<std::ptrdiff_t>(first),
                          busiest->bytes.end());
    const switch_emu::SwitchNode& sw = *nodes_[busiest->node].sw;
    r.queue.port = sw.config().name + "." + sw.config().ports[busiest->port].name;
    r.queue.mean = busiest_mean;
    r.queue.max = static_cast<uint64_t>(*std::max_element(v.begin(), v.end()));
    r.queue.p50 = static_cast<uint64_t>(percentile(v, 0.5));
    r.queue.p99 = static_cast<uint64_t>(percentile(v, 0.99));
    r.queue.samples = n;
    r.queue.interval_ns = cc_sample_ns_;
    if (const EcnMarker* m = sw.egress(busiest->port).ecn_marker()) {
      r.queue.kmin = m->config().classes[3].kmin_bytes;
      r.queue.kmax = m->config().classes[3].kmax_bytes;
    }
    if (record_timeseries_) {
      for (size_t i = 0; i < cc_sample_t_ns_.size(); ++i) {
        r.cc_timeline_t_us.push_back(static_cast<double>(cc_sample_t_ns_[i]) / 1000.0);
        r.cc_timeline_queue.push_back(busiest->bytes[i]);
      }
      for (const RateSeries& rs : rate_series_) r.cc_timeline_rates.emplace_back(rs.name, rs.gbps);
    }
  }
}

void Fabric::sample_nic_split(double dt_ns) {
  // Per host with two or more uplinks, per sample interval: the share of its bytes each uplink
  // carried against the ideal split, each uplink's share of the capacity the background left
  // (the average over the interval). The tracking error is half the summed |share - ideal|
  // (for two uplinks, |share0 - ideal0|), averaged over the window's intervals in which the
  // host sent a frame's worth.
  if (config_.planes < 2) return;
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  nic_tx_last_.resize(hosts);
  nic_bg_last_.resize(hosts);
  const double line_bytes = config_.link_gbps / 8.0 * dt_ns;
  struct UplinkReading {
    uint64_t tx = 0;
    bool up = false;
  };
  const std::vector<UplinkReading> uplinks = gather<UplinkReading>(
      host_uplinks_.size(), [&](size_t i) { return host_uplinks_[i].first; },
      [&](size_t i) {
        const auto [h, u] = host_uplinks_[i];
        return UplinkReading{nodes_[h].nic->port_counters(u).tx_bytes,
                             nodes_[h].nic->egress(u).link_up()};
      });
  size_t at = 0;
  for (uint32_t h = 0; h < hosts; ++h) {
    const nic_emu::NicNode& nic = *nodes_[h].nic;
    const size_t U = nic.uplink_count();
    nic_tx_last_[h].resize(U, 0);
    nic_bg_last_[h].resize(U, 0.0);
    std::vector<double> sent(U), avail(U);
    double sent_sum = 0, avail_sum = 0;
    for (uint16_t u = 0; u < U; ++u, ++at) {
      const uint64_t tx = uplinks[at].tx;
      const double bg = background_wire_bytes(h, u, now_);
      sent[u] = static_cast<double>(tx - nic_tx_last_[h][u]);
      avail[u] = std::max(0.0, 1.0 - (bg - nic_bg_last_[h][u]) / line_bytes);
      if (!uplinks[at].up) avail[u] = 0;
      nic_tx_last_[h][u] = tx;
      nic_bg_last_[h][u] = bg;
      sent_sum += sent[u];
      avail_sum += avail[u];
    }
    if (!window_started_ || sent_sum < config_.mtu || avail_sum <= 0) continue;
    double err = 0;
    for (size_t u = 0; u < U; ++u) err += std::abs(sent[u] / sent_sum - avail[u] / avail_sum);
    split_error_sum_ += err / 2;
    ++split_error_n_;
  }
}

nlohmann::json Fabric::nic_split_report() const {
  // From figures_ (collect()).
  // Over the window, per host: each uplink's share of the bytes the host sent; its deviation
  // from the even split, max over uplinks of |share - 1/U| / (1/U) (7:3 reads 0.4, 5:5 0).
  // Hosts that sent nothing are left out.
  if (config_.planes < 2) return nullptr;
  nlohmann::json hosts = nlohmann::json::object();
  double dev_sum = 0, dev_max = 0, share_sum = 0;
  uint32_t n = 0;
  for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
    const NodeFigures& nic = figures_[h];
    const size_t U = nic.ports.size();
    std::vector<double> bytes(U);
    double total = 0;
    for (uint16_t u = 0; u < U; ++u) {
      const uint64_t start = h < nic_tx_window_.size() ? nic_tx_window_[h][u] : 0;
      bytes[u] = static_cast<double>(nic.ports[u].tx_bytes - start);
      total += bytes[u];
    }
    if (total <= 0) continue;
    nlohmann::json shares = nlohmann::json::array();
    double dev = 0, top = 0;
    for (size_t u = 0; u < U; ++u) {
      const double share = bytes[u] / total;
      shares.push_back(share);
      dev = std::max(dev, std::abs(share - 1.0 / static_cast<double>(U)) * static_cast<double>(U));
      top = std::max(top, share);
    }
    hosts[topology_.hosts()[h].name] = shares;
    dev_sum += dev;
    dev_max = std::max(dev_max, dev);
    share_sum += top;
    ++n;
  }
  if (n == 0) return nullptr;
  return {{"hosts_measured", n},
          {"deviation", dev_sum / n},
          {"deviation_max", dev_max},
          {"top_share", share_sum / n},
          {"tracking_error",
           split_error_n_ > 0 ? split_error_sum_ / static_cast<double>(split_error_n_) : 0.0},
          {"intervals", split_error_n_},
          {"shares", hosts}};
}

nlohmann::json Fabric::bucket_report() {
  // Each leaf's entry was made where it ran (bucket_entry), in switch order here.
  if (mode_ != FabricMode::kWeighted) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
    const auto it = bucket_entries_.find(topology_.switch_node(si));
    if (it != bucket_entries_.end()) out[topology_.switches()[si].name] = std::move(it->second);
  }
  return out;
}

nlohmann::json Fabric::bucket_entry(uint32_t si) const {
  // Weighted mode, per leaf: the buckets its first uplink group (towards the next leaf; every
  // uplink group of a leaf reads the same link state) gives each uplink, as the control loop
  // computed them (B = idle_buckets per idle path, the DESIGN.md formula) averaged over the
  // ticks in the window, and at the last tick; the slots each holds in the power-of-two table
  // the dataplane laid out from them, and the link-state utilisation the formula read (at the
  // last tick, and its mean over the same ticks).
  if (mode_ != FabricMode::kWeighted) return nullptr;
  {
    const SwitchSpec& spec = topology_.switches()[si];
    if (!spec.leaf) return nullptr;
    const Node& n = nodes_[topology_.switch_node(si)];
    int32_t g = -1;
    for (const int32_t lg : spec.leaf_group) {
      if (lg >= 0) {
        g = lg;
        break;
      }
    }
    if (g < 0 || !n.control || !n.control->current()) return nullptr;
    const auto gi = static_cast<size_t>(g);
    const PathSelector& sel = n.sw->group(gi);
    const auto members = sel.member_ports();
    const std::vector<uint32_t>& last = n.control->current()->group_weights.at(gi);
    nlohmann::json paths = nlohmann::json::object();
    double total = 0;
    for (size_t m = 0; m < members.size(); ++m) {
      const bool ticked = n.weight_ticks > 0 && gi < n.weight_sums.size();
      const double ticks = static_cast<double>(n.weight_ticks);
      const double mean = ticked ? n.weight_sums[gi][m] / ticks : last[m];
      const double util = n.control->table().at(members[m]).utilisation;
      total += mean;
      paths[spec.config.ports[members[m]].name] = {
          {"buckets", mean},
          {"last", last[m]},
          {"table_slots", sel.bucket_table().buckets_of(static_cast<uint16_t>(m))},
          {"utilisation", util},
          {"utilisation_mean", ticked ? n.util_sums[gi][m] / ticks : util}};
    }
    return {{"group", spec.config.groups[gi].name},
            {"idle_buckets", n.control->config().reweight.idle_buckets},
            {"table_size", sel.bucket_table().size()},
            {"ticks", n.weight_ticks},
            {"total", total},
            {"paths", paths}};
  }
}

void Fabric::snapshot_flows() {
  fair_start_ns_ = now_;
  flow_window_acked_ = gather<uint64_t>(
      plan_.flows().size(), [&](size_t i) { return plan_.flows()[i].src; },
      [&](size_t i) -> uint64_t {
        const QpFlow& f = plan_.flows()[i];
        return nodes_[f.src].nic->rc_engine()->flow_counters(f.src_qp_index).bytes_acked;
      });
}

void Fabric::snapshot_window_start() {
  window_started_ = true;
  window_start_ns_ = now_;
  window_acked_bytes_ = 0;
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  for (const uint64_t acked : gather<uint64_t>(
           hosts, [](size_t h) { return static_cast<uint32_t>(h); },
           [&](size_t h) { return nodes_[h].nic->rc_engine()->requester_totals().bytes_acked; })) {
    window_acked_bytes_ += acked;
  }
  const std::vector<uint64_t> watched_tx = gather<uint64_t>(
      watched_.size(), [&](size_t i) { return watched_[i].node; },
      [&](size_t i) {
        return nodes_[watched_[i].node].sw->port_counters(watched_[i].port).tx_bytes;
      });
  for (size_t i = 0; i < watched_.size(); ++i) watched_[i].window_tx_bytes = watched_tx[i];
  const std::vector<uint64_t> uplink_tx = gather<uint64_t>(
      host_uplinks_.size(), [&](size_t i) { return host_uplinks_[i].first; },
      [&](size_t i) {
        return nodes_[host_uplinks_[i].first].nic->port_counters(host_uplinks_[i].second).tx_bytes;
      });
  nic_tx_window_.assign(hosts, {});
  for (size_t i = 0; i < host_uplinks_.size(); ++i) {
    nic_tx_window_[host_uplinks_[i].first].push_back(uplink_tx[i]);
  }
}

uint64_t Fabric::next_event(uint32_t index) {
  Lp& lp = *lps_[index];
  // Entries superseded by an earlier schedule go first: the top is then a real event.
  while (!lp.queue.empty() && lp.queue.top().t != nodes_[lp.queue.top().node()].scheduled) {
    lp.queue.pop();
  }
  return lp.queue.empty() ? kNever : lp.queue.top().t;
}

void Fabric::serve_next(uint32_t index) {
  Lp& lp = *lps_[index];
  const DueQueue::Due d = lp.queue.top();
  lp.queue.pop();
  serve(lp, d.node());
  ++lp.serves;
}

void Fabric::take_cut_frames(Lp& lp) {
  rte_mbuf* buf[kBurst];
  uint64_t arrival[kBurst];
  for (const auto& [id, port] : lp.cut_ports) {
    Node& n = nodes_[id];
    if (n.sw->egress(port).in_flight() == 0) continue;
    const Peer& peer = n.peers[port];
    const uint32_t to = lp_of_[peer.node];
    uint16_t k;
    do {
      k = n.sw->take_in_flight(port, buf, arrival, kBurst);
      for (uint16_t i = 0; i < k; ++i) {
        FabricMessage m;
        m.frame = buf[i];
        m.node = peer.node;
        m.cable_or_qp = peer.cable;
        m.port = peer.port;
        send(lp, to, arrival[i], m);
      }
    } while (k == kBurst);
    // Its next event was perhaps one of those arrivals: schedule it again from what is left.
    if (n.scheduled != kNever && node_next(id, now_of(lp)) > n.scheduled) {
      n.scheduled = kNever;
      schedule(lp, id, false);
    }
  }
}

void Fabric::deliver_mail(Lp& lp) {
  // Everything due now: frames to one port of one node go in bursts, in their order.
  rte_mbuf* buf[kBurst];
  const uint32_t i = lp.index;
  const uint64_t t = kernel_->mail_front(i).t;
  while (!kernel_->mail_empty(i) && kernel_->mail_front(i).t == t) {
    const FabricMessage m = kernel_->pop_mail(i).body;
    if (m.frame == nullptr) {
      if (m.bytes == 0) {  // a one-shot flow's end, from its sender: the receiver's QP goes
        nodes_[m.node].nic->rc_engine()->retire_responder(m.cable_or_qp);
      } else {
        post_dynamic(lp, Post{m.node, m.cable_or_qp, m.bytes, t});
      }
      schedule(lp, m.node, false);
      continue;
    }
    uint16_t n = 0;
    buf[n++] = m.frame;
    while (n < kBurst && !kernel_->mail_empty(i)) {
      const Kernel::Message& next = kernel_->mail_front(i);
      if (next.t != t || next.body.frame == nullptr || next.body.node != m.node ||
          next.body.port != m.port) {
        break;
      }
      buf[n++] = next.body.frame;
      kernel_->pop_mail(i);
    }
    deliver(lp, Peer{m.node, m.port, m.cable_or_qp}, buf, n);
    settle(lp);
  }
}

void Fabric::free_mail() {
  kernel_->clear_mail([](FabricMessage& m) { rte_pktmbuf_free(m.frame); });
}

void Fabric::drop_mail_on_cable(uint32_t cable) {
  // What EgressPort::set_link_up(false) does to its delay line: frames whose last bit has not
  // arrived by now die on the wire. Here they have already left it for the far LP's mailbox.
  kernel_->erase_mail_if([&](uint64_t t, FabricMessage& m) {
    if (m.frame == nullptr || m.cable_or_qp != cable || t <= now_) return false;
    rte_pktmbuf_free(m.frame);
    ++link_down_in_flight_;
    return true;
  });
}

void Fabric::pack(ByteWriter& w, const FabricMessage& m) {
  w.put(m.node);
  w.put(m.cable_or_qp);
  w.put(m.bytes);
  w.put(m.port);
  w.put<uint8_t>(m.frame != nullptr);
  if (m.frame != nullptr) FramePacker(payload_store_, pool_, segment_pool_).pack(w, m.frame);
}

FabricMessage Fabric::unpack(ByteReader& r) {
  FabricMessage m;
  m.node = r.get<uint32_t>();
  m.cable_or_qp = r.get<uint32_t>();
  m.bytes = r.get<uint32_t>();
  m.port = r.get<uint16_t>();
  if (r.get<uint8_t>() != 0) {
    m.frame = FramePacker(payload_store_, pool_, segment_pool_).unpack(r);
  }
  return m;
}

void Fabric::discard(FabricMessage& m) {
  rte_pktmbuf_free(m.frame);
  m.frame = nullptr;
}

template <class T, class NodeOf, class Read>
std::vector<T> Fabric::gather(size_t n, NodeOf node_of, Read read) {
  std::vector<T> v(n);
  if (!distributed()) {
    for (size_t i = 0; i < n; ++i) v[i] = read(i);
    return v;
  }
  ByteWriter w;
  for (size_t i = 0; i < n; ++i) {
    if (!node_mine(node_of(i))) continue;
    w.put<uint64_t>(i);
    w.put<T>(read(i));
  }
  for (const std::string& bytes : ranks_->all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto i = r.get<uint64_t>();
      v.at(i) = r.get<T>();
    }
  }
  return v;
}

std::vector<NodeFigures> Fabric::gather_node_figures(uint64_t cc_at_ns) {
  const auto of = [&](uint32_t id) {
    Node& n = nodes_[id];
    return n.sw ? NodeFigures::of(*n.sw, n.control.get(), now_)
                : NodeFigures::of(*n.nic, now_, cc_at_ns, distributed());
  };
  std::vector<NodeFigures> figures(nodes_.size());
  if (!distributed()) {
    for (uint32_t id = 0; id < nodes_.size(); ++id) figures[id] = of(id);
    return figures;
  }
  ByteWriter w;
  for (uint32_t id = 0; id < nodes_.size(); ++id) {
    if (!node_mine(id)) continue;
    w.put(id);
    of(id).write(w);
  }
  for (const std::string& bytes : ranks_->all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto id = r.get<uint32_t>();
      figures.at(id) = NodeFigures::read(r);
    }
  }
  return figures;
}

void Fabric::gather_lp_figures() {
  // What each LP counted, and what only the rank that ran a node holds: its flows' completions,
  // its NICs' log lines, its leaves' bucket reports (weighted mode). Every rank takes the others'.
  if (!distributed()) return;
  ByteWriter w;
  for (auto& lp : lps_) {
    if (!mine(lp->index)) continue;
    w.put<uint8_t>(0);
    w.put(lp->index);
    w.put(lp->completed);
    w.put(lp->last_completion_ns);
    w.put(lp->hops);
    w.put(lp->serves);
    w.put(lp->dead_link_frames);
    w.put(lp->dead_link_frames_late);
    w.put(lp->checksum_filter_drops);
    w.put_vector(lp->fct_ns);
    w.put_vector(lp->sized_fct);
    w.put(lp->excluded_warmup);
    w.put_vector(lp->dynamic_posts);
  }
  for (uint32_t i = 0; i < plan_.flows().size(); ++i) {
    if (!node_mine(plan_.flows()[i].src)) continue;
    w.put<uint8_t>(1);
    w.put(i);
    w.put(flow_fct_[i]);
  }
  for (uint32_t h = 0; h < nic_log_.size(); ++h) {
    if (!node_mine(h)) continue;
    w.put<uint8_t>(2);
    w.put(h);
    const std::vector<std::string> lines = nic_log_[h]->last_formatted();
    w.put<uint64_t>(lines.size());
    for (const std::string& line : lines) w.put_string(line);
  }
  for (auto& [node, entry] : bucket_entries_) {
    w.put<uint8_t>(3);
    w.put(node);
    w.put_string(entry.dump());
  }
  for (uint32_t i = 0; i < plan_.flows().size(); ++i) {
    // The flow's path delays as its sender saw them (path_delays_): for the ideal FCT of its
    // unfinished messages and its flows.csv row, wherever those are computed.
    if (!node_mine(plan_.flows()[i].src)) continue;
    w.put<uint8_t>(5);
    w.put(i);
    w.put(path_delays_->forward_ns(i));
    w.put(path_delays_->forward_tail_ns(i));
    w.put(path_delays_->reverse_ns(i));
  }
  w.put<uint8_t>(4);
  w.put(link_down_in_flight_);
  uint64_t link_down_in_flight = 0;
  for (const std::string& bytes : ranks_->all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto kind = r.get<uint8_t>();
      if (kind == 0) {
        Lp& lp = *lps_.at(r.get<uint32_t>());
        lp.completed = r.get<uint64_t>();
        lp.last_completion_ns = r.get<uint64_t>();
        lp.hops = r.get<uint64_t>();
        lp.serves = r.get<uint64_t>();
        lp.dead_link_frames = r.get<uint64_t>();
        lp.dead_link_frames_late = r.get<uint64_t>();
        lp.checksum_filter_drops = r.get<uint64_t>();
        lp.fct_ns = r.get_vector<uint64_t>();
        lp.sized_fct = r.get_vector<SizedFct>();
        lp.excluded_warmup = r.get<uint64_t>();
        lp.dynamic_posts = r.get_vector<DynamicPost>();
      } else if (kind == 1) {
        const auto i = r.get<uint32_t>();
        flow_fct_.at(i) = r.get<FlowFct>();
      } else if (kind == 2) {
        const auto h = r.get<uint32_t>();
        std::vector<std::string> lines(r.get<uint64_t>());
        for (std::string& line : lines) line = r.get_string();
        remote_nic_log_[h] = std::move(lines);
      } else if (kind == 3) {
        const auto node = r.get<uint32_t>();
        bucket_entries_[node] = nlohmann::json::parse(r.get_string());
      } else if (kind == 4) {
        link_down_in_flight += r.get<uint64_t>();
      } else if (kind == 5) {
        const auto i = r.get<uint32_t>();
        const auto forward = r.get<uint32_t>();
        const auto tail = r.get<uint32_t>();
        const auto reverse = r.get<uint32_t>();
        if (i >= path_delays_->flows()) {
          throw std::runtime_error("fabric_emu --mpi: figures from another rank do not read");
        }
        path_delays_->set_seen(i, forward, tail, reverse);
      } else {
        throw std::runtime_error("fabric_emu --mpi: figures from another rank do not read");
      }
    }
  }
  link_down_in_flight_ = link_down_in_flight;
}

RunResult Fabric::run(const std::function<void(uint64_t, uint64_t)>& progress) {
  const auto wall0 = std::chrono::steady_clock::now();
  auto last_progress = wall0;
  const bool finite = plan_.finite();
  // cdf: messages arrive over the duration; the run goes on until they are all done, within
  // a limit of five durations plus 1 ms. Other finite workloads: the duration is the limit.
  const uint64_t end = config_.workload == Workload::kCdf ? config_.duration_ns * 5 + 1'000'000
                                                          : config_.duration_ns;
  const uint64_t window_at = finite ? 0 : config_.warmup();
  // The flows' fairness leaves the warm-up out: permutation's, or a finite workload's when one
  // is given (its other figures still count from 0).
  const uint64_t fair_at = finite ? config_.warmup_ns : window_at;
  bool fair_started = false;
  if (fair_at == 0) {
    snapshot_flows();
    fair_started = true;
  }
  host_uplinks_.clear();
  for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
    for (uint16_t u = 0; u < nodes_[h].nic->uplink_count(); ++u) host_uplinks_.emplace_back(h, u);
  }
  next_sample_ns_ = config_.sample_ns;
  // About 500 queue samples over the run, at most one a microsecond, at least one per sample_ns.
  cc_sample_ns_ = std::clamp<uint64_t>(config_.duration_ns / 500, 1'000,
                                       std::max<uint64_t>(config_.sample_ns, 1'000));
  next_cc_sample_ns_ = cc_sample_ns_;
  for (uint32_t id = 0; id < nodes_.size(); ++id) {
    if (!nodes_[id].sw) continue;
    for (uint16_t p = 0; p < nodes_[id].sw->port_count(); ++p) {
      queue_series_.push_back(QueueSeries{id, p, {}});
    }
  }
  if (config_.cc.enabled()) {
    for (size_t i = 0; i < plan_.flows().size() && rate_series_.size() < 8; ++i) {
      const QpFlow& f = plan_.flows()[i];
      rate_series_.push_back(RateSeries{f.src, f.src_qp_index,
                                        topology_.hosts()[f.src].name + ">" +
                                            topology_.hosts()[f.dst].name + "/" +
                                            std::to_string(f.src_qp_index),
                                        {}});
    }
  }
  // LPs dealt round-robin over the ranks: racks (the heavy ones) first, then spines.
  kernel_->set_ranks(ranks_);
  if (window_at == 0) snapshot_window_start();
  kernel_->set_threads(threads_);
  uint64_t round_end = 0;
  kernel_->between_rounds();
  for (;;) {
    // The earliest thing due anywhere, and the messages done so far (on every rank).
    uint64_t t_node = kernel_->earliest_here();
    std::array<uint64_t, 2> mins{};  // the earliest, and the latest completion (as UINT64_MAX - t)
    std::array<uint64_t, 2> sums{};  // completed, hops
    uint64_t last = 0;
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      sums[0] += lp->completed;
      sums[1] += lp->hops;
      last = std::max(last, lp->last_completion_ns);
    }
    mins = {t_node, UINT64_MAX - last};
    if (distributed()) kernel_->ranks()->reduce(mins, sums);
    t_node = mins[0];
    if (finite && done_ns_ == 0 && sums[0] >= plan_.messages_total()) {
      done_ns_ = UINT64_MAX - mins[1];
    }
    if (finite && done_ns_ != 0) break;
    if (progress && kernel_->rounds() > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::milliseconds(200)) {
        last_progress = now;
        progress(round_end - 1, sums[1]);
      }
    }
    const uint64_t t_event = next_event_ < events_.size() ? events_[next_event_].at_ns : kNever;
    const uint64_t t_window = window_started_ ? kNever : window_at;
    const uint64_t t_fair = fair_started ? kNever : fair_at;
    const uint64_t t_global =
        std::min({t_event, t_window, t_fair, next_sample_ns_, next_cc_sample_ns_});
    const uint64_t t = std::min(t_node, t_global);
    if (t > end) break;
    if (t == t_global) {
      // Fabric-wide work at t, before any node's events of t.
      now_ = t;
      if (t == next_cc_sample_ns_) {
        sample_cc();
        next_cc_sample_ns_ += cc_sample_ns_;
      } else if (t == t_event) {
        apply_event(events_[next_event_++]);
        // A rate change starts frames due under the old rate: those on cut cables go out now.
        kernel_->flush_at(now_);
      } else if (t == t_window) {
        snapshot_window_start();
      } else if (t == t_fair) {
        snapshot_flows();
        fair_started = true;
      } else {
        sample();
        next_sample_ns_ += config_.sample_ns;
      }
      continue;
    }
    // A round: every LP runs its events before round_end. Nothing it sends can arrive before
    // round_end (the lookahead), and nothing fabric-wide happens before it.
    round_end = std::min({t_global, end + 1, lookahead_ns_ == kNever ? kNever : t + lookahead_ns_});
    kernel_->run_round(round_end);
  }
  // Where the run stopped: the last event anywhere.
  now_ = std::max(now_, kernel_->latest_here());
  if (distributed()) {
    std::array<uint64_t, 1> latest{UINT64_MAX - now_};
    kernel_->ranks()->reduce(latest, {});
    now_ = UINT64_MAX - latest[0];
  }
  for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
    const uint32_t node = topology_.switch_node(si);
    if (!node_mine(node)) continue;
    nlohmann::json entry = bucket_entry(si);
    if (!entry.is_null()) bucket_entries_[node] = std::move(entry);
  }
  gather_lp_figures();
  // The LPs' figures, in LP order.
  completed_ = 0;
  for (auto& lp : lps_) {
    completed_ += lp->completed;
    hops_ += lp->hops;
    serves_ += lp->serves;
    dead_link_frames_ += lp->dead_link_frames;
    dead_link_frames_late_ += lp->dead_link_frames_late;
    checksum_filter_drops_ += lp->checksum_filter_drops;
    fct_ns_.insert(fct_ns_.end(), lp->fct_ns.begin(), lp->fct_ns.end());
    sized_fct_.insert(sized_fct_.end(), lp->sized_fct.begin(), lp->sized_fct.end());
    excluded_warmup_ += lp->excluded_warmup;
    dynamic_posts_.insert(dynamic_posts_.end(), lp->dynamic_posts.begin(), lp->dynamic_posts.end());
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  RunResult r = collect(wall_s);
  free_mail();
  for (Node& n : nodes_) {
    if (n.sw) n.sw->free_all();
    if (n.nic) n.nic->free_all();
  }
  r.mbufs_in_use_at_end = rte_mempool_in_use_count(pool_);
  if (segment_pool_ != nullptr) r.mbufs_in_use_at_end += rte_mempool_in_use_count(segment_pool_);
  // A payload segment still referenced is an mbuf that was not freed (and the store must not
  // go before it).
  if (!payload_store_.unreferenced()) ++r.mbufs_in_use_at_end;
  return r;
}

RunResult Fabric::collect(double wall_s) {
  RunResult r;
  r.mode = std::string(to_string(mode_));
  r.workload = std::string(to_string(config_.workload));
  r.seed = seed_;
  r.receive = config_.effective_receive(mode_);
  const bool finite = plan_.finite();
  // Finite workloads end at the last completion (or where the time limit stopped them);
  // permutation runs the whole duration.
  r.virtual_ns = !finite ? std::max(now_, config_.duration_ns) : done_ns_ != 0 ? done_ns_ : now_;
  r.window_start_ns = window_start_ns_;
  r.window_end_ns = r.virtual_ns;
  r.completed = !finite || done_ns_ != 0;
  r.messages_completed = completed_;
  r.messages_expected = finite ? plan_.messages_total() : 0;

  const double host_bps = config_.link_gbps * 1e9 * config_.planes;
  const double window_s = static_cast<double>(r.window_end_ns - r.window_start_ns) * 1e-9;
  // Every node's counters, from the rank that ran it: the rest reads figures_, never nodes_.
  figures_ = gather_node_figures(r.virtual_ns);

  RcRequesterCounters req;
  RcResponderCounters resp;
  RcPlacementResponderCounters place;
  std::array<uint64_t, ReorderEngine::kDepthBins> depth{};
  uint64_t nic_no_uplink = 0, nic_parse = 0, host_filter = 0;
  nic_emu::PpcidCounters ppcid;
  uint64_t rx = 0, delivered = 0, pfc_in = 0, mac_control = 0, dup_freed = 0, held = 0;
  for (const NodeFigures& f : figures_) {
    if (f.is_switch) continue;
    ppcid += f.ppcid;
    r.ppcid_mismatch_hosts += f.ppcid.layout_mismatch > 0;
    for (const NodeFigures::Port& u : f.ports) rx += u.rx_packets;
    delivered += f.nic_counters.delivered;
    pfc_in += f.nic_counters.pfc_received;
    mac_control += f.nic_drops.mac_control_not_pfc + f.nic_drops.pfc_malformed;
    host_filter += f.nic_drops.host_checksum_filter;
    if (f.has_reorder) {
      dup_freed += f.reorder.duplicates_of_held;
      held += f.reorder_held;
    }
    req += f.requester_totals;
    r.qps_never_acked += f.qps_never_acked;
    resp += f.responder_totals;
    place += f.placement_totals;
    if (f.has_reorder) {
      for (size_t i = 0; i < f.reorder_depth.size() && i < depth.size(); ++i) {
        depth[i] += f.reorder_depth[i];
      }
      r.reorder_timeouts += f.reorder.gap_timeouts;
      r.reorder_held += f.reorder.released_after_hold;
      r.reorder_resyncs += f.reorder.resyncs;
    }
    nic_no_uplink += f.nic_drops.no_uplink;
    for (uint64_t v : f.nic_drops.parse) nic_parse += v;
  }
  r.ppcid.clear();
  ppcid.for_each([&r](std::string_view name, uint64_t v) { r.ppcid[std::string(name)] = v; });
  for (uint32_t h = 0; h < nic_log_.size(); ++h) {
    const auto remote = remote_nic_log_.find(h);
    for (std::string line : remote != remote_nic_log_.end() ? remote->second
                                                           : nic_log_[h]->last_formatted()) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      r.nic_log.push_back(line);
    }
  }
  // Every packet in from an uplink: a PFC frame honoured, another MAC control frame dropped, a
  // parse drop (the RC engine's packets always parse, so these are RX's), delivered, dropped by
  // a host-side filter, a duplicate of a held PSN freed, or still held by the reorder engine.
  const uint64_t accounted =
      pfc_in + mac_control + nic_parse + delivered + host_filter + dup_freed + held;
  r.nic_rx = {{"received", rx},
              {"delivered", delivered},
              {"pfc_frames", pfc_in},
              {"mac_control_dropped", mac_control},
              {"parse_dropped", nic_parse},
              {"host_checksum_filter", host_filter},
              {"reorder_duplicates_freed", dup_freed},
              {"reorder_held_at_end", held},
              {"unaccounted", rx >= accounted ? rx - accounted : 0},
              {"overcounted", accounted > rx ? accounted - rx : 0}};
  const double acked = static_cast<double>(req.bytes_acked - window_acked_bytes_);
  if (window_s > 0 && plan_.senders() > 0) {
    r.throughput_fraction = acked * 8.0 / (window_s * host_bps * plan_.senders());
  }
  if (config_.workload == Workload::kIncast && window_s > 0) {
    // The one receiver's share of its own line rate: what an incast is judged by.
    r.receiver_goodput_fraction = acked * 8.0 / (window_s * host_bps);
  }
  if (config_.workload == Workload::kAllreduce && r.completed && r.virtual_ns > 0) {
    const double n = plan_.ranks();
    r.algbw_gbps = static_cast<double>(plan_.allreduce_bytes()) * 8.0 / static_cast<double>(r.virtual_ns);
    r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    r.collective_bw_fraction = r.busbw_gbps * 1e9 / host_bps;
  }
  r.messages_posted = finite ? plan_.messages_total() : req.messages_started;
  r.packets_sent = req.packets_sent;
  r.packets_retransmitted = req.packets_retransmitted;
  r.retx_rate = req.packets_sent == 0 ? 0 : static_cast<double>(req.packets_retransmitted) / req.packets_sent;
  r.naks = req.naks_received;
  r.timeouts = req.timeouts;
  r.retransmitted_acked = req.retransmitted_acked;
  r.qp_errors = req.qp_errors;
  r.placed_out_of_order = place.placed_out_of_order;
  r.holes_naked = place.holes_naked;
  r.window_overflows = place.window_overflows;
  r.placement_duplicates = place.duplicates;
  r.selective_retransmissions = req.selective_retransmissions;

  uint64_t depth_total = 0;
  for (size_t i = 0; i < depth.size(); ++i) {
    depth_total += depth[i];
    if (depth[i] > 0) {
      r.reorder_max_depth = i;
      r.reorder_depth_histogram.emplace_back(i, depth[i]);
    }
  }
  if (depth_total > 0) {
    const uint64_t want = static_cast<uint64_t>(std::ceil(0.99 * static_cast<double>(depth_total)));
    uint64_t seen = 0;
    for (size_t i = 0; i < depth.size(); ++i) {
      seen += depth[i];
      if (seen >= want) {
        r.reorder_p99_depth = i;
        break;
      }
    }
  }

  // Links: the leaf-spine tier's in the two-tier fields, and with three tiers each tier's too.
  struct Spread {
    double mean = 0, max = 0, imbalance = 0;
  };
  const auto spread = [](const std::vector<double>& v) {
    Spread s;
    if (v.empty()) return s;
    double sum = 0, mn = 1e300;
    for (double u : v) {
      sum += u;
      s.max = std::max(s.max, u);
      mn = std::min(mn, u);
    }
    s.mean = sum / static_cast<double>(v.size());
    s.imbalance = s.mean > 0 ? (s.max - mn) / s.mean : 0;
    return s;
  };
  const uint8_t tier_count = config_.tiers == 3 ? 2 : 1;
  for (uint8_t tier = 1; tier <= tier_count; ++tier) {
    std::vector<double> up, down;
    RunResult::TierUtil t;
    t.name = tier == 1 ? "leaf-spine" : "spine-super";
    for (uint32_t i = 0; i < watched_.size(); ++i) {
      const Watched& w = watched_[i];
      if (w.tier != tier) continue;
      const uint64_t tx = figures_[w.node].ports[w.port].tx_bytes - w.window_tx_bytes;
      const double u = window_s > 0 ? static_cast<double>(tx) * 8.0 / (window_s * w.gbps * 1e9) : 0;
      if (!w.uplink) {
        down.push_back(u);
        continue;
      }
      up.push_back(u);
      if (tier == 1) {
        r.uplink_util.push_back(u);
        r.uplink_names.push_back(link_names_[i]);
      }
      if (tier_count > 1) t.up_by_link.emplace_back(link_names_[i], u);
    }
    const Spread su = spread(up), sd = spread(down);
    t.up_mean = su.mean;
    t.up_max = su.max;
    t.up_imbalance = su.imbalance;
    t.down_mean = sd.mean;
    t.down_max = sd.max;
    t.down_imbalance = sd.imbalance;
    t.links = static_cast<uint32_t>(up.size() + down.size());
    if ((su.mean + sd.mean) / 2 > 0.2) {
      for (const std::vector<double>* v : {&up, &down}) {
        for (double u : *v) t.idle_links += u < 0.05;
      }
    }
    if (tier == 1) {
      r.uplink_util_mean = su.mean;
      r.uplink_util_max = su.max;
      r.uplink_util_imbalance = su.imbalance;
      r.downlink_util_mean = sd.mean;
      r.downlink_util_max = sd.max;
      r.downlink_util_imbalance = sd.imbalance;
      r.fabric_links = t.links;
      r.idle_links = t.idle_links;
    }
    if (tier_count > 1) r.tiers.push_back(std::move(t));
  }

  // PFC and drops.
  uint64_t queue_full = 0, link_down = 0, watchdog = 0, bit_error = 0, loss = 0, headroom = 0;
  uint64_t paused_ns = 0, longest_ns = 0;
  uint64_t no_route = 0, no_eligible = 0, ttl = 0, sw_parse = 0, tcam_drop = 0;
  uint64_t watchdog_ingress = 0;
  uint64_t first_pause = kNever, last_pause_end = 0;
  uint64_t nic_paused_ns = 0;  // of paused_ns, the hosts' NIC uplinks: the storm reaching hosts
  // Returns whether the port was ever paused.
  // Lossless classes: the switches' PFC priorities (the class is the priority here), which
  // the NICs honour on their uplinks too. A buffer drop there is what PFC exists to prevent.
  const uint8_t lossless = config_.pfc ? control::PfcSettings{}.priorities : 0;
  const auto add_egress = [&](const NodeFigures::Port& port) {
    bool ever = false;
    for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
      const EgressClassCounters& c = port.classes[tc];
      if ((lossless >> tc) & 1) {
        r.lossless_drops_queue_full += c.drops_queue_full;
        r.lossless_drops_headroom += c.drops_headroom_overflow;
      }
      queue_full += c.drops_queue_full;
      link_down += c.drops_link_down;
      watchdog += c.drops_watchdog;
      headroom += c.drops_headroom_overflow;
      bit_error += c.drops_bit_error;
      loss += c.drops_loss;
      paused_ns += c.paused_ns;
      longest_ns = std::max(longest_ns, c.longest_pause_ns);
      r.pfc_pause_intervals += c.pause_intervals;
      if (c.pause_intervals > 0) {
        ever = true;
        first_pause = std::min(first_pause, c.first_pause_ns);
        last_pause_end = std::max(last_pause_end, c.last_pause_end_ns);
      }
    }
    return ever;
  };
  for (uint32_t id = 0; id < figures_.size(); ++id) {
    const NodeFigures& f = figures_[id];
    if (f.is_switch) {
      bool sw_paused = false;
      for (const NodeFigures::Port& port : f.ports) {
        const bool ever = add_egress(port);
        r.pfc_ports_paused += ever;
        sw_paused = sw_paused || ever;
      }
      const size_t si = id - topology_.hosts().size();
      if (sw_paused) ++(topology_.switches()[si].leaf ? r.pfc_leaves_paused : r.pfc_spines_paused);
      r.pfc_switches_pausing += f.sw_counters.pfc_frames_sent > 0;
      r.pfc_pause_frames += f.sw_counters.pfc_frames_sent;
      if (f.has_pfc) {
        // The fullest switch, and the fullest headroom against its size: "never over" at a look.
        r.pfc_pool_peak_bytes = std::max(r.pfc_pool_peak_bytes, f.pfc_pool_peak_bytes);
        if (f.pfc_headroom_peak_fraction > r.pfc_headroom_peak_fraction) {
          r.pfc_headroom_peak_fraction = f.pfc_headroom_peak_fraction;
          r.pfc_headroom_peak_bytes = f.pfc_headroom_peak_bytes;
        }
      }
      no_route += f.sw_drops.no_route;
      no_eligible += f.sw_drops.no_eligible_port;
      ttl += f.sw_drops.ttl_expired;
      tcam_drop += f.sw_drops.tcam_drop;
      watchdog_ingress += f.sw_drops.pfc_watchdog_ingress;
      r.pfc_watchdog_storms += f.pfc_watchdog_storms;
      r.pfc_watchdog_frames_suppressed += f.pfc_watchdog_frames_suppressed;
      for (uint64_t v : f.sw_drops.parse) sw_parse += v;
      r.control_publications += f.control_publications;
      r.flowlets_started += f.flowlets_started;
    } else {
      for (const NodeFigures::Port& port : f.ports) {
        const uint64_t before = paused_ns;
        const bool ever = add_egress(port);
        nic_paused_ns += paused_ns - before;
        r.pfc_ports_paused += ever;
        r.pfc_nic_uplinks_paused += ever;
      }
    }
  }
  r.pfc_nic_paused_us = static_cast<double>(nic_paused_ns) / 1000.0;
  if (r.pfc_pause_intervals > 0) {
    r.pfc_mean_pause_us =
        static_cast<double>(paused_ns) / 1000.0 / static_cast<double>(r.pfc_pause_intervals);
    r.pfc_first_pause_us = static_cast<double>(first_pause) / 1000.0;
    r.pfc_last_pause_end_us = static_cast<double>(last_pause_end) / 1000.0;
    r.pfc_storm_us = r.pfc_last_pause_end_us - r.pfc_first_pause_us;
  }
  r.pfc_paused_us = static_cast<double>(paused_ns) / 1000.0;
  r.pfc_longest_pause_us = static_cast<double>(longest_ns) / 1000.0;
  r.pfc_timeline = pfc_timeline_;
  r.pfc_pool_bytes = config_.pfc ? config_.pfc_pool_bytes : 0;
  r.goodput_timeline = goodput_timeline_;
  if (config_.workload == Workload::kCdf) set_carried_load(r, req.bytes_acked);
  for (const FabricEvent& e : config_.events) {
    if (e.kind != FabricEvent::Kind::kLinkDown) continue;
    RunResult::Failover f;
    f.event_us = static_cast<double>(e.at_ns) / 1000.0;
    const double warm_us = static_cast<double>(config_.warmup()) / 1000.0;
    const double sample_us = static_cast<double>(config_.sample_ns) / 1000.0;
    double before_sum = 0, after_sum = 0;
    size_t before_n = 0, after_n = 0;
    std::vector<std::pair<double, double>> after;
    for (const auto& [t, g] : goodput_timeline_) {
      if (t - sample_us >= warm_us && t <= f.event_us) {
        before_sum += g;
        ++before_n;
      } else if (t > f.event_us) {
        after.emplace_back(t, g);
      }
    }
    f.before = before_n > 0 ? before_sum / static_cast<double>(before_n) : 0;
    f.min_after = after.empty() ? 0 : 1e300;
    int64_t last_low = -1;
    for (size_t i = 0; i < after.size(); ++i) {
      f.min_after = std::min(f.min_after, after[i].second);
      if (i >= after.size() / 2) {
        after_sum += after[i].second;
        ++after_n;
      }
    }
    f.after = after_n > 0 ? after_sum / static_cast<double>(after_n) : 0;
    // Settled: 90% of the lower of the level before and the level the fabric settles at (with
    // a link fewer, the level before may be out of reach). Recovered for good at the end of the
    // last interval below it (0: never below; -1: still below when the run ended).
    // Judged on the mean of three intervals, so that the ACK-paced noise of one interval (an
    // ACK covers up to 65 packets) does not read as a failure.
    const double settled = 0.9 * std::min(f.before, f.after);
    for (size_t i = 0; i < after.size(); ++i) {
      const size_t lo = i > 0 ? i - 1 : 0, hi = std::min(i + 1, after.size() - 1);
      double m = 0;
      for (size_t k = lo; k <= hi; ++k) m += after[k].second;
      if (m / static_cast<double>(hi - lo + 1) < settled) last_low = static_cast<int64_t>(i);
    }
    if (last_low < 0) {
      f.recovery_us = 0;
    } else if (static_cast<size_t>(last_low) + 1 < after.size()) {
      f.recovery_us = after[static_cast<size_t>(last_low)].first - f.event_us;
    }
    r.failover = f;
    break;  // the first failure
  }
  r.drops = {{"queue_full", queue_full},
             {"link_down", link_down + link_down_in_flight_},
             {"pfc_watchdog", watchdog},
             {"pfc_watchdog_ingress", watchdog_ingress},
             {"headroom_overflow", headroom},
             {"bit_error", bit_error},
             {"loss", loss},
             {"no_route", no_route},
             {"no_eligible_port", no_eligible},
             {"ttl_expired", ttl},
             {"tcam_drop", tcam_drop},
             {"switch_parse", sw_parse},
             {"nic_no_uplink", nic_no_uplink},
             {"nic_parse", nic_parse},
             {"responder_out_of_order", resp.out_of_order_dropped},
             {"checksum_filter", checksum_filter_drops_},
             {"host_checksum_filter", host_filter}};
  r.tcam_fallback_qps = tcam_fallback_qps_;
  r.buckets = bucket_report();
  r.nic_split = nic_split_report();

  // Completion times.
  std::vector<double> sorted;
  sorted.reserve(fct_ns_.size());
  for (uint64_t v : fct_ns_) sorted.push_back(static_cast<double>(v) / 1000.0);
  if (!sorted.empty()) {
    std::sort(sorted.begin(), sorted.end());
    r.fct_p50_us = percentile(sorted, 0.5);
    r.fct_p99_us = percentile(sorted, 0.99);
    r.fct_max_us = sorted.back();
    const size_t step = std::max<size_t>(1, (sorted.size() + RunResult::kMaxFctSamples - 1) / RunResult::kMaxFctSamples);
    for (size_t i = 0; i < sorted.size(); i += step) r.fct_samples_us.push_back(sorted[i]);
  }
  collect_slowdown(r);

  // One record per flow (QP): who, how much, how fast, how often resent, and which planes its
  // packets took (as the receiving NIC counted them by uplink).
  double fair_sum = 0, fair_sq = 0;
  if (record_flows_) {
    r.flows.reserve(plan_.flows().size());  // one per flow: no doubling at the run's peak
    for (const HostSpec& h : topology_.hosts()) r.host_names.push_back(h.name);
  }
  // A receiving host's heat map: the NIC's own in one process, the figures' copy across ranks.
  const auto heat_map_of = [&](uint32_t dst) -> const nic_emu::QpHeatMap& {
    return distributed() ? figures_[dst].heat_map.value() : nodes_[dst].nic->heat_map();
  };
  for (size_t i = 0; i < plan_.flows().size(); ++i) {
    const QpFlow& f = plan_.flows()[i];
    FlowRecord fr;
    fr.src = f.src;
    fr.dst = f.dst;
    fr.src_qpn = f.src_qpn;
    fr.dst_qpn = f.dst_qpn;
    fr.hops = path_hops(f.src, f.dst);
    const RcQpFlowCounters k =
        !distributed() ? nodes_[f.src].nic->rc_engine()->flow_counters(f.src_qp_index)
        : f.src_qp_index < figures_[f.src].requesters.size()
            ? figures_[f.src].requesters[f.src_qp_index]
            : RcQpFlowCounters{};
    if (k.has_requester) {
      fr.bytes_acked = k.bytes_acked;
      fr.packets_sent = k.packets_sent;
      fr.packets_retransmitted = k.packets_retransmitted;
      fr.naks = k.naks_received;
      fr.timeouts = k.timeouts;
    }
    const FlowFct& ff = flow_fct_[i];
    if (const std::optional<Post> one = single_message(i)) {
      fr.single_message = true;
      fr.size_bytes = one->bytes;
      fr.start_ns = ff.messages > 0 ? ff.first_start_ns : one->at_ns;
      if (ff.messages > 0) fr.end_ns = ff.last_end_ns;
      fr.ideal_fct_ns = flow_ideal_fct_ns(one->bytes, i);
      fr.in_window = fr.start_ns >= config_.slowdown_warmup();
    }
    fr.messages_completed = ff.messages;
    fr.bytes_completed = ff.bytes;
    if (ff.messages > 0) {
      fr.fct_mean_us = ff.fct_sum_ns / static_cast<double>(ff.messages) / 1000.0;
      fr.fct_max_us = ff.fct_max_ns / 1000.0;
      fr.slowdown_mean = ff.slowdown_sum / static_cast<double>(ff.messages);
    }
    fr.throughput_gbps = r.virtual_ns > 0 ? static_cast<double>(fr.bytes_acked) * 8.0 /
                                                static_cast<double>(r.virtual_ns)
                                          : 0;
    const uint64_t window_ns = r.window_end_ns - std::min(r.window_end_ns, fair_start_ns_);
    const uint64_t at_start = i < flow_window_acked_.size() ? flow_window_acked_[i] : 0;
    fr.window_gbps = window_ns > 0 ? static_cast<double>(fr.bytes_acked - at_start) * 8.0 /
                                         static_cast<double>(window_ns)
                                   : 0;
    if (fr.packets_sent > 0) {
      ++r.fairness.flows;
      const double x = fr.window_gbps;
      fair_sum += x;
      fair_sq += x * x;
      r.fairness.min_gbps = r.fairness.flows == 1 ? x : std::min(r.fairness.min_gbps, x);
      r.fairness.max_gbps = std::max(r.fairness.max_gbps, x);
    }
    const NodeFigures& rx = figures_[f.dst];
    const uint32_t sip = topology_.hosts()[f.src].ip;
    const auto rx_uplinks = static_cast<uint16_t>(rx.ports.size());
    fr.packets_by_uplink.assign(rx_uplinks, 0);
    const nic_emu::QpHeatMap& heat = heat_map_of(f.dst);
    if (const std::optional<size_t> e = heat.find(sip, f.dst_qpn)) {
      const std::span<const uint64_t> per_uplink = heat.per_uplink(*e);
      for (uint16_t u = 0; u < rx_uplinks && u < per_uplink.size(); ++u) {
        fr.packets_by_uplink[u] = per_uplink[u];
      }
    }
    if (record_flows_) r.flows.push_back(std::move(fr));
  }
  if (r.fairness.flows > 0) {
    r.fairness.mean_gbps = fair_sum / static_cast<double>(r.fairness.flows);
    // Jain's index over the flows that sent: (sum x)^2 / (n sum x^2); 1 when all are equal.
    r.fairness.jain =
        fair_sq > 0 ? fair_sum * fair_sum / (static_cast<double>(r.fairness.flows) * fair_sq) : 0;
  }

  // Host uplinks (NIC -> leaf), the first tier, over the window.
  {
    std::vector<double> hu;
    for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
      const NodeFigures& nic = figures_[h];
      for (uint16_t u = 0; u < nic.ports.size(); ++u) {
        const uint64_t before = h < nic_tx_window_.size() && u < nic_tx_window_[h].size()
                                    ? nic_tx_window_[h][u]
                                    : 0;
        const uint64_t tx = nic.ports[u].tx_bytes - before;
        hu.push_back(window_s > 0 ? static_cast<double>(tx) * 8.0 / (window_s * config_.link_gbps * 1e9) : 0);
      }
    }
    const Spread sh = spread(hu);
    r.host_uplink_util_mean = sh.mean;
    r.host_uplink_util_max = sh.max;
    r.host_uplink_util_imbalance = sh.imbalance;
  }

  r.dead_link_frames = dead_link_frames_;
  r.dead_link_tx_after_1ms = dead_link_frames_late_;
  r.packet_hops = hops_;
  r.node_events = serves_;
  r.wall_s = wall_s;
  r.hops_per_s = wall_s > 0 ? static_cast<double>(hops_) / wall_s : 0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  for (const NodeFigures& f : figures_) r.memory += f.memory;
  collect_cc(r);
  r.warnings = run_warnings(r, config_);
  return r;
}

// cdf: the carried load, bytes acknowledged fabric-wide per second within [warm-up, end of
// arrivals] over every host's line rate. From the goodput samples (every sample_ns, each the
// bytes acknowledged in its interval over the hosts' capacity in it), so the window is the
// whole sample intervals within [warmup_ns, duration_ns]; when the run ended (every flow done)
// before the window's end, what was acknowledged after the last sample counts in it too.
void Fabric::set_carried_load(RunResult& r, uint64_t acked_total) const {
  const uint64_t s = config_.sample_ns;
  const uint64_t from = (config_.warmup_ns + s - 1) / s * s;
  uint64_t to = config_.duration_ns / s * s;
  if (to <= from) to = from + s;  // shorter than a sample: the one interval from the warm-up
  const double interval_s = static_cast<double>(s) * 1e-9;
  double bits = 0;  // over the hosts' capacity per second
  uint64_t last_t = 0;
  for (const auto& [t_us, g] : goodput_timeline_) {
    const auto t = static_cast<uint64_t>(std::llround(t_us * 1000.0));
    last_t = std::max(last_t, t);
    if (t > from && t <= to) bits += g * interval_s;
  }
  const double capacity_bps =
      static_cast<double>(config_.hosts()) * config_.planes * config_.link_gbps * 1e9;
  if (last_t < to && acked_total > last_sample_acked_bytes_) {
    bits += static_cast<double>(acked_total - last_sample_acked_bytes_) * 8.0 / capacity_bps;
  }
  r.carried_window_ns = {from, to};
  r.carried_load = bits / (static_cast<double>(to - from) * 1e-9);
}

}  // namespace spraynet::fabric
