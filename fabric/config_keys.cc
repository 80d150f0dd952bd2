// The table of every fabric setting (config_keys.h): each key's help, its values and how it sets
// the config, for the flags and the YAML `fabric:` map alike.
#include "fabric/config_keys.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>

#include "control/config_reader.h"
#include "fabric/slowdown.h"

namespace spraynet::fabric {

namespace {

std::string shown(const std::string& v) {
  return "'" + v + "'";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

uint64_t whole_in(const std::string& v, uint64_t min, uint64_t max) {
  const auto n = control::parse_uint(v);
  if (!n || *n < min || *n > max) {
    throw std::invalid_argument("must be a whole number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got " + shown(v));
  }
  return *n;
}

double number_in(const std::string& v, double min, double max, const char* unit = "a number") {
  double d = 0;
  bool ok = false;
  try {
    size_t used = 0;
    d = std::stod(v, &used);
    // nan and inf parse, but no range check could refuse them afterwards (nan compares false).
    ok = used == v.size() && std::isfinite(d) && d >= min && d <= max;
  } catch (const std::exception&) {
  }
  if (!ok) {
    throw std::invalid_argument(std::string("must be ") + unit + " in [" + number_text(min) + ", " +
                                number_text(max) + "], got " + shown(v));
  }
  return d;
}

bool on_off(const std::string& v) {
  if (v == "on" || v == "true" || v == "yes" || v == "1") return true;
  if (v == "off" || v == "false" || v == "no" || v == "0") return false;
  throw std::invalid_argument("must be on|off (or true|false), got " + shown(v));
}

std::string one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : "|") + std::string(a);
  }
  throw std::invalid_argument("must be one of " + list + ", got " + shown(v));
}

std::vector<ConfigKey> make_keys() {
  std::vector<ConfigKey> f;
  using Set = std::function<void(FabricConfig&, const std::string&)>;
  const auto key = [&](const char* name, const std::string& help, Set set) {
    f.push_back({name, help, std::move(set)});
  };
  const auto u32 = [&](const char* name, uint32_t FabricConfig::*m, uint64_t min, uint64_t max,
                       const char* help) {
    key(name, help, [m, min, max](FabricConfig& c, const std::string& v) {
      c.*m = static_cast<uint32_t>(whole_in(v, min, max));
    });
  };
  const auto u64 = [&](const char* name, uint64_t FabricConfig::*m, uint64_t min, uint64_t max,
                       const char* help) {
    key(name, help,
        [m, min, max](FabricConfig& c, const std::string& v) { c.*m = whole_in(v, min, max); });
  };
  const auto dbl = [&](const char* name, double FabricConfig::*m, double min, double max,
                       const char* help) {
    key(name, help,
        [m, min, max](FabricConfig& c, const std::string& v) { c.*m = number_in(v, min, max); });
  };
  const auto boolean = [&](const char* name, bool FabricConfig::*m, const char* help) {
    key(name, help, [m](FabricConfig& c, const std::string& v) { c.*m = on_off(v); });
  };
  const auto choice = [&](const char* name, std::string FabricConfig::*m,
                          std::initializer_list<const char*> allowed, const std::string& help) {
    std::vector<const char*> list(allowed);
    key(name, help, [m, list](FabricConfig& c, const std::string& v) {
      std::string names;
      for (const char* a : list) {
        if (v == a) {
          c.*m = v;
          return;
        }
        names += (names.empty() ? "" : "|") + std::string(a);
      }
      throw std::invalid_argument("must be one of " + names + ", got " + shown(v));
    });
  };
  const auto text = [&](const char* name, std::string FabricConfig::*m, const char* help) {
    key(name, help, [m](FabricConfig& c, const std::string& v) { c.*m = v; });
  };
  const auto time = [&](const char* name, uint64_t FabricConfig::*m, const std::string& help) {
    key(name, help, [m](FabricConfig& c, const std::string& v) { c.*m = parse_duration_ns(v); });
  };
  // Microseconds given, nanoseconds kept; rounded, so that 4.35 us is 4350 ns and not 4349.
  const auto micros = [&](const char* name, uint64_t FabricConfig::*m, double min, double max,
                          const std::string& help) {
    key(name, help, [m, min, max](FabricConfig& c, const std::string& v) {
      c.*m = static_cast<uint64_t>(std::llround(number_in(v, min, max, "microseconds") * 1000.0));
    });
  };
  u32("leaves", &FabricConfig::leaves, 1, 255, "leaf switches per plane (2)");
  u32("spines", &FabricConfig::spines, 1, 256, "spine switches per plane (8)");
  u32("hosts-per-leaf", &FabricConfig::hosts_per_leaf, 1, 254, "hosts under each leaf (8)");
  u32("links-per-spine", &FabricConfig::links_per_spine, 1, 16,
      "parallel links between each leaf and each spine (1)");
  u32("planes", &FabricConfig::planes, 1, 16,
      "planes: each host has one NIC uplink per plane, each plane its own leaves and spines (1)");
  u32("tiers", &FabricConfig::tiers, 2, 3,
      "2: leaf-spine; 3: a folded Clos of --pods pods (--leaves and --spines per pod), spine s of "
      "every pod up to the --super-spines of super-spine plane s; switches pod1.leaf3, "
      "pod1.spine2, super2.5 (2)");
  u32("pods", &FabricConfig::pods, 1, 255, "tiers 3: pods, each a leaf-spine (1)");
  u32("super-spines", &FabricConfig::super_spines, 1, 256,
      "tiers 3: super-spines per super-spine plane (one plane per spine index of a pod) (4)");
  u32("links-per-super", &FabricConfig::links_per_super, 1, 16,
      "tiers 3: parallel links between each spine and each super-spine (1)");
  dbl("leaf-spine-gbps", &FabricConfig::leaf_spine_gbps, 0, 1600,
      "rate of the leaf-spine cables, Gbit/s; 0: --link-gbps (0)");
  dbl("spine-super-gbps", &FabricConfig::spine_super_gbps, 0, 1600,
      "tiers 3: rate of the spine-super-spine cables, Gbit/s; 0: --link-gbps (0)");
  key("oversubscription",
      "A:B per tier, leaf first: bandwidth below a switch to bandwidth above it (the leaf's hosts "
      ": uplinks; with --tiers 3 then the spine's leaves : super-spines), e.g. 1:1,2:1; sets the "
      "leaf-spine (and spine-super) rate from the counts, instead of --leaf-spine-gbps "
      "(--spine-super-gbps) (none)",
      [](FabricConfig& c, const std::string& v) {
        c.oversubscription = parse_oversubscription(v);
      });
  dbl("link-gbps", &FabricConfig::link_gbps, 1, 1600, "rate of every cable, Gbit/s (100)");
  u64("delay-ns", &FabricConfig::delay_ns, 0, 1'000'000'000,
      "propagation delay of every cable (1000)");
  u64("cable-spread-ns", &FabricConfig::cable_spread_ns, 0, 1'000'000'000,
      "cables of different lengths: each adds a seeded draw in [0, N] ns to delay-ns (500: up to "
      "100 m of difference)");
  key("mtu", "RoCE path MTU: 1024 | 4096 (4096)", [](FabricConfig& c, const std::string& v) {
    c.mtu = static_cast<uint32_t>(std::stoul(one_of(v, {"1024", "4096"})));
  });
  u64("queue-bytes", &FabricConfig::queue_bytes, 16384, uint64_t{1} << 32,
      "switch egress queue limit per port and class, for lossy classes (all classes with PFC off); "
      "with PFC on the lossless class has none, the pool bounds it (1048576)");
  key("transport",
      "rc (RoCE RC on the lossless class: go-back-N, or selective with receive ooo-placement) | "
      "irn (IRN, SIGCOMM 2018: lossy RoCE with PFC off on the data class, out-of-order "
      "placement, NAKs carrying a SACK, selective repeat of every hole, a BDP cap, RTO_low / "
      "RTO_high; with every cc and every mode but spray-noreorder, WRITEs only) (rc)",
      [](FabricConfig& c, const std::string& v) {
        if (v != "rc" && v != "irn") throw std::invalid_argument("rc | irn, got " + shown(v));
        c.transport = v;
        // IRN's premise: no PFC on the data class. Before pfc in this table, so that a pfc on
        // in the same file or command line is refused, while a preset's is overridden.
        if (v == "irn") c.pfc = false;
      });
  key("pfc", "PFC (802.1Qbb) on priority 3 at every switch: on | off (on; off with transport irn)",
      [](FabricConfig& c, const std::string& v) {
        c.pfc = on_off(v);
        if (c.pfc && c.transport == "irn") {
          throw std::invalid_argument(
              "on is not allowed with transport irn (IRN is lossy RoCE: PFC off on the data "
              "class)");
        }
      });
  u64("pfc-pool-bytes", &FabricConfig::pfc_pool_bytes, 65536, uint64_t{1} << 40,
      "each switch's shared lossless ingress pool (12582912: a 32 x 100G switch's, as SONiC "
      "configures a 7060CX)");
  dbl("pfc-alpha", &FabricConfig::pfc_alpha, 1.0 / 128, 128,
      "dynamic threshold: a priority group may hold alpha x the free pool, 1/128..128 (SONiC "
      "dynamic_th = log2 alpha) (1)");
  u64("pfc-static-threshold-bytes", &FabricConfig::pfc_static_threshold_bytes, 0, uint64_t{1} << 40,
      "a static threshold per priority group instead of pfc-alpha; 0: dynamic (0)");
  key("pfc-headroom-bytes",
      "headroom per priority group, for what arrives after XOFF: auto (2 x rate x cable delay + 2 "
      "x MTU + 84 + rate x 2.1 us) or 2048..2^30 (auto)",
      [](FabricConfig& c, const std::string& v) {
        c.pfc_headroom_bytes = parse_headroom_bytes(v);
      });
  u64("pfc-xoff-offset-bytes", &FabricConfig::pfc_xoff_offset_bytes, 0, uint64_t{1} << 40,
      "XOFF when a priority group's shared bytes reach threshold - this (0)");
  u64("pfc-xon-offset-bytes", &FabricConfig::pfc_xon_offset_bytes, 0, uint64_t{1} << 40,
      "XON when they fall to threshold - this (or to 0) with the headroom empty (16384)");
  boolean("fast-feedback", &FabricConfig::fast_feedback,
          "a paused port leaves the DLB/spray candidates at once: on | off (off)");
  boolean("pfc-watchdog", &FabricConfig::pfc_watchdog, "PFC watchdog: on | off (on)");
  micros("pfc-watchdog-us", &FabricConfig::pfc_watchdog_ns, 1, 1e7,
         "PFC watchdog detection and restoration time (200000)");
  choice("pfc-watchdog-action", &FabricConfig::pfc_watchdog_action, {"drop", "forward"},
         "PFC watchdog action on a storm: drop (queue, arrivals and the storming port's ingress "
         "priority dropped, no PFC sent to it) | forward (its pauses ignored, no PFC sent to it, "
         "nothing dropped) (drop)");
  key("workload", "permutation | allreduce | alltoall | incast | cdf (permutation)",
      [](FabricConfig& c, const std::string& v) {
        const auto w = parse_workload(v);
        if (!w) throw std::invalid_argument(std::string(kWorkloadNames) + ", got " + shown(v));
        c.workload = *w;
      });
  u32("qps-per-host", &FabricConfig::qps_per_host, 1, 256,
      "permutation: QPs each host runs to its target (1)");
  u64("msg-bytes", &FabricConfig::msg_bytes, 1, uint64_t{1} << 31,
      "permutation: bytes of each RDMA WRITE (1048576)");
  u64("bytes", &FabricConfig::bytes, 1, uint64_t{1} << 40,
      "allreduce: buffer size; alltoall: bytes per pair; incast: bytes per sender (16777216)");
  u32("channels", &FabricConfig::channels, 1, 64,
      "allreduce: parallel rings, each on its own QPs (1)");
  u32("incast-senders", &FabricConfig::incast_senders, 1, 65535,
      "incast: senders to the one receiver (8)");
  text("cdf", &FabricConfig::cdf,
       "cdf: websearch | alistorage2019 | a file of 'BYTES PERCENT' lines; refused with another "
       "workload, and (without --force) when its sizes look like kilobytes (websearch)");
  key("load",
      "cdf: offered load per host, a fraction of its line rate, as HPCC's traffic generator takes "
      "it; replaces a file's network_load; refused with another workload (0.5)",
      [](FabricConfig& c, const std::string& v) {
        c.load = number_in(v, 0.001, 1);
        c.network_load = 0;
      });
  dbl("network-load", &FabricConfig::network_load, 0.001, 2,
      "cdf: offered load as a fraction of the leaf uplinks' capacity for the inter-leaf share of "
      "the traffic, (0, 2]; the per-host load is network-load x uplink capacity / (hosts per leaf "
      "x line rate x (hosts - hosts per leaf) / (hosts - 1)), per plane; not with --load, refused "
      "with another workload (none: --load)");
  key("slowdown-bins",
      std::string("FCT slowdown bins by message size: ") + kSlowdownBinNames +
          "; deciles: the CDF's, ventiles: HPCC's 20 chunks of 5% of the messages, bdp: "
          "ConWeave's below/above one BDP of the longest path (cdf: deciles; others: one bin of "
          "every message)",
      [](FabricConfig& c, const std::string& v) {
        parse_slowdown_bins(v);
        c.slowdown_bins = v;
      });
  micros("message-gap-us", &FabricConfig::message_gap_ns, 0, 1e6,
         "permutation: idle time between a QP's messages (0)");
  choice("op", &FabricConfig::op, {"write", "read"},
         "permutation: write | read (RDMA READs: the destination's data comes back) (write)");
  key("mode",
      "comma-separated (a list in YAML): ecmp | ecmp-qp | weighted | dlb | drill | letflow | "
      "oblivious | reps | spray | spray-noreorder (ecmp,spray)",
      [](FabricConfig& c, const std::string& v) { c.modes = parse_mode_list(v); });
  f.back().comma_list = true;
  choice("spray-policy", &FabricConfig::spray_policy, {"rr", "weighted", "adaptive"},
         "spray: the NIC's uplink choice across planes: rr | weighted | adaptive (rr)");
  key("hash-seed", "per-switch | same (same reproduces hash polarization) (per-switch)",
      [](FabricConfig& c, const std::string& v) {
        c.same_hash_seed = one_of(v, {"per-switch", "same"}) == "same";
      });
  key("udp-sport", "per-qp (rxe's 0xC000 + hash of the QP) | fixed (one port per NIC) (per-qp)",
      [](FabricConfig& c, const std::string& v) {
        c.udp_sport_fixed = one_of(v, {"per-qp", "fixed"}) == "fixed";
      });
  choice("ppcid-layout", &FabricConfig::ppcid_layout, {"auto", "ts-high", "path-high"},
         "auto | ts-high (16 path ids) | path-high (256); auto: path-high above 16 uplinks per "
         "leaf (auto)");
  key("ppcid-layout-host",
      "HOST=ts-high|path-high: that host's NIC uses this PPCID layout whatever the fabric's "
      "(pitfall 2: one NIC on other firmware); repeatable (a list in YAML)",
      [](FabricConfig& c, const std::string& v) {
        c.ppcid_layout_hosts.push_back(parse_ppcid_layout_host(v));
      });
  f.back().repeatable = true;
  key("fabric-paths",
      "spray: path ids the NICs rotate through and recognise on receipt: auto (every id the "
      "layout holds: 16 in ts-high, 256 in path-high; with --tiers 3 one per pair of a leaf "
      "uplink and a spine link up, at most that) | 1..256; fewer than the layout holds lets a "
      "receiver see a layout mismatch (auto)",
      [](FabricConfig& c, const std::string& v) { c.fabric_paths = parse_fabric_paths(v); });
  boolean("nic-restore-checksum", &FabricConfig::nic_restore_checksum,
          "the receiving NIC sets the UDP checksum (the PPCID on the fabric side) back to 0 before "
          "the host: on | off (on)");
  choice("payload", &FabricConfig::payload, {"shared", "copy"},
         "how the RC engines' packets carry their payload: shared (a chained segment from one "
         "read-only store, no copy) | copy (into every packet); same packets, same results "
         "(shared)");
  choice("receive", &FabricConfig::receive, {"reorder-buffer", "ooo-placement", "none"},
         "receiving NICs: reorder-buffer (reorder engine + rxe responder in spray and drill, the "
         "modes that reorder per packet; rxe alone elsewhere) | ooo-placement (every mode: "
         "out-of-order placement, selective retransmission) | none (rxe alone); spray-noreorder "
         "= spray with none (reorder-buffer)");
  micros("reorder-hold-us", &FabricConfig::reorder_hold_ns, 1, 1e6,
         "reorder hold timeout (500; nic_emu's 100 gives up too early under PFC)");
  u32("reorder-window", &FabricConfig::reorder_window, 1, 16384,
      "reorder window, PSNs per QP (1024)");
  micros("placement-nak-delay-us", &FabricConfig::placement_nak_delay_ns, 0, 1e6,
         "ooo-placement: a hole open this long with packets beyond it is NAKed (500)");
  u32("max-in-flight", &FabricConfig::max_in_flight, 66, 65536,
      "unacknowledged packets per QP (512; rxe keeps 128)");
  micros("retransmit-timeout-us", &FabricConfig::retransmit_timeout_ns, 1, 1e8,
         "RC retransmit timeout (67108.864, perftest's)");
  micros("irn-rto-low-us", &FabricConfig::irn_rto_low_ns, 1, 1e8,
         "irn: RTO_low, the timeout while at most irn-rto-low-packets are in flight (100, IRN "
         "§4.1)");
  micros("irn-rto-high-us", &FabricConfig::irn_rto_high_ns, 1, 1e8,
         "irn: RTO_high, the timeout otherwise (320, IRN §4.1)");
  u32("irn-rto-low-packets", &FabricConfig::irn_rto_low_packets, 0, 65536,
      "irn: N, the packets in flight at or below which RTO_low applies (3, IRN §4.1)");
  micros("irn-reorder-wait-us", &FabricConfig::irn_reorder_wait_ns, 0, 1e8,
         "irn, modes that reorder per packet: the reorder engine's hold and the placement "
         "responder's NAK delay; elsewhere IRN NAKs at the first packet past a gap (100)");
  u32("irn-bdp-packets", &FabricConfig::irn_bdp_packets, 0, 65536,
      "irn: the BDP cap, packets in flight per QP; 0 (auto): the longest path's "
      "bandwidth-delay product in MTU packets (0)");
  micros("dlb-gap-us", &FabricConfig::dlb_gap_ns, 0.001, 1e6, "dlb: flowlet gap (100)");
  micros("letflow-timeout-us", &FabricConfig::letflow_timeout_ns, 0.001, 1e6,
         "letflow: flowlet timeout; a flowlet idle this long goes to a random member (100, "
         "conweave-ns3's LetflowRouting)");
  micros("conga-flowlet-timeout-us", &FabricConfig::conga_flowlet_ns, 0.001, 1e6,
         "conga: flowlet timeout (100, conweave-ns3's network-load-balance.cc at 100 Gbit/s)");
  micros("conga-dre-us", &FabricConfig::conga_dre_ns, 0.001, 1e6,
         "conga: T_dre, the DRE's decay period; X *= 1 - alpha every T_dre (50)");
  dbl("conga-alpha", &FabricConfig::conga_alpha, 1e-6, 1,
      "conga: the DRE's alpha; its time constant is T_dre / alpha (0.2)");
  u32("conga-quantisation-bits", &FabricConfig::conga_bits, 1, 3,
      "conga: bits of the congestion metric, levels of C x T_dre / alpha (3, the CE field)");
  micros("conga-aging-us", &FabricConfig::conga_aging_ns, 0.001, 1e7,
         "conga: a table entry not updated this long counts as unknown (500)");
  // ConWeave's, in FabricConfig::conweave (conweave-ns3's run.py names, in microseconds).
  const auto weave = [&](const char* name, uint64_t ConweaveSettings::*m, double min, double max,
                         const std::string& help) {
    key(name, help, [m, min, max](FabricConfig& c, const std::string& v) {
      c.conweave.*m =
          static_cast<uint64_t>(std::llround(number_in(v, min, max, "microseconds") * 1000.0));
    });
  };
  weave("conweave-reply-extra-us", &ConweaveSettings::reply_extra_ns, 0, 1e6,
        "conweave: an RTT reply later than the base RTT plus this marks the path slow (4, "
        "conweave-ns3's run.py CONWEAVE_REPLY_TIMEOUT_EXTRA)");
  weave("conweave-path-pause-us", &ConweaveSettings::path_pause_ns, 0, 1e6,
        "conweave: a NOTIFYed uplink is avoided this long (16, CONWEAVE_PATH_PAUSE_TIME)");
  weave("conweave-tx-expiry-us", &ConweaveSettings::tx_expiry_ns, 1, 1e6,
        "conweave: a flow idle this long starts over on a new path (300, "
        "CONWEAVE_TX_EXPIRY_TIME)");
  weave("conweave-voq-flush-extra-us", &ConweaveSettings::voq_flush_extra_ns, 0, 1e6,
        "conweave: the margin on a held queue's predicted release (16, "
        "CONWEAVE_EXTRA_VOQ_FLUSH_TIME)");
  weave("conweave-voq-default-wait-us", &ConweaveSettings::voq_default_wait_ns, 1, 1e6,
        "conweave: the hold when no old-path timing is known (200, "
        "CONWEAVE_DEFAULT_VOQ_WAITING_TIME)");
  u32("entropy-values", &FabricConfig::entropy_values, 2, 16384,
      "oblivious, reps: the UDP source ports (entropy values) of each QP, a power of two; "
      "oblivious cycles through them in a new order every round, reps draws from them what it "
      "cannot recycle (256)");
  micros("control-period-us", &FabricConfig::control_period_ns, 1, 1e7,
         "weighted: control loop period (200000)");
  micros("nic-control-period-us", &FabricConfig::nic_control_period_ns, 1, 1e7,
         "spray with spray-policy weighted: the NICs' link-state period, how often they reweight "
         "their uplinks (200000)");
  u32("tcam-spray-rules", &FabricConfig::tcam_spray_rules, 0, 1 << 20,
      "spray: a leaf's TCAM spray_rule_limit; QPs beyond it fall back to ECMP (16384)");
  choice("spray-rules", &FabricConfig::spray_rules, {"per-qp", "all-roce"},
         "spray: the leaves' TCAM spray rules: per-qp (one per sprayed QP and one for its ACKs, "
         "counted against tcam-spray-rules, as the articles configure them) | all-roce (one rule "
         "per leaf for every RoCEv2 packet with a PPCID, as a fabric that sprays all RDMA does; "
         "the cdf workloads make a QP per message) (per-qp)");
  u32("tcam-capacity", &FabricConfig::tcam_capacity, 16, 1 << 20,
      "spray: the rules a leaf's TCAM holds in all, whatever spray-rule limit it is told (16384)");
  u32("tcam-roce-partition", &FabricConfig::tcam_roce_partition, 0, 1 << 20,
      "spray: a TCAM partition of this many rules for the spray rules; 0: none (0)");
  key("cc",
      "congestion control: dcqcn (ECN marking at the switches, CNPs, DCQCN at every QP: "
      "ConnectX's algorithm with the defaults measured for a 100G fabric, "
      "docs/congestion-control.md) | dcqcn-connectx (ConnectX's shipped defaults) | dcqcn-paper "
      "(the SIGCOMM 2015 paper's) | dctcp (ECN marks echoed in ACKs, alpha per window, a cut by "
      "alpha/2 once per window, a BDP window; the switches mark at K = 30 KB per 10 Gbit/s) | "
      "timely (RTT gradient from ACKs, T_low/T_high) | hpcc (every switch egress pushes an INT "
      "record on the data packets, the receiver echoes them in its ACK, the window follows the "
      "most utilised hop towards eta 0.95) -- the three as ns-3 HPCC's rdma-hw.cc with its "
      "run.py defaults, docs/congestion-control.md | none (senders bounded by their window and "
      "PFC alone) (dcqcn)",
      [](FabricConfig& c, const std::string& v) {
        const auto m = control::parse_cc_mode(v);
        if (!m)
          throw std::invalid_argument(std::string(control::kCcModeNames) + ", got " + shown(v));
        c.cc.mode = *m;
      });
  choice("ecn-preset", &FabricConfig::ecn_preset, {"hpcc", "conweave"},
         "cc: ECN thresholds at every switch port: hpcc (kmin 100 KB, kmax 400 KB per 25 Gbit/s "
         "of the port's rate, HPCC's run.py) | conweave (100 KB / 400 KB at any rate) (hpcc)");
  u64("ecn-kmin", &FabricConfig::ecn_kmin_bytes, 0, uint64_t{1} << 40,
      "cc: no CE mark at or below this queue depth, bytes, at every port; 0: the preset's (0)");
  u64("ecn-kmax", &FabricConfig::ecn_kmax_bytes, 0, uint64_t{1} << 40,
      "cc: every ECN-capable packet marked above this depth, bytes; 0: the preset's (0)");
  dbl("ecn-pmax", &FabricConfig::ecn_pmax, 0, 1, "cc: marking probability at kmax, (0, 1] (0.2)");
  choice("ecn-mark-at", &FabricConfig::ecn_mark_at, {"dequeue", "enqueue"},
         "cc: dequeue (the depth a packet leaves behind, as ns-3 HPCC) | enqueue (the depth it "
         "finds) (dequeue)");
  key("min-time-between-cnps-us",
      "cc: a receiving NIC sends at most one CNP per QP per this interval (ConnectX's "
      "min_time_between_cnps); 0: one per CE-marked packet (the mode's: dcqcn 0, dcqcn-connectx "
      "4, dcqcn-paper 50)",
      [](FabricConfig& c, const std::string& v) {
        c.cc.min_time_between_cnps_ns =
            static_cast<uint64_t>(std::llround(number_in(v, 0, 1e6, "microseconds") * 1000.0));
      });
  key("cnp-dscp",
      "cc: the DSCP of the CNPs the receiving NICs send (ConnectX's cnp_dscp), 0..63 (48: class "
      "6, strict priority, lossy)",
      [](FabricConfig& c, const std::string& v) {
        c.cc.cnp_dscp = static_cast<uint8_t>(whole_in(v, 0, 63));
      });
  key("ack-class",
      "cc: ACK/NAKs on the QP's data class (as NICs do) | high (the CNP's strict-priority class, "
      "ns-3's AckHighPrio) (data)",
      [](FabricConfig& c, const std::string& v) {
        c.cc.ack_class = one_of(v, {"data", "high"}) == "high" ? control::AckClass::kHigh
                                                               : control::AckClass::kData;
      });
  for (const control::DcqcnParameter& p : control::dcqcn_parameters()) {
    std::string flag = p.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const DcqcnConfig d = dcqcn_fabric_defaults(100.0);
    const DcqcnConfig cx = dcqcn_connectx_defaults(100.0);
    char def[96];
    std::snprintf(def, sizeof def, "%g; dcqcn-connectx %g", p.get(d), p.get(cx));
    f.push_back({flag,
                 "cc DCQCN (ConnectX's " + std::string(p.name) + ", " + p.unit + "): " + p.what +
                     " (" + def + "; dcqcn-paper has its own)",
                 [name = std::string(p.name)](FabricConfig& c, const std::string& v) {
                   if (std::string why = control::set_rp_parameter(c.cc, name, v); !why.empty()) {
                     throw std::invalid_argument(why);
                   }
                 }});
  }
  key("event",
      "a timed change to the fabric (see above); repeatable; a list in YAML, and --event flags "
      "add to a file's",
      [](FabricConfig& c, const std::string& v) { c.events.push_back(parse_fabric_event(v)); });
  f.back().repeatable = true;
  time("duration", &FabricConfig::duration_ns,
       "permutation: virtual time run; cdf: arrival window (run until done, within 5x + 1ms); "
       "others: time limit (2ms)");
  key("warmup",
      "excluded from the throughput window, the flows' fairness and the FCT slowdown (messages "
      "started before it), and the start of cdf's carried-load window: a time with its unit "
      "(500us), or 0 for none; not given: a fifth of duration for permutation, 0 for the other "
      "workloads",
      [](FabricConfig& c, const std::string& v) {
        c.warmup_ns = parse_duration_ns(v);
        c.warmup_given = true;
      });
  micros("sample-us", &FabricConfig::sample_ns, 1, 1e6,
         "timeseries and PFC timeline interval (100)");
  key("seeds", "N or A-B: every mode runs once per seed (1)",
      [](FabricConfig& c, const std::string& v) {
        std::tie(c.seed_first, c.seed_last) = parse_seed_range(v);
      });
  text("json", &FabricConfig::json_file, "write the report (config, runs, summary) here");
  text("timeseries", &FabricConfig::timeseries_file,
       "per-link utilisation and queue every sample-us, CSV");
  text("csv", &FabricConfig::csv_dir,
       "write DIR/summary.csv (the table, one row per mode), DIR/runs.csv (one row per run) and "
       "DIR/flows.csv (one row per QP and run: source, destination, QP, bytes, FCT, throughput, "
       "retransmissions, uplinks)");
  text("plots", &FabricConfig::plots_dir,
       "write PNGs here (with report.json and timeseries.csv) via scripts/fabric_plots.py");
  return f;
}

}  // namespace

std::string ConfigKey::yaml_key() const {
  std::string k = name;
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

}  // namespace spraynet::fabric
