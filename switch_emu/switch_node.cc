#include "switch_emu/switch_node.h"

#include <spdlog/spdlog.h>

#include <bit>
#include <cstring>
#include <stdexcept>

#include "dataplane/wire/flow_key.h"
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

  for (size_t g = 0; g < config_.groups.size(); ++g) {
    const auto& gs = config_.groups[g];
    PathGroupConfig pg;
    pg.mode = *parse_lb_mode(gs.mode);
    pg.member_ports = gs.ports;
    pg.dlb_gap_ns = gs.dlb_gap_ns;
    pg.dlb_table_entries = gs.flowlet_entries;
    pg.seed = config_.seed * 1000003 + g;
    groups_.push_back(std::make_unique<PathSelector>(pg));
    if (!gs.weights.empty()) groups_.back()->set_weights(gs.weights);
  }

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
    ec.class_limit_bytes.fill(ps.queue_bytes);
    ec.delay_line_limit_frames = ps.delay_line_frames;
    for (uint8_t tc = 0; pfc_ && tc < EgressPort::kClasses; ++tc) {
      if (pfc_->lossless(tc)) ec.class_limit_bytes[tc] = lossless_limit;
    }
    egress_.push_back(std::make_unique<EgressPort>(ec));
    if (pfc_) pfc_->attach_port(static_cast<uint16_t>(i), *egress_.back());
  }
  views_.emplace_back(n);  // lossy (every port eligible until refresh_loads reads them)
  if (pfc_) {
    for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
      if (!pfc_->lossless(tc)) continue;
      view_of_tc_[tc] = static_cast<uint8_t>(views_.size());
      lossless_tc_[views_.size()] = tc;
      views_.emplace_back(n);
    }
  }
  ineligible_.assign(views_.size(), 0);
  ports_.resize(n);
  port_next_.resize(n);
  for (size_t i = 0; i < n; ++i) egress_[i]->set_next_event_slot(&port_next_, i);
}

SwitchNode::~SwitchNode() {
  free_all();
  // port_next_ goes before egress_ (declared after it): the ports must stop writing to it.
  for (auto& e : egress_) e->set_next_event_slot(nullptr, 0);
}

void SwitchNode::refresh_loads_if_stale(uint64_t now_ns) {
  // Queued bytes are kept current port by port (enqueue, transmit); eligibility changes with a
  // link going up or down, a pause received (fast feedback) or the watchdog: only then is every
  // port read again, so that a burst costs the ports it touches, not every port of the switch.
  if (loads_stale_ || (pfc_ && (pfc_->config().fast_feedback ||
                                pfc_->eligibility_changes() != eligibility_seen_))) {
    refresh_loads(now_ns);
  }
}

void SwitchNode::refresh_loads(uint64_t now_ns) {
  loads_stale_ = false;
  if (pfc_) eligibility_seen_ = pfc_->eligibility_changes();
  for (size_t i = 0; i < egress_.size(); ++i) {
    const uint16_t port = static_cast<uint16_t>(i);
    const uint64_t queued = egress_[i]->queued_bytes();
    // Lossy traffic does not care for PFC: a port is eligible for it while its link is up.
    views_[0][i] = PathLoad{queued, egress_[i]->link_up()};
    for (size_t v = 1; v < views_.size(); ++v) {
      views_[v][i] = PathLoad{queued, pfc_->eligible(port, lossless_tc_[v], now_ns)};
    }
  }
  for (size_t v = 0; v < views_.size(); ++v) {
    ineligible_[v] = static_cast<uint32_t>(
        std::count_if(views_[v].begin(), views_[v].end(), [](const PathLoad& l) { return !l.eligible; }));
  }
}

void SwitchNode::set_queued_bytes(uint16_t port, uint64_t bytes) {
  for (auto& view : views_) view[port].queued_bytes = bytes;
}

void SwitchNode::receive(uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns) {
  if (port >= egress_.size()) {
    drops_.bad_port += n;
    rte_pktmbuf_free_bulk(pkts, n);
    return;
  }
  refresh_loads_if_stale(now_ns);
  auto& pc = ports_[port];
  for (uint16_t base = 0; base < n; base += kBurst) {
    const uint16_t count = std::min<uint16_t>(kBurst, n - base);
    // Scratch kept in the node: a burst of ParsedPackets zeroed on every call costs more than
    // parsing one packet, and fabric_emu calls with bursts of one.
    ParsedPacket* parsed = scratch_.parsed.data();
    const ParsedPacket** ip = scratch_.ip.data();
    rte_mbuf** ip_mbufs = scratch_.mbufs.data();
    uint16_t nip = 0;
    for (uint16_t i = 0; i < count; ++i) {
      rte_mbuf* m = pkts[base + i];
      pc.rx_packets++;
      pc.rx_bytes += rte_pktmbuf_pkt_len(m);
      const ParseStatus s = parser_.parse(m, parsed[nip]);
      if (s != ParseStatus::kOk) {
        drops_.parse[static_cast<size_t>(s)]++;
        rte_pktmbuf_free(m);
        continue;
      }
      if (parsed[nip].kind == PacketKind::kMacControl) {
        handle_mac_control(port, m, now_ns);
        continue;
      }
      ip[nip] = &parsed[nip];
      ip_mbufs[nip] = m;
      ++nip;
    }
    if (nip == 0) continue;

    TcamMatch* match = scratch_.match.data();
    tcam_->classify(ip, nip, match, &tcam_cache_);
    uint32_t* dst = scratch_.dst.data();
    uint32_t* group = scratch_.group.data();
    for (uint16_t i = 0; i < nip; ++i) dst[i] = parsed[i].dst_ip;
    routes_->lookup_burst(std::span<const uint32_t>(dst, nip), std::span<uint32_t>(group, nip),
                          route_cache_);
    for (uint16_t i = 0; i < nip; ++i) forward(port, ip_mbufs[i], parsed[i], match[i], group[i], now_ns);
  }
}

void SwitchNode::handle_mac_control(uint16_t port, rte_mbuf* m, uint64_t now_ns) {
  PfcFrame frame;
  const PfcParseStatus s =
      parse_pfc_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), frame);
  if (s == PfcParseStatus::kOk) {
    ports_[port].pfc_frames_received++;
    counters_.pfc_received++;
    // A switch without PFC enabled consumes the frame, as hardware does, and honours nothing.
    if (pfc_) egress_[port]->apply(pfc_->on_pfc_frame(port, frame, now_ns), now_ns);
    loads_stale_ = true;
  } else if (s == PfcParseStatus::kNotPfc) {
    drops_.mac_control_not_pfc++;
  } else {
    drops_.pfc_malformed++;
  }
  rte_pktmbuf_free(m);
}

void SwitchNode::forward(uint16_t in_port, rte_mbuf* m, const ParsedPacket& p,
                         const TcamMatch& match, uint32_t group, uint64_t now_ns) {
  if (match.matched && match.action == TcamAction::kDrop) {
    drops_.tcam_drop++;
    rte_pktmbuf_free(m);
    return;
  }
  const uint8_t tc = classes_.classify(p);
  // Priority follows the traffic class 1:1 (see enqueue): the ingress priority group.
  if (pfc_ && pfc_->watchdog_ingress_drop(in_port, tc)) {
    drops_.pfc_watchdog_ingress++;
    rte_pktmbuf_free(m);
    return;
  }
  if (match.matched && match.action == TcamAction::kMirror && match.port < egress_.size()) {
    // An ingress mirror: the copy is the packet as it arrived, before any rewrite.
    rte_mbuf* copy = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX);
    if (copy == nullptr) {
      drops_.mirror_no_mbuf++;
    } else {
      counters_.mirrored++;
      egress_[match.port]->enqueue(copy, tc, EgressPort::kNoIngressPort, 0, now_ns);
      loads_stale_ = true;
    }
  }

  // Quarantine: a deterministic split by PSN (the monitoring share keeps its normal path, so
  // what the QP does there stays visible); without a PSN there is nothing to split on and the
  // honeypot takes it all.
  bool quarantined = false;
  if (match.matched && match.action == TcamAction::kQuarantine && match.port < egress_.size()) {
    quarantined = p.kind != PacketKind::kRoce || p.psn % 100 >= match.keep_percent;
    if (!quarantined) counters_.quarantine_kept++;
  }
  const bool pinned = quarantined || (match.matched && match.action == TcamAction::kPinPort &&
                                      match.port < egress_.size());
  if (!pinned && (group == RouteTable::kNoRoute || group >= groups_.size())) {
    drops_.no_route++;
    rte_pktmbuf_free(m);
    return;
  }
  // An expiring packet goes no further than its route: it must not pick a path, which would
  // start or refresh a flowlet (DLB), count on a member and load a bucket for nothing.
  if (p.ttl <= 1) {
    drops_.ttl_expired++;
    rte_pktmbuf_free(m);
    return;
  }

  uint16_t out_port;
  if (pinned) {
    if (quarantined) {
      counters_.quarantined++;
    } else {
      counters_.pinned++;
    }
    out_port = match.port;
  } else {
    const uint32_t hash = hasher_.hash(make_flow_key(p, hasher_.config().dest_qp_in_key));
    PathSelector& sel = *groups_[group];
    // Each lossless class sees PFC's view of its own class (watchdog drop mode, fast feedback);
    // the others only the links: a storm on one class leaves the port to every other class.
    const std::span<const PathLoad> loads = views_[view_of_tc_[tc]];
    const bool sprayed = match.matched && match.action == TcamAction::kSpray &&
                         p.kind == PacketKind::kRoce && p.udp_checksum != 0;
    const uint8_t path = sprayed ? ppcid_decode(p.udp_checksum, ppcid_layout_).path_id : 0;
    const bool all_eligible = ineligible_[view_of_tc_[tc]] == 0;
    const auto choose = [&](std::span<const PathLoad> view, bool all) {
      return sprayed ? sel.select_sprayed(hash, path, now_ns, view, all)
                     : sel.select(hash, now_ns, view, all);
    };
    if (sprayed) {
      counters_.sprayed++;
    } else if (match.matched && match.action == TcamAction::kSpray) {
      counters_.spray_without_ppcid++;
    }
    out_port = choose(loads, all_eligible);
    if (out_port == PathSelector::kNoPort && view_of_tc_[tc] != 0 && pfc_ &&
        pfc_->config().fast_feedback) {
      // Fast feedback steers lossless traffic around paused ports; with every member paused
      // there is nowhere to steer, and dropping a lossless packet is what PFC exists to avoid:
      // queue behind the pause, as a switch without fast feedback does (ports in watchdog drop
      // mode stay out).
      fallback_view_.resize(egress_.size());
      for (size_t i = 0; i < egress_.size(); ++i) {
        fallback_view_[i] = PathLoad{egress_[i]->queued_bytes(),
                                     egress_[i]->link_up() && !egress_[i]->drop_mode(tc)};
      }
      out_port = choose(fallback_view_, false);
    }
    if (out_port == PathSelector::kNoPort) {
      drops_.no_eligible_port++;
      rte_pktmbuf_free(m);
      return;
    }
  }

  // TTL >= 2 was checked above: this decrements it and patches the checksum.
  decrement_ttl(rte_pktmbuf_mtod(m, uint8_t*) + p.l3_offset);
  enqueue(out_port, in_port, m, tc, now_ns);
}

void SwitchNode::enqueue(uint16_t out_port, uint16_t in_port, rte_mbuf* m, uint8_t tc,
                         uint64_t now_ns) {
  const auto& peer = config_.ports[out_port].peer_mac;
  if (peer) {
    uint8_t* eth = rte_pktmbuf_mtod(m, uint8_t*);
    std::memcpy(eth, peer->data(), 6);
    std::memcpy(eth + 6, macs_[out_port].data(), 6);
  }
  // Priority follows the traffic class 1:1 (PFC priority n pauses class n).
  const EgressEnqueueResult r = egress_[out_port]->enqueue(m, tc, in_port, tc, now_ns);
  if (r == EgressEnqueueResult::kQueued) {
    ports_[out_port].forwarded_packets++;
  } else {
    drops_.egress_refused++;
  }
  // Keep the load views current within a burst, so DLB and DRILL see their own decisions.
  set_queued_bytes(out_port, egress_[out_port]->queued_bytes());
  if (pfc_ && tc < EgressPort::kClasses && view_of_tc_[tc] != 0) {
    const uint8_t v = view_of_tc_[tc];
    const bool eligible = pfc_->eligible(out_port, tc, now_ns);
    bool& was = views_[v][out_port].eligible;
    if (was != eligible) ineligible_[v] = eligible ? ineligible_[v] - 1 : ineligible_[v] + 1;
    was = eligible;
  }
}

void SwitchNode::poll(uint64_t now_ns) {
  if (!pfc_) return;
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
      counters_.pfc_frames_sent++;
      egress_[due[i].port]->enqueue_control(m, now_ns);
      loads_stale_ = true;
    }
    if (n < std::size(due)) break;
  }
}

uint16_t SwitchNode::transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max) {
  if (port >= egress_.size()) return 0;
  const uint16_t n = egress_[port]->dequeue(now_ns, out, max, &ports_[port].tx_bytes);
  set_queued_bytes(port, egress_[port]->queued_bytes());
  ports_[port].tx_packets += n;
  return n;
}

uint64_t SwitchNode::next_event_ns(uint64_t now_ns) const {
  uint64_t next = port_next_.earliest();
  if (pfc_) next = std::min(next, pfc_->next_event_ns(now_ns));
  return next;
}

bool SwitchNode::idle() const {
  for (const auto& e : egress_) {
    if (e->queued_bytes() != 0 || e->in_flight() != 0) return false;
  }
  return true;
}

SwitchAccounting SwitchAccounting::of(const SwitchDropCounters& drops,
                                      const SwitchCounters& counters,
                                      std::span<const SwitchPortCounters> ports,
                                      const EgressAccounting& egress) {
  SwitchAccounting a;
  a.received = drops.bad_port;
  for (const auto& p : ports) a.received += p.rx_packets;
  a.generated = counters.pfc_frames_sent + counters.mirrored;
  a.consumed = counters.pfc_received;
  a.pipeline_dropped = drops.total() - drops.egress_refused - drops.mirror_no_mbuf;
  a.egress = egress;
  return a;
}

SwitchAccounting SwitchNode::accounting() const {
  EgressAccounting egress;
  for (const auto& e : egress_) egress += e->accounting();
  return SwitchAccounting::of(drops_, counters_, ports_, egress);
}

void SwitchNode::free_all() {
  for (auto& e : egress_) e->free_all();
}

void SwitchNode::set_link_up(uint16_t port, bool up, uint64_t now_ns) {
  egress_.at(port)->set_link_up(up, now_ns);
  refresh_loads(now_ns);
}

void SwitchNode::set_link_rate_gbps(uint16_t port, double rate_gbps, uint64_t now_ns) {
  egress_.at(port)->set_link_rate_gbps(rate_gbps, now_ns);
  loads_stale_ = true;  // frames due were started under the old settings
}

void SwitchNode::set_link_ber(uint16_t port, double ber, uint64_t now_ns) {
  egress_.at(port)->set_bit_error_rate(ber, now_ns);
  loads_stale_ = true;  // frames due were started under the old settings
}

void SwitchNode::set_link_loss(uint16_t port, double loss_rate, uint64_t now_ns) {
  egress_.at(port)->set_loss_rate(loss_rate, now_ns);
  loads_stale_ = true;  // frames due were started under the old settings
}

}  // namespace spraynet::switch_emu
