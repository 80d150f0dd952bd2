// fabric_emu's flags (fabric_flags.h): the table of every flag, its help text and how it sets the
// config.
#include "fabric/fabric_flags.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>

#include "control/config_reader.h"
#include "fabric/cdf_plan.h"
#include "fabric/flow_size_cdf.h"
#include "fabric/slowdown.h"

namespace spraynet::fabric {

namespace {

uint64_t to_u64(const std::string& flag, const std::string& v) {
  const auto n = control::parse_uint(v);
  if (!n) throw std::invalid_argument("--" + flag + ": '" + v + "' is not a whole number");
  return *n;
}
double to_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    // nan and inf parse, but no range check could refuse them afterwards (nan compares false).
    if (used == v.size() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + flag + ": '" + v + "' is not a number");
}
bool to_bool(const std::string& flag, const std::string& v) {
  if (v == "on" || v == "true" || v == "1") return true;
  if (v == "off" || v == "false" || v == "0") return false;
  throw std::invalid_argument("--" + flag + ": on | off, got '" + v + "'");
}
std::string one_of(const std::string& flag, const std::string& v,
                   std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : " | ") + std::string(a);
  }
  throw std::invalid_argument("--" + flag + ": " + list + ", got '" + v + "'");
}

}  // namespace

std::vector<Flag> make_flags() {
  std::vector<Flag> f;
  const auto u32 = [&](const char* name, uint32_t FabricConfig::*m, const char* help) {
    f.push_back({name, help, "", [name, m](FabricConfig& c, const std::string& v) {
                   const uint64_t x = to_u64(name, v);
                   if (x > UINT32_MAX) {
                     throw std::invalid_argument(std::string("--") + name + ": at most " +
                                                 std::to_string(UINT32_MAX) + ", got '" + v + "'");
                   }
                   c.*m = static_cast<uint32_t>(x);
                 }});
  };
  const auto u64 = [&](const char* name, uint64_t FabricConfig::*m, const char* help) {
    f.push_back({name, help, "",
                 [name, m](FabricConfig& c, const std::string& v) { c.*m = to_u64(name, v); }});
  };
  const auto dbl = [&](const char* name, double FabricConfig::*m, const char* help) {
    f.push_back({name, help, "",
                 [name, m](FabricConfig& c, const std::string& v) { c.*m = to_double(name, v); }});
  };
  const auto boolean = [&](const char* name, bool FabricConfig::*m, const char* help) {
    f.push_back({name, help, "",
                 [name, m](FabricConfig& c, const std::string& v) { c.*m = to_bool(name, v); }});
  };
  const auto time = [&](const char* name, uint64_t FabricConfig::*m, const char* help) {
    f.push_back({name, help, "", [name, m](FabricConfig& c, const std::string& v) {
                   try {
                     c.*m = parse_duration_ns(v);
                   } catch (const std::invalid_argument& e) {
                     throw std::invalid_argument(std::string("--") + name + ": " + e.what());
                   }
                 }});
  };
  const auto micros = [&](const char* name, uint64_t FabricConfig::*m, const char* help) {
    f.push_back({name, help, "", [name, m](FabricConfig& c, const std::string& v) {
                   const double us = to_double(name, v);
                   // A negative or huge value would wrap in the cast: refuse it here, and leave
                   // each flag's own range to FabricConfig::check.
                   if (!(us >= 0 && us <= 1e9)) {
                     throw std::invalid_argument(std::string("--") + name +
                                                 ": microseconds in [0, 1e9], got '" + v + "'");
                   }
                   c.*m = static_cast<uint64_t>(us * 1000.0);
                 }});
  };
  u32("leaves", &FabricConfig::leaves, "leaf switches per plane (2)");
  u32("spines", &FabricConfig::spines, "spine switches per plane (8)");
  u32("hosts-per-leaf", &FabricConfig::hosts_per_leaf, "hosts under each leaf (8)");
  u32("links-per-spine", &FabricConfig::links_per_spine,
      "parallel links between each leaf and each spine (1)");
  u32("planes", &FabricConfig::planes,
      "planes: each host has one NIC uplink per plane, each plane its own leaves and spines (1)");
  u32("tiers", &FabricConfig::tiers,
      "2: leaf-spine; 3: a folded Clos of --pods pods (--leaves and --spines per pod), spine s of "
      "every pod up to the --super-spines of super-spine plane s; switches pod1.leaf3, "
      "pod1.spine2, super2.5 (2)");
  u32("pods", &FabricConfig::pods, "tiers 3: pods, each a leaf-spine (1)");
  u32("super-spines", &FabricConfig::super_spines,
      "tiers 3: super-spines per super-spine plane (one plane per spine index of a pod) (4)");
  u32("links-per-super", &FabricConfig::links_per_super,
      "tiers 3: parallel links between each spine and each super-spine (1)");
  dbl("leaf-spine-gbps", &FabricConfig::leaf_spine_gbps,
      "rate of the leaf-spine cables, Gbit/s; 0: --link-gbps (0)");
  dbl("spine-super-gbps", &FabricConfig::spine_super_gbps,
      "tiers 3: rate of the spine-super-spine cables, Gbit/s; 0: --link-gbps (0)");
  f.push_back({"oversubscription",
               "A:B per tier, leaf first: bandwidth below a switch to bandwidth above it (the "
               "leaf's hosts : uplinks; with --tiers 3 then the spine's leaves : super-spines), "
               "e.g. 1:1,2:1; sets the leaf-spine (and spine-super) rate from the counts, instead "
               "of --leaf-spine-gbps (--spine-super-gbps) (none)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.oversubscription = parse_oversubscription(v);
               }});
  dbl("link-gbps", &FabricConfig::link_gbps, "rate of every cable, Gbit/s (100)");
  u64("delay-ns", &FabricConfig::delay_ns, "propagation delay of every cable (1000)");
  u64("cable-spread-ns", &FabricConfig::cable_spread_ns,
      "cables of different lengths: each adds a seeded draw in [0, N] ns to delay-ns (500: up to "
      "100 m of difference)");
  u32("mtu", &FabricConfig::mtu, "RoCE path MTU: 1024 | 4096 (4096)");
  u64("queue-bytes", &FabricConfig::queue_bytes,
      "switch egress queue limit per port and class, for lossy classes (all classes with PFC off); "
      "with PFC on the lossless class has none, the pool bounds it (1048576)");
  boolean("pfc", &FabricConfig::pfc, "PFC (802.1Qbb) on priority 3 at every switch: on | off (on)");
  u64("pfc-pool-bytes", &FabricConfig::pfc_pool_bytes,
      "each switch's shared lossless ingress pool (12582912: a 32 x 100G switch's, as SONiC "
      "configures a 7060CX)");
  dbl("pfc-alpha", &FabricConfig::pfc_alpha,
      "dynamic threshold: a priority group may hold alpha x the free pool, 1/128..128 (SONiC "
      "dynamic_th = log2 alpha) (1)");
  u64("pfc-static-threshold-bytes", &FabricConfig::pfc_static_threshold_bytes,
      "a static threshold per priority group instead of pfc-alpha; 0: dynamic (0)");
  f.push_back({"pfc-headroom-bytes",
               "headroom per priority group, for what arrives after XOFF: auto (2 x rate x cable "
               "delay + 2 x MTU + 84 + rate x 2.1 us) or 2048..2^30 (auto)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.pfc_headroom_bytes = parse_headroom_bytes(v);
               }});
  u64("pfc-xoff-offset-bytes", &FabricConfig::pfc_xoff_offset_bytes,
      "XOFF when a priority group's shared bytes reach threshold - this (0)");
  u64("pfc-xon-offset-bytes", &FabricConfig::pfc_xon_offset_bytes,
      "XON when they fall to threshold - this (or to 0) with the headroom empty (16384)");
  boolean("fast-feedback", &FabricConfig::fast_feedback,
          "a paused port leaves the DLB/spray candidates at once: on | off (off)");
  boolean("pfc-watchdog", &FabricConfig::pfc_watchdog, "PFC watchdog: on | off (on)");
  micros("pfc-watchdog-us", &FabricConfig::pfc_watchdog_ns,
         "PFC watchdog detection and restoration time (200000)");
  f.push_back({"pfc-watchdog-action",
               "PFC watchdog action on a storm: drop (queue, arrivals and the storming port's "
               "ingress priority dropped, no PFC sent to it) | forward (its pauses ignored, no PFC "
               "sent to it, nothing dropped) (drop)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.pfc_watchdog_action = one_of("pfc-watchdog-action", v, {"drop", "forward"});
               }});
  f.push_back({"workload", "permutation | allreduce | alltoall | incast | cdf (permutation)", "",
               [](FabricConfig& c, const std::string& v) {
                 const auto w = parse_workload(v);
                 if (!w)
                   throw std::invalid_argument(std::string("--workload: ") + kWorkloadNames +
                                               ", got '" + v + "'");
                 c.workload = *w;
               }});
  u32("qps-per-host", &FabricConfig::qps_per_host,
      "permutation: QPs each host runs to its target (1)");
  u64("msg-bytes", &FabricConfig::msg_bytes, "permutation: bytes of each RDMA WRITE (1048576)");
  u64("bytes", &FabricConfig::bytes,
      "allreduce: buffer size; alltoall: bytes per pair; incast: bytes per sender (16777216)");
  u32("channels", &FabricConfig::channels, "allreduce: parallel rings, each on its own QPs (1)");
  u32("incast-senders", &FabricConfig::incast_senders, "incast: senders to the one receiver (8)");
  f.push_back({"cdf",
               "cdf: websearch | alistorage2019 | a file of 'BYTES PERCENT' lines; refused with "
               "another workload, and (without --force) when its sizes look like kilobytes "
               "(websearch)",
               "", [](FabricConfig& c, const std::string& v) { c.cdf = v; }});
  f.push_back({"load",
               "cdf: offered load per host, a fraction of its line rate, as HPCC's traffic "
               "generator takes it; replaces a file's network_load; refused with another workload "
               "(0.5)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.load = to_double("load", v);
                 c.network_load = 0;
               }});
  dbl("network-load", &FabricConfig::network_load,
      "cdf: offered load as a fraction of the leaf uplinks' capacity for the inter-leaf share "
      "of the traffic, (0, 2]; the per-host load is network-load x uplink capacity / (hosts per "
      "leaf x line rate x (hosts - hosts per leaf) / (hosts - 1)), per plane; not with --load, "
      "refused with another workload (none: --load)");
  f.push_back({"slowdown-bins",
               std::string("FCT slowdown bins by message size: ") + kSlowdownBinNames +
                   "; deciles: the CDF's, ventiles: HPCC's 20 chunks of 5% of the messages, bdp: "
                   "ConWeave's below/above one BDP of the longest path (cdf: deciles; others: one "
                   "bin of every message)",
               "", [](FabricConfig& c, const std::string& v) {
                 try {
                   parse_slowdown_bins(v);
                 } catch (const std::invalid_argument& e) {
                   throw std::invalid_argument(std::string("--slowdown-bins: ") + e.what());
                 }
                 c.slowdown_bins = v;
               }});
  micros("message-gap-us", &FabricConfig::message_gap_ns,
         "permutation: idle time between a QP's messages (0)");
  f.push_back({"op",
               "permutation: write | read (RDMA READs: the destination's data comes back) (write)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.op = one_of("op", v, {"write", "read"});
               }});
  f.push_back({"mode",
               "comma-separated: ecmp | ecmp-qp | weighted | dlb | drill | spray | spray-noreorder "
               "(ecmp,spray)",
               "", [](FabricConfig& c, const std::string& v) { c.modes = parse_mode_list(v); }});
  f.push_back({"spray-policy",
               "spray: the NIC's uplink choice across planes: rr | weighted | adaptive (rr)", "",
               [](FabricConfig& c, const std::string& v) {
                 c.spray_policy = one_of("spray-policy", v, {"rr", "weighted", "adaptive"});
               }});
  f.push_back({"hash-seed", "per-switch | same (same reproduces hash polarization) (per-switch)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.same_hash_seed = one_of("hash-seed", v, {"per-switch", "same"}) == "same";
               }});
  f.push_back({"udp-sport",
               "per-qp (rxe's 0xC000 + hash of the QP) | fixed (one port per NIC) (per-qp)", "",
               [](FabricConfig& c, const std::string& v) {
                 c.udp_sport_fixed = one_of("udp-sport", v, {"per-qp", "fixed"}) == "fixed";
               }});
  f.push_back({"ppcid-layout",
               "auto | ts-high (16 path ids) | path-high (256); auto: path-high above 16 uplinks "
               "per leaf (auto)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.ppcid_layout = one_of("ppcid-layout", v, {"auto", "ts-high", "path-high"});
               }});
  f.push_back(
      {"fabric-paths",
       "spray: path ids the NICs rotate through and recognise on receipt: auto (every id the "
       "layout holds: 16 in ts-high, 256 in path-high; with --tiers 3 one per pair of a leaf "
       "uplink and a spine link up, at most that) | 1..256; fewer than the layout holds lets "
       "a receiver see a layout mismatch (auto)",
       "", [](FabricConfig& c, const std::string& v) { c.fabric_paths = parse_fabric_paths(v); }});
  boolean("nic-restore-checksum", &FabricConfig::nic_restore_checksum,
          "the receiving NIC sets the UDP checksum (the PPCID on the fabric side) back to 0 before "
          "the host: on | off (on)");
  f.push_back({"payload",
               "how the RC engines' packets carry their payload: shared (a chained segment from "
               "one read-only store, no copy) | copy (into every packet); same packets, same "
               "results (shared)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.payload = one_of("payload", v, {"shared", "copy"});
               }});
  f.push_back({"receive",
               "receiving NICs: reorder-buffer (reorder engine + rxe responder in spray and drill, "
               "the modes that reorder per packet; rxe alone elsewhere) | ooo-placement (every "
               "mode: out-of-order placement, selective retransmission) | none (rxe alone); "
               "spray-noreorder = spray with none (reorder-buffer)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.receive = one_of("receive", v, {"reorder-buffer", "ooo-placement", "none"});
               }});
  micros("reorder-hold-us", &FabricConfig::reorder_hold_ns,
         "reorder hold timeout (500; nic_emu's 100 gives up too early under PFC)");
  u32("reorder-window", &FabricConfig::reorder_window, "reorder window, PSNs per QP (1024)");
  micros("placement-nak-delay-us", &FabricConfig::placement_nak_delay_ns,
         "ooo-placement: a hole open this long with packets beyond it is NAKed (500)");
  u32("max-in-flight", &FabricConfig::max_in_flight,
      "unacknowledged packets per QP (512; rxe keeps 128)");
  micros("retransmit-timeout-us", &FabricConfig::retransmit_timeout_ns,
         "RC retransmit timeout (67108.864, perftest's)");
  micros("dlb-gap-us", &FabricConfig::dlb_gap_ns, "dlb: flowlet gap (100)");
  micros("control-period-us", &FabricConfig::control_period_ns,
         "weighted: control loop period (200000)");
  micros("nic-control-period-us", &FabricConfig::nic_control_period_ns,
         "spray with spray-policy weighted: the NICs' link-state period, how often they reweight "
         "their uplinks (200000)");
  u32("tcam-spray-rules", &FabricConfig::tcam_spray_rules,
      "spray: a leaf's TCAM spray_rule_limit; QPs beyond it fall back to ECMP (16384)");
  u32("tcam-capacity", &FabricConfig::tcam_capacity,
      "spray: the rules a leaf's TCAM holds in all, whatever spray-rule limit it is told (16384)");
  u32("tcam-roce-partition", &FabricConfig::tcam_roce_partition,
      "spray: a TCAM partition of this many rules for the spray rules; 0: none (0)");
  f.push_back({"cc",
               "congestion control: dcqcn (ECN marking at the switches, CNPs, DCQCN at every QP: "
               "ConnectX's algorithm with the defaults measured for a 100G fabric, "
               "docs/congestion-control.md) | dcqcn-connectx (ConnectX's shipped defaults) | "
               "dcqcn-paper (the SIGCOMM 2015 paper's) | none (senders bounded by their window and "
               "PFC alone) (dcqcn)",
               "", [](FabricConfig& c, const std::string& v) {
                 const auto m = control::parse_cc_mode(v);
                 if (!m) {
                   throw std::invalid_argument(std::string("--cc: ") + control::kCcModeNames +
                                               ", got '" + v + "'");
                 }
                 c.cc.mode = *m;
               }});
  f.push_back({"ecn-preset",
               "cc: ECN thresholds at every switch port: hpcc (kmin 100 KB, kmax 400 KB per 25 "
               "Gbit/s of the port's rate, HPCC's run.py) | conweave (100 KB / 400 KB at any "
               "rate) (hpcc)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.ecn_preset = one_of("ecn-preset", v, {"hpcc", "conweave"});
               }});
  u64("ecn-kmin", &FabricConfig::ecn_kmin_bytes,
      "cc: no CE mark at or below this queue depth, bytes, at every port; 0: the preset's (0)");
  u64("ecn-kmax", &FabricConfig::ecn_kmax_bytes,
      "cc: every ECN-capable packet marked above this depth, bytes; 0: the preset's (0)");
  dbl("ecn-pmax", &FabricConfig::ecn_pmax, "cc: marking probability at kmax, (0, 1] (0.2)");
  f.push_back({"ecn-mark-at",
               "cc: dequeue (the depth a packet leaves behind, as ns-3 HPCC) | "
               "enqueue (the depth it finds) (dequeue)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.ecn_mark_at = one_of("ecn-mark-at", v, {"dequeue", "enqueue"});
               }});
  f.push_back({"min-time-between-cnps-us",
               "cc: a receiving NIC sends at most one CNP per QP per this interval (ConnectX's "
               "min_time_between_cnps); 0: one per CE-marked packet (the mode's: dcqcn 0, "
               "dcqcn-connectx 4, dcqcn-paper 50)",
               "", [](FabricConfig& c, const std::string& v) {
                 const double us = to_double("min-time-between-cnps-us", v);
                 if (!(us >= 0 && us <= 1e6)) {
                   throw std::invalid_argument("--min-time-between-cnps-us: [0, 1e6], got '" + v +
                                               "'");
                 }
                 c.cc.min_time_between_cnps_ns = static_cast<uint64_t>(us * 1000.0);
               }});
  f.push_back({"ack-class",
               "cc: ACK/NAKs on the QP's data class (as NICs do) | high (the CNP's strict-priority "
               "class, ns-3's AckHighPrio) (data)",
               "", [](FabricConfig& c, const std::string& v) {
                 c.cc.ack_class = one_of("ack-class", v, {"data", "high"}) == "high"
                                      ? control::AckClass::kHigh
                                      : control::AckClass::kData;
               }});
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
                 "", [flag, name = std::string(p.name)](FabricConfig& c, const std::string& v) {
                   if (std::string why = control::set_rp_parameter(c.cc, name, v); !why.empty()) {
                     throw std::invalid_argument("--" + flag + ": " + why);
                   }
                 }});
  }
  time("duration", &FabricConfig::duration_ns,
       "permutation: virtual time run; cdf: arrival window (run until done, within 5x + 1ms); "
       "others: time limit (2ms)");
  f.push_back({"warmup",
               "excluded from the throughput window, the flows' fairness and the FCT slowdown "
               "(messages started before it), and the start of cdf's carried-load window: a time "
               "with its unit (500us), or 0 for none; not "
               "given: a fifth of duration for permutation, 0 for the other workloads",
               "", [](FabricConfig& c, const std::string& v) {
                 try {
                   c.warmup_ns = parse_duration_ns(v);
                   c.warmup_given = true;
                 } catch (const std::invalid_argument& e) {
                   throw std::invalid_argument(std::string("--warmup: ") + e.what());
                 }
               }});
  micros("sample-us", &FabricConfig::sample_ns, "timeseries and PFC timeline interval (100)");
  f.push_back({"seeds", "N or A-B: every mode runs once per seed (1)", "",
               [](FabricConfig& c, const std::string& v) {
                 std::tie(c.seed_first, c.seed_last) = parse_seed_range(v);
               }});
  return f;
}

}  // namespace spraynet::fabric
