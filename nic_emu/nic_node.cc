#include "nic_emu/nic_node.h"

#include <rte_ether.h>
#include <rte_udp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dataplane/egress/egress_memory.h"
#include "dataplane/wire/conweave_overlay.h"
#include "dataplane/wire/flow_key.h"
#include "dataplane/wire/pfc_frame.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet::nic_emu {

namespace {

// The host port is a real port (or the RC engine's side): its emulated link only keeps order,
// it must not be what limits the node.
constexpr double kHostLinkGbps = 400.0;

EgressPortConfig uplink_egress(const control::UplinkSettings& u, uint64_t seed) {
  EgressPortConfig ec;
  ec.link.rate_gbps = u.link.rate_gbps;
  ec.link.propagation_delay_ns = u.link.delay_ns;
  ec.link.bit_error_rate = u.link.ber;
  ec.link.loss_rate = u.link.loss;
  ec.link.up = u.link.up;
  ec.link.seed = seed;
  return ec;
}

}  // namespace

NicNode::NicNode(const control::NicConfig& config, rte_mempool* pool,
                 std::vector<MacAddress> port_macs, std::shared_ptr<spdlog::logger> logger)
    : NicNode(config,
              config.host ? RcTrafficEngineConfig{} : control::rc_engine_config(config), pool,
              std::move(port_macs), std::move(logger)) {}

NicNode::NicNode(const control::NicConfig& config, const RcTrafficEngineConfig& rc_engine,
                 rte_mempool* pool, std::vector<MacAddress> port_macs,
                 std::shared_ptr<spdlog::logger> logger)
    : config_(config),
      pool_(pool),
      macs_(std::move(port_macs)),
      logger_(std::move(logger)),
      uplinks_(config.uplinks.size()),
      hasher_(HashConfig{HashAlgorithm::kCrc32c, static_cast<uint32_t>(config.seed), true}),
      spray_(control::spray_engine_config(config)),
      // (The uplink count is checked below, with the NIC's own message.)
      heat_(static_cast<uint16_t>(std::clamp<size_t>(config.uplinks.size(), 1, 16)),
            config.reorder.max_qps) {
  if (uplinks_ == 0 || uplinks_ > SprayEngine::kMaxUplinks) {
    throw std::invalid_argument("nic: 1 to 16 uplinks, got " + std::to_string(uplinks_));
  }
  // A path is named by its cable, so both ends of an uplink carry the same path id: the ids a
  // peer writes are the ids of this NIC's own uplinks.
  if (config_.spray.fabric_paths > 0) {
    // The PPCID names a fabric path, not a cable: every path id the senders rotate through.
    for (uint16_t id = 0; id < config_.spray.fabric_paths; ++id) {
      known_paths_.set(static_cast<uint8_t>(id));
    }
  } else {
    for (const auto& u : config_.uplinks) known_paths_.set(u.path_id);
  }
  if (config_.reorder_enabled()) {
    ReorderConfig rc = control::reorder_config(config_);
    // The RC engine's READs consume PSNs in its own MTU (the config's may be a default).
    if (!config_.host && config_.reorder.path_mtu == 0) rc.path_mtu = rc_engine.mtu;
    reorder_ = std::make_unique<ReorderEngine>(rc);
  }
  if (!config_.host) {
    RcTrafficEngineConfig engine = rc_engine;
    if (config_.cc.enabled()) {
      // A QP's line rate: its uplink's, or every uplink's when it sprays over them.
      double line = 0;
      for (const auto& u : config_.uplinks) {
        line = spray_.mode() == SprayMode::kFlow ? std::max(line, u.link.rate_gbps)
                                                 : line + u.link.rate_gbps;
      }
      switch (config_.cc.mode) {
        case control::CcMode::kDctcp: {
          DctcpConfig d;  // ns-3 HPCC run.py's DCTCP values (see DctcpConfig)
          d.line_rate_gbps = line;
          d.mtu_bytes = rc_engine.mtu;
          engine.dctcp = d;
          // run.py's DCTCP has a window of one BDP scaled by its rate (HAS_WIN 1, VAR_WIN 1).
          if (config_.cc.base_rtt_ns != 0) {
            engine.var_window_bytes = static_cast<uint64_t>(
                line * static_cast<double>(config_.cc.base_rtt_ns) / 8.0);
          }
          break;
        }
        case control::CcMode::kTimely:
          engine.timely = timely_ns3_defaults(line);
          break;
        case control::CcMode::kHpcc: {
          // T: the caller's (fabric_emu's longest path), else 8 us, ns-3 HPCC's fat-tree order.
          const uint64_t rtt = config_.cc.base_rtt_ns != 0 ? config_.cc.base_rtt_ns : 8'000;
          engine.hpcc = hpcc_ns3_defaults(line, rtt);
          break;
        }
        default:
          engine.dcqcn = config_.cc.dcqcn(line);
      }
      // ECT(0) where the switches mark for it (DCQCN, DCTCP); TIMELY and HPCC send Not-ECT.
      engine.ecn = config_.cc.marks_ecn() ? 0x02 : 0x00;
      if (config_.cc.ack_class == control::AckClass::kHigh) engine.ack_dscp = config_.cc.cnp_dscp;
    }
    rc_ = std::make_unique<RcTrafficEngine>(engine, pool);
    int_source_ = config_.cc.mode == control::CcMode::kHpcc;
    tx_frame_bytes_ = rc_engine.mtu + 128;
    last_cnp_ns_.assign(engine.qps, kNoCnp);
  }
  for (size_t i = 0; i < uplinks_; ++i) {
    egress_.push_back(
        std::make_unique<EgressPort>(uplink_egress(config_.uplinks[i], config_.seed * 7919 + i)));
  }
  if (config_.host) {
    EgressPortConfig host;
    host.link.rate_gbps = kHostLinkGbps;
    host.link.propagation_delay_ns = 0;
    host.class_limit_bytes.fill(64u << 20);  // the reorder engine releases in bursts
    egress_.push_back(std::make_unique<EgressPort>(host));
  }
  while (macs_.size() < egress_.size()) {
    macs_.push_back({0x02, 0x00, 0x00, 0x00, 0x01, static_cast<uint8_t>(macs_.size())});
  }
  if (config_.probe) {
    LatencyProbeConfig pc = config_.probe->probe;
    pc.eth.src = macs_[config_.probe->uplink_index];
    probe_ = std::make_unique<LatencyProbe>(pc);
  }
  if (config_.anomaly.enabled) {
    anomaly_ = std::make_unique<PpcidAnomalyDetector>(control::anomaly_config(config_));
    anomaly_flags_.reserve(config_.anomaly.qp_table_size);
  }
  loads_.resize(uplinks_);
  ports_.resize(egress_.size());
  released_.reserve(1024);
  rc_out_.reserve(256);
  refresh_loads(0);
}

NicNode::~NicNode() {
  free_all();
}

void NicNode::refresh_loads(uint64_t now_ns) {
  bool any = false;
  for (size_t u = 0; u < uplinks_; ++u) {
    loads_[u].queued_bytes = egress_[u]->queued_bytes();
    // A paused uplink would only queue what it is given: spray around it until it resumes. A
    // flow does not move for a pause (only for a link that is down): a QP that changed planes
    // mid-message would arrive out of order, and its packets wait for the pause on a real
    // NIC too (per_flow_room holds them in the QP meanwhile).
    loads_[u].eligible = egress_[u]->link_up() &&
                         (spray_.mode() == SprayMode::kFlow || !egress_[u]->any_paused(now_ns));
    any = any || loads_[u].eligible;
  }
  if (!any) {
    // Every live uplink is paused: queue behind the pause rather than drop (a NIC with one
    // link to its leaf is paused often; dropping there would lose ACKs and stall the QPs).
    for (size_t u = 0; u < uplinks_; ++u) loads_[u].eligible = egress_[u]->link_up();
  }
}

void NicNode::handle_mac_control(uint16_t port, rte_mbuf* m, uint64_t now_ns) {
  PfcFrame frame;
  const PfcParseStatus s =
      parse_pfc_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), frame);
  if (s == PfcParseStatus::kOk) {
    // The NIC honours every priority the fabric pauses (it has no lossless-class config of its
    // own): the quanta count at the uplink's rate.
    PfcPauseUpdate update;
    const double gbps = egress_[port]->link().rate_gbps();
    for (uint8_t prio = 0; prio < 8; ++prio) {
      if (!frame.enabled(prio)) continue;
      const uint8_t bit = static_cast<uint8_t>(1u << prio);
      if (frame.quanta[prio] == 0) {
        update.resume_classes |= bit;
      } else {
        update.pause_classes |= bit;
        update.pause_until_ns[prio] = now_ns + pfc_quanta_to_ns(frame.quanta[prio], gbps);
      }
    }
    egress_[port]->apply(update, now_ns);
    ++counters_.pfc_received;
    refresh_loads(now_ns);
  } else if (s == PfcParseStatus::kNotPfc) {
    ++drops_.mac_control_not_pfc;
  } else {
    ++drops_.pfc_malformed;
  }
  rte_pktmbuf_free(m);
}

void NicNode::receive(uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns) {
  refresh_loads(now_ns);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    if (port >= egress_.size()) {
      ++drops_.bad_port;
      rte_pktmbuf_free(m);
      continue;
    }
    ports_[port].rx_packets++;
    ports_[port].rx_bytes += rte_pktmbuf_pkt_len(m);
    if (port < uplinks_) {
      from_uplink(port, m, now_ns);
    } else {
      from_host(m, now_ns);
    }
  }
  deliver_all(now_ns);
}

void NicNode::from_host(rte_mbuf* m, uint64_t now_ns) {
  ParsedPacket p;
  const ParseStatus s = parser_.parse(m, p);
  uint16_t uplink;
  uint8_t tc = 0;
  if (s == ParseStatus::kOk && p.kind == PacketKind::kMacControl) {
    // PFC and PAUSE are link-local: the host's are for this NIC (pause what it sends the
    // host), never for the fabric.
    handle_mac_control(host_port(), m, now_ns);
    return;
  }
  if (s == ParseStatus::kOk && p.kind == PacketKind::kRoce) {
    if (reorder_ && rc_ && p.bth_opcode == opcode::kRcReadRequest) note_read_request(m, p);
    const uint32_t hash = hasher_.hash(make_flow_key(p, true));
    uplink = spray_.pick(hash, now_ns, loads_);
    if (uplink != SprayEngine::kNoUplink) {
      if (host_side_.write_ppcid) spray_.write_ppcid(m, p, uplink, hash, now_ns);
      ++counters_.sprayed;
      if (int_source_ && p.int_offset == 0 && p.bth_opcode <= opcode::kRcWriteOnlyImm) {
        insert_int(m);
      }
    }
    tc = classes_.classify(p);
  } else if (s == ParseStatus::kOk || s == ParseStatus::kNotIpv4) {
    // Not RoCE (ARP, TCP, other UDP...): one flow stays on one uplink.
    const uint32_t hash = s == ParseStatus::kOk ? hasher_.hash(make_flow_key(p, false)) : 0;
    uplink = spray_.pick_flow(hash, loads_);
    if (uplink != SprayEngine::kNoUplink) ++counters_.flow_hashed;
    if (s == ParseStatus::kOk) tc = classes_.classify(p);
  } else {
    ++drops_.parse[static_cast<size_t>(s)];
    rte_pktmbuf_free(m);
    return;
  }
  if (uplink == SprayEngine::kNoUplink) {
    ++drops_.no_uplink;
    rte_pktmbuf_free(m);
    return;
  }
  if (const auto& peer = config_.uplinks[uplink].peer_mac) {
    // Like a router with a static neighbour: the next hop's MAC, ours as the source. The ICRC
    // starts at the IP header, so it is untouched.
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    std::copy(peer->begin(), peer->end(), eth->dst_addr.addr_bytes);
    std::copy(macs_[uplink].begin(), macs_[uplink].end(), eth->src_addr.addr_bytes);
  }
  const uint32_t bytes = rte_pktmbuf_pkt_len(m);
  if (egress_[uplink]->enqueue(m, tc, EgressPort::kNoIngressPort, tc, now_ns) !=
      EgressEnqueueResult::kQueued) {
    ++drops_.egress_refused;  // EgressPort freed it and counted the cause
    return;
  }
  loads_[uplink].queued_bytes += bytes;  // adaptive mode sees its own decisions within a burst
}

void NicNode::note_read_request(const rte_mbuf* m, const ParsedPacket& p) {
  // The responses come back from the READ's destination, addressed to the QP that sent it, with
  // the request's PSN and the N after it: that is the range the reorder engine may hold them in.
  uint32_t local_qp = 0;
  if (!rc_->local_qp_of(p.dst_ip, p.dest_qp, local_qp)) return;
  if (size_t{p.bth_offset} + kBthSize + kRethSize > rte_pktmbuf_data_len(m)) return;
  const RethView reth(rte_pktmbuf_mtod_offset(m, uint8_t*, p.bth_offset + kBthSize));
  if (reorder_->expect_read_responses(p.dst_ip, local_qp, p.psn,
                                      reorder_->read_psns(reth.dma_length()))) {
    ++counters_.read_ranges_noted;
  }
}

PpcidReading NicNode::read_ppcid(uint16_t uplink, const ParsedPacket& p) {
  const PpcidReading r =
      ppcid_read(p.udp_checksum, spray_.layout(), p.dest_qp, p.psn, known_paths_);
  switch (r.verdict) {
    case PpcidVerdict::kAbsent:
      ++ppcid_.absent;
      break;
    case PpcidVerdict::kOk:
      ++ppcid_.ok;
      ++path_arrivals_[r.path_id];
      if (config_.spray.fabric_paths == 0 && r.path_id != config_.uplinks[uplink].path_id) {
        ++ppcid_.wrong_uplink;
      }
      break;
    case PpcidVerdict::kBadCheck:
      ++ppcid_.bad_check;
      if (!bad_check_logged_ && logger_) {
        bad_check_logged_ = true;
        logger_->warn(
            "uplink {}: PPCID 0x{:04x} fails its check nibble (DestQP 0x{:06x}, PSN "
            "0x{:06x}): the sender writes something else in the UDP checksum, or the "
            "packet was altered; counted as bad_check (logged once)",
            config_.uplinks[uplink].name, p.udp_checksum, p.dest_qp, p.psn);
      }
      break;
    case PpcidVerdict::kLayoutMismatch: {
      ++ppcid_.layout_mismatch;
      if (!mismatch_logged_ && logger_) {
        mismatch_logged_ = true;
        const PpcidLayout other =
            spray_.layout() == PpcidLayout::kTsHigh ? PpcidLayout::kPathHigh : PpcidLayout::kTsHigh;
        logger_->warn(
            "uplink {}: PPCID 0x{:04x} names no path under ppcid_layout {} but path {} "
            "under {}: the sender likely uses ppcid_layout {}; counted as "
            "layout_mismatch (logged once)",
            config_.uplinks[uplink].name, p.udp_checksum, to_string(spray_.layout()), r.path_id,
            to_string(other), to_string(other));
      }
      break;
    }
    case PpcidVerdict::kUnknownPath:
      ++ppcid_.unknown_path;
      break;
  }
  return r;
}

void NicNode::judge_ppcid(uint16_t uplink, const ParsedPacket& p, const PpcidReading& r,
                          uint64_t now_ns) {
  const AnomalyQp* q = anomaly_->observe(p.dest_qp, uplink, r, p.psn, now_ns);
  if (q == nullptr) return;
  anomaly_flags_.push_back(AnomalyFlag{p.dest_qp, p.src_ip, p.dst_ip});
  if (logger_) {
    logger_->warn(
        "anomaly: QP 0x{:06x} flagged: {} on uplink {} (PSN 0x{:06x}, PPCID 0x{:04x}, from "
        "{}.{}.{}.{} to {}.{}.{}.{}), {} anomalous of {} packets",
        q->dest_qp, to_string(q->reason), config_.uplinks[uplink].name, q->psn, p.udp_checksum,
        p.src_ip >> 24, (p.src_ip >> 16) & 0xFF, (p.src_ip >> 8) & 0xFF, p.src_ip & 0xFF,
        p.dst_ip >> 24, (p.dst_ip >> 16) & 0xFF, (p.dst_ip >> 8) & 0xFF, p.dst_ip & 0xFF,
        q->evidence, q->packets);
  }
}

void NicNode::count_arrival(uint16_t uplink, const ParsedPacket& p) {
  if (!heat_.count(p.src_ip, p.dest_qp, uplink)) ++counters_.heat_map_overflow;
}

void NicNode::send_probe(uint64_t now_ns) {
  rte_mbuf* m = probe_->make_probe(pool_, now_ns);
  if (m == nullptr) {
    ++counters_.probe_pool_empty;
    return;
  }
  const uint16_t uplink = config_.probe->uplink_index;
  ParsedPacket p;
  const uint8_t tc = parser_.parse(m, p) == ParseStatus::kOk ? classes_.classify(p) : 0;
  const uint32_t bytes = rte_pktmbuf_pkt_len(m);
  // Behind whatever the uplink already queues: the probe measures the path as the load sees it.
  if (egress_[uplink]->enqueue(m, tc, EgressPort::kNoIngressPort, tc, now_ns) !=
      EgressEnqueueResult::kQueued) {
    ++drops_.egress_refused;  // EgressPort freed it and counted the cause
    ++counters_.probe_egress_refused;
    return;
  }
  ++counters_.probes_sent;
  loads_[uplink].queued_bytes += bytes;
}

void NicNode::from_uplink(uint16_t uplink, rte_mbuf* m, uint64_t now_ns) {
  // Probes first: they are this NIC's own, whatever else the fabric did to them.
  if (probe_ && probe_->on_receive(m, now_ns)) {
    ++counters_.probes_received;
    rte_pktmbuf_free(m);
    return;
  }
  if (!int_carried_.empty()) int_carried_.erase(m);  // an earlier packet's, in this mbuf
  ParsedPacket p;
  const ParseStatus s = parser_.parse(m, p);
  if (s == ParseStatus::kOk && p.kind == PacketKind::kMacControl) {
    handle_mac_control(uplink, m, now_ns);  // PFC is for this NIC, not the host
    return;
  }
  if (s == ParseStatus::kNotIpv4) {
    released_.push_back(m);  // ARP and friends: the host's business
    return;
  }
  if (s != ParseStatus::kOk) {
    ++drops_.parse[static_cast<size_t>(s)];
    rte_pktmbuf_free(m);
    return;
  }
  if (p.kind != PacketKind::kRoce) {
    released_.push_back(m);
    return;
  }
  if (p.int_offset != 0 && !strip_int(m, p)) return;
  const PpcidReading reading = read_ppcid(uplink, p);
  if (p.bth_opcode != opcode::kCnp) {
    if (anomaly_) judge_ppcid(uplink, p, reading, now_ns);
    count_arrival(uplink, p);
  }
  if (p.udp_checksum != 0 && host_side_.restore_checksum) {
    // The UDP checksum field is masked by the ICRC: zeroing it keeps the ICRC valid and stops
    // the host kernel from checking a PPCID as a checksum.
    auto* udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr*, p.l4_offset);
    udp->dgram_cksum = 0;
    p.udp_checksum = 0;
    ++counters_.checksum_restored;
  }
  // Congestion control happens on arrival, before the reorder engine: a hold must not delay
  // the signal (nor a CNP, which has no place in the PSN order).
  if ((p.tos & 0x03) == 0x03 && p.bth_opcode != opcode::kCnp) {
    ++counters_.ce_received;
    if (config_.cc.dcqcn_mode()) notify_congestion(p, now_ns);
  }
  if (p.bth_opcode == opcode::kCnp && rc_) {
    ++counters_.cnps_received;
    ++counters_.delivered;
    rc_->receive(m, p, now_ns, rc_out_);  // the QP's reaction point takes it (or counts it)
    return;
  }
  if (reorder_) {
    reorder_->receive(m, p, now_ns, released_);
  } else {
    released_.push_back(m);
  }
}

void NicNode::notify_congestion(const ParsedPacket& p, uint64_t now_ns) {
  // The CNP goes to the QP that sent the marked packet: the peer of the local QP it was for.
  // Only the RC engine knows its QPs' peers (a NIC in front of a host would need the host's QP
  // contexts).
  if (!rc_) {
    ++counters_.cnp_no_qp;
    return;
  }
  const uint32_t first = rc_->config().first_local_qp;
  const uint32_t index = p.dest_qp - first;
  if (p.dest_qp < first || index >= rc_->qps()) {
    ++counters_.cnp_no_qp;
    return;
  }
  uint64_t& last = last_cnp_ns_[index];
  if (last != kNoCnp && now_ns - last < config_.cc.cnp_interval_ns()) {
    ++counters_.cnps_suppressed;
    return;
  }
  const RcQpAddress a = rc_->config().address(index);
  FrameSpec f = a.frame(cnp_ip_id_++);
  f.ip.tos = static_cast<uint8_t>(config_.cc.cnp_dscp << 2);  // Not-ECT: a CNP is never marked
  // REPS: the marked packet's entropy back to its sender, which will not reuse it.
  if (rc_->config().echo_entropy) f.udp.src_port = p.src_port;
  RoceSpec r;
  r.opcode = opcode::kCnp;
  r.dest_qp = a.peer_qp;
  r.psn = 0;
  r.becn = true;  // RoCEv2 Annex A17: a CNP has BECN set
  rte_mbuf* cnp = build_roce_mbuf(pool_, f, r);
  if (cnp == nullptr) {
    ++counters_.cnp_pool_empty;
    return;
  }
  last = now_ns;
  ++counters_.cnps_sent;
  rc_out_.push_back(cnp);  // out through the TX path with the RC engine's packets
}

void NicNode::deliver(rte_mbuf* m, uint64_t now_ns) {
  if (host_side_.filter_nonzero_udp_checksum) {
    ParsedPacket p;
    if (parser_.parse(m, p) == ParseStatus::kOk && p.kind == PacketKind::kRoce &&
        p.udp_checksum != 0) {
      ++drops_.host_checksum_filter;
      rte_pktmbuf_free(m);
      return;
    }
  }
  // Delivered once the host side has taken it, not before: a refused or unparsable packet is a
  // drop, counted under its cause only.
  if (config_.host) {
    // One class: what the reorder engine put in order stays in order.
    if (egress_[host_port()]->enqueue(m, 0, EgressPort::kNoIngressPort, 0, now_ns) !=
        EgressEnqueueResult::kQueued) {
      ++drops_.egress_refused;  // EgressPort freed it and counted the cause
      return;
    }
    ++counters_.delivered;
    return;
  }
  if (!rc_) {
    // Neither a host port nor an RC engine (the constructors always make one of them).
    ++drops_.no_host;
    rte_pktmbuf_free(m);
    return;
  }
  ParsedPacket p;
  const ParseStatus s = parser_.parse(m, p);
  if (s != ParseStatus::kOk) {
    ++drops_.parse[static_cast<size_t>(s)];  // the RC engine takes only IPv4
    rte_pktmbuf_free(m);
    return;
  }
  ++counters_.delivered;
  if (!int_carried_.empty()) {
    if (const auto it = int_carried_.find(m); it != int_carried_.end()) {
      const IntCarried c = it->second;
      int_carried_.erase(it);
      if (c.echoed) {
        // An ACK with its data packet's records: to the QP's rate control (HPCC).
        std::array<IntHop, kIntCarriedHops> hops{};
        for (size_t i = 0; i < c.n; ++i) {
          hops[i].line_rate_gbps = c.hop[i].line_rate_mbps / 1000.0;
          hops[i].ts_ns = c.hop[i].egress_ts_ns;
          hops[i].tx_bytes = c.hop[i].tx_bytes;
          hops[i].qlen_bytes = c.hop[i].qlen_bytes;
        }
        ++counters_.int_acks_received;
        rc_->receive(m, p, now_ns, rc_out_, std::span<const IntHop>(hops.data(), c.n));
        return;
      }
      const size_t first = rc_out_.size();
      rc_->receive(m, p, now_ns, rc_out_);
      echo_int(first, c);
      return;
    }
  }
  rc_->receive(m, p, now_ns, rc_out_);  // counts and frees what it does not take
}

namespace {
// Room left in front of an INT frame for a leaf overlay it may get on its way (ConWeave's 58
// bytes, the larger of the two; in fabric_emu the leaf prepends to this same mbuf): without it a
// leaf would drop the frame (overlay_no_headroom) or the hops behind it could push no record.
constexpr size_t kLeafOverlayRoom = kConweaveOverlayBytes;
}  // namespace

void NicNode::insert_int(rte_mbuf* m) {
  // Room for the header, every hop's record and a leaf overlay: 16 + 5 x 24 + 58 = 194 bytes,
  // more than the default headroom (128).
  if (!int_make_headroom(
          m, kIntHeaderBytes + size_t{kHpccIntMaxHops} * kIntHopBytes + kLeafOverlayRoom) ||
      !int_insert(m, kHpccIntMaxHops)) {
    ++counters_.int_no_room;
    return;
  }
  ++counters_.int_inserted;
}

bool NicNode::strip_int(rte_mbuf* m, ParsedPacket& p) {
  const uint16_t port = rte_be_to_cpu_16(
      rte_pktmbuf_mtod_offset(m, const rte_udp_hdr*, p.l4_offset)->dst_port);
  IntStack st;
  if (!int_strip(m, port, &st)) {
    ++drops_.int_malformed;
    rte_pktmbuf_free(m);
    return false;
  }
  ++counters_.int_stripped;
  const ParseStatus s = parser_.parse(m, p);  // checks the ICRC, when the parser does
  if (s != ParseStatus::kOk || p.kind != PacketKind::kRoce) {
    if (s != ParseStatus::kOk) {
      ++drops_.parse[static_cast<size_t>(s)];
    } else {
      ++drops_.int_malformed;
    }
    rte_pktmbuf_free(m);
    return false;
  }
  if (rc_ && st.nhop > 0) {
    // Records past kIntCarriedHops (none from this project's sources, which allow 5) are not
    // kept: HPCC reads the path's first ones.
    IntCarried& c = int_carried_[m];
    c.echoed = port == kIntEchoUdpPort;
    c.n = static_cast<uint8_t>(std::min<size_t>(st.nhop, kIntCarriedHops));
    std::copy_n(st.hop.begin(), c.n, c.hop.begin());
  }
  return true;
}

void NicNode::echo_int(size_t first, const IntCarried& c) {
  for (size_t i = first; i < rc_out_.size(); ++i) {
    rte_mbuf* a = rc_out_[i];
    ParsedPacket q;
    if (parser_.parse(a, q) != ParseStatus::kOk || q.kind != PacketKind::kRoce ||
        q.bth_opcode != opcode::kRcAck || q.int_offset != 0) {
      continue;
    }
    if (!int_make_headroom(a, kIntHeaderBytes + size_t{c.n} * kIntHopBytes + kLeafOverlayRoom) ||
        !int_insert(a, c.n, kIntEchoUdpPort)) {
      ++counters_.int_no_room;
      continue;
    }
    for (size_t h = 0; h < c.n; ++h) int_push_hop(a, c.hop[h], kIntEchoUdpPort);
    ++counters_.int_echoed;
  }
}

void NicNode::deliver_all(uint64_t now_ns) {
  // deliver() may make the RC engine answer (ACKs), which goes out through the TX path.
  for (size_t i = 0; i < released_.size(); ++i) deliver(released_[i], now_ns);
  released_.clear();
  if (rc_ && !rc_out_.empty()) send_to_uplinks(now_ns);
}

void NicNode::send_to_uplinks(uint64_t now_ns) {
  refresh_loads(now_ns);
  counters_.rc_packets_sent += rc_out_.size();
  for (size_t i = 0; i < rc_out_.size(); ++i) from_host(rc_out_[i], now_ns);
  rc_out_.clear();
}

void NicNode::poll(uint64_t now_ns) {
  if (probe_ && probe_sending_ && now_ns >= probe_->next_send_ns()) send_probe(now_ns);
  if (reorder_) {
    reorder_->poll(now_ns, released_);
    deliver_all(now_ns);
  }
  if (rc_) {
    // Only what the uplinks can start soon: the rest waits in the QPs, as on a real NIC.
    if (per_flow_room(now_ns)) {
      size_t budget = 0;
      for (const uint32_t f : room_frames_) budget += f;
      if (budget > 0) rc_->poll(now_ns, rc_out_, budget, &room_);
    } else {
      const size_t budget = tx_budget(now_ns);
      if (budget > 0) rc_->poll(now_ns, rc_out_, budget);
    }
    if (!rc_out_.empty()) send_to_uplinks(now_ns);
  }
}

bool NicNode::per_flow_room(uint64_t now_ns) const {
  if (!rc_ || uplinks_ < 2 || spray_.mode() != SprayMode::kFlow) return false;
  uint32_t up = 0;
  for (size_t u = 0; u < uplinks_; ++u) up |= uint32_t{egress_[u]->link_up()} << u;
  if (qp_uplink_.size() != rc_->qps() || up != qp_uplink_mask_) {
    // The uplink from_host will give each QP's packets: the same key and hash as it builds
    // from the packet (make_flow_key with the DestQP), over the uplinks that are up.
    qp_uplink_.assign(rc_->qps(), RcTxRoom::kAnyUplink);
    for (uint32_t q = 0; q < rc_->qps(); ++q) {
      const RcQpAddress a = rc_->config().address(q);
      FlowKey k;
      k.src_ip = a.local_ip;
      k.dst_ip = a.peer_ip;
      k.src_port = a.udp_src_port;
      k.dst_port = kRoceV2UdpPort;
      k.proto_and_qp = (uint32_t{17} << 24) | (a.peer_qp & 0xFFFFFF);
      const uint16_t u = spray_.flow_uplink(hasher_.hash(k), up);
      qp_uplink_[q] = u == SprayEngine::kNoUplink ? RcTxRoom::kAnyUplink : u;
    }
    qp_uplink_mask_ = up;
    room_frames_.assign(uplinks_, 0);
    room_ = RcTxRoom{qp_uplink_, room_frames_};
  }
  // What each uplink can start soon: a paused (or down) one takes nothing, its QPs wait.
  const uint64_t low_water = kTxLowWaterFrames * tx_frame_bytes_;
  for (size_t u = 0; u < uplinks_; ++u) {
    const EgressPort& e = *egress_[u];
    const uint64_t q = e.queued_bytes();
    room_frames_[u] = !e.link_up() || e.any_paused(now_ns) || q >= low_water
                          ? 0
                          : static_cast<uint32_t>((low_water - q) / tx_frame_bytes_) + 1;
  }
  return true;
}

size_t NicNode::tx_budget(uint64_t now_ns) const {
  // The least queued eligible uplink is where adaptive spraying (or the flow hash) can put more.
  // rr and weighted give every uplink its turn whatever its queue, so they may take more only
  // while the fullest uplink they will give packets to has room: otherwise an uplink slower
  // than its share (its rate cut by other traffic, or a weight from stale link state) would
  // queue without bound while the faster one drained, and the NIC would drop its own packets.
  // So a share that does not fit an uplink's capacity costs throughput, as on a NIC whose
  // per-port TX ring backpressures the scheduler.
  const SprayMode mode = spray_.mode();
  const bool by_turn =
      uplinks_ > 1 && (mode == SprayMode::kRoundRobin || mode == SprayMode::kWeighted);
  const SprayWeights& weights = spray_.weights();
  bool any_weight = false;
  if (mode == SprayMode::kWeighted) {
    for (size_t u = 0; u < uplinks_ && u < weights.weights.size(); ++u) {
      const EgressPort& e = *egress_[u];
      any_weight = any_weight || (weights.weights[u] > 0 && e.link_up() && !e.any_paused(now_ns));
    }
  }
  uint64_t least = UINT64_MAX, fullest = 0;
  bool any = false;
  for (size_t u = 0; u < uplinks_; ++u) {
    const EgressPort& e = *egress_[u];
    if (!e.link_up() || e.any_paused(now_ns)) continue;
    any = true;
    least = std::min(least, e.queued_bytes());
    const bool picked = !any_weight || (u < weights.weights.size() && weights.weights[u] > 0);
    if (picked) fullest = std::max(fullest, e.queued_bytes());
  }
  if (by_turn && any) least = fullest;
  const uint64_t low_water = kTxLowWaterFrames * tx_frame_bytes_;
  if (least == UINT64_MAX || least >= low_water) return 0;
  return static_cast<size_t>((low_water - least) / tx_frame_bytes_) + 1;
}

uint16_t NicNode::transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max) {
  if (port >= egress_.size()) return 0;
  auto& pc = ports_[port];
  const uint16_t n = egress_[port]->dequeue(now_ns, out, max, &pc.tx_bytes);
  pc.tx_packets += n;
  return n;
}

uint64_t NicNode::next_event_ns(uint64_t now_ns) const {
  uint64_t next = EgressPort::kNever;
  for (const auto& e : egress_) next = std::min(next, e->next_event_ns());
  if (reorder_) next = std::min(next, reorder_->next_event_ns());
  if (probe_ && probe_sending_) next = std::min(next, std::max(probe_->next_send_ns(), now_ns));
  // A gated engine is woken by its uplinks draining (their events above), not by itself.
  if (rc_ && per_flow_room(now_ns)) {
    bool any = false;
    for (const uint32_t f : room_frames_) any = any || f > 0;
    if (any) next = std::min(next, std::max(rc_->next_event_ns(&room_), now_ns));
  } else if (rc_ && tx_budget(now_ns) > 0) {
    next = std::min(next, std::max(rc_->next_event_ns(), now_ns));
  }
  return next;
}

bool NicNode::idle() const {
  for (const auto& e : egress_) {
    if (e->queued_bytes() != 0 || e->in_flight() != 0) return false;
  }
  return !reorder_ || reorder_->buffered() == 0;
}

void NicNode::flush(uint64_t now_ns) {
  if (!reorder_) return;
  reorder_->flush(released_);
  deliver_all(now_ns);
}

void NicNode::free_all() {
  if (reorder_) {
    std::vector<rte_mbuf*> held;
    reorder_->flush(held);
    freed_at_shutdown_ += held.size();
    for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  }
  // Empty between calls; a throw mid-call could leave some.
  freed_at_shutdown_ += released_.size() + rc_out_.size();
  for (rte_mbuf* m : released_) rte_pktmbuf_free(m);
  released_.clear();
  for (rte_mbuf* m : rc_out_) rte_pktmbuf_free(m);
  rc_out_.clear();
  for (auto& e : egress_) e->free_all();
}

MemoryUsage NicNode::memory_usage() const {
  MemoryUsage m;
  for (const auto& port : egress_) m.queues += egress_port_bytes(*port);
  m.queues += capacity_bytes(egress_);
  // The RC engine and what the node keeps for it (per-QP CNP times and uplinks, its output
  // scratch); without one, that scratch is "other".
  if (rc_) {
    m.rc = rc_->memory_bytes() + capacity_bytes(last_cnp_ns_) + capacity_bytes(qp_uplink_) +
           capacity_bytes(room_frames_) + capacity_bytes(rc_out_);
  }
  if (reorder_) m.reorder = reorder_->memory_bytes();
  m.reorder += capacity_bytes(released_);
  // The object (spray engine, counters, path arrivals inside), the spray engine's pages and
  // tables, the heat map, the anomaly detector, the probe (its object only: its payload and
  // sample vectors are not counted) and the small per-port vectors.
  m.other = sizeof(*this) + spray_.heap_bytes() + capacity_bytes(macs_) + capacity_bytes(loads_) +
            capacity_bytes(ports_) + heat_.memory_bytes() +
            capacity_bytes(anomaly_flags_) + capacity_bytes(config_.uplinks);
  if (anomaly_) m.other += anomaly_->memory_bytes();
  if (probe_) m.other += sizeof(LatencyProbe);
  if (!rc_) m.other += capacity_bytes(rc_out_) + capacity_bytes(room_frames_);
  return m;
}

NicAccounting NicNode::accounting() const {
  NicAccounting a;
  a.received = drops_.bad_port;
  for (const auto& p : ports_) a.received += p.rx_packets;
  a.generated = counters_.rc_packets_sent + counters_.probes_sent + counters_.probe_egress_refused;
  a.consumed = counters_.pfc_received + counters_.probes_received;
  if (rc_) a.consumed += rc_->counters().received;
  a.pipeline_dropped = drops_.total() - drops_.egress_refused;
  if (reorder_) {
    const ReorderCounters& r = reorder_->counters();
    a.reorder_dropped = r.duplicates_of_held;
    a.reorder_held = reorder_->buffered();
    a.reorder_in = r.in;
    a.reorder_released = r.released();
  }
  a.freed_at_shutdown = freed_at_shutdown_;
  for (const auto& e : egress_) a.egress += e->accounting();
  return a;
}

void NicNode::set_link_up(uint16_t uplink, bool up, uint64_t now_ns) {
  if (uplink >= uplinks_) throw std::out_of_range("nic: no uplink " + std::to_string(uplink));
  egress_[uplink]->set_link_up(up, now_ns);
  refresh_loads(now_ns);
}

void NicNode::set_link_rate_gbps(uint16_t uplink, double rate_gbps, uint64_t now_ns) {
  if (uplink >= uplinks_) throw std::out_of_range("nic: no uplink " + std::to_string(uplink));
  egress_[uplink]->set_link_rate_gbps(rate_gbps, now_ns);
  refresh_loads(now_ns);
}

}  // namespace spraynet::nic_emu
