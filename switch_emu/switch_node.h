// A switch: its pipeline plus its ports, with one entry point. A burst arrives on port p at
// now_ns; the node parses, classifies (TCAM), routes (LPM), picks a path (the group's mode),
// rewrites (TTL, L2 when a next hop MAC is configured), accounts for PFC and enqueues on the
// egress port's traffic class; egress (shaper, delay line, PFC pauses) says what may leave each
// port by when. The same node runs under switch_emu's poll-mode lcores (TSC time) and under
// fabric_emu's event clock (virtual time).
//
// Ports are node-local indices 0..N-1 in config order; the driver maps them to DPDK port ids.
// Single-threaded: a driver with several lcores serialises calls (switch_emu takes a lock).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/egress/egress_port.h"
#include "dataplane/egress/pfc_state.h"
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
  X(bad_port) /* receive() on a port the node does not have */

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
  X(pfc_received)                                                                        \
  X(pfc_frames_sent)                                                                     \
  X(mirrored)                                                                            \
  X(pinned)                                                                              \
  X(sprayed)                                                                             \
  X(spray_without_ppcid) /* spray rule hit a packet with UDP checksum 0: sent by ECMP */ \
  X(quarantined)         /* quarantine rule: sent to its honeypot port */                \
  X(quarantine_kept)     /* quarantine rule, PSN % 100 < keep_percent: normal path */

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
  EgressAccounting egress;  // summed over the ports; egress.offered: what the node offered them
  bool node_balanced() const {
    return received + generated == consumed + pipeline_dropped + egress.offered;
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

  // Takes ownership of every mbuf: each is enqueued on an egress port or freed and counted.
  void receive(uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  // Egress timers: the PFC watchdog and the PFC frames due. Call every poll, or at
  // next_event_ns() under an event clock.
  void poll(uint64_t now_ns);
  // Up to max frames that have crossed `port`'s emulated link by now_ns; the caller owns them
  // (sends them with tx_burst, or delivers them to the next node).
  uint16_t transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max);
  // Earliest time anything is due on any port; EgressPort::kNever when idle.
  uint64_t next_event_ns(uint64_t now_ns) const;
  // egress(port).next_event_ns(), from one array (cheap to ask for every port).
  uint64_t port_next_event_ns(uint16_t port) const { return port_next_.at(port); }
  // Appends the ports with something due by now_ns (port_next_event_ns <= now_ns) to out, in
  // port order: what a driver transmits on, without asking every port.
  void append_due_ports(uint64_t now_ns, std::vector<uint16_t>& out) const {
    port_next_.append_due(now_ns, out);
  }
  // True when nothing is queued or in flight on any port.
  bool idle() const;
  // Frees every mbuf still held (shutdown).
  void free_all();

  // Run-time control (validated by the caller).
  void set_link_up(uint16_t port, bool up, uint64_t now_ns);
  // The emulated link's rate, bit error rate and frame loss rate; each throws
  // std::invalid_argument (with the allowed range) for a value the link emulator refuses, and
  // std::out_of_range for an unknown port.
  void set_link_rate_gbps(uint16_t port, double rate_gbps, uint64_t now_ns);
  void set_link_ber(uint16_t port, double ber, uint64_t now_ns);
  void set_link_loss(uint16_t port, double loss_rate, uint64_t now_ns);
  PathSelector& group(size_t i) { return *groups_[i]; }
  const PathSelector& group(size_t i) const { return *groups_[i]; }
  size_t group_count() const { return groups_.size(); }
  Tcam& tcam() { return *tcam_; }

  const SwitchDropCounters& drops() const { return drops_; }
  const SwitchCounters& counters() const { return counters_; }
  const SwitchPortCounters& port_counters(uint16_t port) const { return ports_[port]; }
  const EgressPort& egress(uint16_t port) const { return *egress_[port]; }
  const PfcState* pfc() const { return pfc_.get(); }
  const control::SwitchConfig& config() const { return config_; }
  // Every drop cause summed (drops().total()).
  uint64_t total_drops() const { return drops_.total(); }
  // Where every frame is, now; balanced() holds at any moment between calls.
  SwitchAccounting accounting() const;

 private:
  void refresh_loads(uint64_t now_ns);
  void refresh_loads_if_stale(uint64_t now_ns);
  void set_queued_bytes(uint16_t port, uint64_t bytes);
  void handle_mac_control(uint16_t port, rte_mbuf* m, uint64_t now_ns);
  void forward(uint16_t in_port, rte_mbuf* m, const ParsedPacket& p, const TcamMatch& match,
               uint32_t group, uint64_t now_ns);
  void enqueue(uint16_t out_port, uint16_t in_port, rte_mbuf* m, uint8_t tc, uint64_t now_ns);

  control::SwitchConfig config_;
  rte_mempool* pool_;
  std::vector<MacAddress> macs_;
  std::shared_ptr<spdlog::logger> logger_;

  PacketParser parser_;
  FlowHasher hasher_;
  TrafficClassMap classes_;
  PpcidLayout ppcid_layout_;
  std::unique_ptr<Tcam> tcam_;
  TcamDecisionCache tcam_cache_;  // receive() is single-threaded: the node's own
  std::unique_ptr<RouteTable> routes_;
  RouteCache route_cache_;  // receive() is single-threaded: the node's own
  std::vector<std::unique_ptr<PathSelector>> groups_;
  // PfcState before the egress ports: it is their listener and must outlive them.
  std::unique_ptr<PfcState> pfc_;
  std::vector<std::unique_ptr<EgressPort>> egress_;
  // What path selection reads, one view per class kind: views_[0] for the lossy classes (link
  // up only), views_[v] for lossless class lossless_tc_[v] (PFC's per-class eligibility: a storm
  // or, with fast feedback, a pause on one class leaves the port to the others). Queued bytes are
  // the port's, the same in every view. view_of_tc_ maps a class to its view.
  std::vector<std::vector<PathLoad>> views_;
  std::vector<PathLoad> fallback_view_;  // fast feedback with every member paused (scratch)
  // Ports not eligible in each view, kept with every write of a view's `eligible`: 0 lets path
  // selection skip reading the members' loads in modes that need no queue depth.
  std::vector<uint32_t> ineligible_;
  std::array<uint8_t, 8> view_of_tc_{};
  std::array<uint8_t, 8> lossless_tc_{};
  EarliestEvent port_next_;  // each egress port's next event (EgressPort keeps it)
  bool loads_stale_ = true;
  uint64_t eligibility_seen_ = 0;

  // receive()'s per-burst working set (every element written before it is read).
  struct BurstScratch {
    std::array<ParsedPacket, kBurst> parsed;
    std::array<const ParsedPacket*, kBurst> ip;
    std::array<rte_mbuf*, kBurst> mbufs;
    std::array<TcamMatch, kBurst> match;
    std::array<uint32_t, kBurst> dst;
    std::array<uint32_t, kBurst> group;
  } scratch_;

  std::vector<SwitchPortCounters> ports_;
  SwitchDropCounters drops_;
  SwitchCounters counters_;
};

}  // namespace spraynet::switch_emu
