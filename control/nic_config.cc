#include "control/nic_config.h"

#include <rte_config.h>  // RTE_PKTMBUF_HEADROOM

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "dataplane/wire/roce_headers.h"  // kPsnMask

namespace spraynet::control {

namespace {

// Bounds shared by the parser and nic_config_help(), so that the help cannot drift from what
// the parser accepts. Link bounds are the switch config's (switch_config.cc).
constexpr double kMinRateGbps = LinkLimits::kMinRateGbps;
constexpr double kMaxRateGbps = LinkLimits::kMaxRateGbps;
constexpr uint64_t kMaxDelayNs = LinkLimits::kMaxDelayNs;
constexpr uint64_t kMaxMempoolMbufs = 16u << 20;
constexpr uint64_t kMinDataRoom = 1024;
constexpr uint64_t kMaxDataRoom = 65535;
constexpr uint64_t kMaxPeriodMs = 3'600'000;
// The reorder engine's own limits (ReorderConfig), in the file's units.
constexpr double kMinHoldUs = 0.001;
constexpr double kMaxHoldUs = ReorderConfig::kMaxHoldTimeoutNs / 1000.0;
constexpr double kMinNakDelayUs = 0.0;
constexpr double kMaxNakDelayUs = kMaxHoldUs;
constexpr uint64_t kMaxPlacementWindow = RcPlacementResponderConfig::kMaxWindow;
constexpr uint64_t kMaxRcQps = 65536;
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;  // IBA: a message is at most 2^31 bytes
constexpr uint64_t kMaxInFlight = 0x7FFFFF;               // half the PSN space (serial arithmetic)
constexpr double kMinRtoUs = 1.0;
constexpr double kMaxRtoUs = 10'000'000.0;  // 10 s
// QP 0 (SMI) and QP 1 (GSI) are special: RC traffic never uses them.
constexpr uint64_t kMinQp = 2;
constexpr double kMaxProbeThresholdUs = 1e9;  // 1000 s: any latency change a probe can see
// What a RoCE WRITE adds to an MTU of payload: Ethernet + 802.1Q + IPv4 + UDP + BTH + RETH +
// ICRC. The frame plus the mbuf headroom must fit one segment: the pipeline refuses chains.
constexpr uint32_t kRoceOverhead = 14 + 4 + 20 + 8 + 12 + 16 + 4;

// max_in_flight must leave room for two packets past the requester's ACK request interval.
uint32_t min_in_flight() { return RcTrafficEngineConfig{}.max_pkt_per_ack + 2; }

std::string number(double v) {
  char buf[32];
  // Fixed, shortest round trip: 67108.864, 0.001, 1000000 (never 1e+06).
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

std::string format_mac(const MacAddress& m) {
  char s[18];
  std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return s;
}

std::string hex(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "0x%llx", static_cast<unsigned long long>(v));
  return s;
}

MacAddress mac(const ConfigNode& n, std::string_view key) {
  const std::string s = n.string(key);
  unsigned b[6];
  char tail;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                  &tail) != 6) {
    n.fail(key, "must be a MAC address such as 02:00:00:00:00:01, got \"" + s + "\"");
  }
  MacAddress m{};
  for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(b[i]);
  return m;
}

uint32_t ipv4_address(const ConfigNode& n, std::string_view key, uint32_t def) {
  if (!n.has(key)) return def;
  const std::string s = n.string(key);
  const auto p = parse_ipv4_prefix(s);
  if (!p || s.find('/') != std::string::npos) {
    n.fail(key, "must be an IPv4 address such as 10.0.0.1, got \"" + s + "\"");
  }
  return p->address;
}

// Microseconds as the file gives them (decimals allowed) to nanoseconds.
uint64_t micros_or(const ConfigNode& n, std::string_view key, uint64_t def_ns, double min_us,
                   double max_us) {
  if (!n.has(key)) return def_ns;
  return static_cast<uint64_t>(std::llround(n.number_or(key, 0, min_us, max_us) * 1000.0));
}

// The link block of an uplink: the same keys and bounds as a switch port's (switch_config.cc
// keeps its parser private to that file).
LinkSettings parse_link(const ConfigNode& n) {
  n.allow_only({"rate_gbps", "delay_ns", "ber", "loss", "up"});
  LinkSettings l;
  l.rate_gbps = n.number_or("rate_gbps", l.rate_gbps, kMinRateGbps, kMaxRateGbps);
  l.delay_ns = n.uint_or("delay_ns", l.delay_ns, 0, kMaxDelayNs);
  l.ber = n.number_or("ber", l.ber, 0.0, 1.0);
  l.loss = n.number_or("loss", l.loss, 0.0, 1.0);
  l.up = n.boolean_or("up", l.up);
  return l;
}

void parse_spray(NicConfig& c, const ConfigNode& n) {
  n.allow_only({"mode", "ppcid_layout", "fabric_paths"});
  c.spray.mode = *parse_spray_mode(
      n.choice_or("mode", std::string(to_string(c.spray.mode)), {"flow", "rr", "weighted", "adaptive"}));
  c.spray.ppcid_layout = *parse_ppcid_layout(n.choice_or(
      "ppcid_layout", std::string(to_string(c.spray.ppcid_layout)), {"ts-high", "path-high"}));
  c.spray.fabric_paths = static_cast<uint16_t>(
      n.uint_or("fabric_paths", c.spray.fabric_paths, 0, max_path_id(c.spray.ppcid_layout) + 1));
}

void parse_uplinks(NicConfig& c, const ConfigNode& nic) {
  const auto nodes = nic.list("uplinks");
  if (nodes.empty()) {
    nic.fail("uplinks", "required: a list of 1 to " + std::to_string(kMaxNicUplinks) + " uplinks");
  }
  if (nodes.size() > kMaxNicUplinks) {
    nic.fail("uplinks", "at most " + std::to_string(kMaxNicUplinks) + " uplinks, got " +
                            std::to_string(nodes.size()));
  }
  const PpcidLayout layout = c.spray.ppcid_layout;
  const unsigned max_id = max_path_id(layout);
  std::vector<int> holder(max_id + 1, -1);  // path id -> uplink index
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ConfigNode& n = nodes[i];
    n.allow_only({"name", "device", "path_id", "peer_mac", "link"});
    UplinkSettings u;
    u.name = n.name("name");
    if (c.uplink_index(u.name) >= 0) n.fail("name", "uplink \"" + u.name + "\" defined twice");
    if (c.host && c.host->name == u.name) {
      n.fail("name", "\"" + u.name + "\" is already the host port's name");
    }
    u.device = n.string("device");
    if (n.has("peer_mac")) u.peer_mac = mac(n, "peer_mac");
    if (auto link = n.optional_child("link")) u.link = parse_link(*link);
    if (n.has("path_id")) {
      const uint64_t id = n.uint("path_id", 0, 255);
      if (id > max_id) {
        n.fail("path_id", "must be in [0, " + std::to_string(max_id) + "] with ppcid_layout " +
                              std::string(to_string(layout)) + " (path-high allows [0, 255]), got " +
                              std::to_string(id));
      }
      if (holder[id] >= 0) {
        n.fail("path_id", "path id " + std::to_string(id) + " is already uplink \"" +
                              c.uplinks[holder[id]].name + "\"'s: path ids must be unique");
      }
      holder[id] = static_cast<int>(i);
      u.path_id = static_cast<uint8_t>(id);
      u.path_id_from_config = true;
    }
    c.uplinks.push_back(u);
  }

  // The others from their link fingerprints, by LinkStateTable's rule (fingerprint order, then
  // the next free id): with no path id in the file, the ids are exactly the table's, and they do
  // not change when the uplinks are listed in another order.
  const unsigned bits = path_id_bits(c);
  const unsigned ids = 1u << bits;
  const std::vector<LinkIdentity> identities = uplink_identities(c);
  struct Pending {
    uint64_t fingerprint;
    std::string identity;
    size_t index;
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < c.uplinks.size(); ++i) {
    if (c.uplinks[i].path_id_from_config) continue;
    const std::string id = identity_string(identities[i]);
    pending.push_back({link_fingerprint(id), id, i});
  }
  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    if (a.fingerprint != b.fingerprint) return a.fingerprint < b.fingerprint;
    if (a.identity != b.identity) return a.identity < b.identity;
    return a.index < b.index;
  });
  for (const Pending& p : pending) {
    const unsigned folded = fold_path_id(p.fingerprint, bits);
    // At most 16 uplinks and at least 16 ids: a free one always exists.
    for (unsigned k = 0; k < ids; ++k) {
      const unsigned candidate = (folded + k) % ids;
      if (holder[candidate] < 0) {
        holder[candidate] = static_cast<int>(p.index);
        c.uplinks[p.index].path_id = static_cast<uint8_t>(candidate);
        break;
      }
    }
  }
}

void parse_reorder(NicConfig& c, const ConfigNode& n) {
  if (n.has("enabled")) {
    n.fail("enabled", std::string("replaced by nic.receive: ") + kReceiveModelNames +
                          " (enabled: false is receive: none)");
  }
  n.allow_only({"window", "hold_timeout_us", "max_qps", "max_buffered", "path_mtu"});
  NicReorderSettings& r = c.reorder;
  r.window = static_cast<uint32_t>(n.uint_or("window", r.window, 1, ReorderConfig::kMaxWindow));
  r.hold_timeout_ns = micros_or(n, "hold_timeout_us", r.hold_timeout_ns, kMinHoldUs, kMaxHoldUs);
  r.max_qps = static_cast<uint32_t>(n.uint_or("max_qps", r.max_qps, 1, ReorderConfig::kMaxQps));
  if (uint64_t{r.max_qps} * r.window > ReorderConfig::kMaxRingSlots) {
    n.fail("max_qps", "max_qps x window must be at most " +
                          std::to_string(ReorderConfig::kMaxRingSlots) + " ring slots, got " +
                          std::to_string(r.max_qps) + " x " + std::to_string(r.window));
  }
  r.max_buffered = static_cast<uint32_t>(
      n.uint_or("max_buffered", r.max_buffered, 1, ReorderConfig::kMaxBuffered));
  r.path_mtu = static_cast<uint32_t>(*parse_uint(n.choice_or(
      "path_mtu", std::to_string(r.path_mtu), {"0", "256", "512", "1024", "2048", "4096"})));
}

void parse_placement(NicConfig& c, const ConfigNode& n) {
  n.allow_only({"window", "nak_delay_us"});
  NicPlacementSettings& p = c.placement;
  p.window = static_cast<uint32_t>(n.uint_or("window", p.window, 0, kMaxPlacementWindow));
  p.nak_delay_ns = micros_or(n, "nak_delay_us", p.nak_delay_ns, kMinNakDelayUs, kMaxNakDelayUs);
}

// `cc:` {mode, min_time_between_cnps_us, cnp_dscp, ack_class, rp: {ConnectX's names}}.
void parse_cc(NicConfig& c, const ConfigNode& n) {
  n.allow_only({"mode", "min_time_between_cnps_us", "cnp_dscp", "ack_class", "rp"});
  CcSettings& cc = c.cc;
  const std::string mode =
      n.choice_or("mode", "dcqcn",
                  {"dcqcn", "dcqcn-connectx", "dcqcn-paper", "dctcp", "timely", "hpcc", "none"});
  cc.mode = *parse_cc_mode(mode);
  if (n.has("min_time_between_cnps_us")) {
    cc.min_time_between_cnps_ns =
        static_cast<uint64_t>(n.number_or("min_time_between_cnps_us", 0, 0, 1e6) * 1000.0);
  }
  cc.cnp_dscp = static_cast<uint8_t>(n.uint_or("cnp_dscp", cc.cnp_dscp, 0, 63));
  cc.ack_class = n.choice_or("ack_class", "data", {"data", "high"}) == "high" ? AckClass::kHigh
                                                                              : AckClass::kData;
  if (auto rp = n.optional_child("rp")) {
    if (!rp->is_map()) rp->fail("", "a map of DCQCN parameters (ConnectX's names)");
    for (const auto& kv : rp->yaml()) {
      const std::string key = kv.first.as<std::string>();
      const DcqcnParameter* p = find_dcqcn_parameter(key);
      if (p == nullptr) {
        std::string names;
        for (const DcqcnParameter& q : dcqcn_parameters()) {
          names += names.empty() ? "" : ", ";
          names += q.name;
        }
        rp->fail(key, "not a DCQCN parameter (allowed: " + names + ")");
      }
      const double v = rp->number_or(key, 0, p->min, p->max);
      if (p->integer && v != std::floor(v)) {
        rp->fail(key, std::string("must be a whole number (") + p->unit + ")");
      }
      cc.rp.emplace_back(key, v);
    }
  }
  if (std::string why = cc.check(); !why.empty()) n.fail("rp", why);
}

RcEngineSettings parse_rc_engine(const ConfigNode& n, bool irn) {
  n.allow_only({"qps", "role", "op", "message_bytes", "mtu", "max_in_flight", "messages",
                "retransmit_timeout_us", "local_ip", "peer_ip", "local_mac", "peer_mac", "first_qp",
                "peer_first_qp", "first_psn", "dscp", "entropy", "entropy_values",
                "echo_entropy"});
  RcEngineSettings r;
  r.qps = static_cast<uint32_t>(n.uint_or("qps", r.qps, 1, kMaxRcQps));
  const std::string role = n.choice_or("role", "both", {"requester", "responder", "both"});
  r.role = role == "requester"   ? RcQpRole::kRequester
           : role == "responder" ? RcQpRole::kResponder
                                 : RcQpRole::kBoth;
  r.op =
      n.choice_or("op", to_string(r.op), {"write", "read"}) == "read" ? RcOp::kRead : RcOp::kWrite;
  r.message_bytes =
      static_cast<uint32_t>(n.uint_or("message_bytes", r.message_bytes, 1, kMaxMessageBytes));
  r.mtu = static_cast<uint32_t>(
      *parse_uint(n.choice_or("mtu", std::to_string(r.mtu), {"1024", "4096"})));
  // IRN's BDP cap may be small: its responder ACKs every packet (no AckReq spacing to honour).
  r.max_in_flight = static_cast<uint32_t>(
      n.uint_or("max_in_flight", r.max_in_flight, irn ? 2 : min_in_flight(),
                irn ? RcPlacementResponderConfig::kMaxWindow : kMaxInFlight));
  r.messages = n.uint_or("messages", r.messages, 0, UINT64_MAX);
  if (irn) r.retransmit_timeout_ns = NicIrnSettings::kRtoHighNs;
  r.retransmit_timeout_ns =
      micros_or(n, "retransmit_timeout_us", r.retransmit_timeout_ns, kMinRtoUs, kMaxRtoUs);
  r.local_ip = ipv4_address(n, "local_ip", r.local_ip);
  r.peer_ip = ipv4_address(n, "peer_ip", r.peer_ip);
  if (n.has("local_mac")) r.local_mac = mac(n, "local_mac");
  if (n.has("peer_mac")) r.peer_mac = mac(n, "peer_mac");
  r.first_qp = static_cast<uint32_t>(n.uint_or("first_qp", r.first_qp, kMinQp, kPsnMask));
  r.peer_first_qp =
      static_cast<uint32_t>(n.uint_or("peer_first_qp", r.peer_first_qp, kMinQp, kPsnMask));
  for (const auto& [key, first] : {std::pair{"first_qp", r.first_qp},
                                   std::pair{"peer_first_qp", r.peer_first_qp}}) {
    if (first + uint64_t{r.qps} - 1 > kPsnMask) {
      n.fail(key, "QPs " + hex(first) + " to " + hex(first + uint64_t{r.qps} - 1) +
                      " (qps " + std::to_string(r.qps) + ") run past the 24-bit QP number " +
                      hex(kPsnMask));
    }
  }
  r.first_psn = static_cast<uint32_t>(n.uint_or("first_psn", r.first_psn, 0, kPsnMask));
  r.dscp = static_cast<uint8_t>(n.uint_or("dscp", r.dscp, 0, 63));
  r.entropy = n.choice_or("entropy", r.entropy, {"fixed", "oblivious", "reps"});
  r.entropy_values =
      static_cast<uint32_t>(n.uint_or("entropy_values", r.entropy_values, 2, 16384));
  if ((r.entropy_values & (r.entropy_values - 1)) != 0) {
    n.fail("entropy_values", "must be a power of two, got " + std::to_string(r.entropy_values));
  }
  r.echo_entropy = n.boolean_or("echo_entropy", r.entropy == "reps");
  return r;
}

void parse_probe(NicConfig& c, const ConfigNode& n) {
  n.allow_only({"uplink", "rate_pps", "src_ip", "dst_ip", "src_port", "dst_port", "dscp", "ttl",
                "frame_length", "dst_mac", "change_threshold_us", "max_samples",
                "sequence_window"});
  NicProbeSettings s;
  LatencyProbeConfig& p = s.probe;
  s.uplink = n.string_or("uplink", c.uplinks.front().name);
  const int index = c.uplink_index(s.uplink);
  if (index < 0) {
    std::string names;
    for (const auto& u : c.uplinks) names += (names.empty() ? "" : " | ") + u.name;
    n.fail("uplink", "must name an uplink (" + names + "), got \"" + s.uplink + "\"");
  }
  s.uplink_index = static_cast<uint16_t>(index);
  p.rate_pps = n.uint_or("rate_pps", p.rate_pps, 1, LatencyProbeConfig::kMaxRatePps);
  p.src_ip = ipv4_address(n, "src_ip", p.src_ip);
  p.dst_ip = ipv4_address(n, "dst_ip", p.dst_ip);
  p.src_port = static_cast<uint16_t>(n.uint_or("src_port", p.src_port, 1, 65535));
  p.dst_port = static_cast<uint16_t>(n.uint_or("dst_port", p.dst_port, 1, 65535));
  if (p.dst_port == kRoceV2UdpPort) {
    n.fail("dst_port", "must not be " + std::to_string(kRoceV2UdpPort) +
                           " (RoCEv2's): probes are plain UDP the NIC recognises by port");
  }
  p.dscp = static_cast<uint8_t>(n.uint_or("dscp", p.dscp, 0, 63));
  p.ttl = static_cast<uint8_t>(n.uint_or("ttl", p.ttl, 2, 255));
  p.frame_length = static_cast<uint16_t>(n.uint_or("frame_length", p.frame_length, 0, 9000));
  if (p.frame_length != 0 && p.frame_length < p.min_frame_length()) {
    n.fail("frame_length", "must be 0 (the smallest probe) or " +
                               std::to_string(p.min_frame_length()) + "..9000, got " +
                               std::to_string(p.frame_length));
  }
  if (n.has("dst_mac")) {
    p.eth.dst = mac(n, "dst_mac");
  } else if (const auto& peer = c.uplinks[s.uplink_index].peer_mac) {
    p.eth.dst = *peer;
  }
  p.change_threshold_ns =
      micros_or(n, "change_threshold_us", p.change_threshold_ns, 0, kMaxProbeThresholdUs);
  p.max_samples = static_cast<size_t>(
      n.uint_or("max_samples", p.max_samples, 1, LatencyProbeConfig::kMaxSamples));
  p.sequence_window = static_cast<uint32_t>(
      n.uint_or("sequence_window", p.sequence_window, 1, LatencyProbeConfig::kMaxSequenceWindow));
  if (std::string why = p.check(); !why.empty()) n.fail("probe", "refused by the probe: " + why);
  if (c.mbuf_data_room < RTE_PKTMBUF_HEADROOM + std::max<size_t>(p.frame_length, 64)) {
    n.fail("frame_length", "a probe of " + std::to_string(p.frame_length) +
                               " bytes does not fit mbuf_data_room " +
                               std::to_string(c.mbuf_data_room));
  }
  c.probe = s;
}

// What the dataplane says about the configs built from `c`. The parser's own checks should have
// caught everything; this keeps "a config that loads constructs its engines" true even if an
// engine grows a rule the parser does not know yet.
void check_engines(const NicConfig& c, const ConfigNode& nic) {
  if (std::string why = spray_engine_config(c).check(); !why.empty()) {
    nic.fail("spray", "refused by the spray engine: " + why);
  }
  if (std::string why = reorder_config(c).check(); c.reorder_enabled() && !why.empty()) {
    nic.fail("reorder", "refused by the reorder engine: " + why);
  }
  if (c.rc_engine) {
    if (std::string why = rc_engine_config(c).check(); !why.empty()) {
      nic.fail("rc_engine", "refused by the RC traffic engine: " + why);
    }
  }
}

}  // namespace

std::string_view to_string(ReceiveModel m) {
  switch (m) {
    case ReceiveModel::kReorderBuffer:
      return "reorder-buffer";
    case ReceiveModel::kOooPlacement:
      return "ooo-placement";
    case ReceiveModel::kNone:
      return "none";
  }
  return "?";
}

std::optional<ReceiveModel> parse_receive_model(std::string_view name) {
  for (auto m : {ReceiveModel::kReorderBuffer, ReceiveModel::kOooPlacement, ReceiveModel::kNone}) {
    if (to_string(m) == name) return m;
  }
  return std::nullopt;
}

int NicConfig::uplink_index(const std::string& n) const {
  for (size_t i = 0; i < uplinks.size(); ++i) {
    if (uplinks[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

std::vector<LinkIdentity> uplink_identities(const NicConfig& config) {
  std::vector<LinkIdentity> ids;
  ids.reserve(config.uplinks.size());
  for (const UplinkSettings& u : config.uplinks) ids.push_back({config.name, u.name, u.peer_mac});
  return ids;
}

unsigned path_id_bits(const NicConfig& config) {
  // max_path_id is 2^bits - 1: 15 -> 4 bits, 255 -> 8 bits.
  return static_cast<unsigned>(std::bit_width(max_path_id(config.spray.ppcid_layout)));
}

SprayEngineConfig spray_engine_config(const NicConfig& config) {
  SprayEngineConfig s;
  s.mode = config.spray.mode;
  s.layout = config.spray.ppcid_layout;
  s.seed = config.seed;
  s.fabric_paths = config.spray.fabric_paths;
  for (const UplinkSettings& u : config.uplinks) s.path_ids.push_back(u.path_id);
  return s;
}

ReorderConfig reorder_config(const NicConfig& config) {
  ReorderConfig r;
  r.window = config.reorder.window;
  r.hold_timeout_ns = config.reorder.hold_timeout_ns;
  r.max_qps = config.reorder.max_qps;
  r.max_buffered = config.reorder.max_buffered;
  // 0: the RC engine's MTU (what its READs are counted in), else IB's common 1024.
  r.path_mtu = config.reorder.path_mtu != 0 ? config.reorder.path_mtu
               : config.rc_engine           ? config.rc_engine->mtu
                                            : 1024;
  return r;
}

RcTrafficEngineConfig rc_engine_config(const NicConfig& config) {
  if (!config.rc_engine) throw std::invalid_argument("nic config: no rc_engine (a host is set)");
  const RcEngineSettings& s = *config.rc_engine;
  RcTrafficEngineConfig r;
  r.qps = s.qps;
  r.role = s.role;
  r.message_bytes = s.message_bytes;
  r.op = s.op;
  r.mtu = s.mtu;
  r.max_in_flight = s.max_in_flight;
  r.messages_per_qp = s.messages;
  r.retransmit_timeout_ns = s.retransmit_timeout_ns;
  r.first_psn = s.first_psn;
  r.first_local_qp = s.first_qp;
  r.first_peer_qp = s.peer_first_qp;
  r.local_mac = s.local_mac;
  r.peer_mac = s.peer_mac;
  r.local_ip = s.local_ip;
  r.peer_ip = s.peer_ip;
  r.dscp = s.dscp;
  if (s.entropy != "fixed") {
    r.entropy_values = s.entropy_values;
    r.entropy_reps = s.entropy == "reps";
    r.entropy_seed = config.seed;
  }
  r.echo_entropy = s.echo_entropy;
  apply_receive_side(config, r);
  return r;
}

void apply_receive_side(const NicConfig& config, RcTrafficEngineConfig& r) {
  r.ooo_placement = config.receive == ReceiveModel::kOooPlacement;
  r.placement_window = config.placement.window;
  r.placement_nak_delay_ns = config.placement.nak_delay_ns;
  if (config.irn) {
    // IRN's responder behind the reorder engine (which has waited for the late ones: NAK at
    // once) or placing out of order itself (placement.nak_delay_us).
    r.irn = true;
    if (!r.ooo_placement) r.placement_nak_delay_ns = 0;
    r.ooo_placement = true;
    r.irn_rto_low_ns = config.irn_settings.rto_low_ns;
    r.irn_rto_low_packets = config.irn_settings.rto_low_packets;
  }
}

void parse_anomaly(NicConfig& c, const ConfigNode& n) {
  n.allow_only({"enabled", "qp_table_size", "threshold", "quarantine"});
  NicAnomalySettings& a = c.anomaly;
  a.enabled = n.boolean_or("enabled", a.enabled);
  a.qp_table_size = static_cast<uint32_t>(
      n.uint_or("qp_table_size", a.qp_table_size, 1, PpcidAnomalyConfig::kMaxQps));
  a.threshold = static_cast<uint32_t>(
      n.uint_or("threshold", a.threshold, 1, PpcidAnomalyConfig::kMaxThreshold));
  const auto q = n.optional_child("quarantine");
  if (!q) return;
  q->allow_only({"enabled", "switch_socket", "honeypot_port", "keep_percent", "rule_id_base",
                 "priority", "period_ms", "timeout_ms"});
  NicQuarantineSettings& s = a.quarantine;
  s.enabled = q->boolean_or("enabled", s.enabled);
  if (s.enabled && !a.enabled) {
    q->fail("enabled", "quarantine responds to flagged QPs: it needs nic.anomaly.enabled: true");
  }
  s.switch_socket = q->string_or("switch_socket", s.switch_socket);
  s.honeypot_port = q->string_or("honeypot_port", s.honeypot_port);
  if (s.enabled && s.switch_socket.empty()) {
    q->fail("switch_socket",
            "required with quarantine: the switch's telemetry socket, e.g. "
            "/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2");
  }
  if (s.enabled && s.honeypot_port.empty()) {
    q->fail("honeypot_port", "required with quarantine: a port name of the switch");
  }
  s.keep_percent = static_cast<uint32_t>(q->uint_or("keep_percent", s.keep_percent, 0, 100));
  s.rule_id_base = static_cast<uint32_t>(
      q->uint_or("rule_id_base", s.rule_id_base, 0, UINT32_MAX - uint64_t{a.qp_table_size}));
  s.priority =
      static_cast<int32_t>(q->number_or("priority", s.priority, -2147483648.0, 2147483647.0));
  s.period_ms = q->uint_or("period_ms", s.period_ms, 1, 60'000);
  s.timeout_ms = q->uint_or("timeout_ms", s.timeout_ms, 1, 60'000);
}

NicConfig parse_nic_config(const ConfigNode& root) {
  root.allow_only({"nic"});
  const ConfigNode nic = root.child("nic");
  nic.allow_only({"name", "seed", "mempool_mbufs", "mbuf_data_room", "host", "uplinks", "spray",
                  "receive", "reorder", "placement", "control", "rc_engine", "probe",
                  "idle_backoff", "anomaly", "cc", "transport", "irn"});
  NicConfig c;
  c.file = root.file();
  c.name = nic.name_or("name", c.name);
  c.seed = nic.uint_or("seed", c.seed, 0, UINT64_MAX);
  c.mempool_mbufs =
      static_cast<uint32_t>(nic.uint_or("mempool_mbufs", c.mempool_mbufs, 0, kMaxMempoolMbufs));
  c.mbuf_data_room = static_cast<uint32_t>(
      nic.uint_or("mbuf_data_room", c.mbuf_data_room, kMinDataRoom, kMaxDataRoom));

  // Spray first: the layout bounds the uplinks' path ids.
  if (auto s = nic.optional_child("spray")) parse_spray(c, *s);
  if (auto h = nic.optional_child("host")) {
    h->allow_only({"name", "device"});
    HostSettings host;
    host.name = h->name_or("name", host.name);
    host.device = h->string("device");
    c.host = host;
  }
  parse_uplinks(c, nic);
  c.receive = *parse_receive_model(nic.choice_or("receive", std::string(to_string(c.receive)),
                                                 {"reorder-buffer", "ooo-placement", "none"}));
  if (c.host && c.receive == ReceiveModel::kOooPlacement) {
    nic.fail("receive",
             "ooo-placement is the RC traffic engine's placement responder; with a "
             "host port the host's RDMA stack receives: reorder-buffer or none");
  }
  c.irn = nic.choice_or("transport", "rc", {"rc", "irn"}) == "irn";
  if (c.irn && c.host) {
    nic.fail("transport",
             "irn is the RC traffic engine's transport; with a host port the host's RDMA stack "
             "is the transport: rc");
  }
  if (c.irn && c.receive == ReceiveModel::kNone) {
    nic.fail("receive",
             "transport irn places out of order: reorder-buffer (the reorder engine in front of "
             "IRN's responder) or ooo-placement, not none");
  }
  if (auto irn = nic.optional_child("irn")) {
    if (!c.irn) nic.fail("irn", "IRN's settings, used only with transport: irn: remove the block");
    irn->allow_only({"rto_low_us", "rto_low_packets"});
    c.irn_settings.rto_low_ns =
        micros_or(*irn, "rto_low_us", c.irn_settings.rto_low_ns, kMinRtoUs, kMaxRtoUs);
    c.irn_settings.rto_low_packets = static_cast<uint32_t>(
        irn->uint_or("rto_low_packets", c.irn_settings.rto_low_packets, 0, kMaxInFlight));
  }
  // A block for a model that is not used would be ignored: say so instead.
  if (auto r = nic.optional_child("reorder")) {
    if (!c.reorder_enabled()) {
      nic.fail("reorder",
               "the reorder engine's settings, used only with receive: "
               "reorder-buffer (receive is " +
                   std::string(to_string(c.receive)) + "): remove the block or change receive");
    }
    parse_reorder(c, *r);
  }
  if (auto p = nic.optional_child("placement")) {
    if (c.receive != ReceiveModel::kOooPlacement) {
      nic.fail("placement",
               "the placement responder's settings, used only with receive: "
               "ooo-placement (receive is " +
                   std::string(to_string(c.receive)) + "): remove the block or change receive");
    }
    parse_placement(c, *p);
  }
  if (auto b = nic.optional_child("idle_backoff")) parse_idle_backoff(c.idle_backoff, *b);
  if (auto k = nic.optional_child("control")) {
    k->allow_only({"period_ms"});
    c.control.period_ms = k->uint_or("period_ms", c.control.period_ms, 1, kMaxPeriodMs);
  }

  if (c.host) {
    if (nic.has("rc_engine")) {
      // Never ignored silently: a file with both says two different things about the host.
      nic.fail("rc_engine", "only used when there is no host (then the RC traffic engine plays "
                            "the host): remove rc_engine or host");
    }
  } else {
    auto e = nic.optional_child("rc_engine");
    if (e) {
      c.rc_engine = parse_rc_engine(*e, c.irn);
    } else {
      c.rc_engine = RcEngineSettings{};
      if (c.irn) c.rc_engine->retransmit_timeout_ns = NicIrnSettings::kRtoHighNs;
    }
    const RcEngineSettings& rc = *c.rc_engine;
    if (c.irn && c.irn_settings.rto_low_ns > rc.retransmit_timeout_ns) {
      const std::string why = "irn.rto_low_us (" + number(c.irn_settings.rto_low_ns / 1000.0) +
                              ") must be at most rc_engine.retransmit_timeout_us (" +
                              number(rc.retransmit_timeout_ns / 1000.0) +
                              "), RTO_high under transport irn";
      if (auto irn = nic.optional_child("irn"); irn && irn->has("rto_low_us")) {
        irn->fail("rto_low_us", why);
      }
      e->fail("retransmit_timeout_us", why);
    }
    if (c.irn && rc.op == RcOp::kRead) {
      e->fail("op", "must be write with transport: irn (IRN's placement responder answers "
                    "WRITEs only), got read");
    }
    // Each cross-check fails at a key the file gave (the defaults agree with each other).
    const auto reorder = nic.optional_child("reorder");
    if (c.reorder_enabled() && rc.qps > c.reorder.max_qps) {
      const std::string why = "rc_engine.qps (" + std::to_string(rc.qps) +
                              ") must be at most reorder.max_qps (" +
                              std::to_string(c.reorder.max_qps) +
                              "): each QP needs a reorder context";
      if (e && e->has("qps")) e->fail("qps", why);
      reorder->fail("max_qps", why);
    }
    if (c.reorder_enabled() && c.reorder.hold_timeout_ns >= rc.retransmit_timeout_ns) {
      const std::string why = "reorder.hold_timeout_us (" +
                              number(c.reorder.hold_timeout_ns / 1000.0) +
                              ") must be below rc_engine.retransmit_timeout_us (" +
                              number(rc.retransmit_timeout_ns / 1000.0) +
                              "): a gap held that long is retransmitted anyway";
      if (reorder && reorder->has("hold_timeout_us")) reorder->fail("hold_timeout_us", why);
      e->fail("retransmit_timeout_us", why);
    }
    const auto placement = nic.optional_child("placement");
    if (c.receive == ReceiveModel::kOooPlacement &&
        c.placement.nak_delay_ns >= rc.retransmit_timeout_ns) {
      const std::string why = "placement.nak_delay_us (" +
                              number(c.placement.nak_delay_ns / 1000.0) +
                              ") must be below rc_engine.retransmit_timeout_us (" +
                              number(rc.retransmit_timeout_ns / 1000.0) +
                              "): a hole waited for that long is resent by the timer anyway";
      if (placement && placement->has("nak_delay_us")) placement->fail("nak_delay_us", why);
      e->fail("retransmit_timeout_us", why);
    }
    if (c.receive == ReceiveModel::kOooPlacement && rc.op == RcOp::kRead) {
      // The placement responder models WRITE placement; a READ would go unanswered.
      e->fail("op", "must be write with receive: ooo-placement (the placement responder answers "
                    "WRITEs only), got read");
    }
    const uint32_t needed = RTE_PKTMBUF_HEADROOM + rc.mtu + kRoceOverhead;
    if (c.mbuf_data_room < needed) {
      nic.fail("mbuf_data_room", "must be at least " + std::to_string(needed) +
                                     " to hold a frame at rc_engine.mtu " +
                                     std::to_string(rc.mtu) + " (headroom " +
                                     std::to_string(RTE_PKTMBUF_HEADROOM) + " + MTU + " +
                                     std::to_string(kRoceOverhead) + " of headers), got " +
                                     std::to_string(c.mbuf_data_room));
    }
  }
  if (auto p = nic.optional_child("probe")) parse_probe(c, *p);
  if (auto a = nic.optional_child("anomaly")) parse_anomaly(c, *a);
  if (auto cc = nic.optional_child("cc")) parse_cc(c, *cc);
  check_engines(c, nic);
  return c;
}

PpcidAnomalyConfig anomaly_config(const NicConfig& config) {
  PpcidAnomalyConfig a;
  a.qp_table_size = config.anomaly.qp_table_size;
  a.threshold = config.anomaly.threshold;
  if (config.spray.fabric_paths == 0) {
    for (const auto& u : config.uplinks) a.uplink_path_ids.push_back(u.path_id);
  }
  return a;
}

NicConfig load_nic_config(const std::string& path) {
  return parse_nic_config(ConfigNode::load_file(path));
}

std::string nic_config_help() {
  const NicConfig d;
  const NicReorderSettings& r = d.reorder;
  const RcEngineSettings e;
  const LinkSettings l;
  const std::string roles[] = {"", "requester", "responder", "both"};
  ConfigHelp help;
  auto line = [&help](const std::string& key, const std::string& text) { help.line(key, text); };
  help.raw("nic_emu config (YAML). Every key is optional unless marked (required); unknown keys are\n"
       "errors. Durations in *_us keys may have decimals (0.5 = 500 ns).\n"
       "nic:\n");
  line("  name: " + d.name, "the NIC's name; with the uplink names it identifies the links");
  line("  seed: " + std::to_string(d.seed), "0..2^64-1; salts the spray engine's flow hash");
  line("  mempool_mbufs: " + std::to_string(d.mempool_mbufs),
       "0.." + std::to_string(kMaxMempoolMbufs) + "; 0: sized by the program");
  line("  mbuf_data_room: " + std::to_string(d.mbuf_data_room),
       std::to_string(kMinDataRoom) + ".." + std::to_string(kMaxDataRoom) +
           " bytes, headroom included; a frame must fit one mbuf");
  line("  host:", "optional; absent: the RC traffic engine (rc_engine) plays the host");
  line("    name: host", "port name, distinct from the uplinks'");
  line("    device: (required)", "DPDK port id, ethdev name or vdev spec");
  line("  uplinks: (required)", "a list of 1.." + std::to_string(kMaxNicUplinks) + " uplinks:");
  line("    - name: (required)", "unique among the host and the uplinks");
  line("      device: (required)", "DPDK port id, ethdev name or vdev spec");
  line("      path_id: (fingerprint)",
       "PPCID path id, unique: 0..15 with ts-high, 0..255 with path-high; default: from the "
       "link's fingerprint (FNV-1a of \"<nic name>><peer_mac>\", else \"<nic name>/<uplink "
       "name>\", folded to the layout's width; a taken id moves to the next free one)");
  line("      peer_mac: (none)", "the next hop's MAC, 02:00:00:00:00:01; also names the link");
  line("      link:", "link emulation, as a switch port's:");
  line("        rate_gbps: " + number(l.rate_gbps), number(kMinRateGbps) + ".." + number(kMaxRateGbps));
  line("        delay_ns: " + std::to_string(l.delay_ns), "0.." + std::to_string(kMaxDelayNs));
  line("        ber: " + number(l.ber), "0..1, bit error rate");
  line("        loss: " + number(l.loss), "0..1, frame loss probability");
  line("        up: " + std::string(l.up ? "true" : "false"), "true | false");
  line("  spray:", "");
  line("    mode: " + std::string(to_string(d.spray.mode)),
       "flow | rr | weighted | adaptive (how RoCEv2 packets pick an uplink; other traffic goes by "
       "flow hash)");
  line("    ppcid_layout: " + std::string(to_string(d.spray.ppcid_layout)), "ts-high | path-high");
  line("    fabric_paths: " + std::to_string(d.spray.fabric_paths),
       "0 (the PPCID names the uplink) | 1..16 (ts-high) or 1..256 (path-high): the PPCID names "
       "one of N fabric paths per packet, for a leaf that sprays by path id");
  line("  receive: " + std::string(to_string(d.receive)),
       "reorder-buffer (the reorder engine puts each QP in PSN order for rxe's responder, which "
       "drops what follows a gap) | ooo-placement (no reorder engine; the RC engine places out "
       "of order and resends selectively, as NVIDIA ConnectX OOO/IRN; needs rc_engine, not host) "
       "| none (neither: rxe's responder, or the host, gets packets as they arrive)");
  line("  transport: rc",
       "rc (RoCE RC as rxe, or selective with receive: ooo-placement) | irn (IRN, SIGCOMM 2018: "
       "lossy RoCE, NAKs with a SACK, selective repeat of every hole, the BDP cap "
       "rc_engine.max_in_flight (2 and up), RTO_high rc_engine.retransmit_timeout_us (320 "
       "unless given); needs rc_engine and receive reorder-buffer or ooo-placement; turn PFC "
       "off on the switches' data class)");
  line("  irn:", "IRN's timeouts (only with transport: irn)");
  line("    rto_low_us: " + number(NicIrnSettings{}.rto_low_ns / 1000.0),
       number(kMinRtoUs) + ".." + number(kMaxRtoUs) +
           ", at most rc_engine.retransmit_timeout_us: RTO_low (IRN §4.1)");
  line("    rto_low_packets: " + std::to_string(NicIrnSettings{}.rto_low_packets),
       "0.." + std::to_string(kMaxInFlight) +
           ": RTO_low while at most this many packets are unacknowledged (IRN's N = 3)");
  line("  reorder:", "the reorder engine (only with receive: reorder-buffer)");
  line("    window: " + std::to_string(r.window),
       "1.." + std::to_string(ReorderConfig::kMaxWindow) + " PSNs per QP");
  line("    hold_timeout_us: " + number(r.hold_timeout_ns / 1000.0),
       number(kMinHoldUs) + ".." + number(kMaxHoldUs) +
           "; with rc_engine, below its retransmit_timeout_us");
  line("    max_qps: " + std::to_string(r.max_qps),
       "1.." + std::to_string(ReorderConfig::kMaxQps) + " QP contexts; max_qps x window <= " +
           std::to_string(ReorderConfig::kMaxRingSlots));
  line("    max_buffered: " + std::to_string(r.max_buffered),
       "1.." + std::to_string(ReorderConfig::kMaxBuffered) + " packets held across all QPs");
  line("    path_mtu: " + std::to_string(r.path_mtu),
       "0 | 256 | 512 | 1024 | 2048 | 4096: how many PSNs a READ request consumes; 0: "
       "rc_engine.mtu, or 1024 with a host");
  line("  placement:", "the placement responder (only with receive: ooo-placement)");
  line("    window: " + std::to_string(d.placement.window),
       "0.." + std::to_string(kMaxPlacementWindow) +
           " PSNs tracked per QP (the bitmap); 0: rc_engine.max_in_flight, which never "
           "overflows; beyond it packets are dropped and counted");
  line("    nak_delay_us: " + number(d.placement.nak_delay_ns / 1000.0),
       number(kMinNakDelayUs) + ".." + number(kMaxNakDelayUs) +
           "; a hole open this long with packets beyond it is NAKed (0: at once, as rxe/IRN); "
           "below rc_engine.retransmit_timeout_us");
  line("  control:", "");
  line("    period_ms: " + std::to_string(d.control.period_ms),
       "1.." + std::to_string(kMaxPeriodMs) + "; link-state update and weight publication");
  line("  idle_backoff:",
       "the poll loop's idle back-off (--idle-backoff-us, --idle-polls override):");
  line("    max_sleep_us: " + std::to_string(d.idle_backoff.max_sleep_us),
       "0..1000000, the longest sleep of an idle lcore; 0: busy polling");
  line("    idle_polls: " + std::to_string(d.idle_backoff.idle_polls),
       "0..100000000, empty poll rounds before the first sleep");
  line("  rc_engine:", "only without host (an error with one); defaults apply when absent");
  line(
      "    qps: " + std::to_string(e.qps),
      "1.." + std::to_string(kMaxRcQps) + "; at most reorder.max_qps with receive: reorder-buffer");
  line("    role: " + roles[static_cast<unsigned>(e.role)], "requester | responder | both");
  line("    op: " + std::string(to_string(e.op)),
       "write | read: the requesters' RDMA operation (READ responses come back from the peer)");
  line("    message_bytes: " + std::to_string(e.message_bytes),
       "1.." + std::to_string(kMaxMessageBytes) + " bytes per RDMA WRITE or READ");
  line("    mtu: " + std::to_string(e.mtu),
       "1024 | 4096; mbuf_data_room must hold headroom + mtu + " + std::to_string(kRoceOverhead));
  line("    max_in_flight: " + std::to_string(e.max_in_flight),
       std::to_string(min_in_flight()) + ".." + std::to_string(kMaxInFlight) +
           " unacknowledged packets per QP");
  line("    messages: " + std::to_string(e.messages), "per QP; 0 = unlimited");
  line("    retransmit_timeout_us: " + number(e.retransmit_timeout_ns / 1000.0),
       number(kMinRtoUs) + ".." + number(kMaxRtoUs) + " (4.096 us x 2^14, perftest's default)");
  line("    local_ip: " + format_ipv4(e.local_ip), "IPv4 address");
  line("    peer_ip: " + format_ipv4(e.peer_ip), "IPv4 address");
  line("    local_mac: " + format_mac(e.local_mac), "MAC address");
  line("    peer_mac: " + format_mac(e.peer_mac), "MAC address");
  line("    first_qp: " + hex(e.first_qp),
       std::to_string(kMinQp) + ".." + hex(kPsnMask) + "; local QPs first_qp..first_qp+qps-1");
  line("    peer_first_qp: " + hex(e.peer_first_qp), "likewise, the peer's QPs");
  line("    first_psn: " + std::to_string(e.first_psn), "0.." + hex(kPsnMask));
  line("    dscp: " + std::to_string(e.dscp), "0..63");
  line("    entropy: " + e.entropy,
       "fixed | oblivious (each packet the next of a per-QP permutation of entropy_values UDP "
       "source ports) | reps (REPS: ports recycled from the ACKs' echo, never a marked one)");
  line("    entropy_values: " + std::to_string(e.entropy_values), "power of two, 2..16384");
  line("    echo_entropy: (on with entropy reps)",
       "true | false: ACK/NAKs and CNPs on the port of the packet that made them, every packet "
       "acknowledged");
  const LatencyProbeConfig pr;
  line("  probe:",
       "optional: the latency probe (Pktgen-style timestamped UDP probes on one "
       "uplink, recognised and consumed when they come back on any uplink)");
  line("    uplink: (the first)", "the uplink probes are sent on");
  line("    rate_pps: " + std::to_string(pr.rate_pps),
       "1.." + std::to_string(LatencyProbeConfig::kMaxRatePps) + " probes per second");
  line("    src_ip: " + format_ipv4(pr.src_ip), "IPv4 address");
  line("    dst_ip: " + format_ipv4(pr.dst_ip),
       "IPv4 address; the fabric must route it back to this NIC");
  line("    src_port: " + std::to_string(pr.src_port), "1..65535");
  line("    dst_port: " + std::to_string(pr.dst_port),
       "1..65535, not 4791: what probes are recognised by (with their signature)");
  line("    dscp: " + std::to_string(pr.dscp), "0..63 (46: EF)");
  line("    ttl: " + std::to_string(pr.ttl), "2..255");
  line("    frame_length: 0", "0 (the smallest probe, 66 bytes) | 66..9000 bytes without FCS");
  line("    dst_mac: (peer_mac)",
       "MAC address; default: the uplink's peer_mac, else " + format_mac(pr.eth.dst));
  line("    change_threshold_us: " + number(pr.change_threshold_ns / 1000.0),
       "0.." + number(kMaxProbeThresholdUs) +
           "; probes whose latency moved more than this from the previous one are counted");
  line("    max_samples: " + std::to_string(pr.max_samples),
       "1.." + std::to_string(LatencyProbeConfig::kMaxSamples) +
           " latencies kept for the percentiles (min and max see every probe)");
  line("    sequence_window: " + std::to_string(pr.sequence_window),
       "1.." + std::to_string(LatencyProbeConfig::kMaxSequenceWindow) +
           " sequence numbers remembered for duplicate / out-of-order detection");
  const NicAnomalySettings an;
  const NicQuarantineSettings qs;
  line("  anomaly:",
       "optional: PPCID anomaly detection on received RoCEv2 packets (wrong uplink, bad check, "
       "unknown path, PPCID missing/unexpected, layout flip); a QP is flagged once");
  line("    enabled: false",
       "true | false; off by default: wrong_uplink assumes each uplink's far end writes its "
       "path id");
  line("    qp_table_size: " + std::to_string(an.qp_table_size),
       "1.." + std::to_string(PpcidAnomalyConfig::kMaxQps) +
           " QPs tracked (preallocated); packets of QPs beyond it are counted, not judged");
  line("    threshold: " + std::to_string(an.threshold),
       "1.." + std::to_string(PpcidAnomalyConfig::kMaxThreshold) +
           " anomalous packets that flag a QP (so within 3 forged packets)");
  line("    quarantine:",
       "optional: push a TCAM quarantine rule for each flagged QP to the switch (its "
       "telemetry needs acting commands on)");
  line("      enabled: false", "true | false; needs anomaly.enabled");
  line("      switch_socket: (required)",
       "the switch's /var/run/dpdk/<file-prefix>/dpdk_telemetry.v2");
  line("      honeypot_port: (required)", "the switch's port name quarantined packets go to");
  line("      keep_percent: " + std::to_string(qs.keep_percent),
       "0..100: packets with PSN % 100 below it stay on the normal path");
  line("      rule_id_base: " + std::to_string(qs.rule_id_base),
       "0..2^32-1-qp_table_size; rule id = base + the QP's index in flag order");
  line("      priority: " + std::to_string(qs.priority),
       "the rule's TCAM priority, a 32-bit integer");
  line("      period_ms: " + std::to_string(qs.period_ms),
       "1..60000: how often the control side looks for newly flagged QPs");
  line("      timeout_ms: " + std::to_string(qs.timeout_ms),
       "1..60000 per push (connect, greeting, reply)");
  line("  cc:",
       "optional: congestion control (absent: none). The RC engine's data packets are sent "
       "ECT(0); a CE-marked arrival makes this NIC send a CNP to the sending QP; each QP's rate "
       "follows DCQCN (docs/congestion-control.md)");
  line("    mode: dcqcn", std::string(kCcModeNames) +
                              ": dcqcn is ConnectX's algorithm with the defaults measured for a "
                              "100G fabric, dcqcn-connectx ConnectX's shipped defaults, "
                              "dcqcn-paper the SIGCOMM 2015 paper's; rp keys override any; "
                              "dctcp and timely as ns-3 HPCC runs them; hpcc inserts INT on the "
                              "RC engine's data for the switches' int: records, echoes them in "
                              "ACKs (UDP 4793) and sets each QP's window from them");
  line("    min_time_between_cnps_us: (the mode's)",
       "0..1000000: at most one CNP per QP per interval (ConnectX's min_time_between_cnps); 0: "
       "one per marked packet; default dcqcn 0, dcqcn-connectx 4, dcqcn-paper 50");
  line("    cnp_dscp: 48", "0..63: the CNPs' DSCP (48: class 6, strict priority, lossy)");
  line("    ack_class: data",
       "data | high: ACK/NAKs on the QP's data class, or on the CNP's class (ns-3 AckHighPrio)");
  line("    rp:", "the reaction point's parameters, ConnectX's names and units:");
  help.raw(cc_settings_help("      "));
  return help.str();
}

}  // namespace spraynet::control
