#include "fabric/fabric_config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "control/config_reader.h"
#include "dataplane/forwarding/conga_tables.h"
#include "fabric/slowdown.h"

namespace spraynet::fabric {

namespace {

constexpr const char* kEventForms =
    "link-down:LINK@T, link-up:LINK@T, ber:LINK=RATE@T, rate:LINK=GBPS@T, "
    "background:SWITCH|LINK=FRACTION[@T[~P]], filter:LINK|HOST=udp4791-nonzero-csum|off[@T] "
    "(LINK like leaf0-spine3, leaf0-spine3#1 or h3-leaf0; for ber and rate also one direction, "
    "spine3>leaf0; for background one direction from its first-named end, h0-p1.leaf0; HOST like "
    "h3; T like 500us; ~P: on for P, off for P, repeating)";

double parse_number(std::string_view s, std::string_view what) {
  double v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v)) {
    throw std::invalid_argument(std::string(what) + ": '" + std::string(s) + "' is not a number");
  }
  return v;
}

}  // namespace

std::string_view to_string(FabricMode mode) {
  switch (mode) {
    case FabricMode::kEcmp: return "ecmp";
    case FabricMode::kEcmpQp: return "ecmp-qp";
    case FabricMode::kWeighted: return "weighted";
    case FabricMode::kDlb: return "dlb";
    case FabricMode::kDrill: return "drill";
    case FabricMode::kLetflow: return "letflow";
    case FabricMode::kConga: return "conga";
    case FabricMode::kConweave: return "conweave";
    case FabricMode::kOblivious: return "oblivious";
    case FabricMode::kReps: return "reps";
    case FabricMode::kSpray: return "spray";
    case FabricMode::kSprayNoReorder: return "spray-noreorder";
  }
  return "?";
}

std::optional<FabricMode> parse_fabric_mode(std::string_view name) {
  for (auto m : {FabricMode::kEcmp, FabricMode::kEcmpQp, FabricMode::kWeighted, FabricMode::kDlb,
                 FabricMode::kDrill, FabricMode::kLetflow, FabricMode::kConga, FabricMode::kConweave, FabricMode::kOblivious, FabricMode::kReps, FabricMode::kSpray, FabricMode::kSprayNoReorder}) {
    if (to_string(m) == name) return m;
  }
  return std::nullopt;
}

bool is_spray(FabricMode mode) {
  return mode == FabricMode::kSpray || mode == FabricMode::kSprayNoReorder;
}

bool is_entropy_spray(FabricMode mode) {
  return mode == FabricMode::kOblivious || mode == FabricMode::kReps;
}

bool spreads_per_packet(FabricMode mode) {
  return is_spray(mode) || mode == FabricMode::kDrill || is_entropy_spray(mode);
}

std::string_view to_string(Workload w) {
  switch (w) {
    case Workload::kPermutation: return "permutation";
    case Workload::kAllreduce: return "allreduce";
    case Workload::kAlltoall: return "alltoall";
    case Workload::kIncast: return "incast";
    case Workload::kCdf: return "cdf";
  }
  return "?";
}

std::optional<Workload> parse_workload(std::string_view name) {
  for (auto w : {Workload::kPermutation, Workload::kAllreduce, Workload::kAlltoall,
                 Workload::kIncast, Workload::kCdf}) {
    if (to_string(w) == name) return w;
  }
  return std::nullopt;
}

uint64_t parse_duration_ns(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double ns;
  };
  static constexpr Unit kUnits[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.ends_with(u.suffix)) {
      const std::string_view num = text.substr(0, text.size() - u.suffix.size());
      // "ms" also ends with "s": only take "s" when what precedes is a number.
      double v;
      try {
        v = parse_number(num, "time");
      } catch (const std::invalid_argument&) {
        continue;
      }
      if (v < 0 || v * u.ns > 1e18) break;
      return static_cast<uint64_t>(std::llround(v * u.ns));
    }
  }
  bool bare_number = !text.empty();
  double bare = -1;
  try {
    bare = parse_number(text, "time");
  } catch (const std::invalid_argument&) {
    bare_number = false;
  }
  // Zero is zero in every unit: "0" needs none.
  if (bare_number && bare == 0) return 0;
  if (bare_number) {
    throw std::invalid_argument("'" + std::string(text) +
                                "' has no unit: add ns | us | ms | s (e.g. 500us)");
  }
  if (text.starts_with("-")) {
    throw std::invalid_argument("'" + std::string(text) + "': a time cannot be negative");
  }
  throw std::invalid_argument("'" + std::string(text) +
                              "' is not a time: a number with a unit, ns | us | ms | s "
                              "(e.g. 500us)");
}

FabricEvent parse_fabric_event(std::string_view text) {
  FabricEvent e;
  e.text = std::string(text);
  const auto fail = [&](const std::string& why) -> FabricEvent {
    throw std::invalid_argument("event '" + e.text + "': " + why + "; accepted: " + kEventForms);
  };
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return fail("no kind");
  const std::string_view kind = text.substr(0, colon);
  std::string_view rest = text.substr(colon + 1);
  std::string_view at;
  if (const size_t a = rest.rfind('@'); a != std::string_view::npos) {
    at = rest.substr(a + 1);
    rest = rest.substr(0, a);
  }
  std::string_view value;
  if (const size_t eq = rest.find('='); eq != std::string_view::npos) {
    value = rest.substr(eq + 1);
    rest = rest.substr(0, eq);
  }
  e.target = std::string(rest);
  if (e.target.empty()) return fail("no link or switch named");
  if (e.target.find('>') != std::string::npos && kind != "ber" && kind != "rate") {
    return fail("only ber and rate take one direction of a link (A>B)");
  }
  if (kind == "link-down" || kind == "link-up") {
    e.kind = kind == "link-down" ? FabricEvent::Kind::kLinkDown : FabricEvent::Kind::kLinkUp;
    if (!value.empty()) return fail(std::string(kind) + " takes no value");
  } else if (kind == "ber" || kind == "rate" || kind == "background") {
    e.kind = kind == "ber"    ? FabricEvent::Kind::kBer
             : kind == "rate" ? FabricEvent::Kind::kRate
                              : FabricEvent::Kind::kBackground;
    if (value.empty()) return fail(std::string(kind) + " needs =VALUE");
    try {
      e.value = parse_number(value, "value");
    } catch (const std::invalid_argument& ex) {
      return fail(ex.what());
    }
    if (e.kind == FabricEvent::Kind::kBer && (e.value < 0 || e.value > 1)) return fail("BER in [0, 1]");
    if (e.kind == FabricEvent::Kind::kRate && (e.value <= 0 || e.value > 10000)) {
      return fail("rate in Gbit/s, (0, 10000]");
    }
    if (e.kind == FabricEvent::Kind::kBackground && (e.value < 0 || e.value >= 1)) {
      return fail("background load is a fraction of the line rate in [0, 1)");
    }
  } else if (kind == "filter") {
    e.kind = FabricEvent::Kind::kFilter;
    if (value == "udp4791-nonzero-csum") {
      e.value = 1;
    } else if (value == "off") {
      e.value = 0;
    } else {
      return fail(
          "filter takes =udp4791-nonzero-csum (drop RoCEv2 packets whose UDP checksum is "
          "not 0) or =off");
    }
  } else {
    return fail("unknown kind '" + std::string(kind) + "'");
  }
  if (at.empty()) {
    // Background load and filters are properties of the fabric from the start unless timed.
    if (e.kind != FabricEvent::Kind::kBackground && e.kind != FabricEvent::Kind::kFilter) {
      return fail("no time (@T)");
    }
  } else {
    std::string_view toggle;
    if (const size_t t = at.find('~'); t != std::string_view::npos) {
      toggle = at.substr(t + 1);
      at = at.substr(0, t);
      if (e.kind != FabricEvent::Kind::kBackground) return fail("only background takes ~P");
    }
    try {
      e.at_ns = parse_duration_ns(at);
      if (!toggle.empty()) e.toggle_ns = parse_duration_ns(toggle);
    } catch (const std::invalid_argument& ex) {
      return fail(ex.what());
    }
    if (!toggle.empty() && e.toggle_ns < 1000) return fail("~P: at least 1us");
  }
  return e;
}

uint64_t parse_headroom_bytes(std::string_view text) {
  if (text == "auto") return 0;
  const auto v = control::parse_uint(text);
  if (!v || *v < 2048 || *v > (uint64_t{1} << 30)) {
    throw std::invalid_argument("headroom '" + std::string(text) +
                                "': auto or a byte count in [2048, 1073741824]");
  }
  return *v;
}

std::pair<uint64_t, uint64_t> parse_seed_range(std::string_view text) {
  const auto one = [&](std::string_view s) {
    const auto v = control::parse_uint(s);
    if (!v) throw std::invalid_argument("seeds '" + std::string(text) + "': N or A-B (1-20)");
    return *v;
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    const uint64_t v = one(text);
    return {v, v};
  }
  const uint64_t a = one(text.substr(0, dash));
  const uint64_t b = one(text.substr(dash + 1));
  if (b < a) throw std::invalid_argument("seeds '" + std::string(text) + "': B before A");
  if (b - a >= 100000) throw std::invalid_argument("seeds '" + std::string(text) + "': at most 100000 seeds");
  return {a, b};
}

std::vector<FabricMode> parse_mode_list(std::string_view text) {
  std::vector<FabricMode> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view name = text.substr(start, comma - start);
    const auto m = parse_fabric_mode(name);
    if (!m) {
      throw std::invalid_argument("mode '" + std::string(name) + "': one of " + kModeNames +
                                  ", comma-separated");
    }
    for (FabricMode seen : out) {
      if (seen == *m) throw std::invalid_argument("mode '" + std::string(name) + "' given twice");
    }
    out.push_back(*m);
    start = comma + 1;
  }
  return out;
}

std::pair<std::string, std::string> parse_ppcid_layout_host(std::string_view text) {
  const size_t eq = text.find('=');
  const std::string_view host = text.substr(0, eq);
  const std::string_view layout = eq == std::string_view::npos ? "" : text.substr(eq + 1);
  const bool host_ok = host.size() > 1 && host[0] == 'h' &&
                       host.find_first_not_of("0123456789", 1) == std::string_view::npos;
  if (!host_ok || (layout != "ts-high" && layout != "path-high")) {
    throw std::invalid_argument("ppcid-layout-host '" + std::string(text) +
                                "': HOST=LAYOUT with HOST like h3 and LAYOUT ts-high | path-high");
  }
  return {std::string(host), std::string(layout)};
}

uint32_t parse_fabric_paths(std::string_view text) {
  if (text == "auto") return 0;
  const auto v = control::parse_uint(text);
  if (!v || *v < 1 || *v > 256) {
    throw std::invalid_argument("fabric-paths '" + std::string(text) + "': auto or 1..256");
  }
  return static_cast<uint32_t>(*v);
}

std::vector<std::pair<double, double>> parse_oversubscription(std::string_view text) {
  const auto refuse = [&]() {
    return std::invalid_argument("oversubscription '" + std::string(text) +
                                 "': A:B per tier, leaf first, A and B > 0 (1:1, or with three "
                                 "tiers 1:1,2:1: the leaves' hosts : uplinks, the spines' "
                                 "leaves : super-spines, in bandwidth)");
  };
  std::vector<std::pair<double, double>> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view term = text.substr(at, comma - at);
    const size_t colon = term.find(':');
    if (colon == std::string_view::npos) throw refuse();
    const auto number = [&](std::string_view v) {
      const std::string s(v);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || !(d > 0) || !std::isfinite(d)) {
        throw refuse();
      }
      return d;
    };
    out.emplace_back(number(term.substr(0, colon)), number(term.substr(colon + 1)));
    at = comma + 1;
  }
  return out;
}

std::string format_oversubscription(const std::vector<std::pair<double, double>>& ratios) {
  std::string out;
  char term[64];
  for (const auto& [a, b] : ratios) {
    std::snprintf(term, sizeof term, "%s%g:%g", out.empty() ? "" : ",", a, b);
    out += term;
  }
  return out;
}

std::string FabricConfig::host_ppcid_layout(const std::string& name) const {
  for (const auto& [host, layout] : ppcid_layout_hosts) {
    if (host == name) return layout;
  }
  return effective_ppcid_layout();
}

uint64_t FabricConfig::longest_path_bdp_bytes() const {
  const uint64_t cable = delay_ns + cable_spread_ns;
  std::vector<PathHop> hops = {{link_gbps, cable}};
  if (total_leaves() > 1) {
    hops.push_back({leaf_spine_rate(), cable});
    if (tiers == 3 && pods > 1) {
      hops.push_back({spine_super_rate(), cable});
      hops.push_back({spine_super_rate(), cable});
    }
    hops.push_back({leaf_spine_rate(), cable});
  }
  hops.push_back({link_gbps, cable});
  return static_cast<uint64_t>(std::llround(link_gbps * ideal_fct_ns(mtu, mtu, hops) / 8.0));
}

uint32_t FabricConfig::irn_bdp() const {
  if (irn_bdp_packets != 0) return irn_bdp_packets;
  const double packets = std::ceil(static_cast<double>(longest_path_bdp_bytes()) / mtu);
  return std::max<uint32_t>(2, static_cast<uint32_t>(packets));
}

std::string FabricConfig::effective_receive(FabricMode mode) const {
  if (mode == FabricMode::kSprayNoReorder) return "none";
  // The modes that put one QP's packets on several paths reorder them (spreads_per_packet).
  // Left to rxe alone, every reordering is a NAK, and a NAK
  // that rxe's requester ignores during a retry leaves the QP to its 67 ms timer.
  if (receive == "reorder-buffer") {
    if (spreads_per_packet(mode)) return receive;  // spray-noreorder returned above
    return transport == "irn" ? "ooo-placement" : "none";
  }
  // IRN's responder places out of order whatever the model in front of it.
  if (receive == "none" && transport == "irn") return "ooo-placement";
  return receive;
}

std::string FabricConfig::check() const {
  if (tiers != 2 && tiers != 3) return "tiers: 2 | 3";
  if (pods < 1 || pods > 255) return "pods: 1..255";
  if (tiers == 2 && pods != 1) return "pods: only with --tiers 3 (a two-tier fabric is one pod)";
  if (leaves < 1 || leaves > 255) return "leaves: 1..255";
  if (spines < 1 || spines > 256) return "spines: 1..256";
  if (super_spines < 1 || super_spines > 256) return "super-spines: 1..256";
  if (links_per_super < 1 || links_per_super > 16) return "links-per-super: 1..16";
  if (leaf_spine_gbps != 0 && !(leaf_spine_gbps >= 1 && leaf_spine_gbps <= 1600)) {
    return "leaf-spine-gbps: 0 (link-gbps) or 1..1600";
  }
  if (spine_super_gbps != 0 && !(spine_super_gbps >= 1 && spine_super_gbps <= 1600)) {
    return "spine-super-gbps: 0 (link-gbps) or 1..1600";
  }
  if (oversubscription.size() > tiers - 1) {
    return "oversubscription: " + format_oversubscription(oversubscription) + " gives " +
           std::to_string(oversubscription.size()) + " ratios, a " + std::to_string(tiers) +
           "-tier fabric has " + (tiers == 3 ? "2 (leaf, spine)" : "1 (leaf)");
  }
  if (!oversubscription.empty() && leaf_spine_gbps > 0) {
    return "oversubscription: sets the leaf-spine rate from the counts: give it or "
           "leaf-spine-gbps, not both";
  }
  if (oversubscription.size() > 1 && spine_super_gbps > 0) {
    return "oversubscription: its second ratio sets the spine-super rate from the counts: give "
           "it or spine-super-gbps, not both";
  }
  for (size_t t = 0; t < oversubscription.size(); ++t) {
    const double gbps = t == 0 ? leaf_spine_rate() : spine_super_rate();
    if (!(gbps >= 1 && gbps <= 1600)) {
      char why[320];
      std::snprintf(why, sizeof why,
                    "oversubscription: %s makes the %s links %g Gbit/s (%s); allowed 1..1600",
                    format_oversubscription(oversubscription).c_str(),
                    t == 0 ? "leaf-spine" : "spine-super", gbps,
                    t == 0 ? "hosts-per-leaf x link-gbps x B / (A x spines x links-per-spine)"
                           : "leaves x links-per-spine x leaf-spine rate x B / (A x super-spines "
                             "x links-per-super)");
      return why;
    }
  }
  if (tiers == 3 &&
      uint64_t{leaves} * links_per_spine + uint64_t{super_spines} * links_per_super > 4096) {
    return "tiers 3: a spine's ports (leaves x links-per-spine + super-spines x links-per-super) "
           "above 4096";
  }
  if (tiers == 3 && uint64_t{pods} * links_per_super > 4096) {
    return "tiers 3: a super-spine's ports (pods x links-per-super) above 4096";
  }
  if (hosts_per_leaf < 1 || hosts_per_leaf > 254) return "hosts-per-leaf: 1..254";
  if (links_per_spine < 1 || links_per_spine > 16) return "links-per-spine: 1..16";
  if (planes < 1 || planes > 16) return "planes: 1..16 (one NIC uplink per plane)";
  if (!(link_gbps >= 1 && link_gbps <= 1600)) return "link-gbps: 1..1600";
  if (delay_ns > 1'000'000'000) return "delay-ns: 0..1e9";
  if (cable_spread_ns > 1'000'000'000) return "cable-spread-ns: 0..1e9";
  if (mtu != 1024 && mtu != 4096) return "mtu: 1024 | 4096";
  if (queue_bytes < 16384 || queue_bytes > (uint64_t{1} << 32)) return "queue-bytes: 16384..2^32";
  if (pfc_pool_bytes < 65536 || pfc_pool_bytes > (uint64_t{1} << 40)) {
    return "pfc-pool-bytes: 65536..2^40";
  }
  if (!(pfc_alpha >= 1.0 / 128 && pfc_alpha <= 128)) return "pfc-alpha: 1/128..128";
  if (pfc_static_threshold_bytes != 0 &&
      (pfc_static_threshold_bytes < 2048 || pfc_static_threshold_bytes > pfc_pool_bytes)) {
    return "pfc-static-threshold-bytes: 0 (dynamic, by pfc-alpha) or 2048..pfc-pool-bytes";
  }
  if (pfc_headroom_bytes != 0 &&
      (pfc_headroom_bytes < 2048 || pfc_headroom_bytes > (uint64_t{1} << 30))) {
    return "pfc-headroom-bytes: auto or 2048..2^30";
  }
  if (pfc_xoff_offset_bytes >= pfc_pool_bytes) return "pfc-xoff-offset-bytes: below pfc-pool-bytes";
  if (pfc_xon_offset_bytes >= pfc_pool_bytes) return "pfc-xon-offset-bytes: below pfc-pool-bytes";
  if (qps_per_host < 1 || qps_per_host > 256) return "qps-per-host: 1..256";
  if (msg_bytes < 1 || msg_bytes > (uint64_t{1} << 31)) return "msg-bytes: 1..2^31";
  if (bytes < 1) return "bytes: at least 1";
  if (channels < 1 || channels > 64) return "channels: 1..64";
  if (workload == Workload::kIncast && (incast_senders < 1 || incast_senders >= hosts())) {
    return "incast-senders: 1..hosts-1 (" + std::to_string(hosts() - 1) + " here)";
  }
  if (!(load > 0 && load <= 1)) return "load: (0, 1]";
  if (!slowdown_bins.empty()) {
    try {
      if (parse_slowdown_bins(slowdown_bins).kind == SlowdownBinning::kDeciles &&
          workload != Workload::kCdf) {
        return "slowdown-bins: deciles are the flow-size CDF's: workload cdf only (ventiles, bdp "
               "or a list of byte edges for the others)";
      }
    } catch (const std::invalid_argument& e) {
      return std::string("slowdown-bins: ") + e.what();
    }
  }
  if (network_load != 0) {
    if (!(network_load > 0 && network_load <= 2)) return "network-load: (0, 2]";
    if (inter_leaf_share() <= 0) {
      return "network-load: the fabric has one leaf, so no traffic crosses the uplinks; give "
             "load (per host) instead";
    }
    if (host_load() > 1) {
      char why[320];
      std::snprintf(why, sizeof why,
                    "network-load: %g of the leaf uplinks' capacity needs each host to offer "
                    "%.3f of its line rate (more than it has); at most %.3f on this fabric "
                    "(uplinks / host ports %.3f, inter-leaf share %.3f)",
                    network_load, host_load(), inter_leaf_share() / uplink_ratio(), uplink_ratio(),
                    inter_leaf_share());
      return why;
    }
  }
  if (std::string why = cc.check(); !why.empty()) return why;
  if (ecn_preset != "hpcc" && ecn_preset != "conweave") return "ecn-preset: hpcc | conweave";
  if (ecn_kmin_bytes > ecn_kmax_bytes && ecn_kmax_bytes != 0) {
    return "ecn-kmin: must be <= ecn-kmax (" + std::to_string(ecn_kmax_bytes) + ")";
  }
  if ((ecn_kmin_bytes == 0) != (ecn_kmax_bytes == 0)) {
    return "ecn-kmin, ecn-kmax: give both (bytes) or neither (the preset's, per port rate)";
  }
  if (!(ecn_pmax > 0 && ecn_pmax <= 1)) return "ecn-pmax: (0, 1]";
  if (ecn_mark_at != "dequeue" && ecn_mark_at != "enqueue") return "ecn-mark-at: dequeue | enqueue";
  if (modes.empty()) return std::string("mode: at least one of ") + kModeNames;
  if (spray_policy != "rr" && spray_policy != "weighted" && spray_policy != "adaptive") {
    return "spray-policy: rr | weighted | adaptive";
  }
  if (ppcid_layout != "auto" && ppcid_layout != "ts-high" && ppcid_layout != "path-high") {
    return "ppcid-layout: auto | ts-high | path-high";
  }
  for (size_t i = 0; i < ppcid_layout_hosts.size(); ++i) {
    const auto& [host, layout] = ppcid_layout_hosts[i];
    const auto n = control::parse_uint(std::string_view(host).substr(1));
    if (!n || *n >= hosts()) {
      return "ppcid-layout-host: " + host + " is not a host (h0..h" + std::to_string(hosts() - 1) +
             " here)";
    }
    for (size_t k = 0; k < i; ++k) {
      if (ppcid_layout_hosts[k].first == host) return "ppcid-layout-host: " + host + " given twice";
    }
    if (layout != "ts-high" && layout != "path-high") {
      return "ppcid-layout-host: " + host + "=" + layout + ": the layout is ts-high | path-high";
    }
  }
  if (fabric_paths > 256) return "fabric-paths: auto or 1..256";
  if (fabric_paths > 16) {
    // ts-high carries 4 bits of path id: every NIC on it must fit the count.
    bool ts_high = effective_ppcid_layout() == "ts-high";
    for (const auto& hl : ppcid_layout_hosts) ts_high = ts_high || hl.second == "ts-high";
    if (ts_high) {
      return "fabric-paths: at most 16 where a NIC uses ppcid-layout ts-high (4 bits of path id)";
    }
  }
  if (spray_rules != "per-qp" && spray_rules != "all-roce") return "spray-rules: per-qp | all-roce";
  if (receive != "reorder-buffer" && receive != "ooo-placement" && receive != "none") {
    return "receive: reorder-buffer | ooo-placement | none";
  }
  if (receive == "ooo-placement") {
    for (FabricMode m : modes) {
      if (m == FabricMode::kSprayNoReorder) {
        return "receive: spray-noreorder is spray with receive none; with ooo-placement use "
               "mode spray";
      }
    }
  }
  if (placement_nak_delay_ns >= retransmit_timeout_ns) {
    return "placement-nak-delay-us: below the retransmit timeout";
  }
  if (reorder_hold_ns < 1000 || reorder_hold_ns >= retransmit_timeout_ns) {
    return "reorder-hold-us: at least 1 and below the retransmit timeout";
  }
  if (reorder_window < 1 || reorder_window > 16384) return "reorder-window: 1..16384";
  if (max_in_flight < 66 || max_in_flight > 65536) return "max-in-flight: 66..65536";
  if (transport != "rc" && transport != "irn") return "transport: rc | irn";
  if (transport == "irn") {
    if (pfc) {
      return "transport irn: runs with PFC off on the data class (IRN is lossy RoCE); drop "
             "pfc on";
    }
    if (irn_rto_low_ns < 1 || irn_rto_low_ns > irn_rto_high_ns) {
      return "irn-rto-low-us: 0.001 .. irn-rto-high-us (RTO_low <= RTO_high)";
    }
    if (irn_bdp_packets == 1 || irn_bdp_packets > 65536) {
      return "irn-bdp-packets: 0 (auto) or 2..65536";
    }
    if (irn_reorder_wait_ns >= irn_rto_high_ns) {
      return "irn-reorder-wait-us: below irn-rto-high-us (a wait past the timeout resends what "
             "is merely late)";
    }
    for (FabricMode m : modes) {
      if (m == FabricMode::kSprayNoReorder) {
        return "transport irn: not with mode spray-noreorder (rxe's responder alone); use mode "
               "spray with receive ooo-placement";
      }
    }
    if (op == "read") {
      return "op read: not with transport irn (the placement responder answers WRITEs only)";
    }
  }
  if (dlb_gap_ns < 1) return "dlb-gap-us: above 0";
  if (letflow_timeout_ns < 1) return "letflow-timeout-us: above 0";
  if (std::find(modes.begin(), modes.end(), FabricMode::kConga) != modes.end()) {
    // The paper's setting: a leaf-spine, each leaf's uplinks named by 4 bits.
    if (tiers != 2) return "mode conga: two tiers only (CONGA balances a leaf-spine)";
    if (spines * links_per_spine > CongaTables::kUplinks) {
      return "mode conga: at most 16 uplinks per leaf (spines x links-per-spine; LBTag is 4 "
             "bits), got " +
             std::to_string(spines * links_per_spine);
    }
    if (conga_dre_ns < 1) return "conga-dre-us: above 0";
    if (!(conga_alpha > 0 && conga_alpha <= 1)) return "conga-alpha: in (0, 1]";
    if (conga_bits < 1 || conga_bits > 3) return "conga-quantisation-bits: 1..3";
    if (conga_flowlet_ns < 1) return "conga-flowlet-timeout-us: above 0";
    if (conga_aging_ns < 1) return "conga-aging-us: above 0";
  }
  if (std::find(modes.begin(), modes.end(), FabricMode::kConweave) != modes.end()) {
    // conweave-ns3's leaf-spine: ConWeave runs at the leaves, the spines only route.
    if (tiers != 2) return "mode conweave: two tiers only (ConWeave's leaves, a leaf-spine)";
    if (spines * links_per_spine > CongaTables::kUplinks) {
      return "mode conweave: at most 16 uplinks per leaf (spines x links-per-spine; the uplink "
             "is 4 bits on the wire), got " +
             std::to_string(spines * links_per_spine);
    }
    if (const std::string why = check_conweave_settings(conweave); !why.empty()) {
      return "conweave-" + why;
    }
  }
  if (entropy_values < 2 || entropy_values > 16384 || (entropy_values & (entropy_values - 1)) != 0) {
    return "entropy-values: a power of two from 2 to 16384";
  }
  if (tcam_capacity < 16 || tcam_capacity > (1u << 20)) return "tcam-capacity: 16..1048576";
  if (tcam_roce_partition > tcam_capacity) {
    return "tcam-roce-partition: 0 (none) .. tcam-capacity (" + std::to_string(tcam_capacity) + ")";
  }
  if (control_period_ns < 1000) return "control-period-us: at least 1";
  if (nic_control_period_ns < 1000) return "nic-control-period-us: at least 1";
  if (duration_ns < 1000) return "duration: at least 1us";
  if (warmup() >= duration_ns) return "warmup: below duration";
  if (sample_ns < 1000) return "sample-us: at least 1";
  if (seed_last < seed_first) return "seeds: A-B with A <= B";
  if (workload == Workload::kAlltoall && hosts() < 2) return "workload alltoall: at least 2 hosts";
  if (op != "write" && op != "read") return "op: write | read";
  if (op == "read" && receive == "ooo-placement") {
    return "op read: not with receive ooo-placement (the placement responder answers WRITEs only)";
  }
  if (op == "read" && workload != Workload::kPermutation) {
    return "op read: only with workload permutation (the other workloads chain completions on "
           "data arriving at the destination)";
  }
  if (workload == Workload::kPermutation && total_leaves() < 2) {
    return "workload permutation: at least 2 leaves (each host sends to a host on another leaf)";
  }
  // An event the run never reaches would change nothing, and a planner would read the table
  // as if it had happened.
  const uint64_t end = workload == Workload::kCdf ? duration_ns * 5 + 1'000'000 : duration_ns;
  for (const FabricEvent& e : events) {
    if (e.at_ns > end) {
      char at[64], until[64];
      std::snprintf(at, sizeof at, "%g us", static_cast<double>(e.at_ns) / 1000.0);
      std::snprintf(until, sizeof until, "%g us", static_cast<double>(end) / 1000.0);
      return std::string("event: '") + e.text + "' is at " + at + ", after the end of the run (" +
             until + (workload == Workload::kCdf ? ", 5 x duration + 1 ms" : ", --duration") +
             "): move it, or lengthen the run";
    }
  }
  return {};
}

}  // namespace spraynet::fabric
