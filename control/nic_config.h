// The nic_emu configuration: what the YAML file says under its top-level key `nic:`, validated.
// Every error is `file: key: reason` with the key's full path (`nic.uplinks[3].path_id`) and what
// is allowed (see config_reader.h); unknown keys are errors. nic_config_help() describes every
// key with its default and allowed values, from the same constants the parser uses.
//
// A config that loads also passes the dataplane's own checks (SprayEngineConfig, ReorderConfig,
// RcTrafficEngineConfig) for the configs the conversion functions below build from it, so a
// program never fails later, at engine construction, on something the file said.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/cc_settings.h"
#include "control/config_reader.h"
#include "control/link_state_table.h"
#include "control/switch_config.h"  // LinkSettings
#include "dataplane/nic/ppcid_anomaly_detector.h"
#include "dataplane/nic/reorder_engine.h"
#include "dataplane/nic/spray_engine.h"
#include "dataplane/probe/latency_probe.h"
#include "dataplane/rc_endpoint/rc_traffic_engine.h"
#include "dataplane/wire/packet_builder.h"  // MacAddress
#include "dataplane/wire/ppcid.h"

namespace spraynet::control {

// The port the host is on. Absent: the built-in RC traffic engine plays the host.
struct HostSettings {
  std::string name = "host";
  std::string device;  // DPDK port id, ethdev name, or vdev spec (see runtime::PortConfig)
};

struct UplinkSettings {
  std::string name;
  std::string device;
  // The PPCID path id of this uplink: unique among the NIC's uplinks, within the layout's range
  // (0..max_path_id). Unless the config sets it, it comes from the link's fingerprint, exactly as
  // LinkStateTable assigns ids (fold of the identity's FNV-1a, collisions take the next free id
  // in fingerprint order), around the ids the config did set.
  uint8_t path_id = 0;
  bool path_id_from_config = false;  // false: from the fingerprint
  // The next hop's MAC. It also names the link (its identity is "nic>mac" instead of "nic/port"),
  // so that the path id follows the cable, not the local port name.
  std::optional<MacAddress> peer_mac;
  LinkSettings link;
};

struct NicSpraySettings {
  SprayMode mode = SprayMode::kRoundRobin;
  PpcidLayout ppcid_layout = PpcidLayout::kTsHigh;
  // 0: the PPCID names the uplink. N: it names one of N fabric paths per packet, for a leaf
  // that sprays by path id (SprayEngineConfig::fabric_paths).
  uint16_t fabric_paths = 0;
};

// How the NIC's receive side treats sprayed (reordered) RoCE packets: `nic: receive:`.
enum class ReceiveModel : uint8_t {
  kReorderBuffer,  // the reorder engine puts each QP in PSN order for an rxe responder
  kOooPlacement,   // no reorder engine: the RC engine places out of order, resends selectively
  kNone,           // neither: what arrives goes to the rxe responder (or the host) as it is
};
std::string_view to_string(ReceiveModel m);  // reorder-buffer | ooo-placement | none
std::optional<ReceiveModel> parse_receive_model(std::string_view name);
inline constexpr const char* kReceiveModelNames = "reorder-buffer | ooo-placement | none";

// The reorder engine's parameters (receive: reorder-buffer).
struct NicReorderSettings {
  uint32_t window = 256;               // PSNs per QP
  uint64_t hold_timeout_ns = 100'000;  // the file says hold_timeout_us (decimals allowed)
  uint32_t max_qps = 4096;             // QP contexts
  uint32_t max_buffered = 65536;       // packets held across all QPs
  uint32_t path_mtu = 0;  // PSNs per READ request: 0 = rc_engine.mtu (1024 with a host)
};

// The placement responder's parameters (receive: ooo-placement).
struct NicPlacementSettings {
  uint32_t window = 0;              // PSNs tracked per QP; 0: rc_engine.max_in_flight
  uint64_t nak_delay_ns = 100'000;  // the file says nak_delay_us: a hole waits this long
};

// IRN (`nic: transport: irn`, `nic: irn:`; Mittal et al., SIGCOMM 2018): lossy RoCE by the RC
// traffic engine: NAKs with a SACK, selective repeat of every hole, IRN's two timeouts. The BDP
// cap is rc_engine.max_in_flight (2 and up under irn), RTO_high rc_engine.retransmit_timeout_us
// (320 under irn unless given). PFC is the switches' to turn off on the data class.
struct NicIrnSettings {
  uint64_t rto_low_ns = 100'000;  // the file says rto_low_us; IRN §4.1
  uint32_t rto_low_packets = 3;   // N: RTO_low while at most this many are unacknowledged
  // RTO_high: rc_engine.retransmit_timeout_us's default under irn (IRN §4.1).
  static constexpr uint64_t kRtoHighNs = 320'000;
};

struct NicControlSettings {
  uint64_t period_ms = 200;
};

struct RcEngineSettings {
  uint32_t qps = 4;
  RcQpRole role = RcQpRole::kBoth;  // of every QP
  RcOp op = RcOp::kWrite;           // of every requester
  uint32_t message_bytes = 65536;
  uint32_t mtu = 1024;  // 1024 | 4096
  // Unacknowledged packets per QP, exactly: 129 is rxe's (RXE_MAX_UNACKED_PSNS 128 admits 129, see
  // RcRequesterConfig::max_in_flight); at least 66 because the RC requester asks for an ACK every
  // 64 packets.
  uint32_t max_in_flight = 129;
  uint64_t messages = 100;  // per QP; 0 = unlimited
  // 4.096 us x 2^14 (perftest's default timeout 14); the file says retransmit_timeout_us.
  uint64_t retransmit_timeout_ns = 67'108'864;
  uint32_t local_ip = 0x0A000001;  // host byte order
  uint32_t peer_ip = 0x0A000002;
  MacAddress local_mac{0x02, 0x53, 0x50, 0x00, 0x0a, 0x01};
  MacAddress peer_mac{0x02, 0x53, 0x50, 0x00, 0x0b, 0x01};
  uint32_t first_qp = 0x11;
  uint32_t peer_first_qp = 0x11;
  uint32_t first_psn = 0;
  uint8_t dscp = 26;
  // Entropy spraying of the requesters' UDP source ports: fixed (rxe's port per QP) | oblivious
  // (a per-QP permutation of entropy_values ports) | reps (recycled from the ACKs' echo).
  std::string entropy = "fixed";
  uint32_t entropy_values = 256;  // a power of two, 2..16384
  // ACK/NAKs and CNPs on the port of the packet that made them, every packet acknowledged: what
  // a REPS sender learns from. Default: on with entropy reps.
  bool echo_entropy = false;
};

// The latency probe (`nic: probe:`): Pktgen-style timestamped UDP probes sent on one uplink at
// a set rate alongside the traffic, recognised when they come back on any uplink (through a
// switch that routes probe.dst_ip back towards this NIC) and consumed there, never delivered to
// the host. Sender and receiver are the same NIC, so one clock (the program's TSC) stamps and
// reads every probe, as in Pktgen's latency mode.
struct NicProbeSettings {
  std::string uplink;         // the uplink probes leave on (default: the first)
  uint16_t uplink_index = 0;  // its node port
  LatencyProbeConfig probe;   // addresses, ports, DSCP, size, rate, threshold, sample store
};

// The optional response to a flagged QP: nic_emu's control side pushes a TCAM quarantine rule
// to the switch through its DPDK telemetry socket (/spraynet/tcam_add; the switch must run with
// acting commands on). `nic: anomaly: quarantine:`.
struct NicQuarantineSettings {
  bool enabled = false;
  std::string switch_socket;    // the switch's dpdk_telemetry.v2 socket (required when enabled)
  std::string honeypot_port;    // the switch's port name the quarantined packets go to (required)
  uint32_t keep_percent = 5;    // PSN % 100 below it stays on the normal path (monitoring)
  uint32_t rule_id_base = 900;  // rule id = base + the QP's index in flag order
  int32_t priority = 1000;      // the rule's TCAM priority (above the spray rules it overrides)
  uint64_t period_ms = 50;      // how often the control side looks for newly flagged QPs
  uint64_t timeout_ms = 2000;   // per push: connect, greeting, reply
};

// PPCID anomaly detection at the receiving NIC (dataplane/nic/ppcid_anomaly_detector.h).
// `nic: anomaly:`. Off by default: its rules are false-positive-free only where each uplink's
// far end writes that uplink's path id, which a fabric of switches need not do.
struct NicAnomalySettings {
  bool enabled = false;
  uint32_t qp_table_size = 4096;
  uint32_t threshold = 3;
  NicQuarantineSettings quarantine;
};

struct NicConfig {
  std::string file;
  std::string name = "nic";
  uint64_t seed = 1;
  uint32_t mempool_mbufs = 0;  // 0: sized by the program
  // Data room of each mbuf (headroom included): a frame must fit one segment. The default holds
  // a RoCEv2 packet at MTU 4096 with every header, like the switch's.
  uint32_t mbuf_data_room = 4096 + 256 + 128;
  std::optional<HostSettings> host;
  std::vector<UplinkSettings> uplinks;
  NicSpraySettings spray;
  ReceiveModel receive = ReceiveModel::kReorderBuffer;
  NicReorderSettings reorder;
  NicPlacementSettings placement;
  bool irn = false;  // transport: irn (rc otherwise)
  NicIrnSettings irn_settings;
  NicControlSettings control;
  IdleBackoffSettings idle_backoff;
  // Set exactly when `host` is not: the RC traffic engine plays the host (defaults when the
  // file has no rc_engine block).
  std::optional<RcEngineSettings> rc_engine;
  std::optional<NicProbeSettings> probe;  // absent: no probe
  NicAnomalySettings anomaly;
  // Congestion control (`cc:`): DCQCN's notification point (CNPs for CE-marked arrivals) and
  // the RC engine's reaction points; off (mode none) when the file has no cc block.
  CcSettings cc;

  int uplink_index(const std::string& name) const;  // -1 when unknown
  bool reorder_enabled() const { return receive == ReceiveModel::kReorderBuffer; }
};

inline constexpr size_t kMaxNicUplinks = SprayEngine::kMaxUplinks;  // 16

NicConfig parse_nic_config(const ConfigNode& root);  // root: the file's top level (holds `nic:`)
NicConfig load_nic_config(const std::string& path);

// Every key, its default and allowed values (the program's --help prints it).
std::string nic_config_help();

// One identity per uplink, in uplink order (node name = the NIC's name), as LinkStateTable takes
// them; and the path-id width of the configured layout (4 for ts-high, 8 for path-high).
std::vector<LinkIdentity> uplink_identities(const NicConfig& config);
unsigned path_id_bits(const NicConfig& config);

// The dataplane's configs. rc_engine_config requires config.rc_engine.
SprayEngineConfig spray_engine_config(const NicConfig& config);
ReorderConfig reorder_config(const NicConfig& config);
// The detector's config (uplink path ids only without fabric paths: see wrong_uplink).
PpcidAnomalyConfig anomaly_config(const NicConfig& config);
RcTrafficEngineConfig rc_engine_config(const NicConfig& config);
// The NIC's receive side onto an RC engine's config: the responder model (rxe's or out-of-order
// placement), the placement settings, and the transport (IRN: its responder behind whatever
// model, its timeouts). Part of rc_engine_config; fabric_emu, whose engines come from its
// workload plan, applies it to each.
void apply_receive_side(const NicConfig& config, RcTrafficEngineConfig& engine);

}  // namespace spraynet::control
