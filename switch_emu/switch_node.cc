#include "switch_emu/switch_node.h"

#include <rte_errno.h>
#include <rte_mbuf_dyn.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include <spdlog/spdlog.h>

#include <bit>
#include <cstring>
#include <stdexcept>

#include "dataplane/egress/egress_memory.h"
#include "dataplane/wire/flow_key.h"
#include "dataplane/wire/conga_overlay.h"
#include "dataplane/wire/ipv4_ttl.h"
#include "dataplane/wire/pfc_frame.h"

namespace spraynet::switch_emu {

namespace {

constexpr uint16_t kBurst = SwitchNode::kBurst;

PfcStateConfig pfc_config(const control::SwitchConfig& c) {
  PfcStateConfig p;
  p.enabled_priorities = c.pfc.priorities;
  p.buffer.pool_bytes = c.pfc.pool_bytes;
  p.buffer.alpha = c.pfc.alpha;
  p.buffer.static_threshold_bytes = c.pfc.static_threshold_bytes;
  p.buffer.xoff_offset_bytes = c.pfc.xoff_offset_bytes;
  p.buffer.xon_offset_bytes = c.pfc.xon_offset_bytes;
  // The largest frame the switch takes in is one mbuf's data room.
  const uint32_t mtu = c.mbuf_data_room - RTE_PKTMBUF_HEADROOM;
  for (const auto& port : c.ports) {
    // The port's link settings are its egress; the cable is taken to be the same both ways.
    p.buffer.port_headroom_bytes.push_back(
        c.pfc.headroom_bytes != 0
            ? c.pfc.headroom_bytes
            : SharedBuffer::auto_headroom_bytes(port.link.rate_gbps, port.link.delay_ns, mtu));
  }
  p.xoff_quanta = c.pfc.quanta;
  p.fast_feedback = c.pfc.fast_feedback;
  p.watchdog = c.pfc.watchdog;
  p.watchdog_detection_ns = c.pfc.watchdog_detect_ns;
  p.watchdog_restoration_ns = c.pfc.watchdog_restore_ns;
  // The config loader accepts only the names parse_pfc_watchdog_action knows.
  p.watchdog_action =
      parse_pfc_watchdog_action(c.pfc.watchdog_action).value_or(PfcWatchdogAction::kDrop);
  for (const auto& port : c.ports) p.port_link_gbps.push_back(port.link.rate_gbps);
  return p;
}

}  // namespace

SwitchNode::SwitchNode(const control::SwitchConfig& config, rte_mempool* pool,
                       std::vector<MacAddress> port_macs, std::shared_ptr<spdlog::logger> logger)
    : config_(config),
      pool_(pool),
      macs_(std::move(port_macs)),
      logger_(std::move(logger)),
      hasher_(HashConfig{*parse_hash_algorithm(config.hash.algorithm), config.hash.seed,
                         config.hash.dest_qp}),
      classes_(*parse_trust_mode(config.qos.trust)),
      ppcid_layout_(*parse_ppcid_layout(config.ppcid_layout)) {
  const size_t n = config_.ports.size();
  if (n == 0 || n >= PathSelector::kNoPort) throw std::invalid_argument("a switch needs 1..65534 ports");
  for (size_t i = macs_.size(); i < n; ++i) {
    macs_.push_back({0x02, 0x00, 0x00, 0x00, 0x00, static_cast<uint8_t>(i)});
  }
  for (const auto& [dscp, tc] : config_.qos.dscp_to_tc) classes_.set_dscp(dscp, tc);
  for (const auto& [pcp, tc] : config_.qos.pcp_to_tc) classes_.set_pcp(pcp, tc);

  tcam_ = std::make_unique<Tcam>(control::to_tcam_config(config_.tcam), logger_);
  for (const auto& r : config_.tcam.rules) tcam_->add(control::to_tcam_rule(r));
  tcam_->commit();

  routes_ = std::make_unique<RouteTable>("rt_" + std::to_string(reinterpret_cast<uintptr_t>(this)),
                                         static_cast<uint32_t>(config_.routes.size() + 16),
                                         config_.route_table);
  for (const auto& r : config_.routes) routes_->add(r.prefix.address, r.prefix.length, r.group);

  // With PFC on, lossless classes are never tail-dropped: the shared buffer bounds what it
  // admits, and nothing it admits exceeds the pool plus every headroom. That bound stays as their
  // egress limit so that copies without an ingress port (mirrors), which PFC does not account,
  // stay bounded too.
  uint64_t lossless_limit = 0;
  if (config_.pfc.enabled) {
    pfc_ = std::make_unique<PfcState>(pfc_config(config_), logger_);
    const SharedBuffer& b = pfc_->buffer();
    lossless_limit = b.pool_bytes();
    for (uint16_t q = 0; q < n; ++q) {
      lossless_limit +=
          b.headroom_bytes(q) * static_cast<uint64_t>(std::popcount(config_.pfc.priorities));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& ps = config_.ports[i];
    EgressPortConfig ec;
    ec.link.rate_gbps = ps.link.rate_gbps;
    ec.link.propagation_delay_ns = ps.link.delay_ns;
    ec.link.bit_error_rate = ps.link.ber;
    ec.link.loss_rate = ps.link.loss;
    ec.link.up = ps.link.up;
    ec.link.seed = config_.seed * 7919 + i;
    ec.wire = ps.link.wire;
    ec.class_limit_bytes.fill(ps.queue_bytes);
    ec.delay_line_limit_frames = ps.delay_line_frames;
    if (config_.ecn.enabled) {
      ec.ecn = control::ecn_marker_config(config_, i, control::ecn_port_seed(config_.seed, i));
    }
    if (config_.int_telemetry.enabled) {
      ec.int_telemetry.enabled = true;
      ec.int_telemetry.udp_port = config_.int_telemetry.udp_port;
      if (config_.int_telemetry.max_frame_bytes != 0) {
        ec.int_telemetry.max_frame_len = config_.int_telemetry.max_frame_bytes;
      }
    }
    for (uint8_t tc = 0; pfc_ && tc < EgressPort::kClasses; ++tc) {
      if (pfc_->lossless(tc)) ec.class_limit_bytes[tc] = lossless_limit;
    }
    egress_.push_back(std::make_unique<EgressPort>(ec));
    egress_config_.push_back(ec);
    queues_.push_back({egress_.back().get()});
    if (pfc_) pfc_->attach_port(static_cast<uint16_t>(i), *egress_.back());
  }
  view_count_ = 1;  // lossy (every port eligible until refresh_loads reads them)
  if (pfc_) {
    for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
      if (!pfc_->lossless(tc)) continue;
      view_of_tc_[tc] = static_cast<uint8_t>(view_count_);
      lossless_tc_[view_count_] = tc;
      ++view_count_;
    }
  }
  port_next_.resize(n);
  for (size_t i = 0; i < n; ++i) egress_[i]->set_next_event_slot(&port_next_, i);
  owner_.assign(n, 0);
  make_conga();
  make_conweave();
  lanes_.push_back(make_lane());
}

std::unique_ptr<SwitchNode::Lane> SwitchNode::make_lane() const {
  auto lane = std::make_unique<Lane>();
  lane->index = static_cast<unsigned>(lanes_.size());
  const size_t n = egress_.size();
  for (size_t g = 0; g < config_.groups.size(); ++g) {
    const auto& gs = config_.groups[g];
    PathGroupConfig pg;
    pg.mode = *parse_lb_mode(gs.mode);
    pg.member_ports = gs.ports;
    pg.dlb_gap_ns = gs.dlb_gap_ns;
    pg.dlb_table_entries = gs.flowlet_entries;
    pg.seed = config_.seed * 1000003 + g;
    pg.ecmp_multiply_shift = gs.ecmp_reduce == "multiply";
    pg.spray_path_divisor = static_cast<uint16_t>(gs.spray_path_divisor);
    lane->groups.push_back(std::make_unique<PathSelector>(pg));
    if (lanes_.empty()) {
      if (!gs.weights.empty()) lane->groups.back()->set_weights(gs.weights);
    } else {
      lane->groups.back()->follow(*lanes_[0]->groups[g]);
    }
  }
  lane->views.assign(view_count_, std::vector<PathLoad>(n));
  lane->ineligible.assign(view_count_, 0);
  lane->ports.resize(n);
  lane->port_drops.resize(n);
  return lane;  // its rings (Lane::to) are add_lane's
}

unsigned SwitchNode::add_lane(std::span<const uint16_t> ports) {
  if (conga_ || conweave_) {
    throw std::invalid_argument("add_lane: a CONGA or ConWeave switch keeps one set of tables: "
                                "one lane");
  }
  for (const uint16_t p : ports) {
    if (p >= egress_.size()) {
      throw std::invalid_argument("add_lane: port " + std::to_string(p) + " of " +
                                  std::to_string(egress_.size()));
    }
  }
  const unsigned index = static_cast<unsigned>(lanes_.size());
  lanes_.push_back(make_lane());
  for (const uint16_t p : ports) owner_[p] = static_cast<uint16_t>(index);
  // A ring from every lane to every other: single producer (the sending lane's lcore), single
  // consumer (the owner's).
  for (unsigned a = 0; a < lanes_.size(); ++a) {
    lanes_[a]->to.resize(lanes_.size(), nullptr);
  }
  for (unsigned a = 0; a < lanes_.size(); ++a) {
    for (unsigned b = 0; b < lanes_.size(); ++b) {
      if (a == b || lanes_[a]->to[b] != nullptr) continue;
      // rte_ring names are process-wide: the node's address makes them its own.
      const std::string name =
          fmt::format("swl{:x}_{}_{}", reinterpret_cast<uintptr_t>(this) & 0xFFFFFFFFFFFFull, a, b);
      // Room for every mbuf of the pool: a ring never overflows, the pool runs dry first and
      // the ports count what they could not receive (rx_nombuf), as on a switch out of buffer.
      const unsigned size = std::max(1024u, rte_align32pow2(pool_->size + 1));
      rte_ring* r =
          rte_ring_create(name.c_str(), size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (r == nullptr) {
        throw std::runtime_error("lane handoff ring " + name + ": " + rte_strerror(rte_errno));
      }
      lanes_[a]->to[b] = r;
      rings_.push_back(r);
    }
  }
  parallel_ = !pfc_;
  if (parallel_ && handoff_ns_offset_ < 0) {
    // The time the sending lane forwarded a frame at: the owner enqueues it then (not when it
    // next gets to its ring), so an owner descheduled for a while sees arrivals spread as they
    // came, not as one burst at its return.
    static const rte_mbuf_dynfield kHandoffNs = {"spraynet_lane_handoff_ns", sizeof(uint64_t),
                                                 alignof(uint64_t), 0};
    handoff_ns_offset_ = rte_mbuf_dynfield_register(&kHandoffNs);
    if (handoff_ns_offset_ < 0) {
      throw std::runtime_error(std::string("lane handoff: mbuf dynamic field: ") +
                               rte_strerror(rte_errno));
    }
  }
  if (parallel_) {
    // The event tree is one structure every port writes: lanes running at once must not share
    // it (the event-clock driver, its only reader, runs one lane).
    for (auto& e : egress_) e->set_next_event_slot(nullptr, 0);
    if (!board_) {
      board_ = std::make_unique<PortBoardEntry[]>(egress_.size());
      for (size_t i = 0; i < egress_.size(); ++i) {
        board_[i].queued_bytes.store(egress_[i]->load_bytes(), std::memory_order_relaxed);
      }
    }
  }
  assign_port_queues();
  for (auto& l : lanes_) l->loads_stale = true;
  return index;
}

void SwitchNode::assign_port_queues() {
  const size_t lanes = lanes_.size();
  // Before any lcore runs: the egresses made for fewer lanes hold nothing yet.
  for (auto& e : lane_egress_) e->free_all();
  lane_egress_.clear();
  for (size_t p = 0; p < egress_.size(); ++p) {
    queues_[p].assign(1, egress_[p].get());
    const auto& ps = config_.ports[p];
    if (!parallel_ || !ps.link.wire || ps.tx_queues < lanes) continue;
    for (size_t l = 1; l < lanes; ++l) {
      lane_egress_.push_back(std::make_unique<EgressPort>(egress_config_[p]));
      queues_[p].push_back(lane_egress_.back().get());
    }
  }
  if (!parallel_) return;
  queue_board_ = std::make_unique<QueueBoardEntry[]>(egress_.size() * lanes);
  for (auto& l : lanes_) l->other_lanes_bytes.assign(egress_.size(), 0);
  for (size_t p = 0; p < egress_.size(); ++p) {
    for (size_t l = 0; l < queues_[p].size(); ++l) {
      queue_board_[p * lanes + l].bytes.store(queues_[p][l]->load_bytes(),
                                              std::memory_order_relaxed);
    }
  }
}

std::vector<std::pair<uint16_t, uint16_t>> SwitchNode::lane_tx_queues(unsigned lane) const {
  std::vector<std::pair<uint16_t, uint16_t>> out;
  for (uint16_t p = 0; p < egress_.size(); ++p) {
    if (queues_[p].size() > 1) {
      out.push_back({p, static_cast<uint16_t>(lane)});
    } else if (owner_[p] == lane) {
      out.push_back({p, 0});
    }
  }
  return out;
}

uint64_t SwitchNode::board_bytes(size_t port, Lane& L) const {
  const size_t q = queues_[port].size();
  if (q == 1) return board_[port].queued_bytes.load(std::memory_order_relaxed);
  uint64_t others = 0;
  const size_t base = port * lanes_.size();
  for (size_t l = 0; l < q; ++l) {
    if (l != L.index) others += queue_board_[base + l].bytes.load(std::memory_order_relaxed);
  }
  L.other_lanes_bytes[port] = others;
  return others + queue_board_[base + L.index].bytes.load(std::memory_order_relaxed);
}

SwitchNode::~SwitchNode() {
  free_all();
  for (rte_ring* r : rings_) rte_ring_free(r);
  // port_next_ goes before egress_ (declared after it): the ports must stop writing to it.
  for (auto& e : egress_) e->set_next_event_slot(nullptr, 0);
}

void SwitchNode::refresh_loads_if_stale(Lane& L, uint64_t now_ns) {
  // Queued bytes are kept current port by port (enqueue, transmit); eligibility changes with a
  // link going up or down, a pause received (fast feedback) or the watchdog: only then is every
  // port read again, so that a burst costs the ports it touches, not every port of the switch.
  if (L.loads_stale || (pfc_ && (pfc_->config().fast_feedback ||
                                 pfc_->eligibility_changes() != L.eligibility_seen))) {
    refresh_loads(L, now_ns);
  } else if (lanes_.size() > 1) {
    // Other lanes move their ports' queues: read their depths once per burst (parallel lanes
    // from the board their owners write; serialised lanes from the ports themselves).
    for (size_t i = 0; i < egress_.size(); ++i) {
      const uint64_t q = parallel_ ? board_bytes(i, L) : egress_[i]->load_bytes();
      for (auto& view : L.views) view[i].queued_bytes = q;
    }
  }
}

void SwitchNode::refresh_loads(Lane& L, uint64_t now_ns) {
  L.loads_stale = false;
  if (pfc_) L.eligibility_seen = pfc_->eligibility_changes();
  for (size_t i = 0; i < egress_.size(); ++i) {
    const uint16_t port = static_cast<uint16_t>(i);
    const uint64_t queued = parallel_ ? board_bytes(i, L) : egress_[i]->load_bytes();
    // Lossy traffic does not care for PFC: a port is eligible for it while its link is up (which
    // changes only with every lane stopped).
    L.views[0][i] = PathLoad{queued, egress_[i]->link_up()};
    for (size_t v = 1; v < L.views.size(); ++v) {
      L.views[v][i] = PathLoad{queued, pfc_->eligible(port, lossless_tc_[v], now_ns)};
    }
  }
  for (size_t v = 0; v < L.views.size(); ++v) {
    L.ineligible[v] = static_cast<uint32_t>(std::count_if(
        L.views[v].begin(), L.views[v].end(), [](const PathLoad& l) { return !l.eligible; }));
  }
}

void SwitchNode::set_queued_bytes(Lane& L, uint16_t port, uint64_t bytes) {
  if (parallel_) {
    if (queues_[port].size() > 1) {
      // This lane's share, on its own line; the others' as this lane last read them (once a
      // burst): reading their lines on every packet would cost a cache miss each.
      queue_board_[port * lanes_.size() + L.index].bytes.store(bytes, std::memory_order_relaxed);
      bytes += L.other_lanes_bytes[port];
    } else {
      board_[port].queued_bytes.store(bytes, std::memory_order_relaxed);
    }
  }
  for (auto& view : L.views) view[port].queued_bytes = bytes;
}

void SwitchNode::receive(unsigned lane, uint16_t port, rte_mbuf** pkts, uint16_t n,
                         uint64_t now_ns) {
  Lane& L = *lanes_[lane];
  if (port >= egress_.size()) {
    L.drops.bad_port += n;
    rte_pktmbuf_free_bulk(pkts, n);
    return;
  }
  if (parallel_) take_handoffs(lane);  // only parallel lanes hand frames over
  refresh_loads_if_stale(L, now_ns);
  auto& pc = L.ports[port];
  for (uint16_t base = 0; base < n; base += kBurst) {
    const uint16_t count = std::min<uint16_t>(kBurst, n - base);
    // Scratch kept in the lane: a burst of ParsedPackets zeroed on every call costs more than
    // parsing one packet, and fabric_emu calls with bursts of one.
    ParsedPacket* parsed = L.scratch.parsed.data();
    const ParsedPacket** ip = L.scratch.ip.data();
    rte_mbuf** ip_mbufs = L.scratch.mbufs.data();
    uint16_t nip = 0;
    // The first headers in flight before the loop, then each packet's a few ahead of its parse.
    constexpr uint16_t kAhead = 4;
    for (uint16_t i = 0; i < std::min(kAhead, count); ++i) {
      rte_prefetch0(rte_pktmbuf_mtod(pkts[base + i], const void*));
    }
    for (uint16_t i = 0; i < count; ++i) {
      rte_mbuf* m = pkts[base + i];
      if (i + kAhead < count) rte_prefetch0(rte_pktmbuf_mtod(pkts[base + i + kAhead], const void*));
      pc.rx_packets++;
      pc.rx_bytes += rte_pktmbuf_pkt_len(m);
      const ParseStatus s = parser_.parse(m, parsed[nip]);
      if (s != ParseStatus::kOk) {
        L.drops.parse[static_cast<size_t>(s)]++;
        L.port_drops[port].parse[static_cast<size_t>(s)]++;
        rte_pktmbuf_free(m);
        continue;
      }
      if (parsed[nip].kind == PacketKind::kMacControl) {
        handle_mac_control(L, port, m, now_ns);
        continue;
      }
      if (parsed[nip].kind == PacketKind::kUdp && parsed[nip].dst_port == kVxlanUdpPort) {
        if (conga_ && !conga_arrival(L, port, m, parsed[nip], now_ns)) continue;
        if (conweave_ && !conweave_arrival(L, port, m, parsed[nip], now_ns)) continue;
      }
      ip[nip] = &parsed[nip];
      ip_mbufs[nip] = m;
      ++nip;
    }
    if (nip == 0) continue;

    TcamMatch* match = L.scratch.match.data();
    tcam_->classify(ip, nip, match, &L.tcam_cache);
    uint32_t* dst = L.scratch.dst.data();
    uint32_t* group = L.scratch.group.data();
    for (uint16_t i = 0; i < nip; ++i) dst[i] = parsed[i].dst_ip;
    routes_->lookup_burst(std::span<const uint32_t>(dst, nip), std::span<uint32_t>(group, nip),
                          L.route_cache);
    // Every packet's flow hash before any is forwarded, so that what path selection reads by
    // flow (a DLB flowlet entry: megabytes at 100K flows) is loading for the whole burst at once.
    uint32_t* hash = L.scratch.hash.data();
    const bool dest_qp = hasher_.config().dest_qp_in_key;
    for (uint16_t i = 0; i < nip; ++i) {
      hash[i] = hasher_.hash(make_flow_key(parsed[i], dest_qp));
      if (group[i] < L.groups.size()) L.groups[group[i]]->prefetch(hash[i]);
    }
    for (uint16_t i = 0; i < nip; ++i) {
      forward(lane, L, port, ip_mbufs[i], parsed[i], match[i], group[i], hash[i], now_ns);
    }
  }
  // What a TAIL in this burst let out of a reorder queue follows it.
  if (conweave_) conweave_poll(L, now_ns);
}

void SwitchNode::handle_mac_control(Lane& L, uint16_t port, rte_mbuf* m, uint64_t now_ns) {
  PfcFrame frame;
  const PfcParseStatus s =
      parse_pfc_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), frame);
  if (s == PfcParseStatus::kOk) {
    L.ports[port].pfc_frames_received++;
    L.counters.pfc_received++;
    // A switch without PFC enabled consumes the frame, as hardware does, and honours nothing.
    if (pfc_) {
      egress_[port]->apply(pfc_->on_pfc_frame(port, frame, now_ns), now_ns);
      // The pause is every lane's to see (PFC's lanes are serialised: this is safe).
      for (auto& l : lanes_) l->loads_stale = true;
    }
  } else if (s == PfcParseStatus::kNotPfc) {
    count_drop(L, port, &SwitchDropCounters::mac_control_not_pfc);
  } else {
    count_drop(L, port, &SwitchDropCounters::pfc_malformed);
  }
  rte_pktmbuf_free(m);
}

void SwitchNode::forward(unsigned lane, Lane& L, uint16_t in_port, rte_mbuf* m,
                         const ParsedPacket& p, const TcamMatch& match, uint32_t group,
                         uint32_t hash, uint64_t now_ns) {
  if (match.matched && match.action == TcamAction::kDrop) {
    count_drop(L, in_port, &SwitchDropCounters::tcam_drop);
    rte_pktmbuf_free(m);
    return;
  }
  const uint8_t tc = classes_.classify(p);
  // Priority follows the traffic class 1:1 (see enqueue): the ingress priority group.
  if (pfc_ && pfc_->watchdog_ingress_drop(in_port, tc)) {
    count_drop(L, in_port, &SwitchDropCounters::pfc_watchdog_ingress);
    rte_pktmbuf_free(m);
    return;
  }
  if (match.matched && match.action == TcamAction::kMirror && match.port < egress_.size()) {
    // An ingress mirror: the copy is the packet as it arrived, before any rewrite.
    rte_mbuf* copy = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX);
    if (copy == nullptr) {
      count_drop(L, in_port, &SwitchDropCounters::mirror_no_mbuf);
    } else {
      L.counters.mirrored++;
      // No ingress port: PFC does not account it (priority 0, as ever for copies).
      enqueue(lane, L, match.port, EgressPort::kNoIngressPort, copy, tc, 0, now_ns);
    }
  }

  // Quarantine: a deterministic split by PSN (the monitoring share keeps its normal path, so
  // what the QP does there stays visible); without a PSN there is nothing to split on and the
  // honeypot takes it all.
  bool quarantined = false;
  if (match.matched && match.action == TcamAction::kQuarantine && match.port < egress_.size()) {
    quarantined = p.kind != PacketKind::kRoce || p.psn % 100 >= match.keep_percent;
    if (!quarantined) L.counters.quarantine_kept++;
  }
  const bool pinned = quarantined || (match.matched && match.action == TcamAction::kPinPort &&
                                      match.port < egress_.size());
  if (!pinned && (group == RouteTable::kNoRoute || group >= L.groups.size())) {
    count_drop(L, in_port, &SwitchDropCounters::no_route);
    rte_pktmbuf_free(m);
    return;
  }
  // An expiring packet goes no further than its route: it must not pick a path, which would
  // start or refresh a flowlet (DLB), count on a member and load a bucket for nothing.
  if (p.ttl <= 1) {
    count_drop(L, in_port, &SwitchDropCounters::ttl_expired);
    rte_pktmbuf_free(m);
    return;
  }

  uint16_t out_port;
  int tunnel_leaf = -1;  // CONGA: the leaf this packet is tunnelled to
  ConweaveTag weave_tag;
  bool weave_tunnel = false;
  if (pinned) {
    if (quarantined) {
      L.counters.quarantined++;
    } else {
      L.counters.pinned++;
    }
    out_port = match.port;
  } else {
    PathSelector& sel = *L.groups[group];
    // Each lossless class sees PFC's view of its own class (watchdog drop mode, fast feedback);
    // the others only the links: a storm on one class leaves the port to every other class.
    const std::span<const PathLoad> loads = L.views[view_of_tc_[tc]];
    const bool sprayed = match.matched && match.action == TcamAction::kSpray &&
                         p.kind == PacketKind::kRoce && p.udp_checksum != 0;
    const uint8_t path = sprayed ? ppcid_decode(p.udp_checksum, ppcid_layout_).path_id : 0;
    const bool all_eligible = L.ineligible[view_of_tc_[tc]] == 0;
    // A CONGA leaf tunnels what its conga groups carry (its own host's traffic to another leaf);
    // a ConWeave leaf, the RoCE data its conweave groups carry.
    if (conga_ && conga_->tables && sel.mode() == LbMode::kConga) {
      tunnel_leaf = conga_->group_leaf[group];
    }
    const bool weave = conweave_ && conweave_tunnels(p, group);
    const auto choose = [&](std::span<const PathLoad> view, bool all) {
      if (weave) return conweave_select(p, group, view, now_ns, weave_tag);
      if (tunnel_leaf >= 0) return conga_select(sel, tunnel_leaf, hash, view, now_ns);
      return sprayed ? sel.select_sprayed(hash, path, now_ns, view, all)
                     : sel.select(hash, now_ns, view, all);
    };
    if (sprayed) {
      L.counters.sprayed++;
    } else if (match.matched && match.action == TcamAction::kSpray) {
      L.counters.spray_without_ppcid++;
    }
    out_port = choose(loads, all_eligible);
    if (out_port == PathSelector::kNoPort && view_of_tc_[tc] != 0 && pfc_ &&
        pfc_->config().fast_feedback) {
      // Fast feedback steers lossless traffic around paused ports; with every member paused
      // there is nowhere to steer, and dropping a lossless packet is what PFC exists to avoid:
      // queue behind the pause, as a switch without fast feedback does (ports in watchdog drop
      // mode stay out).
      L.fallback_view.resize(egress_.size());
      for (size_t i = 0; i < egress_.size(); ++i) {
        L.fallback_view[i] =
            PathLoad{egress_[i]->load_bytes(), egress_[i]->link_up() && !egress_[i]->drop_mode(tc)};
      }
      out_port = choose(L.fallback_view, false);
    }
    if (out_port == PathSelector::kNoPort) {
      count_drop(L, in_port, &SwitchDropCounters::no_eligible_port);
      rte_pktmbuf_free(m);
      return;
    }
    weave_tunnel = weave;
  }

  // TTL >= 2 was checked above: this decrements it and patches the checksum.
  decrement_ttl(rte_pktmbuf_mtod(m, uint8_t*) + p.l3_offset);
  if (tunnel_leaf >= 0 &&
      !conga_tunnel(L, in_port, m, *L.groups[group], out_port, tunnel_leaf, hash, now_ns)) {
    return;
  }
  if (weave_tunnel && !conweave_tunnel(L, in_port, m, group, weave_tag, hash)) return;
  // Priority follows the traffic class 1:1 (PFC priority n pauses class n).
  enqueue(lane, L, out_port, in_port, m, tc, tc, now_ns);
}

// Inlined into enqueue() and take_handoffs(): fabric_emu's one lane calls it for every frame.
__attribute__((always_inline)) inline void SwitchNode::enqueue_owned(Lane& L, uint16_t out_port,
                                                                     uint16_t in_port, rte_mbuf* m,
                               uint8_t tc, uint8_t priority, uint64_t now_ns) {
  EgressPort& e = lane_egress(L, out_port);
  if (conga_) conga_departure(out_port, m, now_ns);
  const EgressEnqueueResult r = e.enqueue(m, tc, in_port, priority, now_ns);
  if (r == EgressEnqueueResult::kQueued) {
    L.ports[out_port].forwarded_packets++;
  } else {
    L.drops.egress_refused++;
    if (in_port < L.port_drops.size()) L.port_drops[in_port].egress_refused++;
  }
  // Keep the load views current within a burst, so DLB and DRILL see their own decisions.
  set_queued_bytes(L, out_port, e.load_bytes());
  if (pfc_ && tc < EgressPort::kClasses && view_of_tc_[tc] != 0) {
    const uint8_t v = view_of_tc_[tc];
    const bool eligible = pfc_->eligible(out_port, tc, now_ns);
    bool& was = L.views[v][out_port].eligible;
    if (was != eligible) L.ineligible[v] = eligible ? L.ineligible[v] - 1 : L.ineligible[v] + 1;
    was = eligible;
  }
}

void SwitchNode::enqueue(unsigned lane, Lane& L, uint16_t out_port, uint16_t in_port, rte_mbuf* m,
                         uint8_t tc, uint8_t priority, uint64_t now_ns) {
  const auto& peer = config_.ports[out_port].peer_mac;
  if (peer) {
    uint8_t* eth = rte_pktmbuf_mtod(m, uint8_t*);
    std::memcpy(eth, peer->data(), 6);
    std::memcpy(eth + 6, macs_[out_port].data(), 6);
  }
  const unsigned owner = owner_[out_port];
  if (!parallel_) {
    enqueue_owned(L, out_port, in_port, m, tc, priority, now_ns);
    return;
  }
  if (queues_[out_port].size() > 1) {
    // A port with a tx queue per lane: this lane's own, never handed over.
    enqueue_owned(L, out_port, in_port, m, tc, priority, now_ns);
    return;
  }
  if (owner == lane) {
    PortBoardEntry& b = board_[out_port];
    b.owner_time_ns = std::max(b.owner_time_ns, now_ns);
    enqueue_owned(L, out_port, in_port, m, tc, priority, b.owner_time_ns);
    return;
  }
  // Another lane's port: what its enqueue needs rides in the mbuf's 8 bytes of receive hash
  // (nothing reads them between here and that lane).
  m->hash.fdir.lo = uint32_t{in_port} | uint32_t{tc} << 16 | uint32_t{priority} << 24;
  m->hash.fdir.hi = out_port;
  *RTE_MBUF_DYNFIELD(m, handoff_ns_offset_, uint64_t*) = now_ns;
  if (rte_ring_sp_enqueue(L.to[owner], m) != 0) {
    L.drops.lane_handoff_full++;
    if (in_port < L.port_drops.size()) L.port_drops[in_port].lane_handoff_full++;
    rte_pktmbuf_free(m);
    return;
  }
  L.counters.lane_handoffs++;
}

void SwitchNode::take_handoffs(unsigned lane) {
  Lane& L = *lanes_[lane];
  for (unsigned from = 0; from < lanes_.size(); ++from) {
    if (from == lane) continue;
    rte_ring* r = lanes_[from]->to[lane];
    rte_mbuf* ms[kBurst];
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst(r, reinterpret_cast<void**>(ms), kBurst, nullptr)) > 0) {
      L.counters.lane_handoffs_taken += n;
      // The mbufs were last written on the sender's core: ask for them all before the first.
      for (unsigned i = 0; i < n; ++i) rte_prefetch0(ms[i]);
      for (unsigned i = 0; i < n; ++i) {
        const uint32_t meta = ms[i]->hash.fdir.lo;
        // The sender chose this lane by its ownership of the port.
        const uint16_t out_port = static_cast<uint16_t>(ms[i]->hash.fdir.hi);
        PortBoardEntry& b = board_[out_port];
        b.owner_time_ns =
            std::max(b.owner_time_ns, *RTE_MBUF_DYNFIELD(ms[i], handoff_ns_offset_, uint64_t*));
        enqueue_owned(L, out_port, static_cast<uint16_t>(meta & 0xFFFF), ms[i],
                      static_cast<uint8_t>(meta >> 16), static_cast<uint8_t>(meta >> 24),
                      b.owner_time_ns);
      }
    }
  }
}

void SwitchNode::poll(unsigned lane, uint64_t now_ns) {
  Lane& L = *lanes_[lane];
  if (parallel_) take_handoffs(lane);  // only parallel lanes hand frames over
  if (conweave_) conweave_poll(L, now_ns);
  if (!pfc_) return;
  // PFC's lanes are serialised (lanes_run_in_parallel): whichever lane polls runs the switch's
  // PFC timers and queues its frames on any port.
  pfc_->tick(now_ns);
  PfcEmission due[16];
  size_t n;
  while ((n = pfc_->take_frames(now_ns, due)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      if (m == nullptr || !build_pfc_frame(m, macs_[due[i].port].data(), due[i].frame)) {
        // The frame is lost, as on a switch out of buffer; the refresh timer sends it again.
        if (m != nullptr) rte_pktmbuf_free(m);
        continue;
      }
      L.counters.pfc_frames_sent++;
      egress_[due[i].port]->enqueue_control(m, now_ns);
      for (auto& l : lanes_) l->loads_stale = true;
    }
    if (n < std::size(due)) break;
  }
}

uint16_t SwitchNode::transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max) {
  if (port >= egress_.size()) return 0;
  // The caller is the port's lane; lanes that take turns (or one lane) count in lane 0's.
  Lane& L = parallel_ ? *lanes_[owner_[port]] : *lanes_.front();
  if (parallel_) {
    PortBoardEntry& b = board_[port];
    b.owner_time_ns = std::max(b.owner_time_ns, now_ns);
  }
  const uint16_t n = egress_[port]->dequeue(now_ns, out, max, &L.ports[port].tx_bytes);
  set_queued_bytes(L, port, egress_[port]->load_bytes());
  L.ports[port].tx_packets += n;
  return n;
}

uint16_t SwitchNode::transmit(unsigned lane, uint16_t port, uint64_t now_ns, rte_mbuf** out,
                              uint16_t max) {
  if (port >= egress_.size()) return 0;
  if (queues_[port].size() <= 1) return transmit(port, now_ns, out, max);
  Lane& L = *lanes_.at(lane);
  EgressPort& e = *queues_[port][lane];
  const uint16_t n = e.dequeue(now_ns, out, max, &L.ports[port].tx_bytes);
  set_queued_bytes(L, port, e.load_bytes());
  L.ports[port].tx_packets += n;
  return n;
}

void SwitchNode::unsend(unsigned lane, uint16_t port, rte_mbuf* const* pkts, uint16_t n) {
  if (port >= egress_.size() || n == 0) return;
  Lane& L = tx_lane(lane, port);
  EgressPort& e = lane_egress(L, port);
  e.unsend(pkts, n, &L.ports[port].tx_bytes);
  L.ports[port].tx_packets -= n;
  set_queued_bytes(L, port, e.load_bytes());
}

void SwitchNode::set_tx_backlog(unsigned lane, uint16_t port, uint64_t bytes) {
  if (port >= egress_.size()) return;
  Lane& L = tx_lane(lane, port);
  EgressPort& e = lane_egress(L, port);
  e.set_tx_backlog(bytes);
  set_queued_bytes(L, port, e.load_bytes());
}

uint16_t SwitchNode::take_in_flight(uint16_t port, rte_mbuf** out, uint64_t* arrival_ns,
                                    uint16_t max) {
  if (port >= egress_.size()) return 0;
  Lane& L = *lanes_.front();
  const uint16_t n = egress_[port]->take_in_flight(out, arrival_ns, max, &L.ports[port].tx_bytes);
  L.ports[port].tx_packets += n;
  return n;
}

uint64_t SwitchNode::next_event_ns(uint64_t now_ns) const {
  uint64_t next = port_next_.earliest();
  if (pfc_) next = std::min(next, pfc_->next_event_ns(now_ns));
  if (conweave_) next = std::min(next, conweave_->rx.next_due_ns());
  return next;
}

bool SwitchNode::idle() const {
  for (const auto& e : egress_) {
    if (e->queued_bytes() != 0 || e->in_flight() != 0) return false;
  }
  for (const auto& e : lane_egress_) {
    if (e->queued_bytes() != 0 || e->in_flight() != 0) return false;
  }
  for (const rte_ring* r : rings_) {
    if (rte_ring_count(r) != 0) return false;
  }
  return !conweave_ || conweave_->rx.held_now() == 0;
}

bool SwitchNode::idle(unsigned lane) const {
  for (size_t i = 0; i < egress_.size(); ++i) {
    const EgressPort* e = queues_[i].size() > 1 ? queues_[i][lane]
                          : owner_[i] == lane   ? egress_[i].get()
                                                : nullptr;
    if (e != nullptr && (e->queued_bytes() != 0 || e->in_flight() != 0)) return false;
  }
  for (unsigned from = 0; from < lanes_.size(); ++from) {
    if (from != lane && rte_ring_count(lanes_[from]->to[lane]) != 0) return false;
  }
  return true;
}

SwitchDropCounters SwitchNode::drops() const {
  SwitchDropCounters d = lanes_[0]->drops;
  for (size_t i = 1; i < lanes_.size(); ++i) d += lanes_[i]->drops;
  return d;
}

SwitchDropCounters SwitchNode::port_drops(uint16_t port) const {
  SwitchDropCounters d = lanes_[0]->port_drops.at(port);
  for (size_t i = 1; i < lanes_.size(); ++i) d += lanes_[i]->port_drops[port];
  return d;
}

SwitchCounters SwitchNode::counters() const {
  SwitchCounters c = lanes_[0]->counters;
  for (size_t i = 1; i < lanes_.size(); ++i) c += lanes_[i]->counters;
  return c;
}

SwitchPortCounters SwitchNode::port_counters(uint16_t port) const {
  SwitchPortCounters c = lanes_[0]->ports.at(port);
  for (size_t i = 1; i < lanes_.size(); ++i) c += lanes_[i]->ports[port];
  return c;
}

PathSelectorCounters SwitchNode::group_counters(size_t g) const {
  PathSelectorCounters c{};
  for (const auto& l : lanes_) c += l->groups.at(g)->counters();
  return c;
}

FlowletCounters SwitchNode::group_flowlet_counters(size_t g) const {
  FlowletCounters c{};
  for (const auto& l : lanes_) c += l->groups.at(g)->flowlet_table().counters();
  return c;
}

std::vector<uint64_t> SwitchNode::group_member_packets(size_t g) const {
  std::vector<uint64_t> sum;
  group_member_packets(g, sum);
  return sum;
}

void SwitchNode::group_member_packets(size_t g, std::vector<uint64_t>& out) const {
  const auto first = lanes_[0]->groups.at(g)->member_packets();
  out.assign(first.begin(), first.end());
  for (size_t i = 1; i < lanes_.size(); ++i) {
    const auto more = lanes_[i]->groups[g]->member_packets();
    for (size_t m = 0; m < out.size(); ++m) out[m] += more[m];
  }
}

SwitchAccounting SwitchAccounting::of(const SwitchDropCounters& drops,
                                      const SwitchCounters& counters,
                                      std::span<const SwitchPortCounters> ports,
                                      const EgressAccounting& egress) {
  SwitchAccounting a;
  a.received = drops.bad_port;
  for (const auto& p : ports) a.received += p.rx_packets;
  a.generated = counters.pfc_frames_sent + counters.mirrored + counters.conweave_control_sent;
  a.consumed = counters.pfc_received + counters.conweave_control_consumed;
  a.held = counters.conweave_held - counters.conweave_released;
  a.pipeline_dropped = drops.total() - drops.egress_refused - drops.mirror_no_mbuf;
  a.in_lane_handoff = counters.lane_handoffs - counters.lane_handoffs_taken;
  a.egress = egress;
  return a;
}

MemoryUsage SwitchNode::memory_usage() const {
  MemoryUsage m;
  m.tcam = tcam_->memory_bytes();
  m.routes = routes_->memory_bytes();
  for (const auto& port : egress_) m.queues += egress_port_bytes(*port);
  for (const auto& port : lane_egress_) m.queues += egress_port_bytes(*port);
  m.queues += capacity_bytes(egress_) + capacity_bytes(lane_egress_) + capacity_bytes(queues_) +
              capacity_bytes(egress_config_);
  if (pfc_) m.queues += pfc_->memory_bytes();
  if (conweave_) {
    m.routes += sizeof(Conweave) + conweave_->tx.heap_bytes() + conweave_->rx.heap_bytes() +
                capacity_bytes(conweave_->vtep) + capacity_bytes(conweave_->group_leaf) +
                capacity_bytes(conweave_->released);
  }
  if (conga_) {
    m.routes += sizeof(Conga) + capacity_bytes(conga_->dre) + capacity_bytes(conga_->vtep) +
                capacity_bytes(conga_->group_leaf) + capacity_bytes(conga_->metrics);
    if (conga_->tables) m.routes += sizeof(CongaTables) + conga_->tables->heap_bytes();
  }
  for (rte_ring* r : rings_) m.queues += static_cast<uint64_t>(rte_ring_get_memsize(r->size));
  m.other =
      sizeof(*this) + capacity_bytes(macs_) + capacity_bytes(lanes_) + capacity_bytes(owner_) +
      capacity_bytes(rings_) + port_next_.heap_bytes() +
      (board_ != nullptr ? egress_.size() * sizeof(PortBoardEntry) : 0) +
      (queue_board_ != nullptr ? egress_.size() * lanes_.size() * sizeof(QueueBoardEntry) : 0);
  // The config copy: its vectors (rules' and routes' entries, ports, groups with their members).
  const control::SwitchConfig& c = config_;
  m.other += capacity_bytes(c.ports) + capacity_bytes(c.groups) + capacity_bytes(c.routes) +
             capacity_bytes(c.tcam.rules) + capacity_bytes(c.tcam.partitions) +
             capacity_bytes(c.lcores) + capacity_bytes(c.qos.dscp_to_tc) +
             capacity_bytes(c.qos.pcp_to_tc);
  for (const auto& g : c.groups) m.other += capacity_bytes(g.ports) + capacity_bytes(g.weights);
  for (const auto& lane : lanes_) {
    const Lane& L = *lane;
    m.other += sizeof(Lane) - sizeof(L.tcam_cache) - sizeof(L.route_cache);
    m.tcam += sizeof(L.tcam_cache) + L.tcam_cache.heap_bytes();
    m.routes += sizeof(L.route_cache) + L.route_cache.heap_bytes() + capacity_bytes(L.groups);
    for (const auto& g : L.groups) m.routes += g->memory_bytes();
    m.routes += capacity_bytes(L.views) + capacity_bytes(L.fallback_view) +
                capacity_bytes(L.ineligible);
    for (const auto& v : L.views) m.routes += capacity_bytes(v);
    m.other += capacity_bytes(L.ports) + capacity_bytes(L.port_drops) + capacity_bytes(L.to) +
               capacity_bytes(L.other_lanes_bytes);
  }
  return m;
}

SwitchAccounting SwitchNode::accounting() const {
  EgressAccounting egress;
  for (const auto& e : egress_) egress += e->accounting();
  for (const auto& e : lane_egress_) egress += e->accounting();
  std::vector<SwitchPortCounters> ports(egress_.size());
  for (uint16_t p = 0; p < egress_.size(); ++p) ports[p] = port_counters(p);
  return SwitchAccounting::of(drops(), counters(), ports, egress);
}

void SwitchNode::free_all() {
  // What is still between lanes was handed over and never taken (its lane stopped first): the
  // receiving lane counts it taken and dropped, which keeps the identity whole.
  for (size_t to = 0; to < lanes_.size(); ++to) {
    Lane& L = *lanes_[to];
    for (size_t from = 0; from < lanes_.size(); ++from) {
      if (from == to) continue;
      rte_mbuf* m;
      while (rte_ring_sc_dequeue(lanes_[from]->to[to], reinterpret_cast<void**>(&m)) == 0) {
        L.counters.lane_handoffs_taken++;
        L.drops.lane_handoff_unsent++;
        // The sender's ingress port rides in the mbuf (enqueue()).
        const uint16_t in_port = static_cast<uint16_t>(m->hash.fdir.lo & 0xFFFF);
        if (in_port < L.port_drops.size()) L.port_drops[in_port].lane_handoff_unsent++;
        rte_pktmbuf_free(m);
      }
    }
  }
  if (conweave_) {
    // Held in a reorder queue when the switch stopped: released and dropped, counted.
    Lane& L = *lanes_[0];
    conweave_->released.clear();
    conweave_->rx.take_all(conweave_->released);
    for (rte_mbuf* m : conweave_->released) {
      ++L.counters.conweave_released;
      ++L.drops.reorder_held_at_exit;
      rte_pktmbuf_free(m);
    }
    conweave_->released.clear();
  }
  for (auto& e : egress_) e->free_all();
  for (auto& e : lane_egress_) e->free_all();
}

EgressAccounting SwitchNode::port_egress_accounting(uint16_t port) const {
  EgressAccounting a;
  for (const EgressPort* e : queues_.at(port)) a += e->accounting();
  return a;
}

EgressClassCounters SwitchNode::port_class_counters(uint16_t port, uint8_t tc,
                                                    uint64_t now_ns) const {
  const auto& q = queues_.at(port);
  EgressClassCounters c = q[0]->counters(tc, now_ns);
  for (size_t i = 1; i < q.size(); ++i) {
    const EgressClassCounters o = q[i]->counters(tc, now_ns);
    c.enqueued += o.enqueued;
    c.transmitted_packets += o.transmitted_packets;
    c.transmitted_bytes += o.transmitted_bytes;
    c.drops_queue_full += o.drops_queue_full;
    c.drops_link_down += o.drops_link_down;
    c.drops_watchdog += o.drops_watchdog;
    c.drops_headroom_overflow += o.drops_headroom_overflow;
    c.drops_bit_error += o.drops_bit_error;
    c.drops_loss += o.drops_loss;
    c.drops_delay_line_full += o.drops_delay_line_full;
    c.ecn_marked += o.ecn_marked;
    c.ecn_not_ect += o.ecn_not_ect;
    // Pauses are PFC's, and a port with queues per lane has none: its first queue's stand.
  }
  static_assert(sizeof(EgressClassCounters) == 17 * sizeof(uint64_t),
                "every EgressClassCounters field is summed here, or said why not");
  return c;
}

uint64_t SwitchNode::port_queued_bytes(uint16_t port) const {
  uint64_t b = 0;
  for (const EgressPort* e : queues_.at(port)) b += e->queued_bytes();
  return b;
}

uint64_t SwitchNode::port_queued_bytes(uint16_t port, uint8_t tc) const {
  uint64_t b = 0;
  for (const EgressPort* e : queues_.at(port)) b += e->queued_bytes(tc);
  return b;
}

void SwitchNode::set_link_up(uint16_t port, bool up, uint64_t now_ns) {
  for (EgressPort* e : queues_.at(port)) e->set_link_up(up, now_ns);
  refresh_loads(*lanes_[0], now_ns);
  for (size_t i = 1; i < lanes_.size(); ++i) lanes_[i]->loads_stale = true;
}

void SwitchNode::set_link_rate_gbps(uint16_t port, double rate_gbps, uint64_t now_ns) {
  for (EgressPort* e : queues_.at(port)) e->set_link_rate_gbps(rate_gbps, now_ns);
  // CONGA's metric is the rate over the link's capacity: the new one from now.
  if (conga_) conga_->dre.at(port).set_rate_gbps(rate_gbps);
  for (auto& l : lanes_) l->loads_stale = true;  // frames due were started under the old settings
}

void SwitchNode::set_link_ber(uint16_t port, double ber, uint64_t now_ns) {
  for (EgressPort* e : queues_.at(port)) e->set_bit_error_rate(ber, now_ns);
  for (auto& l : lanes_) l->loads_stale = true;  // frames due were started under the old settings
}

void SwitchNode::set_link_loss(uint16_t port, double loss_rate, uint64_t now_ns) {
  for (EgressPort* e : queues_.at(port)) e->set_loss_rate(loss_rate, now_ns);
  for (auto& l : lanes_) l->loads_stale = true;  // frames due were started under the old settings
}

}  // namespace spraynet::switch_emu
