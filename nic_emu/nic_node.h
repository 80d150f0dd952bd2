// A NIC: a host port and up to 16 uplinks, with one entry point like the switch. A burst arrives
// on port p at now_ns; the node decides, enqueues on egress, and egress (shaper, delay line) says
// what may leave each port by when. The same node runs under nic_emu's poll-mode lcore (TSC
// time) and under fabric_emu's or a test's event clock (virtual time).
//
// TX (host -> uplinks): RoCEv2 packets are sprayed per packet by the SprayEngine's mode over the
// eligible uplinks (up, and not paused by PFC from the fabric; the others are excluded at once:
// "fast feedback") and get their PPCID written into
// the UDP checksum; everything else goes by flow hash. RX (uplinks -> host): the PPCID is read and
// classified (per-path counts; a layout mismatch is counted and logged once with the likely
// layout), the ReorderEngine puts each QP back into PSN order (and the READ responses of the
// RC engine's READ requests, whose PSN ranges TX noted), the UDP checksum is restored to 0
// (a host kernel checks a non-zero one), and the packet goes to the host port.
//
// Without a host port the RcTrafficEngine plays the host: its packets take the TX path and what
// RX would deliver to the host goes to it instead.
//
// Node ports: uplinks 0..U-1 in config order, then the host port U when there is one.
// Single-threaded, except the spray weights and mode, which the control thread publishes.
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "control/nic_config.h"
#include "dataplane/egress/egress_port.h"
#include "dataplane/forwarding/flow_hasher.h"
#include "dataplane/forwarding/path_load.h"
#include "dataplane/forwarding/traffic_class_map.h"
#include "dataplane/memory_usage.h"
#include "dataplane/nic/ppcid_anomaly_detector.h"
#include "dataplane/nic/reorder_engine.h"
#include "dataplane/nic/spray_engine.h"
#include "dataplane/probe/latency_probe.h"
#include "nic_emu/qp_heat_map.h"
#include "dataplane/rc_endpoint/rc_traffic_engine.h"
#include "dataplane/wire/counter_list.h"
#include "dataplane/wire/int_header.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/ppcid.h"

namespace spdlog {
class logger;
}

namespace spraynet::nic_emu {

// The NIC's drop causes besides parse statuses, once: X(name). The struct, its total, the JSON
// (drops_json) and telemetry (/spraynet/drops) are all made from this list.
#define SPRAYNET_NIC_DROP_CAUSES(X)                                                           \
  X(no_uplink)           /* TX: every uplink down */                                          \
  X(egress_refused)      /* EgressPort refused it (its class counters say why) */             \
  X(no_host)             /* RX delivery with neither host port nor RC engine */               \
  X(bad_port)            /* receive() on a port the node does not have */                     \
  X(mac_control_not_pfc) /* 802.3x PAUSE and other MAC control frames: consumed */            \
  X(pfc_malformed)       /* EtherType 0x8808, opcode PFC, but not a valid frame */            \
  /* RoCEv2 packets with a non-zero UDP checksum that a host-side filter dropped on their way \
     from the NIC to the host (NicHostSide::filter_nonzero_udp_checksum). */                  \
  X(host_checksum_filter)                                                                     \
  /* RoCEv2 behind INT (HPCC) whose INT would not parse or strip */                           \
  X(int_malformed)

// Every packet the node takes in is forwarded, or counted here under exactly one cause.
// Summable: per-lcore copies add up.
struct NicDropCounters {
  std::array<uint64_t, kParseStatusCount> parse{};  // by ParseStatus ([kOk] stays 0)
  SPRAYNET_NIC_DROP_CAUSES(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_DROP_COUNTER_METHODS(NicDropCounters, SPRAYNET_NIC_DROP_CAUSES)
};
static_assert(sizeof(NicDropCounters) ==
                  sizeof(uint64_t) *
                      (kParseStatusCount + SPRAYNET_COUNTER_COUNT(SPRAYNET_NIC_DROP_CAUSES)),
              "every NIC drop counter is in SPRAYNET_NIC_DROP_CAUSES");

// What the NIC does with the UDP checksum, for experiments on it (DESIGN.md: the PPCID travels
// in it on the fabric side, and a host kernel checks a non-zero one, so the last NIC restores it
// to 0), and what stands between the NIC's RX and the host. Not part of control::NicConfig: a
// spraying NIC always writes and restores it; fabric_emu turns these off to show why they matter
// (and a fabric that sprays nothing has NICs that write no PPCID).
struct NicHostSide {
  bool write_ppcid = true;  // TX: the PPCID into RoCEv2 packets' UDP checksum
  bool restore_checksum = true;
  // Drop RoCEv2 packets whose UDP checksum is not 0 before the host (a host kernel or a
  // middlebox that checks it), counted in NicDropCounters::host_checksum_filter.
  bool filter_nonzero_udp_checksum = false;
};

#define SPRAYNET_NIC_PORT_COUNTERS(X)                    \
  X(rx_packets)                                          \
  X(rx_bytes)                                            \
  X(tx_packets) /* handed to the driver by transmit() */ \
  X(tx_bytes)

struct NicPortCounters {
  SPRAYNET_NIC_PORT_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(NicPortCounters, SPRAYNET_NIC_PORT_COUNTERS)
};
static_assert(sizeof(NicPortCounters) == sizeof(uint64_t) * NicPortCounters::kCounters);

// How the PPCIDs of received RoCEv2 packets read (DESIGN.md "PPCID").
#define SPRAYNET_PPCID_COUNTERS(X)                                              \
  X(absent) /* UDP checksum 0: not sprayed */                                   \
  X(ok)                                                                         \
  X(bad_check)       /* check nibble wrong: corrupted, or not a PPCID at all */ \
  X(layout_mismatch) /* the sender uses the other layout */                     \
  X(unknown_path)                                                               \
  X(wrong_uplink) /* ok, but the path id is not the one of the uplink it came in on */

struct PpcidCounters {
  SPRAYNET_PPCID_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(PpcidCounters, SPRAYNET_PPCID_COUNTERS)
};
static_assert(sizeof(PpcidCounters) == sizeof(uint64_t) * PpcidCounters::kCounters);

// The latency probe's counters (config.probe): probes handed to the probe uplink's egress,
// probes recognised on arrival (duplicates included) and consumed, probes not made for want of
// an mbuf, probes the egress refused (counted in drops too, and lost to the probe's report).
#define SPRAYNET_NIC_COUNTERS(X)                                                     \
  X(sprayed)           /* RoCEv2 packets sent to an uplink by the spray engine */    \
  X(flow_hashed)       /* other packets sent to an uplink by flow hash */            \
  X(delivered)         /* packets the host port's egress or the RC engine took */    \
  X(checksum_restored) /* RoCEv2 packets whose UDP checksum was set back to 0 */     \
  X(heat_map_overflow) /* arrivals of QPs beyond the heat map's capacity */          \
  X(pfc_received)      /* PFC frames from the fabric, honoured on that uplink */     \
  /* RC engine READ requests sent: their response PSNs told to the reorder engine */ \
  X(read_ranges_noted)                                                               \
  /* RC engine packets (requests, ACKs, READ responses, retransmissions) to TX */    \
  X(rc_packets_sent)                                                                 \
  X(probes_sent)                                                                     \
  X(probes_received)                                                                 \
  X(probe_pool_empty)                                                                \
  X(probe_egress_refused)                                                            \
  /* Congestion control (config cc): the notification point, then the CNPs taken */  \
  X(ce_received)     /* RoCEv2 data packets that arrived CE-marked */               \
  X(cnps_sent)       /* CNPs made for them, towards the sending QP */               \
  X(cnps_suppressed) /* none made: one went to that QP within min_time_between_cnps */ \
  X(cnp_no_qp)       /* none made: no RC-engine QP takes that DestQP (or a host port) */ \
  X(cnp_pool_empty)  /* none made: the mempool was empty */                          \
  X(cnps_received)   /* CNPs from the fabric, handed to the RC engine's QPs */         \
  /* HPCC (cc mode hpcc): INT on the RC engine's data packets, stripped and echoed */   \
  X(int_inserted)   /* data packets sent with an INT header for the switches */       \
  X(int_no_room)    /* data packets or ACKs sent without: no room in the mbuf */       \
  X(int_stripped)   /* arrivals whose INT was removed before the host or RC engine */  \
  X(int_echoed)     /* ACKs that carried their data packet's records back */           \
  X(int_acks_received) /* ACKs with echoed records, handed to the rate control */

struct NicCounters {
  SPRAYNET_NIC_COUNTERS(SPRAYNET_COUNTER_FIELD)
  SPRAYNET_COUNTER_METHODS(NicCounters, SPRAYNET_NIC_COUNTERS)
};
static_assert(sizeof(NicCounters) == sizeof(uint64_t) * NicCounters::kCounters);

// The node's accounting identity at any moment (issue: "received = forwarded + dropped +
// buffered"): every frame the node took in or made itself (the RC engine's packets, probes) is
// consumed (a PFC frame honoured, a probe of its own back, a packet the RC engine took), dropped
// by the pipeline (a cause of NicDropCounters other than egress_refused, which the egress side
// counts) or by the reorder engine (a second copy of a held PSN), held by the reorder engine,
// freed from it at shutdown, or was offered to an egress port, where EgressAccounting says where
// it is now (the host port's dequeued are the deliveries to the host). The RC engine holds no
// mbufs between calls: it builds every (re)transmission from its QP state. Each term is counted
// where it happens.
struct NicAccounting {
  uint64_t received = 0;           // on a port, or on one the node does not have (bad_port)
  uint64_t generated = 0;          // RC engine packets to the TX path, probes made
  uint64_t consumed = 0;           // PFC frames honoured, own probes back, taken by the RC engine
  uint64_t pipeline_dropped = 0;   // NicDropCounters but egress_refused
  uint64_t reorder_dropped = 0;    // ReorderCounters::duplicates_of_held
  uint64_t reorder_held = 0;       // ReorderEngine::buffered()
  uint64_t freed_at_shutdown = 0;  // held by the reorder engine when free_all() freed them
  EgressAccounting egress;         // summed over the ports; egress.offered: what the node offered
  // The reorder engine's own identity: in = released + duplicates_of_held + held.
  uint64_t reorder_in = 0;
  uint64_t reorder_released = 0;
  bool node_balanced() const {
    return received + generated == consumed + pipeline_dropped + reorder_dropped + reorder_held +
                                       freed_at_shutdown + egress.offered;
  }
  bool reorder_balanced() const {
    return reorder_in == reorder_released + reorder_dropped + reorder_held;
  }
  bool balanced() const { return node_balanced() && reorder_balanced() && egress.balanced(); }
};

// A QP the anomaly detector flagged, with the addresses of the packet that flagged it (the
// quarantine rule's destination is the QP's host: this packet's destination).
struct AnomalyFlag {
  uint32_t dest_qp = 0;
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
};

class NicNode {
 public:
  // Throws std::invalid_argument for a config the stages refuse. port_macs: by node port (the
  // source MAC written on uplinks with a peer_mac); empty: 02:00:00:00:01:<index>.
  NicNode(const control::NicConfig& config, rte_mempool* pool,
          std::vector<MacAddress> port_macs = {}, std::shared_ptr<spdlog::logger> logger = nullptr);
  // The same with the RC engine's config given in full (per-QP peers, posted messages: what
  // fabric_emu's workloads need and a YAML file does not say); config.rc_engine must be set.
  NicNode(const control::NicConfig& config, const RcTrafficEngineConfig& rc_engine,
          rte_mempool* pool, std::vector<MacAddress> port_macs = {},
          std::shared_ptr<spdlog::logger> logger = nullptr);
  ~NicNode();
  NicNode(const NicNode&) = delete;
  NicNode& operator=(const NicNode&) = delete;

  size_t uplink_count() const { return uplinks_; }
  bool has_host() const { return config_.host.has_value(); }
  uint16_t host_port() const { return static_cast<uint16_t>(uplinks_); }
  size_t port_count() const { return egress_.size(); }

  // Takes ownership of every mbuf: forwarded, held (reorder), or freed and counted.
  void receive(uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  // Timers: reorder holds that ended, the RC engine's packets due. Call every poll, or at
  // next_event_ns() under an event clock.
  void poll(uint64_t now_ns);
  // Up to max frames that have crossed `port`'s emulated link by now_ns; the caller owns them.
  uint16_t transmit(uint16_t port, uint64_t now_ns, rte_mbuf** out, uint16_t max);
  // Earliest time anything is due (egress, reorder hold, RC engine); EgressPort::kNever when
  // only arriving packets can make progress.
  uint64_t next_event_ns(uint64_t now_ns) const;
  // Nothing queued, in flight or held by the reorder engine.
  bool idle() const;
  // Releases whatever the reorder engine holds towards the host (shutdown drain).
  void flush(uint64_t now_ns);
  // Frees every mbuf still held.
  void free_all();

  // The latency probe, when config.probe is set (nullptr otherwise). It sends from poll() while
  // sending is on (from construction until stop_probes()).
  const LatencyProbe* probe() const { return probe_.get(); }
  void stop_probes() { probe_sending_ = false; }
  bool probes_sending() const { return probe_ != nullptr && probe_sending_; }

  // Run-time control (uplinks only).
  void set_link_up(uint16_t uplink, bool up, uint64_t now_ns);
  // The uplink's emulated line rate (fabric_emu's background load takes a share of it).
  void set_link_rate_gbps(uint16_t uplink, double rate_gbps, uint64_t now_ns);
  void set_host_side(const NicHostSide& h) { host_side_ = h; }
  const NicHostSide& host_side() const { return host_side_; }

  const control::NicConfig& config() const { return config_; }
  SprayEngine& spray() { return spray_; }
  const SprayEngine& spray() const { return spray_; }
  const ReorderEngine* reorder() const { return reorder_.get(); }
  ReorderEngine* reorder() { return reorder_.get(); }  // to tell it the QPs' first PSNs
  const RcTrafficEngine* rc_engine() const { return rc_.get(); }
  // For posting messages (fabric_emu's workloads); nullptr with a host port.
  RcTrafficEngine* rc_engine() { return rc_.get(); }
  // Bytes the uplinks may hold before the RC engine is asked for more: a NIC schedules its QPs
  // onto the wire as it drains (and stops when PFC pauses it), it does not drop its own packets.
  static constexpr uint64_t kTxLowWaterFrames = 2;
  const EgressPort& egress(uint16_t port) const { return *egress_[port]; }
  const NicDropCounters& drops() const { return drops_; }
  const NicCounters& counters() const { return counters_; }
  const NicPortCounters& port_counters(uint16_t port) const { return ports_[port]; }
  const PpcidCounters& ppcid_counters() const { return ppcid_; }
  // Received PPCIDs read ok, by path id (what each uplink's far end wrote).
  const std::array<uint64_t, 256>& path_arrivals() const { return path_arrivals_; }
  // The heat map, one entry per QP seen (at most config.reorder.max_qps).
  const QpHeatMap& heat_map() const { return heat_; }
  // The PPCID anomaly detector (nullptr unless config.anomaly.enabled), and the QPs it flagged
  // in flag order (anomaly_flags()[i] is anomaly()->flagged(i)).
  const PpcidAnomalyDetector* anomaly() const { return anomaly_.get(); }
  const std::vector<AnomalyFlag>& anomaly_flags() const { return anomaly_flags_; }
  // Every drop cause summed (drops().total()).
  uint64_t total_drops() const { return drops_.total(); }
  // Where every frame is, now; balanced() holds at any moment between calls.
  NicAccounting accounting() const;
  // Where the node's memory goes (dataplane/memory_usage.h), from its data structures as they
  // stand; mbufs (held by the reorder engine or queued) are the pool's, not counted.
  MemoryUsage memory_usage() const;

 private:
  void from_host(rte_mbuf* m, uint64_t now_ns);
  // TX of an RC engine READ request: tells the reorder engine which response PSNs to order.
  // (With a host port the NIC does not know the requesting QP: its READ responses pass as
  // before, unordered.)
  void note_read_request(const rte_mbuf* m, const ParsedPacket& p);
  void from_uplink(uint16_t uplink, rte_mbuf* m, uint64_t now_ns);
  // HPCC (cc mode hpcc). TX: an RC engine data packet (SEND, WRITE) gets an empty INT stack for
  // the switches to fill. RX: INT comes off every arrival before anything else reads it (the
  // ICRC holds again); false when it was malformed (counted, freed). ACKs the RC engine made for
  // a data packet that carried records, rc_out_[first...], echo them on kIntEchoUdpPort.
  void insert_int(rte_mbuf* m);
  bool strip_int(rte_mbuf* m, ParsedPacket& p);
  struct IntCarried;
  void echo_int(size_t first, const IntCarried& c);
  void deliver(rte_mbuf* m, uint64_t now_ns);  // towards the host (port or RC engine)
  void deliver_all(uint64_t now_ns);           // released_ -> deliver
  void send_to_uplinks(uint64_t now_ns);       // rc_out_ through the TX path
  PpcidReading read_ppcid(uint16_t uplink, const ParsedPacket& p);
  void judge_ppcid(uint16_t uplink, const ParsedPacket& p, const PpcidReading& r, uint64_t now_ns);
  void count_arrival(uint16_t uplink, const ParsedPacket& p);
  void refresh_loads(uint64_t now_ns);
  void handle_mac_control(uint16_t port, rte_mbuf* m, uint64_t now_ns);
  void send_probe(uint64_t now_ns);
  // The notification point: a CE-marked RoCEv2 packet `p` arrived; a CNP to its sender's QP
  // joins rc_out_ unless that QP had one within min_time_between_cnps.
  void notify_congestion(const ParsedPacket& p, uint64_t now_ns);
  // How many packets the RC engine may add now (0: the eligible uplinks are full or none is).
  size_t tx_budget(uint64_t now_ns) const;
  // Per-flow (flow mode, several uplinks): each QP stays on the uplink its hash gives it, so
  // the RC engine is given room per uplink (RcTxRoom) rather than one budget for all; false
  // (and `room` untouched) in the other modes. Fills qp_uplink_ and room_frames_.
  bool per_flow_room(uint64_t now_ns) const;

  control::NicConfig config_;
  rte_mempool* pool_;
  std::vector<MacAddress> macs_;
  std::shared_ptr<spdlog::logger> logger_;
  size_t uplinks_;
  uint64_t tx_frame_bytes_ = 0;  // an MTU frame with its headers: the unit of tx_budget
  // per_flow_room's state: each QP's uplink under the up-uplink mask it was computed for, and
  // the frames each uplink may still take.
  mutable std::vector<uint16_t> qp_uplink_;
  mutable uint32_t qp_uplink_mask_ = 0;
  mutable std::vector<uint32_t> room_frames_;
  mutable RcTxRoom room_;

  PacketParser parser_;
  FlowHasher hasher_;
  TrafficClassMap classes_;
  SprayEngine spray_;
  PathIdSet known_paths_;
  std::unique_ptr<ReorderEngine> reorder_;
  std::unique_ptr<RcTrafficEngine> rc_;
  std::unique_ptr<LatencyProbe> probe_;
  bool probe_sending_ = true;
  // Per RC-engine QP: when the last CNP for it left (kNoCnp: never).
  static constexpr uint64_t kNoCnp = UINT64_MAX;
  std::vector<uint64_t> last_cnp_ns_;
  uint16_t cnp_ip_id_ = 0;
  std::unique_ptr<PpcidAnomalyDetector> anomaly_;
  std::vector<AnomalyFlag> anomaly_flags_;  // reserved to the detector's table: never grows
  std::vector<std::unique_ptr<EgressPort>> egress_;
  std::vector<PathLoad> loads_;  // per uplink

  // HPCC: the records an arrival carried, from its strip in from_uplink to deliver() (the
  // reorder engine may hold it between), by mbuf. from_uplink sets or erases the entry of every
  // mbuf it takes, so an entry is never an earlier packet's.
  static constexpr size_t kIntCarriedHops = 8;
  // The hop budget a data packet leaves with: ns-3 HPCC's IntHeader::maxHop (int-header.h), 5,
  // the switches of a three-tier fat tree's longest path.
  static constexpr uint8_t kHpccIntMaxHops = 5;
  struct IntCarried {
    bool echoed = false;  // an ACK's echo (kIntEchoUdpPort), not a data packet's records
    uint8_t n = 0;
    std::array<IntHopRecord, kIntCarriedHops> hop{};
  };
  bool int_source_ = false;
  std::unordered_map<const rte_mbuf*, IntCarried> int_carried_;
  std::vector<rte_mbuf*> released_;  // scratch: reorder output
  std::vector<rte_mbuf*> rc_out_;    // scratch: RC engine output

  QpHeatMap heat_;
  std::array<uint64_t, 256> path_arrivals_{};
  NicHostSide host_side_;
  bool mismatch_logged_ = false;
  bool bad_check_logged_ = false;
  uint64_t freed_at_shutdown_ = 0;  // by free_all(), besides what egress counts itself

  std::vector<NicPortCounters> ports_;
  NicDropCounters drops_;
  NicCounters counters_;
  PpcidCounters ppcid_;
};

}  // namespace spraynet::nic_emu
