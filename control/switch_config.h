// The switch_emu configuration: what the YAML file says, validated, with names resolved to
// indices. Every error is `file: key: reason` (see config_reader.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/config_reader.h"
#include "dataplane/egress/ecn_marker.h"
#include "dataplane/egress/shared_buffer.h"
#include "dataplane/forwarding/conga_tables.h"
#include "dataplane/forwarding/conweave_tx.h"
#include "dataplane/forwarding/discounting_rate_estimator.h"
#include "dataplane/forwarding/route_table.h"
#include "dataplane/forwarding/tcam.h"

namespace spraynet::control {

// What an emulated link accepts, one source for the config files (switch and NIC) and for the
// telemetry commands that change a link at run time.
struct LinkLimits {
  static constexpr double kMinRateGbps = 0.001;
  static constexpr double kMaxRateGbps = 10000.0;
  static constexpr uint64_t kMaxDelayNs = 10'000'000'000ull;
  static constexpr double kMaxBer = 1.0;
  static constexpr double kMaxLoss = 1.0;
};
// Empty when `value` is allowed for the link property `key` (rate_gbps | ber | loss_rate), else
// "must be a number in [lo, hi], got V".
std::string check_link_value(std::string_view key, double value);

struct LinkSettings {
  double rate_gbps = 100.0;
  uint64_t delay_ns = 1000;
  double ber = 0.0;
  double loss = 0.0;
  bool up = true;
  // The wire is the link (EgressPortConfig::wire): what a config's port without `link:` (or
  // with `link: wire`) gets; rate_gbps is then only the rate utilisation is measured against.
  // False here so that configs made in code (fabric_emu, tests) keep their emulated links.
  bool wire = false;
};

struct PortSettings {
  std::string name;
  std::string device;  // DPDK port id, ethdev name, or vdev spec (see runtime::PortConfig)
  LinkSettings link;
  // Per traffic class; with PFC on, lossless classes have no egress limit (the shared lossless
  // buffer bounds them) and this is the lossy classes' limit.
  uint64_t queue_bytes = 1 << 20;
  // Frames the port's delay line may hold (on the wire, or arrived and not yet sent by the
  // driver): EgressPortConfig::delay_line_limit_frames.
  uint32_t delay_line_frames = 1u << 18;
  // The next hop's MAC: when set, routed packets leaving this port get it as destination and
  // the port's own MAC as source, as a router with a static neighbour does.
  std::optional<std::array<uint8_t, 6>> peer_mac;
  // The DPDK port's queues and descriptors per queue. Several rx queues: RSS over the 5-tuple
  // spreads flows over them (where the PMD has RSS); lcores poll (port, queue) pairs. Several tx
  // queues on a wire port of a switch without PFC: each lcore that forwards to the port sends on
  // its own queue (its lane's index) instead of handing frames to the port's owner.
  uint16_t rx_queues = 1, tx_queues = 1;
  uint16_t rx_descriptors = 1024, tx_descriptors = 1024;
};

struct GroupSettings {
  std::string name;
  std::string mode = "ecmp";  // ecmp | weighted | dlb | drill | letflow | conga | conweave
  int overlay_leaf = -1;  // conga, conweave: the leaf behind the group's destinations (`leaf:`)
  std::vector<uint16_t> ports;  // indices into SwitchConfig::ports
  std::vector<uint32_t> weights;  // weighted mode: initial weights (default equal)
  uint64_t dlb_gap_ns = 100'000;
  uint32_t flowlet_entries = 4096;
  std::string ecmp_reduce = "modulo";  // modulo (hash % N) | multiply ((hash * N) >> 32)
  // Sprayed packets choose by PPCID path id / this (PathGroupConfig::spray_path_divisor): a
  // three-tier spine's up groups skip the digit the leaf chose by.
  uint32_t spray_path_divisor = 1;
};

struct RouteSettings {
  Ipv4Prefix prefix;
  uint32_t group = 0;  // index into SwitchConfig::groups
};

struct TcamRuleSettings {
  uint32_t id = 0;
  int32_t priority = 0;
  std::string partition = "default";
  Ipv4Prefix src{0, 0};
  Ipv4Prefix dst{0, 0};
  uint8_t proto = 0;
  uint8_t proto_mask = 0;  // 0: any protocol
  UintRange src_port{0, 0xFFFF};
  UintRange dst_port{0, 0xFFFF};
  UintRange dest_qp{0, 0xFFFFFF};
  std::string action = "ecmp";  // ecmp | spray | pin | drop | mirror | quarantine
  uint16_t port = 0;            // pin, mirror, quarantine: index into SwitchConfig::ports
  uint8_t keep_percent = 5;     // quarantine: PSN % 100 below it stays on the normal path
};

struct TcamPartitionSettings {
  std::string name;
  uint32_t capacity = 0;
};

struct TcamSettings {
  uint32_t capacity = 16384;
  uint32_t spray_rule_limit = 16384;
  std::vector<TcamPartitionSettings> partitions;
  std::vector<TcamRuleSettings> rules;
};

struct HashSettings {
  std::string algorithm = "crc32c";  // crc32c | crc32
  uint32_t seed = 0;
  bool dest_qp = false;
};

struct QosSettings {
  std::string trust = "dscp";  // dscp | pcp
  std::vector<std::pair<uint8_t, uint8_t>> dscp_to_tc;  // overrides of dscp >> 3
  std::vector<std::pair<uint8_t, uint8_t>> pcp_to_tc;   // overrides of identity
};

struct PfcSettings {
  bool enabled = false;
  uint8_t priorities = 1u << 3;  // bitmask: lossless priorities
  // The shared lossless ingress buffer (dataplane/egress/shared_buffer.h).
  uint64_t pool_bytes = SharedBufferConfig::kDefaultPoolBytes;
  double alpha = 1.0;                   // dynamic threshold: alpha x the free pool
  uint64_t static_threshold_bytes = 0;  // > 0: a static threshold instead of alpha
  uint64_t headroom_bytes = 0;          // per PG; 0: auto, from each port's link and MTU
  uint64_t xoff_offset_bytes = 0;
  uint64_t xon_offset_bytes = SharedBufferConfig{}.xon_offset_bytes;
  uint16_t quanta = 0xFFFF;
  bool fast_feedback = false;
  bool watchdog = true;
  uint64_t watchdog_detect_ns = 200'000'000;
  uint64_t watchdog_restore_ns = 200'000'000;
  std::string watchdog_action = "drop";  // drop | forward (dataplane/egress/pfc_state.h)
};

// ECN marking at the egress ports (`ecn:`, dataplane/egress/ecn_marker.h): off without the block.
// The thresholds are a preset scaled to each port's link rate unless kmin_bytes / kmax_bytes
// override them for every port; ecn_marker_config() resolves them for one port.
struct EcnSettings {
  // The presets' thresholds, in bytes (HPCC's run.py writes KB and ns-3 multiplies by 1000).
  // hpcc: kmin 100 KB and kmax 400 KB per 25 Gbit/s of the port's rate (kmin_map 100*bw/25,
  // kmax_map 400*bw/25); conweave: those of 25 Gbit/s at any rate.
  static constexpr uint64_t kKminBytesPer25G = 100'000;
  static constexpr uint64_t kKmaxBytesPer25G = 400'000;
  static constexpr uint64_t kMaxThresholdBytes = uint64_t{1} << 40;
  // dctcp: K = 30 KB per 10 Gbit/s for both kmin and kmax (run.py's dctcp kmin_map/kmax_map
  // 30*bw/10), with pmax 1: DCTCP's step marking.
  static constexpr uint64_t kDctcpKBytesPer10G = 30'000;

  bool enabled = false;  // true when the block is present, unless it says enabled: false
  EcnMarkPoint mark_at = EcnMarkPoint::kDequeue;
  // Bitmask of the traffic classes marked; the block's default: the PFC lossless priorities
  // when pfc is on, else class 3.
  uint8_t classes = 1u << 3;
  std::string preset = "hpcc";         // hpcc | conweave | dctcp
  std::optional<uint64_t> kmin_bytes;  // overrides the preset at every port
  std::optional<uint64_t> kmax_bytes;
  double pmax = 0.2;  // (0, 1]
};

// In-band telemetry for HPCC (`int:`, dataplane/wire/int_header.h): every port pushes its record
// on each frame that carries INT on udp_port as the frame starts (EgressIntConfig). Off without
// the block.
struct IntSettings {
  bool enabled = false;  // true when the block is present, unless it says enabled: false
  uint16_t udp_port = 4792;
  // The longest frame a port may send with the records on it (0: no limit): a frame with no
  // room left gets INT's M bit instead of a record.
  uint32_t max_frame_bytes = 0;
};

// The control loop (control/control_loop.h): period, reweighting formula, EWMA.
// CONGA (dataplane/wire/conga_overlay.h, docs/switch_emu.md "CONGA"). A `conga:` block turns it
// on: every port keeps a DRE and raises the CE of overlay packets it sends (a spine needs no
// more); a leaf (`leaf:` set) also tunnels what its conga groups carry to the group's leaf and
// takes the overlay off what arrives for its own `vtep`.
struct CongaSettings {
  bool enabled = false;
  int leaf = -1;  // this switch's leaf id (0..255); -1: a spine
  uint32_t vtep = 0;  // this leaf's tunnel address (host order)
  std::vector<std::pair<uint8_t, uint32_t>> leaves;  // (leaf id, tunnel address) of the others
  uint32_t vni = 1;
  DreSettings dre;
  uint64_t aging_ns = CongaTables::kDefaultAgingNs;
};

// ConWeave (dataplane/forwarding/conweave_tx.h, conweave_rx.h; docs/switch_emu.md "ConWeave"): a
// `conweave:` block on a leaf. Its conweave groups tunnel RoCE data to the group's leaf, which
// holds what a reroute would deliver out of order. Spines need nothing: they route the overlay.
struct ConweaveSwitchSettings {
  bool enabled = false;
  int leaf = -1;
  uint32_t vtep = 0;
  std::vector<std::pair<uint8_t, uint32_t>> leaves;
  uint32_t vni = 1;
  // Leaf to leaf and back, propagation only, as conweave-ns3 sets it (1 us links, 2 hops: 4 us).
  uint64_t base_rtt_ns = 4'000;
  ConweaveSettings params;
  uint8_t control_dscp = 48;  // RTT replies, CLEARs, NOTIFYs: a class PFC does not pause
};

struct ControlSettings {
  uint64_t period_ms = 200;
  double target_utilisation = 0.6;  // u_target of the bucket formula
  uint32_t idle_buckets = 32;       // B: buckets a path at or below the target keeps
  double utilisation_weight = 0.5;  // EWMA weight of the newest period
};

// The poll loops' adaptive idle back-off (dataplane/runtime/poll_loop.h), `idle_backoff:` in
// both programs' configs; --idle-backoff-us and --idle-polls override it. The defaults are the
// programs' (runtime::kProgramIdleBackoff): on, for lcores that share cores.
struct IdleBackoffSettings {
  static constexpr uint64_t kMaxSleepUs = 1'000'000;
  static constexpr uint32_t kMaxIdlePolls = 100'000'000;
  uint64_t max_sleep_us = 100;  // the longest sleep; 0: busy polling (benchmarks)
  uint32_t idle_polls = 256;    // empty rounds in a row before the first sleep
};
// Reads an `idle_backoff:` block ({max_sleep_us, idle_polls}) into `s`.
void parse_idle_backoff(IdleBackoffSettings& s, const ConfigNode& n);

// The telemetry socket (`telemetry:`): what it lets a client do, and who may connect.
struct TelemetrySettings {
  // The acting commands (link_set, link_rate, link_ber, link_loss, tcam_add, tcam_remove,
  // group_mode) answer a refusal unless this is true or switch_emu has --telemetry-acting.
  bool acting_commands = false;
  // The socket's mode, set once EAL has made it: 0600 lets only its owner (the user that ran
  // the program) connect; 0660 adds the owner's group.
  uint32_t socket_mode = 0600;
};

struct LcoreSettings {
  unsigned lcore = 0;
  // Indices into SwitchConfig::ports whose egress this lcore owns (its lane transmits them on tx
  // queue 0; other lanes hand it their frames, unless the port has a tx queue per lane).
  std::vector<uint16_t> ports;
  // The (port index, rx queue) pairs this lcore polls: `rx:` in the config, else queue 0 of each
  // of `ports`.
  std::vector<std::pair<uint16_t, uint16_t>> rx;
};

struct SwitchConfig {
  std::string file;
  std::string name = "switch";
  uint64_t seed = 1;
  std::string ppcid_layout = "ts-high";  // how TCAM spray rules read the PPCID: ts-high | path-high
  uint32_t mempool_mbufs = 0;  // 0: sized from ports and descriptors
  // Data room of each mbuf: a frame must fit one segment (the pipeline refuses chained mbufs).
  // The default holds a RoCEv2 packet at MTU 4096 with every header; 9344 fits 9216-byte jumbos.
  uint32_t mbuf_data_room = 4096 + 256 + 128;
  // The route table's backend (`route_table: lpm | rib | hash`): lpm answers in one or two
  // memory accesses but costs 64 MiB per switch; rib walks a trie, a few hundred bytes per
  // route, for fabrics of many switches in one process; hash probes a map per prefix length and
  // takes no DPDK memzone, for more switches than ribs fit (dataplane/forwarding/route_table.h).
  RouteTableBackend route_table = RouteTableBackend::kLpm;
  std::vector<PortSettings> ports;
  std::vector<GroupSettings> groups;
  std::vector<RouteSettings> routes;
  TcamSettings tcam;
  HashSettings hash;
  QosSettings qos;
  PfcSettings pfc;
  EcnSettings ecn;
  IntSettings int_telemetry;  // `int:`
  CongaSettings conga;
  ConweaveSwitchSettings conweave;
  ControlSettings control;
  IdleBackoffSettings idle_backoff;
  TelemetrySettings telemetry;
  std::vector<LcoreSettings> lcores;  // empty: the main lcore polls every port

  int port_index(const std::string& name) const;  // -1 when unknown
};

SwitchConfig parse_switch_config(const ConfigNode& root);
// One TCAM rule as the config's tcam.rules[] entries write it (port names resolved against
// `config`); also how telemetry's tcam_add reads a rule given as a YAML flow map.
TcamRuleSettings parse_tcam_rule(const SwitchConfig& config, const ConfigNode& node);
// The dataplane's view of the TCAM settings.
TcamRule to_tcam_rule(const TcamRuleSettings& rule);
TcamConfig to_tcam_config(const TcamSettings& tcam);
SwitchConfig load_switch_config(const std::string& path);

// The ECN marker config of port `port_index` (its link rate scales the hpcc preset): every class
// off when ecn is off. `seed` is the marker's own (one generator per port: SwitchNode uses
// ecn_port_seed(config.seed, port_index)). Throws std::out_of_range for a port that is not there.
EcnMarkerConfig ecn_marker_config(const SwitchConfig& config, size_t port_index, uint64_t seed);
// A port's marker seed from the node's: apart from the links' (seed * 7919 + i) and the groups'
// (seed * 1000003 + g), so that no two of a node's generators draw the same sequence.
constexpr uint64_t ecn_port_seed(uint64_t node_seed, size_t port_index) {
  return node_seed * 1000033 + port_index;
}

// Every key, its default and what is allowed (switch_emu --help prints it).
std::string switch_config_help();

}  // namespace spraynet::control
