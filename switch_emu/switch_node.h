// A switch: its pipeline plus its ports, with one entry point. A burst arrives on port p at
// now_ns; the node parses, classifies (TCAM), routes (LPM), picks a path (the group's mode),
// rewrites (TTL, L2 when a next hop MAC is configured), accounts for PFC and enqueues on the
// egress port's traffic class; egress (shaper, delay line, PFC pauses) says what may leave each
// port by when. The same node runs under switch_emu's poll-mode lcores (TSC time) and under
// fabric_emu's event clock (virtual time).
//
// Ports are node-local indices 0..N-1 in config order; the driver maps them to DPDK port ids.
//
// Lanes (one per lcore). A node starts with one lane, which owns every port: fabric_emu and a
// one-lcore switch_emu run it so, single-threaded. add_lane(ports) makes another lane that owns
// those ports' egress (before any lcore runs); each lane is then called by one lcore only, and
// the lanes share no written state: each has its own burst scratch, TCAM and route caches, path
// selectors (replicas reading lane 0's bucket tables and modes, with their own flowlets, DRILL
// state and counters) and counters, summed by the accessors below. A packet leaving by a port
// another lane owns is handed to that lane through an rte_ring (single producer, single
// consumer); the owner enqueues it on egress when it next calls receive() or poll(). Path
// selection reads other lanes' queue depths from a per-port board the owners write.
// With PFC on, the shared lossless buffer and the PFC state are switch-wide (one MMU), so the
// lanes of a PFC switch must not run at once: lanes_run_in_parallel() is false and the driver
// serialises their calls (program/node_lcore.h); they then touch every port directly.
// A wire port with a tx queue per lane (PortSettings::tx_queues >= lanes, no PFC) is not handed
// over: every lane has its own EgressPort for it and sends on its own tx queue (the lane's
// index), as a NIC's queues are each one core's; its depth for path selection is the sum of the
// lanes' queues, each lane writing its own share to the board.
// Whatever is not a lane's call (control, reports, summed counters) needs every lane stopped.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/egress/egress_port.h"
#include "dataplane/egress/pfc_state.h"
#include "dataplane/memory_usage.h"
#include "dataplane/forwarding/conga_tables.h"
#include "dataplane/forwarding/conweave_rx.h"
#include "dataplane/forwarding/conweave_tx.h"
#include "dataplane/forwarding/discounting_rate_estimator.h"
#include "dataplane/forwarding/flow_hasher.h"
#include "dataplane/forwarding/path_selector.h"
#include "dataplane/forwarding/route_cache.h"
#include "dataplane/forwarding/route_table.h"
#include "dataplane/forwarding/tcam.h"
#include "dataplane/forwarding/traffic_class_map.h"
#include "dataplane/wire/counter_list.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/ppcid.h"

namespace spdlog {
class logger;
}

namespace spraynet::switch_emu {

// The switch's drop causes besides parse statuses, once: X(name). The struct, its total, the
// JSON (drops_json) and telemetry (/spraynet/drops) are all made from this list.
#define SPRAYNET_SWITCH_DROP_CAUSES(X)                                                         \
  X(mac_control_not_pfc) /* 802.3x PAUSE and other MAC control frames: consumed */             \
  X(pfc_malformed)       /* EtherType 0x8808, opcode PFC, but not a valid frame */             \
  X(tcam_drop)           /* a TCAM rule said drop */                                           \
  X(no_route)            /* no route for the destination */                                    \
  X(ttl_expired)         /* TTL 0 or 1 on arrival: dropped before path selection */            \
  X(no_eligible_port)    /* every member of the group down, paused or dropping */              \
  /* Received on a port whose neighbour is storming, with the stormed priority: PFC watchdog   \
     drop mode drops the ingress priority group too (PfcState::watchdog_ingress_drop). */      \
  X(pfc_watchdog_ingress)                                                                      \
  X(egress_refused) /* EgressPort refused it (its counters say why) */                         \
  /* a mirror copy could not be allocated (the original went on): a copy lost, not a packet */ \
  X(mirror_no_mbuf)                                                                            \
  X(bad_port)            /* receive() on a port the node does not have */                      \
  X(overlay_no_headroom) /* a CONGA or ConWeave leaf could not prepend its overlay (headroom) */ \
  X(lane_handoff_full)   /* the ring to the egress port's lane was full (holds the pool) */    \
  X(lane_handoff_unsent) /* handed to a lane that stopped before taking it: freed at the end */ \
  X(reorder_held_at_exit) /* in a ConWeave reorder queue when the switch stopped: freed */

// Every packet the node takes in is forwarded, or counted here under exactly one cause (and
// every mirror copy it could not make, under mirror_no_mbuf). Summable: per-lcore copies add up.
struct SwitchDropCounters {
  std::array<uint64_t, kParseStatusCount> parse{};  // by ParseStatus ([kOk] stays 0)
  SPRAYNET_SWITCH_DROP_CAUSES(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_DROP_COUNTER_METHODS(SwitchDropCounters, SPRAYNET_SWITCH_DROP_CAUSES)
};
static_assert(sizeof(SwitchDropCounters) ==
                  sizeof(uint64_t) *
                      (kParseStatusCount + SPRAYNET_COUNTER_COUNT(SPRAYNET_SWITCH_DROP_CAUSES)),
              "every switch drop counter is in SPRAYNET_SWITCH_DROP_CAUSES");

#define SPRAYNET_SWITCH_PORT_COUNTERS(X)                                    \
  X(rx_packets)                                                             \
  X(rx_bytes)                                                               \
  X(tx_packets) /* handed to the driver by transmit() */                    \
  X(tx_bytes)                                                               \
  X(forwarded_packets) /* enqueued on this port's egress by the pipeline */ \
  X(pfc_frames_received)

struct SwitchPortCounters {
  SPRAYNET_SWITCH_PORT_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(SwitchPortCounters, SPRAYNET_SWITCH_PORT_COUNTERS)
};
static_assert(sizeof(SwitchPortCounters) == sizeof(uint64_t) * SwitchPortCounters::kCounters);

#define SPRAYNET_SWITCH_COUNTERS(X)                                                      \
  X(conweave_held)     /* ConWeave: taken into a reorder queue (accounting: held) */     \
  X(conweave_released) /* ... and let out of it (forwarded or dropped from there) */      \
  X(conweave_control_sent) /* RTT replies, CLEARs, NOTIFYs made (accounting: generated) */ \
  X(conweave_control_consumed) /* those that arrived for this leaf (consumed) */          \
  X(conweave_control_no_mbuf) /* a control message not made: no mbuf */                   \
  X(pfc_received)                                                                        \
  X(pfc_frames_sent)                                                                     \
  X(mirrored)                                                                            \
  X(pinned)                                                                              \
  X(sprayed)                                                                             \
  X(spray_without_ppcid) /* spray rule hit a packet with UDP checksum 0: sent by ECMP */ \
  X(quarantined)         /* quarantine rule: sent to its honeypot port */                \
  X(quarantine_kept)     /* quarantine rule, PSN % 100 < keep_percent: normal path */    \
  X(lane_handoffs)       /* handed to the lane owning the egress port */                 \
  X(lane_handoffs_taken) /* taken from another lane and enqueued on egress */

// CONGA's switch-wide counts (the node's tables add theirs: CongaTableCounters).
#define SPRAYNET_CONGA_COUNTERS(X)                                                           \
  X(encapsulated) /* leaf: packets given the overlay towards another leaf */                 \
  X(decapsulated) /* leaf: overlay packets for this leaf's address, overlay taken off */     \
  X(transit)      /* overlay packets sent on with their overlay (a spine, or another leaf's) */ \
  X(ce_raised)    /* overlay packets whose CE this switch raised */                          \
  X(feedback_carried) /* packets sent with a From-Leaf entry piggybacked */

struct CongaCounters {
  SPRAYNET_CONGA_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(CongaCounters, SPRAYNET_CONGA_COUNTERS)
};

struct SwitchCounters {
  SPRAYNET_SWITCH_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(SwitchCounters, SPRAYNET_SWITCH_COUNTERS)
};
static_assert(sizeof(SwitchCounters) == sizeof(uint64_t) * SwitchCounters::kCounters);

// The node's accounting identity at any moment (issue: "received = forwarded + dropped +
// buffered"): every frame the node took in or made itself is consumed (a PFC frame honoured),
// dropped by the pipeline (a cause of SwitchDropCounters other than egress_refused, which the
// egress side counts, and mirror_no_mbuf, a copy never made), or was offered to an egress port,
// where EgressAccounting says where it is now. Each term is counted where it happens.
struct SwitchAccounting {
  uint64_t received = 0;         // on a port, or on one the node does not have (bad_port)
  uint64_t generated = 0;        // PFC frames sent and mirror copies made
  uint64_t consumed = 0;         // PFC frames received and honoured
  uint64_t pipeline_dropped = 0;
  uint64_t in_lane_handoff = 0;  // handed from one lane to another, not yet taken
  uint64_t held = 0;             // in ConWeave's reorder queues
  EgressAccounting egress;  // summed over the ports; egress.offered: what the node offered them
  bool node_balanced() const {
    return received + generated ==
           consumed + pipeline_dropped + in_lane_handoff + held + egress.offered;
  }
  bool balanced() const { return node_balanced() && egress.balanced(); }
  // The terms from the counters that count them: SwitchNode::accounting() and a published copy
  // of its counters (switch_counter_snapshot.h) both use this.
  static SwitchAccounting of(const SwitchDropCounters& drops, const SwitchCounters& counters,
                             std::span<const SwitchPortCounters> ports,
                             const EgressAccounting& egress);
};

class SwitchNode {
 public:
  static constexpr uint16_t kBurst = 32;  // receive() works through bursts this size at most

  // Ports' MACs by node port index (the source MAC of routed packets and of PFC frames); empty:
  // 02:00:00:00:00:<index>. Throws control::ConfigError-like std::invalid_argument for a
  // config the stages refuse.
  SwitchNode(const control::SwitchConfig& config, rte_mempool* pool,
             std::vector<MacAddress> port_macs = {},
             std::shared_ptr<spdlog::logger> logger = nullptr);
  ~SwitchNode();
  SwitchNode(const SwitchNode&) = delete;
  SwitchNode& operator=(const SwitchNode&) = delete;

  size_t port_count() const { return egress_.size(); }

  // Another lane, owning the egress of `ports` (taken from the lanes that owned them); returns
  // its index. Call before any lcore runs. Throws std::invalid_argument for an unknown port or
  // std::runtime_error when a handoff ring cannot be made.
  unsigned add_lane(std::span<const uint16_t> ports);
  size_t lane_count() const { return lanes_.size(); }
  unsigned lane_of_port(uint16_t port) const { return owner_.at(port); }
  // Whether the lanes may run at once: several lanes and no PFC (see the header). False with one
  // lane, or with lanes that must take turns (their calls are then serialised).
  bool lanes_run_in_parallel() const { return parallel_; }
  // Whether `port` has an egress and a tx queue per lane (see the header): every lane transmits
  // it, on tx queue `lane`, and nothing bound for it is handed over.
  bool port_per_lane(uint16_t port) const { return queues_.at(port).size() > 1; }
  // The (node port, tx queue) pairs `lane` transmits on: the ports it owns (queue 0) that have
  // one egress, and every port with one per lane (queue `lane`).
  std::vector<std::pair<uint16_t, uint16_t>> lane_tx_queues(unsigned lane) const;

  // Takes ownership of every mbuf: each is enqueued on an egress port (or handed to the lane
  // that owns it) or freed and counted. Lane 0 without a lane argument.
  void receive(uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns) {
    receive(0, port, pkts, n, now_ns);
  }
  void receive(unsigned lane, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  // Egress timers: the PFC watchdog and the PFC frames due; and the frames other lanes handed
  // to this lane. Call every poll, or at next_event_ns() under an event clock.
  void poll(uint64_t now_ns) { poll(0, now_ns); }
  void poll(unsigned lane, uint64_t now_ns);
  // Up to max frames that have crossed `port`'s emulated link by now_ns; the caller owns them
  // (sends them with tx_burst, or delivers them to the next node). Called by the port's lane.
  uint16_t transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max);
  // The same for `lane`'s own queue of a port with one per lane (port_per_lane); for any other
  // port, transmit(port, ...) (the lane must own it).
  uint16_t transmit(unsigned lane, uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max);
  // A wire port (EgressPort::wire): the last n frames transmit() returned, which the PMD did not
  // take (pkts: those frames, in order); they go first at the next transmit(). The port's lane.
  void unsend(uint16_t port, rte_mbuf* const* pkts, uint16_t n) { unsend(0, port, pkts, n); }
  void unsend(unsigned lane, uint16_t port, rte_mbuf* const* pkts, uint16_t n);
  // A wire port: the bytes waiting in its PMD's tx descriptors (EgressPort::set_tx_backlog), part
  // of the depth path selection reads. The port's lane.
  void set_tx_backlog(uint16_t port, uint64_t bytes) { set_tx_backlog(0, port, bytes); }
  void set_tx_backlog(unsigned lane, uint16_t port, uint64_t bytes);
  // Up to max frames already started on `port`'s link, whatever their arrival time, with those
  // times (EgressPort::take_in_flight): for a driver whose far end runs apart by at least the
  // cable's delay. Counted as transmit counts. One lane only.
  uint16_t take_in_flight(uint16_t port, rte_mbuf** out, uint64_t* arrival_ns, uint16_t max);
  // Earliest time anything is due on any port; EgressPort::kNever when idle. One lane only.
  uint64_t next_event_ns(uint64_t now_ns) const;
  // egress(port).next_event_ns(), from one array (cheap to ask for every port). One lane only.
  uint64_t port_next_event_ns(uint16_t port) const { return port_next_.at(port); }
  // Appends the ports with something due by now_ns (port_next_event_ns <= now_ns) to out, in
  // port order: what a driver transmits on, without asking every port. One lane only.
  void append_due_ports(uint64_t now_ns, std::vector<uint16_t>& out) const {
    port_next_.append_due(now_ns, out);
  }
  // True when nothing is queued or in flight on any port, and nothing is between lanes.
  bool idle() const;
  // The same for what `lane` owns: its ports, and the frames handed to it.
  bool idle(unsigned lane) const;
  // Frees every mbuf still held (shutdown).
  void free_all();

  // Run-time control (validated by the caller; every lane stopped).
  void set_link_up(uint16_t port, bool up, uint64_t now_ns);
  // The emulated link's rate, bit error rate and frame loss rate; each throws
  // std::invalid_argument (with the allowed range) for a value the link emulator refuses, and
  // std::out_of_range for an unknown port.
  void set_link_rate_gbps(uint16_t port, double rate_gbps, uint64_t now_ns);
  void set_link_ber(uint16_t port, double ber, uint64_t now_ns);
  void set_link_loss(uint16_t port, double loss_rate, uint64_t now_ns);
  // Lane 0's selector: the primary, which the control side publishes to and which every lane's
  // replica follows (mode, bucket table). Its counters are lane 0's: group_counters() and
  // group_member_packets() sum every lane's.
  PathSelector& group(size_t i) { return *lanes_[0]->groups[i]; }
  const PathSelector& group(size_t i) const { return *lanes_[0]->groups[i]; }
  size_t group_count() const { return lanes_[0]->groups.size(); }
  PathSelectorCounters group_counters(size_t i) const;
  // The group's DLB flowlet tables (one per lane), summed.
  FlowletCounters group_flowlet_counters(size_t i) const;
  std::vector<uint64_t> group_member_packets(size_t i) const;
  // The same into `out`, in place (a publication keeps the vector's storage).
  void group_member_packets(size_t i, std::vector<uint64_t>& out) const;
  Tcam& tcam() { return *tcam_; }
  // CONGA (config conga: block): whether it is on, the node's counters, its leaf tables (null on
  // a spine or without CONGA) and a port's DRE metric now.
  bool conga_enabled() const { return conga_ != nullptr; }
  CongaCounters conga_counters() const { return conga_ ? conga_->counters : CongaCounters{}; }
  const CongaTables* conga_tables() const { return conga_ ? conga_->tables.get() : nullptr; }
  uint8_t conga_port_metric(uint16_t port, uint64_t now_ns) const;
  // ConWeave (config conweave: block): its two stages (null without it).
  const ConweaveTx* conweave_tx() const { return conweave_ ? &conweave_->tx : nullptr; }
  const ConweaveRx* conweave_rx() const { return conweave_ ? &conweave_->rx : nullptr; }

  // Summed over the lanes.
  SwitchDropCounters drops() const;
  SwitchCounters counters() const;
  SwitchPortCounters port_counters(uint16_t port) const;
  // The port's egress (its first, for a port with one per lane: it carries the link's state).
  const EgressPort& egress(uint16_t port) const { return *egress_[port]; }
  // The egress `lane` enqueues to and transmits for `port`: its own on a port with one per lane.
  const EgressPort& egress(unsigned lane, uint16_t port) const {
    const auto& q = queues_.at(port);
    return q.size() > 1 ? *q.at(lane) : *egress_[port];
  }
  // Every egress of `port`, by tx queue (one, or one per lane).
  std::span<EgressPort* const> egress_queues(uint16_t port) const { return queues_.at(port); }
  // The port's egress summed over its queues.
  EgressAccounting port_egress_accounting(uint16_t port) const;
  EgressClassCounters port_class_counters(uint16_t port, uint8_t tc, uint64_t now_ns) const;
  uint64_t port_queued_bytes(uint16_t port) const;
  uint64_t port_queued_bytes(uint16_t port, uint8_t tc) const;
  const PfcState* pfc() const { return pfc_.get(); }
  const control::SwitchConfig& config() const { return config_; }
  // One lane's own counters (what it alone writes), for per-lane publication.
  const SwitchDropCounters& lane_drops(unsigned lane) const { return lanes_.at(lane)->drops; }
  const SwitchCounters& lane_counters(unsigned lane) const { return lanes_.at(lane)->counters; }
  const SwitchPortCounters& lane_port_counters(unsigned lane, uint16_t port) const {
    return lanes_.at(lane)->ports.at(port);
  }
  const PathSelector& lane_group(unsigned lane, size_t g) const {
    return *lanes_.at(lane)->groups.at(g);
  }
  // The drops of frames that arrived on `port`, by cause, summed over the lanes: every cause
  // but bad_port (no port of the node); mirror_no_mbuf on the port of the frame whose copy could
  // not be made. A mirror copy made and a frame the switch made have no ingress port: their
  // drops are in drops() only. Counted only on a drop (one more increment).
  SwitchDropCounters port_drops(uint16_t port) const;
  const SwitchDropCounters& lane_port_drops(unsigned lane, uint16_t port) const {
    return lanes_.at(lane)->port_drops.at(port);
  }
  // Every drop cause summed (drops().total()).
  uint64_t total_drops() const { return drops().total(); }
  // Where every frame is, now; balanced() holds at any moment between calls.
  SwitchAccounting accounting() const;
  // Where the node's memory goes (dataplane/memory_usage.h), from its data structures as they
  // stand; mbufs are the pool's, not counted. Every lane stopped.
  MemoryUsage memory_usage() const;

 private:
  // receive()'s per-burst working set (every element written before it is read).
  struct BurstScratch {
    std::array<ParsedPacket, kBurst> parsed;
    std::array<const ParsedPacket*, kBurst> ip;
    std::array<rte_mbuf*, kBurst> mbufs;
    std::array<TcamMatch, kBurst> match;
    std::array<uint32_t, kBurst> dst;
    std::array<uint32_t, kBurst> group;
    std::array<uint32_t, kBurst> hash;
  };
  // What one lane (one lcore) writes; see the header.
  struct Lane {
    unsigned index = 0;
    BurstScratch scratch;
    TcamDecisionCache tcam_cache;
    RouteCache route_cache;
    std::vector<std::unique_ptr<PathSelector>> groups;
    // What path selection reads, one view per class kind: views[0] for the lossy classes (link
    // up only), views[v] for lossless class lossless_tc_[v] (PFC's per-class eligibility: a
    // storm or, with fast feedback, a pause on one class leaves the port to the others). Queued
    // bytes are the port's, the same in every view.
    std::vector<std::vector<PathLoad>> views;
    std::vector<PathLoad> fallback_view;  // fast feedback with every member paused (scratch)
    // Ports not eligible in each view, kept with every write of a view's `eligible`: 0 lets path
    // selection skip reading the members' loads in modes that need no queue depth.
    std::vector<uint32_t> ineligible;
    bool loads_stale = true;
    uint64_t eligibility_seen = 0;
    // By port with an egress per lane: the other lanes' queued bytes as last read (per burst).
    std::vector<uint64_t> other_lanes_bytes;
    std::vector<SwitchPortCounters> ports;
    SwitchDropCounters drops;
    std::vector<SwitchDropCounters> port_drops;  // by ingress port: a part of `drops`
    SwitchCounters counters;
    std::vector<rte_ring*> to;  // by destination lane (null: none, or this lane)
  };
  // One port's queued bytes, written by its lane, read by the others (parallel lanes only).
  struct alignas(64) PortBoardEntry {
    std::atomic<uint64_t> queued_bytes{0};
    // The latest time the owner has run the port to (its lane's alone): a frame handed over
    // is enqueued at the time its sender forwarded it, never before this.
    uint64_t owner_time_ns = 0;
  };

  // A drop of a frame that arrived on in_port (a port of the node): switch-wide and by port.
  static void count_drop(Lane& lane, uint16_t in_port, uint64_t SwitchDropCounters::*cause) {
    ++(lane.drops.*cause);
    ++(lane.port_drops[in_port].*cause);
  }
  void refresh_loads(Lane& lane, uint64_t now_ns);
  void refresh_loads_if_stale(Lane& lane, uint64_t now_ns);
  void set_queued_bytes(Lane& lane, uint16_t port, uint64_t bytes);
  // A port's depth as path selection reads it from another lane (parallel lanes only).
  // `lane`: the reader, whose view keeps the other lanes' share of a port with one egress per
  // lane (Lane::other_lanes_bytes) for set_queued_bytes, which then reads no other core's line.
  uint64_t board_bytes(size_t port, Lane& lane) const;
  // The egress `lane` enqueues to for `port` (its own on a port with one per lane).
  EgressPort& lane_egress(const Lane& lane, uint16_t port) {
    auto& q = queues_[port];
    return q.size() > 1 ? *q[lane.index] : *egress_[port];
  }
  // The lane whose counters a port's transmit side counts in, for a call made by `lane`: that
  // lane on a port with an egress per lane; else the port's owner (parallel lanes) or lane 0.
  Lane& tx_lane(unsigned lane, uint16_t port) {
    if (queues_[port].size() > 1) return *lanes_.at(lane);
    return parallel_ ? *lanes_[owner_[port]] : *lanes_.front();
  }
  // CONGA (switch_conga.cc). An overlay packet that arrived on `port`: a leaf's own is recorded
  // and decapsulated, `p` parsed again from the inner frame. False: m freed and counted.
  bool conga_arrival(Lane& lane, uint16_t port, rte_mbuf* m, ParsedPacket& p, uint64_t now_ns);
  // The uplink for a packet this leaf tunnels to `leaf` by group `sel`.
  uint16_t conga_select(PathSelector& sel, int leaf, uint32_t hash, std::span<const PathLoad> view,
                        uint64_t now_ns);
  // Wraps m for `leaf`, leaving by out_port of `sel`. False: m freed and counted.
  bool conga_tunnel(Lane& lane, uint16_t in_port, rte_mbuf* m, const PathSelector& sel,
                    uint16_t out_port, int leaf, uint32_t hash, uint64_t now_ns);
  // Every frame queued on out_port: its DRE counts it, an overlay frame's CE is raised.
  void conga_departure(uint16_t out_port, rte_mbuf* m, uint64_t now_ns);
  void make_conga();
  // By leaf id: its tunnel address (0: none), from a leaf overlay's block (conga:, conweave:).
  static std::vector<uint32_t> vtep_by_leaf(int leaf, uint32_t vtep,
                                            std::span<const std::pair<uint8_t, uint32_t>> leaves);
  // A frame that did not parse as IP where IP was expected (status kOk: it parsed as MAC
  // control): counted under its parse status on `port`, and freed.
  static void drop_unparsed(Lane& lane, uint16_t port, ParseStatus status, rte_mbuf* m);
  // ConWeave (switch_conweave.cc). An overlay frame for this leaf: a control message is
  // consumed, a data packet decapsulated (p parsed again) and maybe held. False: m taken.
  bool conweave_arrival(Lane& lane, uint16_t port, rte_mbuf* m, ParsedPacket& p, uint64_t now_ns);
  // Whether `p` is RoCE data this leaf tunnels by group `group` (its ConweaveTx chooses).
  bool conweave_tunnels(const ParsedPacket& p, uint32_t group) const;
  // The uplink for it, and the tag it goes with.
  uint16_t conweave_select(const ParsedPacket& p, uint32_t group, std::span<const PathLoad> view,
                           uint64_t now_ns, ConweaveTag& tag);
  bool conweave_tunnel(Lane& lane, uint16_t in_port, rte_mbuf* m, uint32_t group,
                       const ConweaveTag& tag, uint32_t hash);
  // Sends a control message to `leaf` through the pipeline.
  void conweave_send(Lane& lane, uint16_t in_port, uint8_t leaf, const ConweaveWire& message,
                     uint64_t now_ns);
  // Forwards what the reorder queues release by now_ns; ages the tables now and then.
  void conweave_poll(Lane& lane, uint64_t now_ns);
  // One frame into the pipeline after receive's counting: parse, classify, route, forward.
  void route_one(Lane& lane, uint16_t in_port, rte_mbuf* m, uint64_t now_ns);
  void make_conweave();

  // After a lane is added: which wire ports get an egress per lane.
  void assign_port_queues();
  void handle_mac_control(Lane& lane, uint16_t port, rte_mbuf* m, uint64_t now_ns);
  void forward(unsigned lane_index, Lane& lane, uint16_t in_port, rte_mbuf* m,
               const ParsedPacket& p, const TcamMatch& match, uint32_t group, uint32_t hash,
               uint64_t now_ns);
  void enqueue(unsigned lane_index, Lane& lane, uint16_t out_port, uint16_t in_port, rte_mbuf* m,
               uint8_t tc, uint8_t priority, uint64_t now_ns);
  void enqueue_owned(Lane& lane, uint16_t out_port, uint16_t in_port, rte_mbuf* m, uint8_t tc,
                     uint8_t priority, uint64_t now_ns);
  // Enqueues what other lanes handed to `lane_index`.
  void take_handoffs(unsigned lane_index);
  std::unique_ptr<Lane> make_lane() const;

  control::SwitchConfig config_;
  rte_mempool* pool_;
  std::vector<MacAddress> macs_;
  std::shared_ptr<spdlog::logger> logger_;

  PacketParser parser_;
  FlowHasher hasher_;
  TrafficClassMap classes_;
  PpcidLayout ppcid_layout_;
  std::unique_ptr<Tcam> tcam_;
  std::unique_ptr<RouteTable> routes_;
  // PfcState before the egress ports: it is their listener and must outlive them.
  std::unique_ptr<PfcState> pfc_;
  std::vector<std::unique_ptr<EgressPort>> egress_;
  std::vector<EgressPortConfig> egress_config_;  // what each port's egress was made with
  // By port: its egress by tx queue: {egress_[p]}, or one per lane (the first egress_[p], the
  // others in lane_egress_).
  std::vector<std::vector<EgressPort*>> queues_;
  std::vector<std::unique_ptr<EgressPort>> lane_egress_;
  // Ports with one per lane: each lane's share of the depth, [port * lanes + lane].
  struct alignas(64) QueueBoardEntry {  // a line each: lanes write theirs every packet
    std::atomic<uint64_t> bytes{0};
  };
  std::unique_ptr<QueueBoardEntry[]> queue_board_;
  std::array<uint8_t, 8> view_of_tc_{};  // a class's view (Lane::views)
  std::array<uint8_t, 8> lossless_tc_{};
  size_t view_count_ = 1;
  EarliestEvent port_next_;  // each egress port's next event (EgressPort keeps it; one lane)

  // CONGA's state, when the config has a conga: block (one lane: the config allows one lcore).
  struct Conga {
    std::vector<DiscountingRateEstimator> dre;  // by port
    std::unique_ptr<CongaTables> tables;        // a leaf's; null on a spine
    std::vector<uint32_t> vtep;                 // by leaf id: its tunnel address (0: unknown)
    std::vector<int> group_leaf;                // by group: its destination leaf, or -1
    std::vector<uint8_t> metrics;               // conga_select's scratch, by member
    CongaCounters counters;
  };
  std::unique_ptr<Conga> conga_;
  struct Conweave {
    Conweave(const ConweaveSettings& s, uint64_t seed) : tx(s, seed), rx(s) {}
    ConweaveTx tx;
    ConweaveRx rx;
    std::vector<uint32_t> vtep;  // by leaf id (0: unknown)
    std::vector<int> group_leaf;
    std::vector<rte_mbuf*> released;  // scratch
    uint64_t next_age_ns = 0;
  };
  std::unique_ptr<Conweave> conweave_;

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<uint16_t> owner_;              // port -> its lane
  bool parallel_ = false;                    // several lanes, and no PFC: they run at once
  std::unique_ptr<PortBoardEntry[]> board_;  // parallel lanes only
  std::vector<rte_ring*> rings_;             // every handoff ring, for free_all and the end
  int handoff_ns_offset_ = -1;  // the mbuf dynamic field a handed frame's time rides in
};

}  // namespace spraynet::switch_emu
