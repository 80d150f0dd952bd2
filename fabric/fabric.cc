#include "fabric/fabric.h"

#include <rte_mempool.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dataplane/egress/link_emulator.h"
#include "fabric/flow_size_cdf.h"
#include "fabric/frame_packer.h"
#include "fabric/fabric_detail.h"
#include "fabric/kernel/rank_bytes.h"

namespace spraynet::fabric {

using detail::kBurst;
using detail::kNever;

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
    control::apply_receive_side(spec.nic, engine);
    if (engine.irn) {  // the requester's BDP cap and RTO_high are the fabric's
      engine.max_in_flight = config.irn_bdp();
      engine.retransmit_timeout_ns = config.irn_rto_high_ns;
    }
    if (config.payload == "shared") engine.payload_store = &payload_store_;
    if (is_entropy_spray(mode)) {
      engine.entropy_values = config.entropy_values;
      engine.entropy_seed = seed * 0x9E3779B97F4A7C15ull + h;
    }
    if (mode == FabricMode::kReps) {
      engine.entropy_reps = true;
      engine.echo_entropy = true;  // and an ACK per packet: rxe's one per 65 is too few to learn
    }
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
  // all-roce: the topology gave every leaf one catch-all rule instead.
  if (config_.spray_rules == "all-roce") return;
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

}  // namespace spraynet::fabric
