// What one fabric_emu experiment is: the topology, the switches' buffer and PFC settings, the
// workload, the modes compared, the events, the run length and the seeds. Filled from flags or
// from a YAML file (`fabric:` at the top; every flag has a key of the same name with '_' for
// '-'); every error names the file (or "command line"), the key and what is allowed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/cc_settings.h"
#include "dataplane/forwarding/conweave_tx.h"

namespace spraynet::fabric {

// How the fabric balances, as one name: the switches' group mode, what the NIC does, and
// whether the receiving NIC reorders.
enum class FabricMode : uint8_t {
  kEcmp,            // 5-tuple CRC32C % N at every switch
  kEcmpQp,          // the same with BTH DestQP in the key ("E-ECMP")
  kWeighted,        // bucket tables reweighted by the control loop from link state
  kDlb,             // flowlets on the least-queued eligible member
  kDrill,           // per packet, the less loaded of two samples and the last winner
  kLetflow,         // flowlets on a member drawn at random (LetFlow, NSDI 2017)
  kConga,           // flowlets on the least congested uplink, leaf-to-leaf feedback (CONGA)
  kConweave,        // RoCE flows rerouted off slow paths, reordering masked at the leaf (ConWeave)
  kOblivious,       // ECMP switches; each NIC QP's packets on a permutation of UDP source ports
  kReps,            // ECMP switches; NIC QPs recycle the source ports ACKs echo (REPS)
  kSpray,           // NIC writes a path id per packet; leaves spray by TCAM rule
  kSprayNoReorder,  // the same with receive none, whatever --receive says (see receive)
};
std::string_view to_string(FabricMode mode);
std::optional<FabricMode> parse_fabric_mode(std::string_view name);
bool is_spray(FabricMode mode);
// The NIC chooses each packet's UDP source port (oblivious, reps) for ECMP switches to hash.
bool is_entropy_spray(FabricMode mode);
// One QP's packets take several paths, so its receiver sees them reordered: spray (with or
// without the reorder engine), DRILL's per-packet choice at the leaf, entropy spraying.
bool spreads_per_packet(FabricMode mode);
inline constexpr const char* kModeNames = "ecmp | ecmp-qp | weighted | dlb | drill | letflow | conga | conweave | oblivious | reps | spray | spray-noreorder";

enum class Workload : uint8_t { kPermutation, kAllreduce, kAlltoall, kIncast, kCdf };
std::string_view to_string(Workload w);
std::optional<Workload> parse_workload(std::string_view name);
inline constexpr const char* kWorkloadNames = "permutation | allreduce | alltoall | incast | cdf";

// One timed change to the fabric.
struct FabricEvent {
  enum class Kind : uint8_t { kLinkDown, kLinkUp, kBer, kRate, kBackground, kFilter };
  Kind kind = Kind::kLinkDown;
  // A link ("leaf0-spine3", "leaf0-spine3#1", "p1.leaf0-p1.spine3", "h3-leaf0"; for ber and
  // rate also one direction, "spine3>leaf1"), for background a switch ("spine2"), and for a
  // filter a link or a host ("h3": between that host's NIC and the host).
  std::string target;
  double value = 0;  // BER, Gbit/s, background load fraction, or filter on (1) / off (0)
  uint64_t at_ns = 0;
  // Background only: > 0 makes it a square wave, on for toggle_ns from at_ns, off for toggle_ns,
  // and so on to the end of the run ("=0.8@1ms~500us"): congestion that comes and goes.
  uint64_t toggle_ns = 0;
  std::string text;  // as given, for reports
};
// "link-down:LINK@T", "link-up:LINK@T", "ber:LINK=1e-6@T", "rate:LINK=50@T",
// "background:SWITCH|LINK=0.85[@T[~P]]", "filter:LINK|HOST=udp4791-nonzero-csum|off[@T]"; T and P
// like 500us, 1.5ms, 2000ns, 1s. A filter is a middlebox (a security group) that drops RoCEv2
// packets (UDP 4791) whose UDP checksum is not 0: on a link, both ways across it; on a host,
// between its NIC and the host. Throws std::invalid_argument with the reason and the accepted
// forms.
FabricEvent parse_fabric_event(std::string_view text);
// "500us" -> 500000; "0" (zero needs no unit) -> 0. Throws std::invalid_argument.
uint64_t parse_duration_ns(std::string_view text);

struct FabricConfig {
  std::string source = "command line";  // the YAML file, for error messages

  // Topology.
  // 2: leaf-spine. 3: a folded Clos of `pods` pods, each `leaves` leaves and `spines` spines,
  // spine s of every pod up to the super_spines super-spines of super-spine plane s
  // (topology.h names them).
  uint32_t tiers = 2;
  uint32_t pods = 1;          // tiers 3 (1 with tiers 2)
  uint32_t leaves = 2;        // per pod
  uint32_t spines = 8;        // per pod
  uint32_t super_spines = 4;  // tiers 3: per super-spine plane (one plane per spine index)
  uint32_t hosts_per_leaf = 8;
  uint32_t links_per_spine = 1;  // parallel leaf-spine links
  uint32_t links_per_super = 1;  // tiers 3: parallel spine-super-spine links
  uint32_t planes = 1;           // each host has one NIC uplink per plane
  double link_gbps = 100.0;      // every cable's rate, unless a tier's is given below
  double leaf_spine_gbps = 0;    // 0: link_gbps
  double spine_super_gbps = 0;   // tiers 3; 0: link_gbps
  // Oversubscription per tier, (A, B) for A:B, bandwidth below a switch to bandwidth above it:
  // the leaf's (its hosts' : its uplinks'), then with three tiers the spine's (its leaves' : its
  // super-spines'). Each sets its tier's up-link rate from the counts (leaf_spine_rate,
  // spine_super_rate); empty: the rates given (or link_gbps).
  std::vector<std::pair<double, double>> oversubscription;
  uint64_t delay_ns = 1000;  // propagation delay of every cable
  // Cables of different lengths: each cable's delay is delay_ns + a seeded draw in
  // [0, cable_spread_ns] (1 ns is about 20 cm of fibre: 500 ns, cables that differ by up to
  // 100 m, as across a row of racks).
  uint64_t cable_spread_ns = 500;
  uint32_t mtu = 4096;       // 1024 | 4096

  // Switch buffer and PFC.
  // Per egress port and traffic class: the lossy classes' limit. With PFC on, the lossless class
  // has none: each switch's shared lossless buffer (the pfc_ settings) bounds it.
  uint64_t queue_bytes = 1 << 20;
  bool pfc = true;
  // The shared lossless ingress pool, per switch: a 32 x 100G shared-buffer switch's (SONiC's
  // Arista 7060CX config gives its ingress_lossless_pool 12,766,208 bytes).
  uint64_t pfc_pool_bytes = 12ull << 20;
  double pfc_alpha = 1.0;                   // dynamic threshold: alpha x the free pool
  uint64_t pfc_static_threshold_bytes = 0;  // > 0: a static threshold instead
  uint64_t pfc_headroom_bytes = 0;          // per PG; 0: auto from each cable and the MTU
  uint64_t pfc_xoff_offset_bytes = 0;
  uint64_t pfc_xon_offset_bytes = 16384;
  bool fast_feedback = false;
  bool pfc_watchdog = true;
  uint64_t pfc_watchdog_ns = 200'000'000;
  std::string pfc_watchdog_action = "drop";  // drop | forward (dataplane/egress/pfc_state.h)

  // Workload.
  Workload workload = Workload::kPermutation;
  uint32_t qps_per_host = 1;
  uint64_t msg_bytes = 1 << 20;  // permutation: size of each message
  uint64_t bytes = 16 << 20;     // allreduce: buffer; alltoall: per pair; incast: per sender
  uint32_t channels = 1;         // allreduce rings
  uint32_t incast_senders = 8;
  std::string cdf = "websearch";  // cdf: a built-in name or a file
  double load = 0.5;              // cdf: offered load per host, fraction of its line rate
  // FCT slowdown bins (fabric/slowdown.h): deciles | ventiles | bdp | "E1,E2,..". Empty: the
  // CDF's deciles for cdf, one bin of every message for the other workloads.
  std::string slowdown_bins;
  // cdf: the load given as a fraction of the leaf uplinks' capacity for the inter-leaf share of
  // the traffic (0: not given, `load` is in force). host_load() turns it into the per-host load
  // the arrivals are drawn at; `--load` and `--network-load` are one setting given two ways.
  double network_load = 0;
  uint64_t message_gap_ns = 0;    // permutation: idle time between a QP's messages (flowlet gaps)
  std::string op = "write";       // permutation: write | read (the destination's data comes back)

  // Modes and hashing.
  std::vector<FabricMode> modes = {FabricMode::kEcmp, FabricMode::kSpray};
  std::string spray_policy = "rr";  // rr | weighted | adaptive (the NIC's uplink choice)
  bool same_hash_seed = false;      // --hash-seed same: every switch hashes alike (polarization)
  bool udp_sport_fixed = false;     // --udp-sport fixed: one UDP source port per NIC
  // auto: ts-high (16 path ids) up to 16 uplinks per leaf, path-high (256) beyond, so that a
  // sprayed QP can use every uplink.
  std::string ppcid_layout = "auto";
  // Hosts whose NIC uses another layout than the fabric's (ppcid_layout): the mismatch of
  // pitfall 2, one NIC on a firmware that reads the PPCID the other way. (host name, layout).
  std::vector<std::pair<std::string, std::string>> ppcid_layout_hosts;
  // Path ids the NICs rotate through and recognise on receipt; 0 (auto): every id the layout
  // holds (16 in ts-high, 256 in path-high). With fewer than the layout holds, an id a receiver
  // does not know tells it something is wrong: that is how it can see a layout mismatch.
  uint32_t fabric_paths = 0;
  // The receiving NIC sets the UDP checksum back to 0 before the host (DESIGN.md): off shows why.
  bool nic_restore_checksum = true;
  // How the RC engines' packets carry their payload: "shared" (a chained segment attached from
  // one read-only PayloadStore, no copy; the default) or "copy" (into every packet). The
  // packets and every result are the same; shared is faster and its mbufs are small.
  std::string payload = "shared";
  // The receiving NICs' model (nic_emu's `receive`): reorder-buffer (today's default: the
  // reorder engine in spray mode, rxe's responder alone in the others, where nothing reorders)
  // | ooo-placement (every mode: placement responder, selective retransmission) | none (rxe's
  // responder alone in every mode). Mode spray-noreorder is spray with receive none, so it
  // cannot be combined with ooo-placement.
  std::string receive = "reorder-buffer";
  // Larger than nic_emu's 100 us / 256: under PFC (an incast, say) sprayed paths are paused at
  // different times and a QP's packets can be hundreds of microseconds and hundreds of PSNs
  // apart; a hold that gives up too early turns that into NAKs and go-back-N, which reorders
  // more (8-to-1 incast, spray: 100 us / 256 never finished in 20 ms, 500 us / 1024 reaches
  // 0.98 of the receiver's line rate with no retransmission).
  uint64_t reorder_hold_ns = 500'000;
  uint32_t reorder_window = 1024;
  // receive ooo-placement: how long a hole waits before its NAK. The same 500 us as the reorder
  // hold, for the same reason: under PFC a sprayed QP's packets can be that far apart.
  uint64_t placement_nak_delay_ns = 500'000;
  // Unacknowledged packets per QP. rxe keeps 128 and asks for an ACK every 65th packet, which
  // leaves a 100G QP window-bound once queues add tens of us to its RTT; hardware RNICs keep
  // far more in flight. 512 lets a QP alone on a link fill it, as the ECMP expectation assumes.
  uint32_t max_in_flight = 512;
  uint64_t retransmit_timeout_ns = 67'108'864;
  // The transport: "rc" (RoCE RC over a lossless class: go-back-N, or selective with
  // ooo-placement) or "irn" (Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018:
  // lossy RoCE, PFC off on the data class, NAKs with a SACK and selective repeat of every hole,
  // a BDP cap on packets in flight, two timeouts). With irn, max_in_flight and
  // retransmit_timeout_ns give way to the irn_ settings.
  std::string transport = "rc";
  // IRN §4.1 (40 Gbit/s, their fabric): RTO_low 100 us while at most N = 3 packets are in
  // flight, RTO_high 320 us otherwise.
  uint64_t irn_rto_low_ns = 100'000;
  uint64_t irn_rto_high_ns = 320'000;
  uint32_t irn_rto_low_packets = 3;
  // IRN's BDP cap, packets per QP; 0 (auto): the bandwidth-delay product of the longest path
  // (longest_path_bdp_bytes, as --slowdown-bins bdp uses it) in MTU packets,
  // rounded up.
  uint32_t irn_bdp_packets = 0;
  // In the modes that reorder per packet, how long the reorder engine holds a gap and the
  // placement responder waits before NAKing one (elsewhere IRN NAKs the first packet past a gap,
  // at once). reorder-hold-us and placement-nak-delay-us are rc's: their 500 us wait out PFC
  // pauses, which IRN does not have; below RTO_high, or what is merely late is resent.
  uint64_t irn_reorder_wait_ns = 100'000;
  uint64_t dlb_gap_ns = 100'000;  // 0 is not allowed by the flowlet table
  // LetFlow's flowlet timeout: conweave-ns3's LetflowRouting (100 us for 100G RoCE).
  uint64_t letflow_timeout_ns = 100'000;
  // CONGA: conweave-ns3's network-load-balance.cc at 100 Gbit/s (flowlet 100 us, T_dre 50 us,
  // alpha 0.2, 3 bits, aging 500 us).
  uint64_t conga_flowlet_ns = 100'000;
  uint64_t conga_dre_ns = 50'000;
  double conga_alpha = 0.2;
  uint32_t conga_bits = 3;
  uint64_t conga_aging_ns = 500'000;
  // ConWeave: conweave-ns3's run.py values for its leaf-spine (dataplane/forwarding/conweave_tx.h).
  ConweaveSettings conweave;
  // oblivious, reps: the entropy values (UDP source ports) of each QP; a power of two.
  uint32_t entropy_values = 256;
  uint64_t control_period_ns = 200'000'000;
  // The NICs' own control loop (spray modes with spray_policy weighted): how often each NIC
  // reads its uplinks' link state and republishes its spray weights.
  uint64_t nic_control_period_ns = 200'000'000;
  uint32_t tcam_spray_rules = 16384;  // a leaf's spray_rule_limit
  // "per-qp" (a rule per sprayed QP and one for its ACKs, the articles' set-up) or "all-roce"
  // (one catch-all rule per leaf: with a QP per message, per-QP rules would never fit).
  std::string spray_rules = "per-qp";
  uint32_t tcam_capacity = 16384;     // the rules a leaf's TCAM holds in all (the hardware's size)
  // A TCAM partition of this many rules for the sprayed QPs' rules (0: none, they share the
  // default partition, i.e. the whole TCAM).
  uint32_t tcam_roce_partition = 0;

  // Congestion control (docs/congestion-control.md): DCQCN on by default, as on every
  // production RoCEv2 fabric (ConnectX ships it on). With cc on, every switch marks ECN on the
  // lossless class, the NICs send ECT(0), make CNPs and pace each QP at its DCQCN rate; `none`
  // is the model without: senders bounded by their window and PFC alone.
  control::CcSettings cc = default_cc();
  // ECN marking (with cc on): the preset's thresholds per port rate (hpcc: 100 KB / 400 KB per
  // 25 Gbit/s; conweave: 100 KB / 400 KB flat), unless kmin/kmax are given (0: the preset's).
  std::string ecn_preset = "hpcc";
  uint64_t ecn_kmin_bytes = 0;
  uint64_t ecn_kmax_bytes = 0;
  double ecn_pmax = 0.2;
  std::string ecn_mark_at = "dequeue";  // dequeue | enqueue
  static control::CcSettings default_cc() {
    control::CcSettings c;
    c.mode = control::CcMode::kDcqcn;
    return c;
  }

  std::vector<FabricEvent> events;

  // Run.
  uint64_t duration_ns = 2'000'000;  // permutation: run length; others: time limit
  uint64_t warmup_ns = 0;            // not given: a fifth of duration (not for cdf: none)
  bool warmup_given = false;         // --warmup / warmup: given, 0 included (0: no warm-up)
  uint64_t seed_first = 1;
  uint64_t seed_last = 1;
  uint64_t sample_ns = 100'000;  // timeseries and PFC timeline interval
  // Where the report goes (YAML json/timeseries/plots/csv; the flags of the same names win).
  // Not part of the experiment: config_json leaves them out.
  std::string json_file, timeseries_file, plots_dir, csv_dir;

  uint32_t total_leaves() const { return pods * leaves; }  // per plane
  uint32_t hosts() const { return total_leaves() * hosts_per_leaf; }
  // The leaf-spine rate: leaf_spine_gbps, else the leaf tier's oversubscription A:B over the
  // counts (hosts_per_leaf x link_gbps x B / (A x leaf uplinks)), else link_gbps.
  double leaf_spine_rate() const {
    if (leaf_spine_gbps > 0) return leaf_spine_gbps;
    if (oversubscription.empty()) return link_gbps;
    const auto [a, b] = oversubscription[0];
    return hosts_per_leaf * link_gbps * b / (a * leaf_uplinks());
  }
  // The spine-super rate: spine_super_gbps, else the spine tier's A:B (leaves x links_per_spine x
  // leaf_spine_rate() x B / (A x spine uplinks)), else link_gbps.
  double spine_super_rate() const {
    if (spine_super_gbps > 0) return spine_super_gbps;
    if (oversubscription.size() < 2) return link_gbps;
    const auto [a, b] = oversubscription[1];
    return leaves * links_per_spine * leaf_spine_rate() * b / (a * spine_uplinks());
  }
  // The layout host `name`'s NIC uses (ppcid_layout_hosts, else the fabric's).
  std::string host_ppcid_layout(const std::string& name) const;
  std::string effective_ppcid_layout() const {
    if (ppcid_layout != "auto") return ppcid_layout;
    // Three tiers: a sprayed path is a choice at the leaf and one at the spine.
    const uint64_t paths = uint64_t{spines} * links_per_spine *
                           (tiers == 3 ? uint64_t{super_spines} * links_per_super : 1);
    return paths > 16 ? "path-high" : "ts-high";
  }
  // Spray choices per plane: a leaf's among its uplinks, a three-tier spine's among its links up.
  uint32_t leaf_uplinks() const { return spines * links_per_spine; }
  uint32_t spine_uplinks() const { return super_spines * links_per_super; }
  // The path ids a NIC rotates through with fabric_paths auto, when its layout holds
  // `layout_ids`: all of them with two tiers; with three, one per (leaf uplink, spine uplink)
  // pair, the leaf choosing by the id's low digit (id % leaf_uplinks) and the spine by the next
  // (id / leaf_uplinks), capped at what the layout holds (docs/fabric_emu.md "Three tiers").
  uint32_t auto_fabric_paths(uint32_t layout_ids) const {
    if (tiers != 3) return layout_ids;
    return static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{leaf_uplinks()} * spine_uplinks(), layout_ids));
  }
  uint64_t warmup() const {
    if (warmup_given || warmup_ns != 0 || workload == Workload::kCdf) return warmup_ns;
    return duration_ns / 5;
  }
  // Messages that start before it are left out of the FCT slowdown: permutation's window start,
  // the warm-up given for the others (none by default).
  uint64_t slowdown_warmup() const {
    return workload == Workload::kPermutation ? warmup() : warmup_ns;
  }
  // cdf load, as papers state it. Destinations are uniform over the other hosts, so a host's
  // flows leave its leaf with probability inter_leaf_share() = (hosts - hosts_per_leaf) /
  // (hosts - 1). Per plane, a leaf's hosts offer hosts_per_leaf x link_gbps x host load x that
  // share to its uplinks, whose capacity is spines x links_per_spine x leaf_spine_rate(): the
  // network load is the one over the other, and the host load the network load x
  // uplink_capacity / (hosts_per_leaf x link_gbps x share). 0 with a single leaf.
  double inter_leaf_share() const {
    const uint64_t n = hosts();
    return n > 1 ? static_cast<double>(n - hosts_per_leaf) / static_cast<double>(n - 1) : 0.0;
  }
  // A leaf's uplink capacity over its hosts' line rate (both per plane): 1 / oversubscription.
  double uplink_ratio() const {
    return static_cast<double>(leaf_uplinks()) * leaf_spine_rate() / (hosts_per_leaf * link_gbps);
  }
  // The per-host load the arrivals are drawn at: `load`, or network_load converted.
  double host_load() const {
    if (network_load <= 0) return load;
    const double share = inter_leaf_share();
    return share > 0 ? network_load * uplink_ratio() / share : 0.0;
  }
  // The inter-leaf offered load against the leaf uplinks' capacity at host_load().
  double offered_network_load() const { return host_load() * inter_leaf_share() / uplink_ratio(); }
  // The receive model the NICs of a `mode` run use: reorder-buffer | ooo-placement | none.
  std::string effective_receive(FabricMode mode) const;
  // The bandwidth-delay product of the longest path, bytes: the host rate times the ideal FCT
  // of one full packet over it and its ACK back (host, leaf-spine, across pods twice
  // spine-super-spine, host; every cable at delay_ns + cable_spread_ns, each tier at its rate).
  // --slowdown-bins bdp's edge and IRN's BDP cap.
  uint64_t longest_path_bdp_bytes() const;
  // transport irn: the BDP cap in force (irn_bdp_packets, or longest_path_bdp_bytes in MTU
  // packets, rounded up, at least 2).
  uint32_t irn_bdp() const;
  // The switches' ECN marking in force: DCTCP marks with its own step (the `dctcp` preset,
  // pmax 1, ns-3 HPCC run.py's DCTCP runs) whatever ecn-preset and ecn-pmax say.
  std::string effective_ecn_preset() const {
    return cc.mode == control::CcMode::kDctcp ? "dctcp" : ecn_preset;
  }
  double effective_ecn_pmax() const { return cc.mode == control::CcMode::kDctcp ? 1.0 : ecn_pmax; }
  // Empty when valid, else "key: reason" (key as the flag says it).
  std::string check() const;
};

// Reads `fabric:` from a YAML file over `base` (flags given on the command line are applied
// after). Throws control::ConfigError naming the file and key.
FabricConfig load_fabric_config(const std::string& path, FabricConfig base = {});
FabricConfig parse_fabric_config_yaml(const std::string& yaml, const std::string& name,
                                      FabricConfig base = {});
// "auto" -> 0, or a byte count in [2048, 2^30]. Throws std::invalid_argument.
uint64_t parse_headroom_bytes(std::string_view text);
// "1-20" or "7" -> [first, last]. Throws std::invalid_argument.
std::pair<uint64_t, uint64_t> parse_seed_range(std::string_view text);
std::vector<FabricMode> parse_mode_list(std::string_view text);  // "ecmp,spray"
// "h3=path-high" -> {"h3", "path-high"}. Throws std::invalid_argument.
std::pair<std::string, std::string> parse_ppcid_layout_host(std::string_view text);
// "auto" -> 0, or a count in [1, 256]. Throws std::invalid_argument.
uint32_t parse_fabric_paths(std::string_view text);
// "1:1,2:1" -> {{1, 1}, {2, 1}}: A:B per tier, leaf first, A and B > 0. Throws
// std::invalid_argument naming the accepted form.
std::vector<std::pair<double, double>> parse_oversubscription(std::string_view text);
// The other way: "1:1,2:1" ("" for none).
std::string format_oversubscription(const std::vector<std::pair<double, double>>& ratios);

}  // namespace spraynet::fabric
