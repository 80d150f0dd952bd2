// --config FILE: the `fabric:` map applied over a FabricConfig, every key checked (errors name
// the file, the key and what is allowed).
#include "fabric/fabric_config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "control/config_reader.h"
#include "fabric/slowdown.h"

namespace spraynet::fabric {

namespace {

void apply_yaml(FabricConfig& c, const control::ConfigNode& root) {
  root.allow_only({"fabric"});
  const control::ConfigNode n = root.child("fabric");
  if (n.has("reorder")) {
    n.fail("reorder",
           "replaced by receive: reorder-buffer (was auto) | ooo-placement | none "
           "(was off)");
  }
  n.allow_only({"tiers",
                "pods",
                "leaves",
                "spines",
                "super_spines",
                "hosts_per_leaf",
                "links_per_spine",
                "links_per_super",
                "leaf_spine_gbps",
                "spine_super_gbps",
                "oversubscription",
                "planes",
                "link_gbps",
                "delay_ns",
                "cable_spread_ns",
                "mtu",
                "queue_bytes",
                "pfc",
                "pfc_pool_bytes",
                "pfc_alpha",
                "pfc_static_threshold_bytes",
                "pfc_headroom_bytes",
                "pfc_xoff_offset_bytes",
                "pfc_xon_offset_bytes",
                "fast_feedback",
                "pfc_watchdog",
                "pfc_watchdog_us",
                "pfc_watchdog_action",
                "workload",
                "qps_per_host",
                "msg_bytes",
                "bytes",
                "channels",
                "incast_senders",
                "cdf",
                "load",
                "slowdown_bins",
                "network_load",
                "message_gap_us",
                "op",
                "mode",
                "spray_policy",
                "hash_seed",
                "udp_sport",
                "ppcid_layout",
                "ppcid_layout_host",
                "fabric_paths",
                "nic_restore_checksum",
                "payload",
                "receive",
                "reorder_hold_us",
                "reorder_window",
                "placement_nak_delay_us",
                "max_in_flight",
                "retransmit_timeout_us",
                "dlb_gap_us",
                "control_period_us",
                "nic_control_period_us",
                "tcam_spray_rules",
                "tcam_capacity",
                "tcam_roce_partition",
                "event",
                "duration",
                "warmup",
                "seeds",
                "sample_us",
                "json",
                "timeseries",
                "plots",
                "csv",
                "cc",
                "ecn_preset",
                "ecn_kmin",
                "ecn_kmax",
                "ecn_pmax",
                "ecn_mark_at",
                "min_time_between_cnps_us",
                "cnp_dscp",
                "ack_class",
                "dce_tcp_g",
                "dce_tcp_rtt",
                "initial_alpha_value",
                "rate_reduce_monitor_period",
                "rate_to_set_on_first_cnp",
                "rpg_min_dec_fac",
                "rpg_min_rate",
                "rpg_max_rate",
                "rpg_time_reset",
                "rpg_byte_reset",
                "rpg_threshold",
                "rpg_ai_rate",
                "rpg_hai_rate",
                "clamp_tgt_rate",
                "clamp_tgt_rate_after_time_inc"});
  c.source = n.file();
  c.tiers = static_cast<uint32_t>(n.uint_or("tiers", c.tiers, 2, 3));
  c.pods = static_cast<uint32_t>(n.uint_or("pods", c.pods, 1, 255));
  c.super_spines = static_cast<uint32_t>(n.uint_or("super_spines", c.super_spines, 1, 256));
  c.links_per_super = static_cast<uint32_t>(n.uint_or("links_per_super", c.links_per_super, 1, 16));
  c.leaf_spine_gbps = n.number_or("leaf_spine_gbps", c.leaf_spine_gbps, 0, 1600);
  c.spine_super_gbps = n.number_or("spine_super_gbps", c.spine_super_gbps, 0, 1600);
  if (n.has("oversubscription")) {
    try {
      c.oversubscription = parse_oversubscription(n.string("oversubscription"));
    } catch (const std::invalid_argument& e) {
      n.fail("oversubscription", e.what());
    }
  }
  c.leaves = static_cast<uint32_t>(n.uint_or("leaves", c.leaves, 1, 255));
  c.spines = static_cast<uint32_t>(n.uint_or("spines", c.spines, 1, 256));
  c.hosts_per_leaf = static_cast<uint32_t>(n.uint_or("hosts_per_leaf", c.hosts_per_leaf, 1, 254));
  c.links_per_spine = static_cast<uint32_t>(n.uint_or("links_per_spine", c.links_per_spine, 1, 16));
  c.planes = static_cast<uint32_t>(n.uint_or("planes", c.planes, 1, 16));
  c.link_gbps = n.number_or("link_gbps", c.link_gbps, 1, 1600);
  c.delay_ns = n.uint_or("delay_ns", c.delay_ns, 0, 1'000'000'000);
  c.cable_spread_ns = n.uint_or("cable_spread_ns", c.cable_spread_ns, 0, 1'000'000'000);
  c.mtu = static_cast<uint32_t>(
      std::stoul(n.choice_or("mtu", std::to_string(c.mtu), {"1024", "4096"})));
  c.queue_bytes = n.uint_or("queue_bytes", c.queue_bytes, 16384, uint64_t{1} << 32);
  c.pfc = n.boolean_or("pfc", c.pfc);
  c.pfc_pool_bytes = n.uint_or("pfc_pool_bytes", c.pfc_pool_bytes, 65536, uint64_t{1} << 40);
  c.pfc_alpha = n.number_or("pfc_alpha", c.pfc_alpha, 1.0 / 128, 128);
  c.pfc_static_threshold_bytes =
      n.uint_or("pfc_static_threshold_bytes", c.pfc_static_threshold_bytes, 0, uint64_t{1} << 40);
  if (n.has("pfc_headroom_bytes")) {
    try {
      c.pfc_headroom_bytes = parse_headroom_bytes(n.string("pfc_headroom_bytes"));
    } catch (const std::invalid_argument& e) {
      n.fail("pfc_headroom_bytes", e.what());
    }
  }
  c.pfc_xoff_offset_bytes =
      n.uint_or("pfc_xoff_offset_bytes", c.pfc_xoff_offset_bytes, 0, uint64_t{1} << 40);
  c.pfc_xon_offset_bytes =
      n.uint_or("pfc_xon_offset_bytes", c.pfc_xon_offset_bytes, 0, uint64_t{1} << 40);
  c.fast_feedback = n.boolean_or("fast_feedback", c.fast_feedback);
  c.pfc_watchdog = n.boolean_or("pfc_watchdog", c.pfc_watchdog);
  c.pfc_watchdog_ns = n.uint_or("pfc_watchdog_us", c.pfc_watchdog_ns / 1000, 1, 10'000'000) * 1000;
  c.pfc_watchdog_action =
      n.choice_or("pfc_watchdog_action", c.pfc_watchdog_action, {"drop", "forward"});
  if (n.has("workload")) {
    c.workload = *parse_workload(
        n.choice_or("workload", "", {"permutation", "allreduce", "alltoall", "incast", "cdf"}));
  }
  c.qps_per_host = static_cast<uint32_t>(n.uint_or("qps_per_host", c.qps_per_host, 1, 256));
  c.msg_bytes = n.uint_or("msg_bytes", c.msg_bytes, 1, uint64_t{1} << 31);
  c.bytes = n.uint_or("bytes", c.bytes, 1, uint64_t{1} << 40);
  c.channels = static_cast<uint32_t>(n.uint_or("channels", c.channels, 1, 64));
  c.incast_senders = static_cast<uint32_t>(n.uint_or("incast_senders", c.incast_senders, 1, 65535));
  c.cdf = n.string_or("cdf", c.cdf);
  if (n.has("load") && n.has("network_load")) {
    n.fail("network_load",
           "give load (a fraction of each host's line rate) or network_load (of the leaf "
           "uplinks' capacity), not both");
  }
  // One setting given two ways: the key given replaces the other (of a file or map below).
  if (n.has("load")) c.network_load = 0;
  c.load = n.number_or("load", c.load, 0.001, 1);
  if (n.has("slowdown_bins")) {
    c.slowdown_bins = n.string("slowdown_bins");
    try {
      parse_slowdown_bins(c.slowdown_bins);
    } catch (const std::invalid_argument& e) {
      n.fail("slowdown_bins", e.what());
    }
  }
  c.network_load = n.number_or("network_load", c.network_load, 0.001, 2);
  c.message_gap_ns = n.uint_or("message_gap_us", c.message_gap_ns / 1000, 0, 1'000'000) * 1000;
  if (n.has("mode")) {
    try {
      const auto list = n.string_list("mode");
      std::string joined;
      for (const auto& m : list) joined += (joined.empty() ? "" : ",") + m;
      c.modes = parse_mode_list(joined);
    } catch (const control::ConfigError&) {
      try {
        c.modes = parse_mode_list(n.string("mode"));
      } catch (const std::invalid_argument& e) {
        n.fail("mode", e.what());
      }
    } catch (const std::invalid_argument& e) {
      n.fail("mode", e.what());
    }
  }
  c.spray_policy = n.choice_or("spray_policy", c.spray_policy, {"rr", "weighted", "adaptive"});
  c.same_hash_seed = n.choice_or("hash_seed", c.same_hash_seed ? "same" : "per-switch",
                                 {"per-switch", "same"}) == "same";
  c.op = n.choice_or("op", c.op, {"write", "read"});
  c.udp_sport_fixed = n.choice_or("udp_sport", c.udp_sport_fixed ? "fixed" : "per-qp",
                                  {"per-qp", "fixed"}) == "fixed";
  c.ppcid_layout = n.choice_or("ppcid_layout", c.ppcid_layout, {"auto", "ts-high", "path-high"});
  for (const std::string& text : n.string_list("ppcid_layout_host")) {
    try {
      c.ppcid_layout_hosts.push_back(parse_ppcid_layout_host(text));
    } catch (const std::invalid_argument& e) {
      n.fail("ppcid_layout_host", e.what());
    }
  }
  if (n.has("fabric_paths")) {
    try {
      c.fabric_paths = parse_fabric_paths(n.string("fabric_paths"));
    } catch (const std::invalid_argument& e) {
      n.fail("fabric_paths", e.what());
    }
  }
  c.nic_restore_checksum = n.boolean_or("nic_restore_checksum", c.nic_restore_checksum);
  if (n.has("cc")) {
    c.cc.mode =
        *control::parse_cc_mode(n.choice_or("cc", std::string(control::to_string(c.cc.mode)),
                                            {"dcqcn", "dcqcn-connectx", "dcqcn-paper", "none"}));
  }
  c.ecn_preset = n.choice_or("ecn_preset", c.ecn_preset, {"hpcc", "conweave"});
  c.ecn_kmin_bytes = n.uint_or("ecn_kmin", c.ecn_kmin_bytes, 0, uint64_t{1} << 40);
  c.ecn_kmax_bytes = n.uint_or("ecn_kmax", c.ecn_kmax_bytes, 0, uint64_t{1} << 40);
  c.ecn_pmax = n.number_or("ecn_pmax", c.ecn_pmax, 1e-9, 1);
  c.ecn_mark_at = n.choice_or("ecn_mark_at", c.ecn_mark_at, {"dequeue", "enqueue"});
  if (n.has("min_time_between_cnps_us")) {
    c.cc.min_time_between_cnps_ns =
        static_cast<uint64_t>(n.number_or("min_time_between_cnps_us", 0, 0, 1e6) * 1000.0);
  }
  c.cc.cnp_dscp = static_cast<uint8_t>(n.uint_or("cnp_dscp", c.cc.cnp_dscp, 0, 63));
  if (n.has("ack_class")) {
    c.cc.ack_class = n.choice_or("ack_class", "data", {"data", "high"}) == "high"
                         ? control::AckClass::kHigh
                         : control::AckClass::kData;
  }
  for (const control::DcqcnParameter& p : control::dcqcn_parameters()) {
    if (!n.has(p.name)) continue;
    const double v = n.number_or(p.name, 0, p.min, p.max);
    if (std::string why = control::set_rp_parameter(c.cc, p.name, v); !why.empty()) {
      n.fail(p.name, why);
    }
  }
  c.receive = n.choice_or("receive", c.receive, {"reorder-buffer", "ooo-placement", "none"});
  c.payload = n.choice_or("payload", c.payload, {"shared", "copy"});
  c.placement_nak_delay_ns = static_cast<uint64_t>(
      n.number_or("placement_nak_delay_us", c.placement_nak_delay_ns / 1000.0, 0, 1'000'000) *
      1000);
  c.reorder_hold_ns = static_cast<uint64_t>(
      n.number_or("reorder_hold_us", c.reorder_hold_ns / 1000.0, 1, 1'000'000) * 1000);
  c.reorder_window = static_cast<uint32_t>(n.uint_or("reorder_window", c.reorder_window, 1, 16384));
  c.max_in_flight = static_cast<uint32_t>(n.uint_or("max_in_flight", c.max_in_flight, 66, 65536));
  c.retransmit_timeout_ns = static_cast<uint64_t>(
      n.number_or("retransmit_timeout_us", c.retransmit_timeout_ns / 1000.0, 1, 1e8) * 1000);
  c.dlb_gap_ns =
      static_cast<uint64_t>(n.number_or("dlb_gap_us", c.dlb_gap_ns / 1000.0, 0.001, 1e6) * 1000);
  c.control_period_ns = static_cast<uint64_t>(
      n.number_or("control_period_us", c.control_period_ns / 1000.0, 1, 1e7) * 1000);
  c.nic_control_period_ns = static_cast<uint64_t>(
      n.number_or("nic_control_period_us", c.nic_control_period_ns / 1000.0, 1, 1e7) * 1000);
  c.tcam_spray_rules =
      static_cast<uint32_t>(n.uint_or("tcam_spray_rules", c.tcam_spray_rules, 0, 1 << 20));
  c.tcam_capacity = static_cast<uint32_t>(n.uint_or("tcam_capacity", c.tcam_capacity, 16, 1 << 20));
  c.tcam_roce_partition =
      static_cast<uint32_t>(n.uint_or("tcam_roce_partition", c.tcam_roce_partition, 0, 1 << 20));
  for (const std::string& text : n.string_list("event")) {
    try {
      c.events.push_back(parse_fabric_event(text));
    } catch (const std::invalid_argument& e) {
      n.fail("event", e.what());
    }
  }
  const auto duration_key = [&](std::string_view key, uint64_t& out) {
    if (!n.has(key)) return;
    try {
      out = parse_duration_ns(n.string(key));
    } catch (const std::invalid_argument& e) {
      n.fail(key, e.what());
    }
  };
  duration_key("duration", c.duration_ns);
  duration_key("warmup", c.warmup_ns);
  if (n.has("warmup")) c.warmup_given = true;
  c.sample_ns = n.uint_or("sample_us", c.sample_ns / 1000, 1, 1'000'000) * 1000;
  c.json_file = n.string_or("json", c.json_file);
  c.timeseries_file = n.string_or("timeseries", c.timeseries_file);
  c.plots_dir = n.string_or("plots", c.plots_dir);
  c.csv_dir = n.string_or("csv", c.csv_dir);
  if (n.has("seeds")) {
    try {
      std::tie(c.seed_first, c.seed_last) = parse_seed_range(n.string("seeds"));
    } catch (const std::invalid_argument& e) {
      n.fail("seeds", e.what());
    }
  }
  // Keys another workload would ignore are refused, not ignored.
  for (const char* key : {"cdf", "load", "network_load"}) {
    if (n.has(key) && c.workload != Workload::kCdf) {
      n.fail(key, "only with workload cdf (workload " + std::string(to_string(c.workload)) +
                      " would ignore it)");
    }
  }
  if (const std::string why = c.check(); !why.empty()) {
    const size_t colon = why.find(':');
    std::string key = why.substr(0, colon);
    for (char& ch : key) {
      if (ch == '-') ch = '_';
    }
    n.fail(key, why.substr(colon + 2));
  }
}

}  // namespace

FabricConfig load_fabric_config(const std::string& path, FabricConfig base) {
  apply_yaml(base, control::ConfigNode::load_file(path));
  return base;
}

FabricConfig parse_fabric_config_yaml(const std::string& yaml, const std::string& name,
                                      FabricConfig base) {
  apply_yaml(base, control::ConfigNode::load_string(yaml, name));
  return base;
}

}  // namespace spraynet::fabric
