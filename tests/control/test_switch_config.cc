#include "control/switch_config.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>
#include <string>

#include "control/quarantine_pusher.h"
#include "dataplane/egress/egress_port.h"

using namespace spraynet::control;

namespace {

SwitchConfig parse(const std::string& yaml) {
  return parse_switch_config(ConfigNode::load_string(yaml, "test.yaml"));
}

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kPorts = R"(
ports:
  - {name: a, device: net_ring0}
  - {name: b, device: net_ring1, link: {rate_gbps: 25, delay_ns: 5000, ber: 1e-12}}
  - {name: c, device: "2"}
)";

}  // namespace

TEST_CASE("every file in configs/ loads") {
  const std::filesystem::path dir = SPRAYNET_SOURCE_DIR "/configs";
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    if (entry.path().filename().string().starts_with("nic-")) continue;  // nic_emu's: test_nic_config
    if (entry.path().filename().string().starts_with("fabric-")) continue;  // test_fabric_config
    INFO(entry.path().string());
    const std::string path = entry.path().string();
    SwitchConfig c;
    REQUIRE_NOTHROW(c = load_switch_config(path));
    CHECK_FALSE(c.ports.empty());
    ++loaded;
  }
  CHECK(loaded >= 3);
}

TEST_CASE("a full config resolves names to indices") {
  const auto c = parse(kPorts + R"(
groups:
  - {name: g, mode: dlb, ports: [b, c], dlb_gap_ns: 50000}
routes:
  - {prefix: 10.1.0.0/16, group: g}
  - {prefix: 0.0.0.0/0, port: a}
tcam:
  capacity: 8
  partitions: [{name: roce, capacity: 4}]
  rules:
    - {id: 7, priority: 5, partition: roce, action: pin, port: c,
       match: {proto: udp, dst_port: 4791, dest_qp: 0x10-0x1f, dst: 10.1.2.0/24}}
pfc: {priorities: [3, 4], pool_bytes: 16777216, alpha: 2, headroom_bytes: 100000,
      xon_offset_bytes: 8192}
lcores:
  - {lcore: 0, ports: [a]}
  - {lcore: 1, ports: [b, c]}
)");
  REQUIRE(c.ports.size() == 3);
  CHECK(c.ports[1].link.rate_gbps == 25);
  CHECK(c.ports[1].link.ber == 1e-12);
  REQUIRE(c.groups.size() == 2);  // g, plus the implicit one-port group of the default route
  CHECK(c.groups[0].mode == "dlb");
  CHECK(c.groups[0].ports == std::vector<uint16_t>{1, 2});
  CHECK(c.groups[1].ports == std::vector<uint16_t>{0});
  CHECK(c.routes[0].prefix.address == 0x0A010000);
  CHECK(c.routes[0].prefix.length == 16);
  CHECK(c.routes[1].group == 1);
  REQUIRE(c.tcam.rules.size() == 1);
  const auto& r = c.tcam.rules[0];
  CHECK(r.action == "pin");
  CHECK(r.port == 2);
  CHECK(r.proto == 17);
  CHECK(r.dst_port.lo == 4791);
  CHECK(r.dst_port.hi == 4791);
  CHECK(r.dest_qp.lo == 0x10);
  CHECK(r.dest_qp.hi == 0x1f);
  CHECK(c.tcam.spray_rule_limit == 8);  // defaults to the capacity
  CHECK(c.pfc.enabled);
  CHECK(c.pfc.priorities == 0b00011000);
  CHECK(c.pfc.pool_bytes == 16u << 20);
  CHECK(c.pfc.alpha == 2.0);
  CHECK(c.pfc.static_threshold_bytes == 0);
  CHECK(c.pfc.headroom_bytes == 100'000);
  CHECK(c.pfc.xoff_offset_bytes == 0);
  CHECK(c.pfc.xon_offset_bytes == 8192);
  CHECK(c.pfc.watchdog_action == "drop");  // SONiC's default
  CHECK(c.lcores.size() == 2);
}

TEST_CASE("errors name the file, the key and what is allowed") {
  CHECK(error_of("ports: []") == "test.yaml: ports: required: a list of one or more ports");
  CHECK(error_of(kPorts + "groups: [{name: g, mode: fastest, ports: [a]}]") ==
        "test.yaml: groups[0].mode: must be one of ecmp|weighted|dlb|drill|letflow|conga|conweave, got \"fastest\"");
  CHECK(error_of(kPorts + "groups: [{name: g, ports: [a], ecmp_reduce: divide}]") ==
        "test.yaml: groups[0].ecmp_reduce: must be one of modulo|multiply, got \"divide\"");
  CHECK(parse(kPorts + "groups: [{name: g, ports: [a], ecmp_reduce: multiply}]")
            .groups[0]
            .ecmp_reduce == "multiply");
  CHECK(parse(kPorts + "groups: [{name: g, ports: [a]}]").groups[0].ecmp_reduce == "modulo");
  CHECK(parse(kPorts + "groups: [{name: g, ports: [a]}]").groups[0].spray_path_divisor == 1);
  CHECK(parse(kPorts + "groups: [{name: g, ports: [a], spray_path_divisor: 8}]")
            .groups[0]
            .spray_path_divisor == 8);
  CHECK(error_of(kPorts + "groups: [{name: g, ports: [a], spray_path_divisor: 0}]")
            .starts_with("test.yaml: groups[0].spray_path_divisor: "));
  CHECK(error_of(kPorts + "groups: [{name: g, ports: [a, z]}]") ==
        "test.yaml: groups[0].ports: unknown port \"z\" (ports: a|b|c)");
  CHECK(error_of("ports: [{name: a, device: x, link: {rate_gbps: fast}}]") ==
        "test.yaml: ports[0].link.rate_gbps: must be a number in [0.001, 10000], got \"fast\"");
  CHECK(error_of("ports: [{name: a, device: x, lnik: {}}]") ==
        "test.yaml: ports[0].lnik: unknown key (allowed here: name|device|link|queue_bytes|"
        "delay_line_frames|peer_mac|rx_queues|tx_queues|rx_descriptors|tx_descriptors)");
  CHECK(error_of("ports: [{name: a, device: x, peer_mac: 02:00:00:00:00}]") ==
        "test.yaml: ports[0].peer_mac: must be a MAC address such as 02:00:00:00:00:01, got "
        "\"02:00:00:00:00\"");
  CHECK(error_of(kPorts + "routes: [{prefix: 10.0.0.0/33, port: a}]") ==
        "test.yaml: routes[0].prefix: must be an IPv4 address or prefix such as 10.0.0.0/8, got "
        "\"10.0.0.0/33\"");
  CHECK(error_of(kPorts + "routes: [{prefix: 10.0.0.0/8, group: nope}]") ==
        "test.yaml: routes[0].group: unknown group \"nope\"");
  CHECK(error_of(kPorts + "tcam: {rules: [{id: 1, action: pin}]}") ==
        "test.yaml: tcam.rules[0].port: required for action pin");
  CHECK(error_of(kPorts + "tcam: {rules: [{id: 1, match: {dest_qp: 5-2}}]}") ==
        "test.yaml: tcam.rules[0].match.dest_qp: must be N or LO-HI within [0, 16777215], got "
        "\"5-2\"");
  CHECK(error_of(kPorts + "pfc: {alpha: 1, static_threshold_bytes: 65536}") ==
        "test.yaml: pfc.static_threshold_bytes: give alpha (a dynamic threshold) or "
        "static_threshold_bytes (a static one), not both");
  CHECK(error_of(kPorts + "pfc: {alpha: 500}").find("test.yaml: pfc.alpha: ") == 0);
  CHECK(error_of(kPorts + "pfc: {headroom_bytes: lots}") ==
        "test.yaml: pfc.headroom_bytes: must be auto or a byte count in [2048, 1073741824], got "
        "\"lots\"");
  CHECK(error_of(kPorts + "pfc: {pool_bytes: 1000}").find("test.yaml: pfc.pool_bytes: ") == 0);
  CHECK(error_of(kPorts + "pfc: {buffer_bytes: 262144}").find("pfc.buffer_bytes") !=
        std::string::npos);  // the old per-port buffer key is gone
  CHECK(error_of(kPorts + "lcores: [{lcore: 0, ports: [a, b]}]") ==
        "test.yaml: lcores: port \"c\" is owned by no lcore (list it in one lcore's ports:)");
  CHECK(error_of(kPorts + "pfc: {watchdog: {action: alert}}") ==
        "test.yaml: pfc.watchdog.action: must be one of drop|forward, got \"alert\"");
  CHECK(error_of(kPorts + "hash: {algorithm: md5}") ==
        "test.yaml: hash.algorithm: must be one of crc32c|crc32, got \"md5\"");
  CHECK(error_of("ports: [") .find("test.yaml: YAML syntax error") == 0);
}

TEST_CASE("quarantine rules: a honeypot port, keep_percent 0..100 (default 5), nowhere else") {
  const auto c = parse(kPorts +
                       "tcam: {rules: [{id: 9, action: quarantine, port: c, match: {dest_qp: 17}},"
                       " {id: 10, action: quarantine, port: b, keep_percent: 0}]}");
  REQUIRE(c.tcam.rules.size() == 2);
  CHECK(c.tcam.rules[0].keep_percent == 5);
  CHECK(c.tcam.rules[0].port == 2);
  const spraynet::TcamRule r = to_tcam_rule(c.tcam.rules[0]);
  CHECK(r.action == spraynet::TcamAction::kQuarantine);
  CHECK(r.keep_percent == 5);
  CHECK(r.dest_qp_lo == 17);
  CHECK(to_tcam_rule(c.tcam.rules[1]).keep_percent == 0);
  CHECK(error_of(kPorts + "tcam: {rules: [{id: 1, action: quarantine}]}") ==
        "test.yaml: tcam.rules[0].port: required for action quarantine");
  CHECK(error_of(kPorts + "tcam: {rules: [{id: 1, action: quarantine, port: a, keep_percent: "
                          "101}]}")
            .find("test.yaml: tcam.rules[0].keep_percent: ") == 0);
  CHECK(error_of(kPorts + "tcam: {rules: [{id: 1, action: pin, port: a, keep_percent: 5}]}") ==
        "test.yaml: tcam.rules[0].keep_percent: only quarantine takes keep_percent");
}

TEST_CASE("the rule a NIC pushes for a flagged QP is one this parser takes") {
  const SwitchConfig c = parse(kPorts);
  QuarantinePushConfig q;
  q.honeypot_port = "c";
  q.keep_percent = 7;
  q.priority = -3;
  const std::string yaml = quarantine_rule_yaml(q, 901, QuarantineTarget{0x12, 0x0A000002});
  const TcamRuleSettings r = parse_tcam_rule(c, ConfigNode::load_string(yaml, "tcam_add"));
  CHECK(r.id == 901);
  CHECK(r.priority == -3);
  CHECK(r.action == "quarantine");
  CHECK(r.port == 2);
  CHECK(r.keep_percent == 7);
  CHECK(r.dst.address == 0x0A000002);
  CHECK(r.dst.length == 32);
  CHECK(r.dest_qp.lo == 0x12);
  CHECK(r.dest_qp.hi == 0x12);
}

TEST_CASE("list items are named once: groups[0].weights[1], not groups[0].groups[0]...") {
  CHECK(error_of(kPorts + "groups: [{name: g, mode: weighted, ports: [a, b, c], weights: [1, -2, 4]}]") ==
        "test.yaml: groups[0].weights[1]: must be an integer in [0, 65535], got \"-2\"");
  CHECK(error_of(kPorts + "pfc: {priorities: [3, 9]}").find("test.yaml: pfc.priorities[1]: ") == 0);
}

TEST_CASE("weights where nothing would use them, or all 0, are refused with the reason") {
  CHECK(error_of(kPorts + "groups: [{name: g, ports: [a, b], weights: [1, 2]}]") ==
        "test.yaml: groups[0].weights: only a weighted group uses weights (mode is ecmp): set "
        "mode: weighted or drop weights");
  CHECK(error_of(kPorts + "groups: [{name: g, mode: weighted, ports: [a, b], weights: [0, 0]}]") ==
        "test.yaml: groups[0].weights: at least one weight must be above 0 (all 0 would send "
        "nothing)");
  const SwitchConfig ok = parse(kPorts + "groups: [{name: g, mode: weighted, ports: [a, b], weights: [0, 3]}]");
  CHECK(ok.groups[0].weights == std::vector<uint32_t>{0, 3});
}

TEST_CASE("route_table picks the route table's backend") {
  CHECK(parse(kPorts).route_table == spraynet::RouteTableBackend::kLpm);  // the default
  CHECK(parse(kPorts + "route_table: lpm").route_table == spraynet::RouteTableBackend::kLpm);
  CHECK(parse(kPorts + "route_table: rib").route_table == spraynet::RouteTableBackend::kRib);
  CHECK(parse(kPorts + "route_table: hash").route_table == spraynet::RouteTableBackend::kHash);
  CHECK(error_of(kPorts + "route_table: trie") ==
        "test.yaml: route_table: must be one of lpm|rib|hash, got \"trie\"");
  CHECK(error_of(kPorts + "route_table: [lpm]").find("test.yaml: route_table: ") == 0);
}

TEST_CASE("a missing file is named") {
  try {
    load_switch_config("/nonexistent/sw.yaml");
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == "/nonexistent/sw.yaml: cannot open file");
  }
}

TEST_CASE("one check for link values, the config's and telemetry's") {
  CHECK(check_link_value("rate_gbps", 0.001).empty());
  CHECK(check_link_value("rate_gbps", 10000).empty());
  CHECK(check_link_value("rate_gbps", 0.0001) == "must be a number in [0.001, 10000], got 0.0001");
  CHECK_FALSE(check_link_value("rate_gbps", 20000).empty());
  CHECK_FALSE(check_link_value("rate_gbps", std::nan("")).empty());
  CHECK(check_link_value("ber", 1e-9).empty());
  CHECK_FALSE(check_link_value("ber", 1.5).empty());
  CHECK_FALSE(check_link_value("loss_rate", -0.1).empty());
  CHECK(check_link_value("speed", 1) == "unknown link property");
  CHECK(error_of("ports: [{name: a, device: x, link: {rate_gbps: 20000}}]") ==
        "test.yaml: ports[0].link.rate_gbps: must be a number in [0.001, 10000], got \"20000\"");
}

namespace {

// The keys switch_config_help() lists, as dotted paths ("ports[].link.rate_gbps").
std::set<std::string> help_keys() {
  std::set<std::string> keys;
  std::vector<std::string> stack;  // the path at each depth (2 columns a level)
  std::istringstream in(switch_config_help());
  std::string line;
  while (std::getline(in, line)) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || indent >= 32) continue;  // wrapped text
    std::string key = line.substr(indent);
    bool item = false;
    if (key.rfind("- ", 0) == 0) {
      item = true;
      key = key.substr(2);
    }
    const size_t colon = key.find(':');
    if (colon == std::string::npos || key.find(' ') < colon) continue;  // prose
    key = key.substr(0, colon);
    // A list item's key sits 2 columns right of its dash; the item itself is a level ("[]").
    const size_t depth = (indent + (item ? 2 : 0)) / 2;
    if (item) {
      stack.resize(depth - 1);
      stack.push_back("[]");
    } else {
      stack.resize(depth);
    }
    std::string path;
    for (const auto& s : stack) path += s == "[]" ? (path.pop_back(), std::string("[].")) : s + ".";
    keys.insert(path + key);
    stack.push_back(key);
  }
  return keys;
}

// What the loader accepts at `path`, read from its own refusal of an unknown key there.
std::set<std::string> loader_keys(const std::string& yaml) {
  const std::string e = error_of(yaml);
  const size_t at = e.find("allowed here: ");
  REQUIRE(at != std::string::npos);
  std::set<std::string> out;
  std::string list = e.substr(at + 14, e.find(')', at) - at - 14);
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t bar = std::min(list.find('|', pos), list.size());
    out.insert(list.substr(pos, bar - pos));
    pos = bar + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("switch_emu --help lists exactly the keys the loader accepts, at every level") {
  const std::set<std::string> help = help_keys();
  const std::string p = "ports: [{name: a, device: x}]\n";
  const std::vector<std::pair<std::string, std::string>> levels = {
      {"", "zzz: 1\n" + p},
      {"ports[].", "ports: [{name: a, device: x, zzz: 1}]\n"},
      {"ports[].link.", "ports: [{name: a, device: x, link: {zzz: 1}}]\n"},
      {"groups[].", p + "groups: [{name: g, ports: [a], zzz: 1}]\n"},
      {"routes[].", p + "routes: [{prefix: 10.0.0.0/8, port: a, zzz: 1}]\n"},
      {"tcam.", p + "tcam: {zzz: 1}\n"},
      {"tcam.partitions[].", p + "tcam: {partitions: [{name: q, capacity: 1, zzz: 1}]}\n"},
      {"tcam.rules[].", p + "tcam: {rules: [{id: 1, zzz: 1}]}\n"},
      {"tcam.rules[].match.", p + "tcam: {rules: [{id: 1, match: {zzz: 1}}]}\n"},
      {"hash.", p + "hash: {zzz: 1}\n"},
      {"qos.", p + "qos: {zzz: 1}\n"},
      {"pfc.", p + "pfc: {zzz: 1}\n"},
      {"pfc.watchdog.", p + "pfc: {watchdog: {zzz: 1}}\n"},
      {"ecn.", p + "ecn: {zzz: 1}\n"},
      {"int.", p + "int: {zzz: 1}\n"},
      {"conga.", p + "conga: {zzz: 1}\n"},
      {"conga.leaves[].", p + "conga: {leaf: 0, vtep: 10.0.0.1, leaves: [{zzz: 1}]}\n"},
      {"conweave.", p + "conweave: {zzz: 1}\n"},
      {"conweave.leaves[].", p + "conweave: {leaf: 0, vtep: 10.0.0.1, leaves: [{zzz: 1}]}\n"},
      {"control.", p + "control: {zzz: 1}\n"},
      {"idle_backoff.", p + "idle_backoff: {zzz: 1}\n"},
      {"telemetry.", p + "telemetry: {zzz: 1}\n"},
      {"lcores[].", p + "lcores: [{lcore: 0, ports: [a], zzz: 1}]\n"},
  };
  std::set<std::string> covered;
  for (const auto& [prefix, yaml] : levels) {
    INFO("level " << (prefix.empty() ? "top" : prefix));
    std::set<std::string> listed;
    for (const std::string& k : help) {
      if (k.rfind(prefix, 0) != 0) continue;
      const std::string rest = k.substr(prefix.size());
      if (rest.find('.') == std::string::npos) listed.insert(rest.substr(0, rest.find('[')));
    }
    CHECK(listed == loader_keys(yaml));
    for (const auto& k : listed) covered.insert(prefix + k);
  }
  // Every key the help lists belongs to one of those levels.
  for (const std::string& k : help) {
    std::string bare = k;
    for (size_t at; (at = bare.find("[]")) != std::string::npos;) bare.erase(at, 2);
    std::string flat;
    for (const auto& c : covered) {
      std::string b = c;
      for (size_t at; (at = b.find("[]")) != std::string::npos;) b.erase(at, 2);
      if (b == bare) flat = c;
    }
    INFO(k);
    CHECK_FALSE(flat.empty());
  }
}

TEST_CASE("telemetry: acting commands off and the socket 0600 by default; the mode is octal") {
  const SwitchConfig d = parse(kPorts);
  CHECK_FALSE(d.telemetry.acting_commands);
  CHECK(d.telemetry.socket_mode == 0600);
  const SwitchConfig c = parse(kPorts + "telemetry: {acting_commands: true, socket_mode: 660}");
  CHECK(c.telemetry.acting_commands);
  CHECK(c.telemetry.socket_mode == 0660);
  CHECK(parse(kPorts + "telemetry: {socket_mode: 0o640}").telemetry.socket_mode == 0640);
  CHECK(parse(kPorts + "telemetry: {socket_mode: \"0600\"}").telemetry.socket_mode == 0600);
  for (const char* bad : {"400", "066", "1777", "6x0", "\"\"", "-600"}) {
    INFO(bad);
    CHECK(error_of(kPorts + "telemetry: {socket_mode: " + bad + "}")
              .starts_with("test.yaml: telemetry.socket_mode: an octal mode"));
  }
  CHECK(error_of(kPorts + "telemetry: {acting: true}") ==
        "test.yaml: telemetry.acting: unknown key (allowed here: acting_commands|socket_mode)");
}

TEST_CASE("idle_backoff: the programs' default, read, and bounded") {
  const SwitchConfig d = parse(kPorts);
  CHECK(d.idle_backoff.max_sleep_us == 100);
  CHECK(d.idle_backoff.idle_polls == 256);
  const SwitchConfig c = parse(kPorts + "idle_backoff: {max_sleep_us: 0, idle_polls: 10}");
  CHECK(c.idle_backoff.max_sleep_us == 0);  // busy polling
  CHECK(c.idle_backoff.idle_polls == 10);
  CHECK(error_of(kPorts + "idle_backoff: {max_sleep_us: 2000000}") ==
        "test.yaml: idle_backoff.max_sleep_us: must be an integer in [0, 1000000], got "
        "\"2000000\"");
  CHECK(error_of(kPorts + "idle_backoff: {sleep: 1}") ==
        "test.yaml: idle_backoff.sleep: unknown key (allowed here: max_sleep_us|idle_polls)");
}

TEST_CASE("ports[].delay_line_frames: the egress delay line's bound, default 2^18, 1..2^24") {
  const std::string one = "ports: [{name: a, device: x}]\n";
  CHECK(parse(one).ports[0].delay_line_frames ==
        spraynet::EgressPortConfig::kDefaultDelayLineLimitFrames);
  CHECK(parse("ports: [{name: a, device: x, delay_line_frames: 8}]\n").ports[0].delay_line_frames ==
        8);
  const std::string e = error_of("ports: [{name: a, device: x, delay_line_frames: 0}]\n");
  INFO(e);
  CHECK(e.find("delay_line_frames") != std::string::npos);
}

TEST_CASE("a key with no value is refused, not read as its default") {
  CHECK(error_of(kPorts + "seed:\n") ==
        "test.yaml: seed: has no value: give one, or leave the key out for its default");
  CHECK(error_of("ports:\n  - {name: a, device: x, link: {rate_gbps: }}\n") ==
        "test.yaml: ports[0].link.rate_gbps: has no value: give one, or leave the key out for its "
        "default");
  CHECK(error_of(kPorts + "pfc:\n  enabled:\n") ==
        "test.yaml: pfc.enabled: has no value: give one, or leave the key out for its default");
  // A list may be left empty that way.
  CHECK_NOTHROW(parse(kPorts + "routes:\n"));
}

TEST_CASE("names: 1..64 letters, digits, '_', '-', '.'; not digits only (telemetry indices)") {
  CHECK_NOTHROW(parse("ports:\n  - {name: leaf0-spine3.p1_a, device: x}\n"));
  CHECK(error_of("ports:\n  - {name: '', device: x}\n") ==
        "test.yaml: ports[0].name: \"\" must not be empty");
  CHECK(error_of("ports:\n  - {name: 'up 1', device: x}\n") ==
        "test.yaml: ports[0].name: \"up 1\" may hold only letters, digits, '_', '-' and '.'");
  CHECK(error_of("ports:\n  - {name: 'a,b', device: x}\n").find("may hold only") !=
        std::string::npos);
  CHECK(error_of("ports:\n  - {name: '3', device: x}\n") ==
        "test.yaml: ports[0].name: \"3\" must not be digits only (telemetry would read it as an "
        "index)");
  CHECK(error_of("ports:\n  - {name: " + std::string(65, 'a') + ", device: x}\n")
            .find("is 65 characters long; at most 64") != std::string::npos);
  CHECK(error_of(kPorts + "groups:\n  - {name: 'g 1', ports: [a]}\n")
            .starts_with("test.yaml: groups[0].name: \"g 1\" may hold only"));
  CHECK(error_of(kPorts + "name: ''\n") == "test.yaml: name: \"\" must not be empty");
}

namespace {

bool any_class_marks(const spraynet::EcnMarkerConfig& m) {
  for (const auto& c : m.classes) {
    if (c.enabled) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("ecn: off without the block; the hpcc preset scales with each port's rate") {
  // Port a: 100 Gbit/s (the default), b: 25, c: 100.
  const auto off = parse(kPorts);
  CHECK_FALSE(off.ecn.enabled);
  CHECK_FALSE(any_class_marks(ecn_marker_config(off, 0, 1)));

  const auto c = parse(kPorts + "ecn: {}\n");
  CHECK(c.ecn.enabled);
  CHECK(c.ecn.mark_at == spraynet::EcnMarkPoint::kDequeue);
  CHECK(c.ecn.classes == (1u << 3));  // no pfc: class 3
  CHECK(c.ecn.preset == "hpcc");
  CHECK(c.ecn.pmax == 0.2);
  const auto a = ecn_marker_config(c, 0, 77);
  CHECK(a.seed == 77);
  CHECK(a.mark_at == spraynet::EcnMarkPoint::kDequeue);
  for (size_t tc = 0; tc < 8; ++tc) CHECK(a.classes[tc].enabled == (tc == 3));
  CHECK(a.classes[3].kmin_bytes == 400'000);  // HPCC's kmin_map 100 * 100 / 25 KB
  CHECK(a.classes[3].kmax_bytes == 1'600'000);
  CHECK(a.classes[3].pmax == 0.2);
  const auto b = ecn_marker_config(c, 1, 78);
  CHECK(b.classes[3].kmin_bytes == 100'000);
  CHECK(b.classes[3].kmax_bytes == 400'000);
  CHECK(a.check().empty());
  CHECK_THROWS_AS(ecn_marker_config(c, 3, 1), std::out_of_range);
  // The seeds SwitchNode gives its ports differ from port to port.
  CHECK(ecn_port_seed(1, 0) != ecn_port_seed(1, 1));

  // With pfc on, the lossless priorities are the default classes.
  const auto pfc = parse(kPorts + "pfc: {priorities: [3, 4]}\necn: {}\n");
  CHECK(pfc.ecn.classes == ((1u << 3) | (1u << 4)));
  CHECK(ecn_marker_config(pfc, 2, 1).classes[4].enabled);

  // dctcp: a step at K = 30 KB per 10 Gbit/s (run.py's dctcp kmin_map = kmax_map = 30 * bw / 10
  // KB): 300 KB at port 0's 100 Gbit/s, 75 KB at port 1's 25.
  const auto d = parse(kPorts + "ecn: {preset: dctcp, pmax: 1}\n");
  const auto d0 = ecn_marker_config(d, 0, 1);
  CHECK(d0.classes[3].kmin_bytes == 30'000 * 100 / 10);
  CHECK(d0.classes[3].kmax_bytes == 30'000 * 100 / 10);
  CHECK(d0.classes[3].pmax == 1.0);
  CHECK(ecn_marker_config(d, 1, 1).classes[3].kmin_bytes == 30'000 * 25 / 10);
}

TEST_CASE("ecn: conweave's flat thresholds, overrides, classes, mark_at, enabled: false") {
  const auto cw = parse(kPorts + "ecn: {preset: conweave}\n");
  for (size_t port = 0; port < 3; ++port) {
    const auto m = ecn_marker_config(cw, port, 1);
    CHECK(m.classes[3].kmin_bytes == 100'000);
    CHECK(m.classes[3].kmax_bytes == 400'000);
  }
  const auto o = parse(kPorts +
                       "ecn: {mark_at: enqueue, classes: [1, 5], kmin_bytes: 409600, "
                       "kmax_bytes: 1638400, pmax: 1}\n");
  CHECK(o.ecn.classes == ((1u << 1) | (1u << 5)));
  for (size_t port = 0; port < 3; ++port) {
    const auto m = ecn_marker_config(o, port, 1);
    CHECK(m.mark_at == spraynet::EcnMarkPoint::kEnqueue);
    CHECK_FALSE(m.classes[3].enabled);
    CHECK(m.classes[5].enabled);
    CHECK(m.classes[1].kmin_bytes == 409'600);
    CHECK(m.classes[1].kmax_bytes == 1'638'400);
    CHECK(m.classes[1].pmax == 1.0);
  }
  // One override: the other threshold is still the preset's at each port's rate.
  const auto k = parse(kPorts + "ecn: {kmin_bytes: 0}\n");
  CHECK(ecn_marker_config(k, 0, 1).classes[3].kmin_bytes == 0);
  CHECK(ecn_marker_config(k, 0, 1).classes[3].kmax_bytes == 1'600'000);
  CHECK(ecn_marker_config(k, 1, 1).classes[3].kmax_bytes == 400'000);
  const auto disabled = parse(kPorts + "ecn: {enabled: false, classes: [2]}\n");
  CHECK_FALSE(disabled.ecn.enabled);
  CHECK_FALSE(any_class_marks(ecn_marker_config(disabled, 0, 1)));
}

TEST_CASE("ecn: errors name the file, the key and what is allowed") {
  CHECK(error_of(kPorts + "ecn: {kmin_bytes: 500000, kmax_bytes: 400000}") ==
        "test.yaml: ecn.kmin_bytes: must be <= ecn.kmax_bytes (400000)");
  // kmin alone above the hpcc kmax of port b's 25 Gbit/s (400000).
  CHECK(error_of(kPorts + "ecn: {kmin_bytes: 500000}") ==
        "test.yaml: ecn.kmin_bytes: must be <= ecn.kmax_bytes (400000: the hpcc preset at port "
        "b's 25 Gbit/s): set kmax_bytes too");
  CHECK(error_of(kPorts + "ecn: {kmax_bytes: 99999, preset: conweave}") ==
        "test.yaml: ecn.kmax_bytes: must be >= ecn.kmin_bytes (100000: the conweave preset at "
        "port a's 100 Gbit/s): set kmin_bytes too");
  CHECK(error_of(kPorts + "ecn: {pmax: 0}") == "test.yaml: ecn.pmax: must be in (0, 1], got 0");
  CHECK(error_of(kPorts + "ecn: {pmax: 1.5}") == "test.yaml: ecn.pmax: must be in (0, 1], got 1.5");
  CHECK(error_of(kPorts + "ecn: {pmax: lots}") ==
        "test.yaml: ecn.pmax: must be in (0, 1], got lots");
  CHECK(error_of(kPorts + "ecn: {classes: [3, 9]}") ==
        "test.yaml: ecn.classes: each class 0-7, got 9");
  CHECK(error_of(kPorts + "ecn: {classes: []}") ==
        "test.yaml: ecn.classes: must list at least one class 0-7");
  CHECK(error_of(kPorts + "ecn: {mark_at: egress}") ==
        "test.yaml: ecn.mark_at: must be one of dequeue|enqueue, got \"egress\"");
  CHECK(error_of(kPorts + "ecn: {preset: dcqcn}") ==
        "test.yaml: ecn.preset: must be one of hpcc|conweave|dctcp, got \"dcqcn\"");
  CHECK(error_of(kPorts + "ecn: {kmin_bytes: -1}")
            .find("test.yaml: ecn.kmin_bytes: must be an integer in [0, 1099511627776]") == 0);
  CHECK(error_of(kPorts + "ecn: {kmin: 1}") ==
        "test.yaml: ecn.kmin: unknown key (allowed here: enabled|mark_at|classes|preset|"
        "kmin_bytes|kmax_bytes|pmax)");
  CHECK(error_of(kPorts + "ecn: {enabled: maybe}") ==
        "test.yaml: ecn.enabled: must be true|false, got \"maybe\"");
}

TEST_CASE("ecn: the help lists every key with its default and range") {
  const std::string h = switch_config_help();
  for (const char* text : {"ecn:", "mark_at: dequeue", "preset: hpcc", "pmax: 0.2", "(0, 1]",
                           "400000 and 1600000 at 100 Gbit/s", "kmin_bytes: (preset)",
                           "kmax_bytes: (preset)", "classes: (pfc priorities)", "conweave"}) {
    INFO(text);
    CHECK(h.find(text) != std::string::npos);
  }
}

TEST_CASE("a port without link: is a wire port; link: emulated or a map is an emulated link") {
  const SwitchConfig c = parse(R"(
ports:
  - {name: a, device: x}
  - {name: b, device: x, link: wire}
  - {name: c, device: x, link: emulated}
  - {name: d, device: x, link: {rate_gbps: 25, delay_ns: 0}}
routes:
  - {prefix: 0.0.0.0/0, port: a}
)");
  CHECK(c.ports[0].link.wire);
  CHECK(c.ports[1].link.wire);
  CHECK_FALSE(c.ports[2].link.wire);
  CHECK(c.ports[2].link.rate_gbps == 100.0);
  CHECK(c.ports[2].link.delay_ns == 1000);
  CHECK_FALSE(c.ports[3].link.wire);
  CHECK(c.ports[3].link.rate_gbps == 25.0);
  CHECK(c.ports[3].link.delay_ns == 0);
  // Configs made in code keep an emulated link (fabric_emu's).
  CHECK_FALSE(PortSettings{}.link.wire);
  const std::string e = error_of(R"(
ports:
  - {name: a, device: x, link: fibre}
routes:
  - {prefix: 0.0.0.0/0, port: a}
)");
  CHECK(e.find("test.yaml") != std::string::npos);
  CHECK(e.find("ports[0].link") != std::string::npos);
  CHECK(e.find("wire, emulated or a map") != std::string::npos);
  CHECK(switch_config_help().find("link: wire") != std::string::npos);
}

TEST_CASE("ports' queues and descriptors; lcores own ports and poll (port, rx queue) pairs") {
  const std::string ports = R"(
ports:
  - {name: a, device: x, rx_queues: 2, tx_queues: 2, rx_descriptors: 512, tx_descriptors: 2048}
  - {name: b, device: y, rx_queues: 2, tx_queues: 2}
)";
  SwitchConfig c = parse(ports);
  CHECK(c.ports[0].rx_queues == 2);
  CHECK(c.ports[0].tx_queues == 2);
  CHECK(c.ports[0].rx_descriptors == 512);
  CHECK(c.ports[0].tx_descriptors == 2048);
  CHECK(c.ports[1].rx_descriptors == 1024);
  CHECK(parse("ports: [{name: a, device: x}]").ports[0].rx_queues == 1);

  using Pairs = std::vector<std::pair<uint16_t, uint16_t>>;
  c = parse(ports +
            "lcores: [{lcore: 0, ports: [a, b], rx: [a:0, b:0]}, {lcore: 1, rx: [a:1, b:1]}]");
  REQUIRE(c.lcores.size() == 2);
  CHECK(c.lcores[0].ports == std::vector<uint16_t>{0, 1});
  CHECK(c.lcores[0].rx == Pairs{{0, 0}, {1, 0}});
  CHECK(c.lcores[1].ports.empty());
  CHECK(c.lcores[1].rx == Pairs{{0, 1}, {1, 1}});
  // Without rx: queue 0 of the ports it owns.
  c = parse("ports: [{name: a, device: x}]\nlcores: [{lcore: 0, ports: [a]}]");
  CHECK(c.lcores[0].rx == Pairs{{0, 0}});

  CHECK(error_of(ports + "lcores: [{lcore: 0, ports: [a, b]}]") ==
        "test.yaml: lcores: rx queue 1 of port \"a\" is polled by no lcore (rx: [a:1] in one "
        "lcore)");
  CHECK(error_of(ports + "lcores: [{lcore: 0, ports: [a, b], rx: [a:0, b:0, a:2, b:1]}]") ==
        "test.yaml: lcores[0].rx: \"a:2\": port \"a\" has rx queues 0..1 (rx_queues: 2)");
  CHECK(error_of(ports + "lcores: [{lcore: 0, ports: [a, b], rx: [a0]}]") ==
        "test.yaml: lcores[0].rx: each entry is PORT:QUEUE (e.g. p0:1), got \"a0\"");
  CHECK(error_of(ports + "lcores: [{lcore: 0, ports: [a, b], rx: [a:0, b:0, a:1, b:1]}, "
                         "{lcore: 1, rx: [a:1]}]") ==
        "test.yaml: lcores[1].rx: rx queue 1 of port \"a\" is already polled by lcore 0");
  CHECK(error_of(ports + "lcores: [{lcore: 0, ports: [a, b], rx: [a:0, b:0, a:1, b:1]}, "
                         "{lcore: 1, ports: [a]}]") ==
        "test.yaml: lcores[1].ports: port \"a\" is already owned by lcore 0");
  CHECK(error_of(ports + "lcores: [{lcore: 0}]") ==
        "test.yaml: lcores[0]: needs ports:, rx: or both");
  CHECK(error_of("ports: [{name: a, device: x, rx_queues: 0}]")
            .starts_with("test.yaml: ports[0].rx_queues: "));
  CHECK(error_of("ports: [{name: a, device: x, tx_queues: 65}]")
            .starts_with("test.yaml: ports[0].tx_queues: "));
  CHECK(error_of("ports: [{name: a, device: x, tx_descriptors: 8}]")
            .starts_with("test.yaml: ports[0].tx_descriptors: "));
}

TEST_CASE("conga: a leaf's block and groups read; errors name the key and the range") {
  const std::string leaf = kPorts + R"(
groups:
  - {name: up, mode: conga, leaf: 3, ports: [b, c], dlb_gap_ns: 50000}
routes:
  - {prefix: 10.0.3.0/24, group: up}
conga:
  leaf: 1
  vtep: 10.0.1.255
  leaves: [{leaf: 3, vtep: 10.0.3.255}]
  t_dre_us: 20
  alpha: 0.1
  quantisation_bits: 2
  aging_us: 1000
)";
  const SwitchConfig c = parse(leaf);
  CHECK(c.conga.enabled);
  CHECK(c.conga.leaf == 1);
  CHECK(c.conga.vtep == 0x0A0001FF);
  REQUIRE(c.conga.leaves.size() == 1);
  CHECK(c.conga.leaves[0] == std::pair<uint8_t, uint32_t>{3, 0x0A0003FF});
  CHECK(c.conga.dre.t_dre_ns == 20000);
  CHECK(c.conga.dre.alpha == 0.1);
  CHECK(c.conga.dre.bits == 2);
  CHECK(c.conga.aging_ns == 1000000);
  CHECK(c.conga.vni == 1);
  CHECK(c.groups[0].mode == "conga");
  CHECK(c.groups[0].overlay_leaf == 3);
  // Without the block CONGA is off; a spine's block has no leaf.
  CHECK_FALSE(parse(kPorts).conga.enabled);
  const SwitchConfig spine = parse(kPorts + "conga: {t_dre_us: 50}\n");
  CHECK(spine.conga.enabled);
  CHECK(spine.conga.leaf == -1);
  CHECK(spine.conga.dre.t_dre_ns == 50000);
  CHECK(spine.conga.dre.alpha == 0.2);
  CHECK(spine.conga.aging_ns == 500000);

  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string y = leaf;
    y.replace(y.find(from), from.size(), to);
    return error_of(y);
  };
  CHECK(replaced("alpha: 0.1", "alpha: 0") ==
        "test.yaml: conga.alpha: must be a number in [1e-06, 1], got \"0\"");
  CHECK(replaced("quantisation_bits: 2", "quantisation_bits: 4") ==
        "test.yaml: conga.quantisation_bits: must be an integer in [1, 3], got \"4\"");
  CHECK(replaced("t_dre_us: 20", "t_dre_us: 0") ==
        "test.yaml: conga.t_dre_us: must be a number in [0.001, 1e+06], got \"0\"");
  CHECK(replaced("leaf: 1\n", "leaf: 256\n") ==
        "test.yaml: conga.leaf: must be an integer in [0, 255], got \"256\"");
  CHECK(replaced("vtep: 10.0.1.255", "vtep: 10.0.1.0/24") ==
        "test.yaml: conga.vtep: a tunnel address (10.0.0.254), not a prefix");
  CHECK(replaced("{leaf: 3, vtep: 10.0.3.255}", "{leaf: 1, vtep: 10.0.3.255}") ==
        "test.yaml: conga.leaves[0].leaf: leaf 1 listed twice");
  CHECK(replaced("leaves: [{leaf: 3, vtep: 10.0.3.255}]", "leaves: []") ==
        "test.yaml: groups[0] (up).leaf: leaf 3 has no tunnel address: list it in conga.leaves "
        "(and not this switch's own leaf)");
  CHECK(replaced("mode: conga, leaf: 3, ", "mode: conga, ") ==
        "test.yaml: groups[0].leaf: required for mode conga: the leaf (0..255) behind this "
        "group's routes");
  CHECK(replaced("mode: conga, leaf: 3, ", "mode: dlb, leaf: 3, ") ==
        "test.yaml: groups[0].leaf: only a conga or conweave group names a destination leaf");
  CHECK(error_of(kPorts + "groups:\n  - {name: up, mode: conga, leaf: 3, ports: [b]}\n") ==
        "test.yaml: groups[0] (up).mode: conga needs a conga: block with this switch's leaf: and "
        "vtep:");
  CHECK(error_of(kPorts + "conga: {vtep: 10.0.0.255}\n") ==
        "test.yaml: conga.leaf: required with vtep and leaves (a leaf's id, 0..255; a spine has "
        "none of them)");
  CHECK(error_of(kPorts + "conga: {}\nqos: {trust: pcp}\n") ==
        "test.yaml: qos.trust: conga's overlay carries no VLAN tag, so spines classify by the "
        "DSCP it copies: trust dscp");
  CHECK(error_of(kPorts + "conga: {}\nlcores:\n  - {lcore: 1, ports: [a]}\n  - {lcore: 2, ports: "
                          "[b, c]}\n") ==
        "test.yaml: lcores: conga keeps one set of tables per switch: one lcore, got 2");
}

TEST_CASE("conweave: a leaf's block read with conweave-ns3's defaults; errors name the key") {
  const std::string leaf = kPorts + R"(
groups:
  - {name: up, mode: conweave, leaf: 2, ports: [b, c]}
routes:
  - {prefix: 10.0.2.0/24, group: up}
conweave:
  leaf: 0
  vtep: 10.0.0.255
  leaves: [{leaf: 2, vtep: 10.0.2.255}]
)";
  const SwitchConfig c = parse(leaf);
  CHECK(c.conweave.enabled);
  CHECK(c.conweave.leaf == 0);
  CHECK(c.conweave.vtep == 0x0A0000FF);
  CHECK(c.conweave.base_rtt_ns == 4000);
  CHECK(c.conweave.params.reply_extra_ns == 4000);
  CHECK(c.conweave.params.path_pause_ns == 16000);
  CHECK(c.conweave.params.tx_expiry_ns == 300000);
  CHECK(c.conweave.params.voq_flush_extra_ns == 16000);
  CHECK(c.conweave.params.voq_default_wait_ns == 200000);
  CHECK(c.conweave.params.aging_ns == 2000000);
  CHECK(c.conweave.control_dscp == 48);
  CHECK(c.groups[0].mode == "conweave");
  CHECK(c.groups[0].overlay_leaf == 2);
  const auto with = [&](const std::string& extra) { return error_of(leaf + extra); };
  CHECK(with("  tx_expiry_us: 0\n") ==
        "test.yaml: conweave.tx_expiry_us: must be a number in [1, 1e+06], got \"0\"");
  CHECK(with("  control_dscp: 64\n") ==
        "test.yaml: conweave.control_dscp: must be an integer in [0, 63], got \"64\"");
  CHECK(with("conga: {}\n") ==
        "test.yaml: conweave: a switch runs CONGA or ConWeave, not both (it has a conga: block)");
  CHECK(error_of(kPorts + "conweave: {base_rtt_us: 8}\n") ==
        "test.yaml: conweave.leaf: required");
}

TEST_CASE("int: turns INT records on at every port, with its port and frame limit checked") {
  const std::string p = "ports: [{name: a, device: x}]\n";
  auto c = parse(p + "int: {}\n");
  CHECK(c.int_telemetry.enabled);
  CHECK(c.int_telemetry.udp_port == 4792);
  CHECK(c.int_telemetry.max_frame_bytes == 0);
  c = parse(p + "int: {enabled: false, udp_port: 5000, max_frame_bytes: 1600}\n");
  CHECK_FALSE(c.int_telemetry.enabled);
  CHECK(c.int_telemetry.udp_port == 5000);
  CHECK(c.int_telemetry.max_frame_bytes == 1600);
  CHECK_FALSE(parse(p).int_telemetry.enabled);
  CHECK_THROWS_WITH(
      parse(p + "int: {udp_port: 4791}\n"),
      Catch::Contains("test.yaml: int.udp_port: 1..65535 but not 4791"));
  CHECK_THROWS_WITH(
      parse(p + "int: {udp_port: 0}\n"),
      Catch::Contains("test.yaml: int.udp_port"));
}
