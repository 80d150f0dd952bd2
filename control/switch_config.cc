#include "control/switch_config.h"
#include <sstream>
#include <cmath>

#include <algorithm>
#include <charconv>

#include <cstdio>
#include <cstdlib>
#include <set>

namespace spraynet::control {

namespace {

constexpr uint64_t kMaxPorts = 64;
constexpr uint64_t kMaxPortQueues = 64;

PortSettings parse_port(const ConfigNode& n) {
  n.allow_only({"name", "device", "link", "queue_bytes", "delay_line_frames", "peer_mac",
                "rx_queues", "tx_queues", "rx_descriptors", "tx_descriptors"});
  PortSettings p;
  p.name = n.name("name");
  p.device = n.string("device");
  p.rx_queues = static_cast<uint16_t>(n.uint_or("rx_queues", p.rx_queues, 1, kMaxPortQueues));
  p.tx_queues = static_cast<uint16_t>(n.uint_or("tx_queues", p.tx_queues, 1, kMaxPortQueues));
  p.rx_descriptors =
      static_cast<uint16_t>(n.uint_or("rx_descriptors", p.rx_descriptors, 32, 32768));
  p.tx_descriptors =
      static_cast<uint16_t>(n.uint_or("tx_descriptors", p.tx_descriptors, 32, 32768));
  p.queue_bytes = n.uint_or("queue_bytes", p.queue_bytes, 2048, uint64_t{1} << 32);
  p.delay_line_frames =
      static_cast<uint32_t>(n.uint_or("delay_line_frames", p.delay_line_frames, 1, 1u << 24));
  if (n.has("peer_mac")) {
    const std::string mac = n.string("peer_mac");
    std::array<uint8_t, 6> m{};
    unsigned b[6];
    char tail;
    if (std::sscanf(mac.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                    &b[5], &tail) != 6) {
      n.fail("peer_mac", "must be a MAC address such as 02:00:00:00:00:01, got \"" + mac + "\"");
    }
    for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(b[i]);
    p.peer_mac = m;
  }
  // No `link:`, or `link: wire`: the wire is the link (no shaper, no delay line); `link:
  // emulated` or a map of its properties: an emulated link (rate, delay, BER, loss).
  p.link.wire = true;
  if (n.has("link") && n.yaml()["link"].IsScalar()) {
    const std::string kind = n.string("link");
    if (kind != "wire" && kind != "emulated") {
      n.fail("link",
             "must be wire, emulated or a map of the emulated link's properties "
             "(rate_gbps, delay_ns, ber, loss, up), got \"" +
                 kind + "\"");
    }
    p.link.wire = kind == "wire";
  } else if (auto link = n.optional_child("link")) {
    p.link.wire = false;
    link->allow_only({"rate_gbps", "delay_ns", "ber", "loss", "up"});
    p.link.rate_gbps = link->number_or("rate_gbps", p.link.rate_gbps, LinkLimits::kMinRateGbps,
                                       LinkLimits::kMaxRateGbps);
    p.link.delay_ns = link->uint_or("delay_ns", p.link.delay_ns, 0, LinkLimits::kMaxDelayNs);
    p.link.ber = link->number_or("ber", p.link.ber, 0.0, LinkLimits::kMaxBer);
    p.link.loss = link->number_or("loss", p.link.loss, 0.0, LinkLimits::kMaxLoss);
    p.link.up = link->boolean_or("up", p.link.up);
  }
  return p;
}

}  // namespace

std::string check_link_value(std::string_view key, double value) {
  double lo = 0, hi = 0;
  if (key == "rate_gbps") {
    lo = LinkLimits::kMinRateGbps;
    hi = LinkLimits::kMaxRateGbps;
  } else if (key == "ber") {
    hi = LinkLimits::kMaxBer;
  } else if (key == "loss_rate" || key == "loss") {
    hi = LinkLimits::kMaxLoss;
  } else {
    return "unknown link property";
  }
  if (std::isfinite(value) && value >= lo && value <= hi) return {};
  std::ostringstream o;
  o << "must be a number in [" << lo << ", " << hi << "], got " << value;
  return o.str();
}

namespace {

uint16_t port_ref(const SwitchConfig& c, const ConfigNode& n, std::string_view key,
                  const std::string& name) {
  const int idx = c.port_index(name);
  if (idx < 0) {
    std::string known;
    for (const auto& p : c.ports) known += (known.empty() ? "" : "|") + p.name;
    n.fail(key, "unknown port \"" + name + "\" (ports: " + known + ")");
  }
  return static_cast<uint16_t>(idx);
}

GroupSettings parse_group(const SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"name", "mode", "ports", "weights", "dlb_gap_ns", "flowlet_entries", "ecmp_reduce",
                "spray_path_divisor", "leaf"});
  GroupSettings g;
  g.name = n.name("name");
  g.mode = n.choice_or("mode", g.mode,
                       {"ecmp", "weighted", "dlb", "drill", "letflow", "conga", "conweave"});
  const bool tunnelled = g.mode == "conga" || g.mode == "conweave";
  if (n.has("leaf")) {
    if (!tunnelled) n.fail("leaf", "only a conga or conweave group names a destination leaf");
    g.overlay_leaf = static_cast<int>(n.uint("leaf", 0, 255));
  } else if (tunnelled) {
    n.fail("leaf", "required for mode " + g.mode +
                       ": the leaf (0..255) behind this group's routes");
  }
  g.ecmp_reduce = n.choice_or("ecmp_reduce", g.ecmp_reduce, {"modulo", "multiply"});
  g.spray_path_divisor =
      static_cast<uint32_t>(n.uint_or("spray_path_divisor", g.spray_path_divisor, 1, 256));
  const auto names = n.string_list("ports");
  if (names.empty()) n.fail("ports", "required: a list of one or more port names");
  std::set<uint16_t> seen;
  for (const auto& name : names) {
    const uint16_t idx = port_ref(c, n, "ports", name);
    if (!seen.insert(idx).second) n.fail("ports", "port \"" + name + "\" listed twice");
    g.ports.push_back(idx);
  }
  if (tunnelled && g.ports.size() > CongaTables::kUplinks) {
    n.fail("ports", "a " + g.mode + " group has at most " + std::to_string(CongaTables::kUplinks) +
                        " ports (the uplink is 4 bits on the wire), got " +
                        std::to_string(g.ports.size()));
  }
  for (uint64_t w : n.uint_list("weights", 0, 65535)) g.weights.push_back(static_cast<uint32_t>(w));
  if (!g.weights.empty() && g.mode != "weighted") {
    n.fail("weights", "only a weighted group uses weights (mode is " + g.mode +
                          "): set mode: weighted or drop weights");
  }
  if (!g.weights.empty() &&
      std::all_of(g.weights.begin(), g.weights.end(), [](uint32_t w) { return w == 0; })) {
    n.fail("weights", "at least one weight must be above 0 (all 0 would send nothing)");
  }
  if (!g.weights.empty() && g.weights.size() != g.ports.size()) {
    n.fail("weights", "must have one weight per port (" + std::to_string(g.ports.size()) +
                          "), got " + std::to_string(g.weights.size()));
  }
  g.dlb_gap_ns = n.uint_or("dlb_gap_ns", g.dlb_gap_ns, 1, 10'000'000'000ull);
  g.flowlet_entries =
      static_cast<uint32_t>(n.uint_or("flowlet_entries", g.flowlet_entries, 1, 1u << 24));
  if ((g.flowlet_entries & (g.flowlet_entries - 1)) != 0) {
    n.fail("flowlet_entries", "must be a power of two, got " + std::to_string(g.flowlet_entries));
  }
  return g;
}

uint8_t protocol(const ConfigNode& n) {
  const std::string s = n.string("proto");
  if (s == "udp") return 17;
  if (s == "tcp") return 6;
  if (s == "icmp") return 1;
  const auto v = parse_uint(s);
  if (!v || *v > 255) n.fail("proto", "must be udp|tcp|icmp or a number 0-255, got \"" + s + "\"");
  return static_cast<uint8_t>(*v);
}

}  // namespace

TcamRuleSettings parse_tcam_rule(const SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"id", "priority", "partition", "match", "action", "port", "keep_percent"});
  TcamRuleSettings r;
  r.id = static_cast<uint32_t>(n.uint("id", 0, 0xFFFFFFFF));
  const double prio = n.number_or("priority", 0, -2147483648.0, 2147483647.0);
  r.priority = static_cast<int32_t>(prio);
  r.partition = n.string_or("partition", r.partition);
  r.action =
      n.choice_or("action", r.action, {"ecmp", "spray", "pin", "drop", "mirror", "quarantine"});
  if (r.action == "pin" || r.action == "mirror" || r.action == "quarantine") {
    if (!n.has("port")) n.fail("port", "required for action " + r.action);
    r.port = port_ref(c, n, "port", n.string("port"));
  } else if (n.has("port")) {
    n.fail("port", "only pin, mirror and quarantine take a port");
  }
  if (r.action == "quarantine") {
    r.keep_percent = static_cast<uint8_t>(n.uint_or("keep_percent", r.keep_percent, 0, 100));
  } else if (n.has("keep_percent")) {
    n.fail("keep_percent", "only quarantine takes keep_percent");
  }
  if (auto m = n.optional_child("match")) {
    m->allow_only({"src", "dst", "proto", "src_port", "dst_port", "dest_qp"});
    if (auto p = m->optional_prefix("src")) r.src = *p;
    if (auto p = m->optional_prefix("dst")) r.dst = *p;
    if (m->has("proto")) {
      r.proto = protocol(*m);
      r.proto_mask = 0xFF;
    }
    r.src_port = m->range_or_all("src_port", 0, 0xFFFF);
    r.dst_port = m->range_or_all("dst_port", 0, 0xFFFF);
    r.dest_qp = m->range_or_all("dest_qp", 0, 0xFFFFFF);
  }
  return r;
}

TcamRule to_tcam_rule(const TcamRuleSettings& r) {
  TcamRule t;
  t.id = r.id;
  t.priority = r.priority;
  t.partition = r.partition;
  t.src_ip = r.src.address;
  t.src_prefix_len = r.src.length;
  t.dst_ip = r.dst.address;
  t.dst_prefix_len = r.dst.length;
  t.ip_proto = r.proto;
  t.ip_proto_mask = r.proto_mask;
  t.src_port_lo = static_cast<uint16_t>(r.src_port.lo);
  t.src_port_hi = static_cast<uint16_t>(r.src_port.hi);
  t.dst_port_lo = static_cast<uint16_t>(r.dst_port.lo);
  t.dst_port_hi = static_cast<uint16_t>(r.dst_port.hi);
  t.dest_qp_lo = static_cast<uint32_t>(r.dest_qp.lo);
  t.dest_qp_hi = static_cast<uint32_t>(r.dest_qp.hi);
  t.action = *parse_tcam_action(r.action);  // parse_tcam_rule accepted only known actions
  t.port = r.port;
  t.keep_percent = r.keep_percent;
  return t;
}

TcamConfig to_tcam_config(const TcamSettings& t) {
  TcamConfig c;
  c.capacity = t.capacity;
  c.spray_rule_limit = t.spray_rule_limit;
  for (const auto& p : t.partitions) c.partitions.push_back({p.name, p.capacity});
  return c;
}

namespace {

void parse_control(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"period_ms", "target_utilisation", "idle_buckets", "utilisation_weight"});
  auto& k = c.control;
  k.period_ms = n.uint_or("period_ms", k.period_ms, 1, 3'600'000);
  k.target_utilisation = n.number_or("target_utilisation", k.target_utilisation, 0.0, 0.99);
  k.idle_buckets = static_cast<uint32_t>(n.uint_or("idle_buckets", k.idle_buckets, 1, 4096));
  k.utilisation_weight = n.number_or("utilisation_weight", k.utilisation_weight, 0.01, 1.0);
}

void parse_tcam(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"capacity", "spray_rule_limit", "partitions", "rules"});
  c.tcam.capacity = static_cast<uint32_t>(n.uint_or("capacity", c.tcam.capacity, 0, 1u << 20));
  c.tcam.spray_rule_limit = static_cast<uint32_t>(
      n.uint_or("spray_rule_limit", c.tcam.capacity, 0, 1u << 20));
  std::set<std::string> names = {"default"};
  for (const auto& p : n.list("partitions")) {
    p.allow_only({"name", "capacity"});
    TcamPartitionSettings s;
    s.name = p.name("name");
    if (!names.insert(s.name).second) p.fail("name", "partition \"" + s.name + "\" defined twice");
    s.capacity = static_cast<uint32_t>(p.uint("capacity", 0, 1u << 20));
    c.tcam.partitions.push_back(s);
  }
  std::set<uint32_t> ids;
  for (const auto& r : n.list("rules")) {
    TcamRuleSettings rule = parse_tcam_rule(c, r);
    if (!names.count(rule.partition)) {
      std::string known;
      for (const auto& s : names) known += (known.empty() ? "" : "|") + s;
      r.fail("partition", "unknown partition \"" + rule.partition + "\" (partitions: " + known + ")");
    }
    if (!ids.insert(rule.id).second) r.fail("id", "rule id " + std::to_string(rule.id) + " used twice");
    c.tcam.rules.push_back(rule);
  }
}

std::vector<std::pair<uint8_t, uint8_t>> class_map(const ConfigNode& n, std::string_view key,
                                                   uint64_t max_code) {
  std::vector<std::pair<uint8_t, uint8_t>> out;
  for (const auto& e : n.list(key)) {
    e.allow_only({"code", "tc"});
    out.emplace_back(static_cast<uint8_t>(e.uint("code", 0, max_code)),
                     static_cast<uint8_t>(e.uint("tc", 0, 7)));
  }
  return out;
}

void parse_pfc(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"enabled", "priorities", "pool_bytes", "alpha", "static_threshold_bytes",
                "headroom_bytes", "xoff_offset_bytes", "xon_offset_bytes", "quanta",
                "fast_feedback", "watchdog"});
  PfcSettings& p = c.pfc;
  p.enabled = n.boolean_or("enabled", true);
  if (n.has("priorities")) {
    p.priorities = 0;
    for (uint64_t prio : n.uint_list("priorities", 0, 7)) p.priorities |= uint8_t(1u << prio);
    if (p.priorities == 0) n.fail("priorities", "must list at least one priority 0-7");
  }
  p.pool_bytes = n.uint_or("pool_bytes", p.pool_bytes, 65536, uint64_t{1} << 40);
  if (n.has("alpha") && n.has("static_threshold_bytes")) {
    n.fail("static_threshold_bytes",
           "give alpha (a dynamic threshold) or static_threshold_bytes (a static one), not both");
  }
  p.alpha =
      n.number_or("alpha", p.alpha, SharedBufferConfig::kMinAlpha, SharedBufferConfig::kMaxAlpha);
  p.static_threshold_bytes =
      n.uint_or("static_threshold_bytes", p.static_threshold_bytes, 2048, p.pool_bytes);
  if (n.has("headroom_bytes")) {
    const std::string h = n.string("headroom_bytes");
    const auto v = h == "auto" ? std::optional<uint64_t>(0) : parse_uint(h);
    if (!v || (h != "auto" && (*v < 2048 || *v > (uint64_t{1} << 30)))) {
      n.fail("headroom_bytes",
             "must be auto or a byte count in [2048, 1073741824], got \"" + h + "\"");
    }
    p.headroom_bytes = *v;
  }
  p.xoff_offset_bytes = n.uint_or("xoff_offset_bytes", p.xoff_offset_bytes, 0, p.pool_bytes - 1);
  p.xon_offset_bytes = n.uint_or("xon_offset_bytes", p.xon_offset_bytes, 0, p.pool_bytes - 1);
  p.quanta = static_cast<uint16_t>(n.uint_or("quanta", p.quanta, 1, 0xFFFF));
  p.fast_feedback = n.boolean_or("fast_feedback", p.fast_feedback);
  if (auto w = n.optional_child("watchdog")) {
    w->allow_only({"enabled", "detect_ms", "restore_ms", "action"});
    p.watchdog = w->boolean_or("enabled", true);
    p.watchdog_detect_ns = w->uint_or("detect_ms", 200, 1, 3'600'000) * 1'000'000;
    p.watchdog_restore_ns = w->uint_or("restore_ms", 200, 1, 3'600'000) * 1'000'000;
    p.watchdog_action = w->choice_or("action", p.watchdog_action, {"drop", "forward"});
  }
}

struct EcnThresholds {
  uint64_t kmin = 0;
  uint64_t kmax = 0;
};

// A port's thresholds: the overrides, else the preset at its link rate.
EcnThresholds ecn_thresholds(const EcnSettings& e, double rate_gbps) {
  EcnThresholds t;
  if (e.preset == "dctcp") {
    // ns-3 HPCC run.py's DCTCP runs: kmin = kmax = 30 KB per 10 Gbit/s (a step at K).
    const auto k = static_cast<uint64_t>(std::llround(EcnSettings::kDctcpKBytesPer10G * rate_gbps / 10.0));
    t.kmin = e.kmin_bytes.value_or(k);
    t.kmax = e.kmax_bytes.value_or(k);
    return t;
  }
  const double scale = e.preset == "hpcc" ? rate_gbps / 25.0 : 1.0;
  t.kmin = e.kmin_bytes.value_or(
      static_cast<uint64_t>(std::llround(EcnSettings::kKminBytesPer25G * scale)));
  t.kmax = e.kmax_bytes.value_or(
      static_cast<uint64_t>(std::llround(EcnSettings::kKmaxBytesPer25G * scale)));
  return t;
}

std::string gbps(double rate) {
  std::ostringstream o;
  o << rate;
  return o.str();
}

void parse_ecn(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"enabled", "mark_at", "classes", "preset", "kmin_bytes", "kmax_bytes", "pmax"});
  EcnSettings& e = c.ecn;
  e.enabled = n.boolean_or("enabled", true);
  e.mark_at = n.choice_or("mark_at", "dequeue", {"dequeue", "enqueue"}) == "enqueue"
                  ? EcnMarkPoint::kEnqueue
                  : EcnMarkPoint::kDequeue;
  // Where DCQCN runs, it runs on the lossless classes: those are the default.
  e.classes = c.pfc.enabled ? c.pfc.priorities : uint8_t{1u << 3};
  if (n.has("classes")) {
    e.classes = 0;
    for (const auto& item : n.list("classes")) {
      const std::string text = item.scalar();
      const auto tc = parse_uint(text);
      if (!tc || *tc > 7) n.fail("classes", "each class 0-7, got " + text);
      e.classes |= static_cast<uint8_t>(1u << *tc);
    }
    if (e.classes == 0) n.fail("classes", "must list at least one class 0-7");
  }
  e.preset = n.choice_or("preset", e.preset, {"hpcc", "conweave", "dctcp"});
  if (n.has("kmin_bytes")) e.kmin_bytes = n.uint("kmin_bytes", 0, EcnSettings::kMaxThresholdBytes);
  if (n.has("kmax_bytes")) e.kmax_bytes = n.uint("kmax_bytes", 0, EcnSettings::kMaxThresholdBytes);
  if (n.has("pmax")) {
    const std::string text = n.string("pmax");
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v) || !(v > 0.0 && v <= 1.0)) {
      n.fail("pmax", "must be in (0, 1], got " + text);
    }
    e.pmax = v;
  }
  // kmin <= kmax at every port: an override may meet a preset value that scales with the rate.
  if (e.kmin_bytes && e.kmax_bytes) {
    if (*e.kmin_bytes > *e.kmax_bytes) {
      n.fail("kmin_bytes", "must be <= ecn.kmax_bytes (" + std::to_string(*e.kmax_bytes) + ")");
    }
    return;
  }
  for (const PortSettings& p : c.ports) {
    const EcnThresholds t = ecn_thresholds(e, p.link.rate_gbps);
    if (t.kmin <= t.kmax) continue;
    const std::string at = ": the " + e.preset + " preset at port " + p.name + "'s " +
                           gbps(p.link.rate_gbps) + " Gbit/s";
    if (e.kmin_bytes) {
      n.fail("kmin_bytes",
             "must be <= ecn.kmax_bytes (" + std::to_string(t.kmax) + at + "): set kmax_bytes too");
    }
    n.fail("kmax_bytes",
           "must be >= ecn.kmin_bytes (" + std::to_string(t.kmin) + at + "): set kmin_bytes too");
  }
}

}  // namespace

EcnMarkerConfig ecn_marker_config(const SwitchConfig& config, size_t port_index, uint64_t seed) {
  const PortSettings& port = config.ports.at(port_index);
  const EcnSettings& e = config.ecn;
  EcnMarkerConfig m;
  m.mark_at = e.mark_at;
  m.seed = seed;
  if (!e.enabled) return m;
  const EcnThresholds t = ecn_thresholds(e, port.link.rate_gbps);
  for (size_t tc = 0; tc < m.classes.size(); ++tc) {
    if ((e.classes >> tc) & 1) m.classes[tc] = EcnClassConfig{true, t.kmin, t.kmax, e.pmax};
  }
  return m;
}

int SwitchConfig::port_index(const std::string& n) const {
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

// A leaf overlay's `leaf`, `vtep`, `leaves` and `vni` (conga:, conweave:); `leaf_required`: a
// block without them is refused (ConWeave has no spine part).
void parse_overlay_leaves(const ConfigNode& n, int& leaf, uint32_t& vtep,
                          std::vector<std::pair<uint8_t, uint32_t>>& leaves, uint32_t& vni,
                          bool leaf_required) {
  const auto address = [](const ConfigNode& node, std::string_view key) {
    const Ipv4Prefix p = node.prefix(key);
    if (p.length != 32) node.fail(key, "a tunnel address (10.0.0.254), not a prefix");
    return p.address;
  };
  if (n.has("leaf") || leaf_required) {
    leaf = static_cast<int>(n.uint("leaf", 0, 255));
    vtep = address(n, "vtep");
  } else if (n.has("vtep") || n.has("leaves")) {
    n.fail("leaf", "required with vtep and leaves (a leaf's id, 0..255; a spine has none of them)");
  }
  std::set<uint32_t> ids;
  if (leaf >= 0) ids.insert(static_cast<uint32_t>(leaf));
  for (const auto& l : n.list("leaves")) {
    l.allow_only({"leaf", "vtep"});
    const auto id = static_cast<uint8_t>(l.uint("leaf", 0, 255));
    if (!ids.insert(id).second) l.fail("leaf", "leaf " + std::to_string(id) + " listed twice");
    leaves.emplace_back(id, address(l, "vtep"));
  }
  vni = static_cast<uint32_t>(n.uint_or("vni", vni, 0, 0xFFFFFF));
}

// Microseconds in [lo, hi] read, nanoseconds kept (rounded).
uint64_t micros_or(const ConfigNode& n, std::string_view key, uint64_t def_ns, double lo,
                   double hi) {
  const double us = n.number_or(key, static_cast<double>(def_ns) / 1000.0, lo, hi);
  return static_cast<uint64_t>(us * 1000.0 + 0.5);
}

void parse_conweave(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"leaf", "vtep", "leaves", "vni", "base_rtt_us", "reply_extra_us", "path_pause_us",
                "tx_expiry_us", "voq_flush_extra_us", "voq_default_wait_us", "aging_us",
                "voq_limit_packets", "control_dscp"});
  ConweaveSwitchSettings& k = c.conweave;
  k.enabled = true;
  parse_overlay_leaves(n, k.leaf, k.vtep, k.leaves, k.vni, true);
  ConweaveSettings& p = k.params;
  k.base_rtt_ns = micros_or(n, "base_rtt_us", k.base_rtt_ns, 0, 1e6);
  p.reply_extra_ns = micros_or(n, "reply_extra_us", p.reply_extra_ns, 0, 1e6);
  p.path_pause_ns = micros_or(n, "path_pause_us", p.path_pause_ns, 0, 1e6);
  p.tx_expiry_ns = micros_or(n, "tx_expiry_us", p.tx_expiry_ns, 1, 1e6);
  p.voq_flush_extra_ns = micros_or(n, "voq_flush_extra_us", p.voq_flush_extra_ns, 0, 1e6);
  p.voq_default_wait_ns = micros_or(n, "voq_default_wait_us", p.voq_default_wait_ns, 1, 1e6);
  p.aging_ns = micros_or(n, "aging_us", p.aging_ns, 1, 1e7);
  p.voq_limit_packets =
      static_cast<uint32_t>(n.uint_or("voq_limit_packets", p.voq_limit_packets, 1, 1u << 20));
  k.control_dscp = static_cast<uint8_t>(n.uint_or("control_dscp", k.control_dscp, 0, 63));
}

void parse_conga(SwitchConfig& c, const ConfigNode& n) {
  n.allow_only({"leaf", "vtep", "leaves", "vni", "t_dre_us", "alpha", "quantisation_bits",
                "aging_us"});
  CongaSettings& k = c.conga;
  k.enabled = true;
  parse_overlay_leaves(n, k.leaf, k.vtep, k.leaves, k.vni, false);
  k.dre.t_dre_ns = micros_or(n, "t_dre_us", k.dre.t_dre_ns, 0.001, 1e6);
  k.dre.alpha = n.number_or("alpha", k.dre.alpha, 1e-6, 1.0);
  k.dre.bits = static_cast<unsigned>(n.uint_or("quantisation_bits", k.dre.bits, 1, 3));
  k.aging_ns = micros_or(n, "aging_us", k.aging_ns, 0.001, 1e7);
}

SwitchConfig parse_switch_config(const ConfigNode& root) {
  root.allow_only({"name", "seed", "ppcid_layout", "mempool_mbufs", "mbuf_data_room", "route_table",
                   "ports", "groups", "routes", "tcam", "hash", "qos", "pfc", "ecn", "int",
                   "conga", "conweave", "control", "lcores", "idle_backoff", "telemetry"});
  SwitchConfig c;
  c.file = root.file();
  c.name = root.name_or("name", c.name);
  c.seed = root.uint_or("seed", c.seed, 0, UINT64_MAX);
  c.ppcid_layout = root.choice_or("ppcid_layout", c.ppcid_layout, {"ts-high", "path-high"});
  c.mempool_mbufs = static_cast<uint32_t>(root.uint_or("mempool_mbufs", 0, 0, 16u << 20));
  c.mbuf_data_room =
      static_cast<uint32_t>(root.uint_or("mbuf_data_room", c.mbuf_data_room, 1024, 65535));
  c.route_table = *parse_route_table_backend(
      root.choice_or("route_table", std::string(to_string(c.route_table)), {"lpm", "rib", "hash"}));

  const auto ports = root.list("ports");
  if (ports.empty()) root.fail("ports", "required: a list of one or more ports");
  if (ports.size() > kMaxPorts) root.fail("ports", "at most " + std::to_string(kMaxPorts) + " ports");
  for (const auto& p : ports) {
    PortSettings s = parse_port(p);
    if (c.port_index(s.name) >= 0) p.fail("name", "port \"" + s.name + "\" defined twice");
    c.ports.push_back(s);
  }

  for (const auto& g : root.list("groups")) {
    GroupSettings s = parse_group(c, g);
    for (const auto& other : c.groups) {
      if (other.name == s.name) g.fail("name", "group \"" + s.name + "\" defined twice");
    }
    c.groups.push_back(s);
  }

  std::set<std::pair<uint32_t, uint8_t>> prefixes;
  for (const auto& r : root.list("routes")) {
    r.allow_only({"prefix", "group", "port"});
    RouteSettings s;
    s.prefix = r.prefix("prefix");
    if (!prefixes.insert({s.prefix.address, s.prefix.length}).second) {
      r.fail("prefix", "route " + format_ipv4(s.prefix.address) + "/" +
                           std::to_string(s.prefix.length) + " defined twice");
    }
    if (r.has("group") == r.has("port")) r.fail_here("needs exactly one of group or port");
    if (r.has("port")) {
      // A route to one port is a group of one, named after the port.
      const uint16_t port = port_ref(c, r, "port", r.string("port"));
      const std::string name = "port:" + c.ports[port].name;
      int idx = -1;
      for (size_t i = 0; i < c.groups.size(); ++i) {
        if (c.groups[i].name == name) idx = static_cast<int>(i);
      }
      if (idx < 0) {
        GroupSettings g;
        g.name = name;
        g.ports = {port};
        c.groups.push_back(g);
        idx = static_cast<int>(c.groups.size() - 1);
      }
      s.group = static_cast<uint32_t>(idx);
    } else {
      const std::string name = r.string("group");
      int idx = -1;
      for (size_t i = 0; i < c.groups.size(); ++i) {
        if (c.groups[i].name == name) idx = static_cast<int>(i);
      }
      if (idx < 0) r.fail("group", "unknown group \"" + name + "\"");
      s.group = static_cast<uint32_t>(idx);
    }
    c.routes.push_back(s);
  }

  if (auto t = root.optional_child("tcam")) parse_tcam(c, *t);

  if (auto h = root.optional_child("hash")) {
    h->allow_only({"algorithm", "seed", "dest_qp"});
    c.hash.algorithm = h->choice_or("algorithm", c.hash.algorithm, {"crc32c", "crc32"});
    c.hash.seed = static_cast<uint32_t>(h->uint_or("seed", 0, 0, 0xFFFFFFFF));
    c.hash.dest_qp = h->boolean_or("dest_qp", false);
  }

  if (auto q = root.optional_child("qos")) {
    q->allow_only({"trust", "dscp_to_tc", "pcp_to_tc"});
    c.qos.trust = q->choice_or("trust", c.qos.trust, {"dscp", "pcp"});
    c.qos.dscp_to_tc = class_map(*q, "dscp_to_tc", 63);
    c.qos.pcp_to_tc = class_map(*q, "pcp_to_tc", 7);
  }

  if (auto k = root.optional_child("conga")) parse_conga(c, *k);
  if (auto k = root.optional_child("conweave")) parse_conweave(c, *k);
  if (c.conga.enabled && c.conweave.enabled) {
    root.fail("conweave", "a switch runs CONGA or ConWeave, not both (it has a conga: block)");
  }
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const GroupSettings& g = c.groups[i];
    if (g.overlay_leaf < 0) continue;
    const std::string where = "groups[" + std::to_string(i) + "] (" + g.name + ")";
    const bool conga = g.mode == "conga";
    if ((conga ? c.conga.leaf : c.conweave.leaf) < 0) {
      throw ConfigError(c.file, where + ".mode",
                        g.mode + " needs a " + g.mode +
                            ": block with this switch's leaf: and vtep:");
    }
    const auto& leaves = conga ? c.conga.leaves : c.conweave.leaves;
    const bool known = std::any_of(leaves.begin(), leaves.end(),
                                   [&](const auto& l) { return l.first == g.overlay_leaf; });
    if (!known) {
      throw ConfigError(c.file, where + ".leaf",
                        "leaf " + std::to_string(g.overlay_leaf) +
                            " has no tunnel address: list it in " + g.mode +
                            ".leaves (and not this switch's own leaf)");
    }
  }
  if (auto p = root.optional_child("pfc")) parse_pfc(c, *p);
  if (auto e = root.optional_child("ecn")) parse_ecn(c, *e);  // after pfc: its default classes
  if (auto t = root.optional_child("int")) {
    t->allow_only({"enabled", "udp_port", "max_frame_bytes"});
    IntSettings& i = c.int_telemetry;
    i.enabled = t->boolean_or("enabled", true);
    i.udp_port = static_cast<uint16_t>(t->uint_or("udp_port", i.udp_port, 1, 65535));
    if (i.udp_port == 4791) t->fail("udp_port", "1..65535 but not 4791 (RoCEv2's own), got 4791");
    i.max_frame_bytes =
        static_cast<uint32_t>(t->uint_or("max_frame_bytes", i.max_frame_bytes, 0, 65535));
  }
  if (auto k = root.optional_child("control")) parse_control(c, *k);
  if (auto b = root.optional_child("idle_backoff")) parse_idle_backoff(c.idle_backoff, *b);
  if (auto t = root.optional_child("telemetry")) {
    t->allow_only({"acting_commands", "socket_mode"});
    c.telemetry.acting_commands = t->boolean_or("acting_commands", c.telemetry.acting_commands);
    if (t->has("socket_mode")) {
      // Always octal, as chmod reads it: 600, 0600 and 0o600 are the same mode.
      std::string text = t->string("socket_mode");
      std::string_view digits = text;
      if (digits.starts_with("0o") || digits.starts_with("0O")) digits.remove_prefix(2);
      uint64_t mode = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mode, 8);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
          mode > 0777 || (mode & 0600) != 0600) {
        throw ConfigError(c.file, "telemetry.socket_mode",
                          "an octal mode from 600 to 777 that lets the owner read and write "
                          "(e.g. 600 or 660), got \"" + text + "\"");
      }
      c.telemetry.socket_mode = static_cast<uint32_t>(mode);
    }
  }

  // Every port's egress is owned by one lcore (`ports`), every (port, rx queue) polled by one.
  std::vector<int> owner(c.ports.size(), -1);
  std::vector<std::vector<int>> polled(c.ports.size());
  for (size_t i = 0; i < c.ports.size(); ++i) polled[i].assign(c.ports[i].rx_queues, -1);
  std::set<unsigned> lcore_ids;
  for (const auto& l : root.list("lcores")) {
    l.allow_only({"lcore", "ports", "rx"});
    LcoreSettings s;
    s.lcore = static_cast<unsigned>(l.uint("lcore", 0, 1023));
    if (!lcore_ids.insert(s.lcore).second) l.fail("lcore", "lcore " + std::to_string(s.lcore) + " listed twice");
    if (!l.has("ports") && !l.has("rx")) l.fail_here("needs ports:, rx: or both");
    for (const auto& name : l.has("ports") ? l.string_list("ports") : std::vector<std::string>{}) {
      const uint16_t idx = port_ref(c, l, "ports", name);
      if (owner[idx] >= 0) {
        l.fail("ports",
               "port \"" + name + "\" is already owned by lcore " + std::to_string(owner[idx]));
      }
      owner[idx] = static_cast<int>(s.lcore);
      s.ports.push_back(idx);
    }
    if (l.has("rx")) {
      for (const auto& pair : l.string_list("rx")) {
        // "PORT:QUEUE", the port by name.
        const size_t colon = pair.rfind(':');
        const auto q = colon == std::string::npos
                           ? std::nullopt
                           : parse_uint(std::string_view(pair).substr(colon + 1));
        if (!q) l.fail("rx", "each entry is PORT:QUEUE (e.g. p0:1), got \"" + pair + "\"");
        const uint16_t idx = port_ref(c, l, "rx", pair.substr(0, colon));
        if (*q >= c.ports[idx].rx_queues) {
          l.fail("rx", "\"" + pair + "\": port \"" + c.ports[idx].name + "\" has rx queues 0.." +
                           std::to_string(c.ports[idx].rx_queues - 1) +
                           " (rx_queues: " + std::to_string(c.ports[idx].rx_queues) + ")");
        }
        s.rx.push_back({idx, static_cast<uint16_t>(*q)});
      }
    } else {
      for (const uint16_t idx : s.ports) s.rx.push_back({idx, 0});
    }
    for (const auto& [idx, q] : s.rx) {
      if (polled[idx][q] >= 0) {
        l.fail(l.has("rx") ? "rx" : "ports",
               "rx queue " + std::to_string(q) + " of port \"" + c.ports[idx].name +
                   "\" is already polled by lcore " + std::to_string(polled[idx][q]));
      }
      polled[idx][q] = static_cast<int>(s.lcore);
    }
    c.lcores.push_back(s);
  }
  const char* overlay = c.conga.enabled ? "conga" : c.conweave.enabled ? "conweave" : nullptr;
  if (overlay != nullptr && c.lcores.size() > 1) {
    root.fail("lcores", std::string(overlay) +
                            " keeps one set of tables per switch: one lcore, got " +
                            std::to_string(c.lcores.size()));
  }
  if (overlay != nullptr && c.qos.trust != "dscp") {
    throw ConfigError(c.file, "qos.trust",
                      std::string(overlay) +
                          "'s overlay carries no VLAN tag, so spines classify by the DSCP it "
                          "copies: trust dscp");
  }
  if (!c.lcores.empty()) {
    for (size_t i = 0; i < c.ports.size(); ++i) {
      if (owner[i] < 0)
        root.fail("lcores", "port \"" + c.ports[i].name +
                                "\" is owned by no lcore (list it in one lcore's ports:)");
      for (size_t q = 0; q < polled[i].size(); ++q) {
        if (polled[i][q] < 0) {
          root.fail("lcores", "rx queue " + std::to_string(q) + " of port \"" + c.ports[i].name +
                                  "\" is polled by no lcore (rx: [" + c.ports[i].name + ":" +
                                  std::to_string(q) + "] in one lcore)");
        }
      }
    }
  }
  return c;
}

SwitchConfig load_switch_config(const std::string& path) {
  return parse_switch_config(ConfigNode::load_file(path));
}

void parse_idle_backoff(IdleBackoffSettings& s, const ConfigNode& n) {
  n.allow_only({"max_sleep_us", "idle_polls"});
  s.max_sleep_us = n.uint_or("max_sleep_us", s.max_sleep_us, 0, IdleBackoffSettings::kMaxSleepUs);
  s.idle_polls = static_cast<uint32_t>(
      n.uint_or("idle_polls", s.idle_polls, 0, IdleBackoffSettings::kMaxIdlePolls));
}

std::string switch_config_help() {
  const SwitchConfig d;
  const PortSettings port;
  const GroupSettings group;
  const TcamRuleSettings rule;
  const PfcSettings pfc;
  const ControlSettings k;
  const auto n = ConfigHelp::number;
  ConfigHelp h;
  h.raw("switch_emu config (YAML), top level. Every key is optional unless marked (required);\n"
        "unknown keys are errors. Names (ports, groups, partitions) are what other keys refer to.\n");
  h.line("name: " + d.name, "the switch's name (logs, link identities)");
  h.line("seed: " + std::to_string(d.seed), "0..2^64-1; seeds DRILL's samples and the links' loss draws");
  h.line("ppcid_layout: " + d.ppcid_layout, "ts-high | path-high: how TCAM spray rules read the PPCID");
  h.line("mempool_mbufs: 0", "0.." + std::to_string(16u << 20) + "; 0: sized from ports and descriptors");
  h.line("mbuf_data_room: " + std::to_string(d.mbuf_data_room),
         "1024..65535 bytes, headroom included; a frame must fit one mbuf");
  h.line("route_table: " + std::string(to_string(d.route_table)),
         "lpm (rte_lpm: fastest, 64 MiB) | rib (rte_rib: bytes per route) | hash (a map per "
         "prefix length, no DPDK memzone)");
  h.line("ports: (required)", "a list of 1.." + std::to_string(kMaxPorts) + " ports, indexed 0.. in this order:");
  h.line("  - name: (required)", "unique; what groups, routes, TCAM rules and lcores name");
  h.line("    device: (required)", "DPDK port id, ethdev name, or vdev spec (net_pcap0,rx_pcap=in.pcap; "
         "net_null0,no-rx=1 for an output: without no-rx net_null generates packets)");
  h.line("    queue_bytes: " + std::to_string(port.queue_bytes),
         "2048..2^32 per traffic class; with PFC on only lossy classes (the pfc pool bounds "
         "lossless ones)");
  h.line("    delay_line_frames: " + std::to_string(port.delay_line_frames),
         "1..2^24 frames on the emulated link or arrived and not yet sent; beyond it a frame is "
         "dropped, counted as drops_delay_line_full");
  h.line("    peer_mac: (none)", "the next hop's MAC (02:00:00:00:00:01): routed packets get it as "
         "destination and the port's MAC as source; without it frames keep their MACs");
  h.line("    rx_queues: 1",
         "1.." + std::to_string(kMaxPortQueues) +
             ": more than one turns on RSS over the 5-tuple (where the PMD has it); lcores: rx: "
             "names the pairs");
  h.line("    tx_queues: 1",
         "1.." + std::to_string(kMaxPortQueues) +
             ": a wire port with a queue per lcore (no PFC) is sent to by every lcore on its own "
             "queue, without handing frames to the port's owner");
  h.line("    rx_descriptors: 1024", "32..32768 per rx queue (the PMD may round it)");
  h.line("    tx_descriptors: 1024", "32..32768 per tx queue (the PMD may round it)");
  h.line("    link: wire",
         "wire (the default): frames go straight to the PMD's tx queue, no "
         "shaper or delay line (classes and PFC still hold) | emulated (the defaults below) | "
         "a map: an emulated link with these properties:");
  h.line("      rate_gbps: " + n(port.link.rate_gbps), n(LinkLimits::kMinRateGbps) + ".." + n(LinkLimits::kMaxRateGbps));
  h.line("      delay_ns: " + std::to_string(port.link.delay_ns), "0.." + std::to_string(LinkLimits::kMaxDelayNs));
  h.line("      ber: " + n(port.link.ber), "0..1, bit error rate");
  h.line("      loss: " + n(port.link.loss), "0..1, frame loss probability");
  h.line("      up: true", "true | false");
  h.line("groups:", "ECMP groups:");
  h.line("  - name: (required)", "unique; routes name it");
  h.line("    mode: " + group.mode,
         "ecmp | weighted | dlb | drill | letflow (flowlets on a random member) | conga "
         "(flowlets on the least congested uplink; needs the conga: block and leaf:) | conweave "
         "(RoCE data rerouted off slow paths, reordering masked; the conweave: block and leaf:)");
  h.line("    leaf: (none)", "conga and conweave only, 0..255: the leaf behind the group's routes");
  h.line("    ports: (required)", "port names, each once");
  h.line("    weights: (equal)", "weighted only: one per port, 0..65535, not all 0; kept in force, "
         "scaled by link state");
  h.line("    dlb_gap_ns: " + std::to_string(group.dlb_gap_ns), "1..10^10, the flowlet gap (dlb, letflow, conga)");
  h.line("    flowlet_entries: " + std::to_string(group.flowlet_entries), "power of two, 1..2^24");
  h.line("    ecmp_reduce: " + group.ecmp_reduce,
         "modulo (hash % N, the classic ECMP) | multiply ((hash * N) >> 32, no division)");
  h.line("    spray_path_divisor: " + std::to_string(group.spray_path_divisor),
         "1..256: sprayed packets choose by PPCID path id / this (a tier above the leaf: the "
         "choices made below it)");
  h.line("routes:", "longest prefix first:");
  h.line("  - prefix: (required)", "10.0.0.0/8 or 10.0.0.1; each prefix once");
  h.line("    group: (or port)", "a group name; exactly one of group and port");
  h.line("    port: (or group)", "a port name: a group of one");
  h.line("tcam:", "");
  h.line("  capacity: " + std::to_string(d.tcam.capacity), "0..2^20 rules");
  h.line("  spray_rule_limit: (capacity)", "0..2^20 spray rules");
  h.line("  partitions:", "named shares of the capacity (\"default\" always exists):");
  h.line("    - name: (required)", "unique");
  h.line("      capacity: (required)", "0..2^20");
  h.line("  rules:", "");
  h.line("    - id: (required)", "0..2^32-1, unique");
  h.line("      priority: " + std::to_string(rule.priority), "-2^31..2^31-1; higher wins");
  h.line("      partition: " + rule.partition, "a partition name");
  h.line("      action: " + rule.action, "ecmp | spray | pin | drop | mirror | quarantine");
  h.line("      port: (none)", "pin, mirror and quarantine (the honeypot) only: a port name");
  h.line("      keep_percent: " + std::to_string(rule.keep_percent),
         "quarantine only, 0..100: RoCEv2 packets with PSN % 100 below it stay on the normal "
         "path, the rest (and every non-RoCEv2 packet) go to port");
  h.line("      match:", "every field optional (absent: any):");
  h.line("        src:", "IPv4 prefix");
  h.line("        dst:", "IPv4 prefix");
  h.line("        proto:", "udp | tcp | icmp | 0..255");
  h.line("        src_port:", "N or LO-HI in 0..65535");
  h.line("        dst_port:", "N or LO-HI in 0..65535");
  h.line("        dest_qp:", "N or LO-HI in 0..0xFFFFFF (BTH DestQP)");
  h.line("hash:", "");
  h.line("  algorithm: " + d.hash.algorithm, "crc32c | crc32");
  h.line("  seed: 0", "0..2^32-1; equal seeds at two tiers reproduce polarization");
  h.line("  dest_qp: false", "true | false: BTH DestQP in the key (E-ECMP)");
  h.line("qos:", "traffic classes 0..7:");
  h.line("  trust: " + d.qos.trust, "dscp (class = DSCP >> 3) | pcp (class = PCP)");
  h.line("  dscp_to_tc:", "overrides: a list of {code: 0..63, tc: 0..7}");
  h.line("  pcp_to_tc:", "overrides: a list of {code: 0..7, tc: 0..7}");
  h.line("conga:", "a conga: section turns CONGA on (docs/switch_emu.md, \"CONGA\"); one lcore, "
         "qos.trust dscp:");
  h.line("  leaf: (none)", "0..255: this switch is that leaf; absent: a spine (DREs and CE only)");
  h.line("  vtep: (required on a leaf)", "this leaf's tunnel address (outer IPv4 source/dest)");
  h.line("  leaves:", "the other leaves (a leaf's conga groups name them):");
  h.line("    - leaf: (required)", "0..255, each once");
  h.line("      vtep: (required)", "its tunnel address");
  h.line("  vni: 1", "0..2^24-1, the overlay's VXLAN network identifier");
  h.line("  t_dre_us: " + n(static_cast<double>(d.conga.dre.t_dre_ns) / 1000.0),
         "0.001..10^6: the DRE's decay period (conweave-ns3: 50)");
  h.line("  alpha: " + n(d.conga.dre.alpha), "(0, 1]: X *= 1 - alpha every t_dre (0.2)");
  h.line("  quantisation_bits: " + std::to_string(d.conga.dre.bits),
         "1..3: metric levels 2^bits over C x t_dre / alpha (3, the header's CE width)");
  h.line("  aging_us: " + n(static_cast<double>(d.conga.aging_ns) / 1000.0),
         "0.001..10^7: a table entry not updated this long counts as unknown (500)");
  h.line("conweave:", "a conweave: section makes this switch a ConWeave leaf (docs/switch_emu.md, "
         "\"ConWeave\"); one lcore, qos.trust dscp:");
  h.line("  leaf: (required)", "0..255: this switch's leaf id");
  h.line("  vtep: (required)", "this leaf's tunnel address");
  h.line("  leaves:", "the other leaves (a leaf's conweave groups name them):");
  h.line("    - leaf: (required)", "0..255, each once");
  h.line("      vtep: (required)", "its tunnel address");
  h.line("  vni: 1", "0..2^24-1");
  h.line("  base_rtt_us: 4", "0..10^6: leaf to leaf and back, propagation (conweave-ns3: 4)");
  h.line("  reply_extra_us: 4", "0..10^6: an RTT reply later than base_rtt + this: the path is slow");
  h.line("  path_pause_us: 16", "0..10^6: a NOTIFYed uplink is avoided this long");
  h.line("  tx_expiry_us: 300", "1..10^6: a flow idle this long starts over on a new path");
  h.line("  voq_flush_extra_us: 16", "0..10^6: the margin on a held queue's predicted release");
  h.line("  voq_default_wait_us: 200", "1..10^6: the wait when no old-path timing is known");
  h.line("  aging_us: 2000", "1..10^7: flows idle this long are forgotten");
  h.line("  voq_limit_packets: 4096", "1..2^20 per flow: beyond it a packet passes out of order");
  h.line("  control_dscp: 48", "0..63: the DSCP of RTT replies, CLEARs and NOTIFYs");
  h.line("pfc:", "a pfc: section turns PFC on (enabled defaults to true inside it):");
  h.line("  enabled: true", "true | false");
  h.line("  priorities: [3]", "lossless priorities 0..7, at least one");
  h.line("  pool_bytes: " + std::to_string(pfc.pool_bytes),
         "65536..2^40: the switch's shared lossless ingress pool (32 MiB: half a 32 x 400G "
         "switch's 64 MB)");
  h.line("  alpha: " + n(pfc.alpha),
         "1/128..128: dynamic threshold, a PG may hold alpha x the free pool (SONiC dynamic_th = "
         "log2 alpha); n congested PGs get alpha x pool / (1 + alpha x n) each");
  h.line("  static_threshold_bytes: (none)",
         "2048..pool_bytes: a static threshold per PG instead of alpha (not both)");
  h.line("  headroom_bytes: auto",
         "auto | 2048..2^30 per PG: what arrives after XOFF; auto: 2 x rate x delay of the port's "
         "link + 2 x the largest frame + 84 + rate x 2.1 us");
  h.line("  xoff_offset_bytes: " + std::to_string(pfc.xoff_offset_bytes),
         "0..pool_bytes-1: XOFF when a PG's shared bytes reach threshold - this");
  h.line("  xon_offset_bytes: " + std::to_string(pfc.xon_offset_bytes),
         "0..pool_bytes-1: XON when they fall to threshold - this (or to 0), headroom empty");
  h.line("  quanta: " + std::to_string(pfc.quanta), "1..65535 (512 bit times each)");
  h.line("  fast_feedback: false", "true | false: a paused port leaves the DLB/spray candidates at once");
  h.line("  watchdog:", "");
  h.line("    enabled: true", "true | false");
  h.line("    detect_ms: 200", "1..3600000");
  h.line("    restore_ms: 200", "1..3600000");
  h.line("    action: " + pfc.watchdog_action,
         "drop (flush the queue, drop its arrivals and the storming port's ingress priority "
         "group, send it no PFC) | forward (ignore its pauses, send it no PFC, drop nothing)");
  const EcnSettings ecn;
  h.line("ecn:",
         "an ecn: section turns CE marking on at every port's egress (enabled defaults to "
         "true inside it):");
  h.line("  enabled: true", "true | false");
  h.line("  mark_at: dequeue",
         "dequeue (on the depth a packet leaves behind as it starts on the wire, as ns-3 HPCC) | "
         "enqueue (on the depth it finds)");
  h.line("  classes: (pfc priorities)",
         "traffic classes 0..7 marked, at least one; default: the pfc lossless priorities when "
         "pfc is on, else [3]");
  h.line("  preset: " + ecn.preset,
         "hpcc (kmin " + std::to_string(EcnSettings::kKminBytesPer25G) + ", kmax " +
             std::to_string(EcnSettings::kKmaxBytesPer25G) +
             " bytes per 25 Gbit/s of the port's link rate: 400000 and 1600000 at 100 Gbit/s) | "
             "conweave (kmin " +
             std::to_string(EcnSettings::kKminBytesPer25G) + ", kmax " +
             std::to_string(EcnSettings::kKmaxBytesPer25G) + " bytes at any rate) | dctcp (kmin = kmax = " +
             std::to_string(EcnSettings::kDctcpKBytesPer10G) +
             " bytes per 10 Gbit/s: DCTCP's step at K, with pmax 1)");
  h.line("  kmin_bytes: (preset)",
         "0..2^40, <= kmax: no mark at or below this queue depth; overrides the preset at every "
         "port");
  h.line("  kmax_bytes: (preset)",
         "0..2^40: every ECN-capable packet is marked above this depth; overrides the preset at "
         "every port");
  h.line("  pmax: " + n(ecn.pmax),
         "(0, 1]: the marking probability at kmax, rising linearly from 0 at kmin");
  h.line("int:",
         "an int: section makes every port push an INT record (HPCC's in-band telemetry) on "
         "frames that carry INT (enabled defaults to true inside it):");
  h.line("  enabled: true", "true | false");
  h.line("  udp_port: 4792",
         "1..65535, not 4791: the UDP port that says INT-MD follows (the NICs' cc mode hpcc "
         "inserts it on 4792 and echoes on 4793, where no record is pushed)");
  h.line("  max_frame_bytes: 0",
         "0..65535: the longest frame with its records (0: no limit); past it the frame gets "
         "INT's M bit instead of a record");
  h.line("control:", "the control loop:");
  h.line("  period_ms: " + std::to_string(k.period_ms), "1..3600000");
  h.line("  target_utilisation: " + n(k.target_utilisation), "0..0.99 (u_target)");
  h.line("  idle_buckets: " + std::to_string(k.idle_buckets), "1..4096 (B)");
  h.line("  utilisation_weight: " + n(k.utilisation_weight), "0.01..1, EWMA weight of the newest period");
  h.line("idle_backoff:",
         "the poll loops' idle back-off (--idle-backoff-us, --idle-polls override):");
  h.line("  max_sleep_us: " + std::to_string(d.idle_backoff.max_sleep_us),
         "0..1000000, the longest sleep of an idle lcore; 0: busy polling");
  h.line("  idle_polls: " + std::to_string(d.idle_backoff.idle_polls),
         "0..100000000, empty poll rounds before the first sleep");
  h.line("telemetry:", "the telemetry socket (dpdk-telemetry.py -f PREFIX):");
  h.line("  acting_commands: false",
         "true | false: allow link_set, link_rate, link_ber, link_loss, tcam_add, tcam_remove, "
         "group_mode (--telemetry-acting also allows them)");
  h.line("  socket_mode: 600", "octal, 600..777 with owner read-write: the socket file's mode (its "
                                 "owner is the user that ran the program)");
  h.line("lcores:", "absent: the main lcore polls every rx queue of every port; else:");
  h.line("  - lcore: (required)", "0..1023, enabled by EAL's -l");
  h.line("    ports: []",
         "port names whose egress this lcore owns (each port in exactly one "
         "lcore); without rx: it also polls their rx queue 0");
  h.line("    rx: (ports' queue 0)",
         "PORT:QUEUE pairs this lcore polls (p0:1); every rx queue "
         "of every port in exactly one lcore");
  return h.str();
}

}  // namespace spraynet::control
