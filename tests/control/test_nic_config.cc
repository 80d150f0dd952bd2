#include "control/nic_config.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "control/link_state_table.h"

using namespace spraynet;
using namespace spraynet::control;

namespace {

NicConfig parse(const std::string& yaml) {
  return parse_nic_config(ConfigNode::load_string(yaml, "test.yaml"));
}

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// `nic:` with one uplink, then `extra` (indented map entries under nic).
std::string one_uplink(const std::string& extra = "") {
  return "nic:\n  uplinks: [{name: up0, device: net_ring0}]\n" + extra;
}

std::string uplinks(int n, const std::string& each = "") {
  std::string s = "nic:\n  uplinks:\n";
  for (int i = 0; i < n; ++i) {
    s += "    - {name: up" + std::to_string(i) + ", device: net_ring" + std::to_string(i) + each +
         "}\n";
  }
  return s;
}

const std::string kHost = "  host: {device: net_ring_host}\n";

}  // namespace

TEST_CASE("defaults") {
  const NicConfig c = parse(one_uplink());
  CHECK(c.file == "test.yaml");
  CHECK(c.name == "nic");
  CHECK(c.seed == 1);
  CHECK(c.mempool_mbufs == 0);
  CHECK(c.mbuf_data_room == 4480);
  CHECK_FALSE(c.host.has_value());
  REQUIRE(c.uplinks.size() == 1);
  const UplinkSettings& u = c.uplinks[0];
  CHECK(u.name == "up0");
  CHECK(u.device == "net_ring0");
  CHECK_FALSE(u.path_id_from_config);
  CHECK(u.path_id <= 15);
  CHECK_FALSE(u.peer_mac.has_value());
  CHECK(u.link.rate_gbps == 100.0);
  CHECK(u.link.delay_ns == 1000);
  CHECK(u.link.ber == 0.0);
  CHECK(u.link.loss == 0.0);
  CHECK(u.link.up);
  CHECK(c.spray.mode == SprayMode::kRoundRobin);
  CHECK(c.spray.ppcid_layout == PpcidLayout::kTsHigh);
  CHECK(c.receive == ReceiveModel::kReorderBuffer);
  CHECK(c.reorder_enabled());
  CHECK(c.placement.window == 0);
  CHECK(c.placement.nak_delay_ns == 100'000);
  CHECK(c.reorder.window == 256);
  CHECK(c.reorder.hold_timeout_ns == 100'000);
  CHECK(c.reorder.max_qps == 4096);
  CHECK(c.reorder.max_buffered == 65536);
  CHECK(c.control.period_ms == 200);
  // No host: the RC traffic engine plays it, with its defaults.
  REQUIRE(c.rc_engine.has_value());
  const RcEngineSettings& e = *c.rc_engine;
  CHECK(e.qps == 4);
  CHECK(e.role == RcQpRole::kBoth);
  CHECK(e.message_bytes == 65536);
  CHECK(e.mtu == 1024);
  CHECK(e.max_in_flight == 129);
  CHECK(e.messages == 100);
  CHECK(e.retransmit_timeout_ns == 67'108'864);
  CHECK(e.local_ip == 0x0A000001);
  CHECK(e.peer_ip == 0x0A000002);
  CHECK(e.local_mac == MacAddress{0x02, 0x53, 0x50, 0x00, 0x0a, 0x01});
  CHECK(e.peer_mac == MacAddress{0x02, 0x53, 0x50, 0x00, 0x0b, 0x01});
  CHECK(e.first_qp == 0x11);
  CHECK(e.peer_first_qp == 0x11);
  CHECK(e.first_psn == 0);
  CHECK(e.dscp == 26);
  CHECK(c.uplink_index("up0") == 0);
  CHECK(c.uplink_index("up1") == -1);

  // With a host there is no RC engine.
  const NicConfig h = parse(one_uplink(kHost));
  REQUIRE(h.host.has_value());
  CHECK(h.host->name == "host");
  CHECK(h.host->device == "net_ring_host");
  CHECK_FALSE(h.rc_engine.has_value());
}

TEST_CASE("a full config") {
  const NicConfig c = parse(R"(
nic:
  name: nic-a
  seed: 7
  mempool_mbufs: 16384
  mbuf_data_room: 9344
  host: {name: h0, device: "net_pcap0,rx_pcap=in.pcap"}
  uplinks:
    - name: up0
      device: "net_pcap1,tx_pcap=/tmp/up0.pcap"
      path_id: 200
      peer_mac: "02:00:00:00:00:02"
      link: {rate_gbps: 25, delay_ns: 5000, ber: 1e-9, loss: 0.01, up: false}
    - {name: up1, device: "3", path_id: 0}
    - {name: up2, device: net_ring2}
  spray: {mode: adaptive, ppcid_layout: path-high}
  receive: reorder-buffer
  reorder: {window: 1024, hold_timeout_us: 2.5, max_qps: 128, max_buffered: 1000}
  control: {period_ms: 50}
)");
  CHECK(c.name == "nic-a");
  CHECK(c.seed == 7);
  CHECK(c.mempool_mbufs == 16384);
  CHECK(c.mbuf_data_room == 9344);
  REQUIRE(c.host.has_value());
  CHECK(c.host->name == "h0");
  CHECK(c.host->device == "net_pcap0,rx_pcap=in.pcap");
  REQUIRE(c.uplinks.size() == 3);
  const UplinkSettings& u = c.uplinks[0];
  CHECK(u.device == "net_pcap1,tx_pcap=/tmp/up0.pcap");
  CHECK(u.path_id == 200);
  CHECK(u.path_id_from_config);
  CHECK(u.peer_mac == MacAddress{0x02, 0, 0, 0, 0, 0x02});
  CHECK(u.link.rate_gbps == 25);
  CHECK(u.link.delay_ns == 5000);
  CHECK(u.link.ber == 1e-9);
  CHECK(u.link.loss == 0.01);
  CHECK_FALSE(u.link.up);
  CHECK(c.uplinks[1].path_id == 0);  // path id 0 is allowed: the PPCID is never 0x0000 anyway
  CHECK(c.uplinks[1].device == "3");
  CHECK_FALSE(c.uplinks[2].path_id_from_config);
  CHECK(c.uplinks[2].path_id != 0);
  CHECK(c.uplinks[2].path_id != 200);
  CHECK(c.spray.mode == SprayMode::kAdaptive);
  CHECK(c.spray.ppcid_layout == PpcidLayout::kPathHigh);
  CHECK(c.reorder_enabled());
  CHECK(c.reorder.window == 1024);
  CHECK(c.reorder.hold_timeout_ns == 2500);
  CHECK(c.reorder.max_qps == 128);
  CHECK(c.reorder.max_buffered == 1000);
  CHECK(c.control.period_ms == 50);
  CHECK_FALSE(c.rc_engine.has_value());
}

TEST_CASE("a full rc_engine block") {
  const NicConfig c = parse(one_uplink(R"(  rc_engine:
    qps: 16
    role: requester
    message_bytes: 1048576
    mtu: 4096
    max_in_flight: 256
    messages: 0
    retransmit_timeout_us: 8388.608
    local_ip: 192.168.1.1
    peer_ip: 192.168.1.2
    local_mac: "02:53:50:00:0a:07"
    peer_mac: "02:53:50:00:0b:07"
    first_qp: 0x100
    peer_first_qp: 0x200
    first_psn: 0xFFFFF0
    dscp: 46
)"));
  REQUIRE(c.rc_engine.has_value());
  const RcEngineSettings& e = *c.rc_engine;
  CHECK(e.qps == 16);
  CHECK(e.role == RcQpRole::kRequester);
  CHECK(e.message_bytes == 1048576);
  CHECK(e.mtu == 4096);
  CHECK(e.max_in_flight == 256);
  CHECK(e.messages == 0);
  CHECK(e.retransmit_timeout_ns == 8'388'608);
  CHECK(e.local_ip == 0xC0A80101);
  CHECK(e.peer_ip == 0xC0A80102);
  CHECK(e.local_mac == MacAddress{0x02, 0x53, 0x50, 0x00, 0x0a, 0x07});
  CHECK(e.peer_mac == MacAddress{0x02, 0x53, 0x50, 0x00, 0x0b, 0x07});
  CHECK(e.first_qp == 0x100);
  CHECK(e.peer_first_qp == 0x200);
  CHECK(e.first_psn == 0xFFFFF0);
  CHECK(e.dscp == 46);
  CHECK(parse(one_uplink("  rc_engine: {role: responder}")).rc_engine->role == RcQpRole::kResponder);
  CHECK(e.op == RcOp::kWrite);
  const NicConfig reads = parse(one_uplink("  rc_engine: {op: read, mtu: 4096}"));
  CHECK(reads.rc_engine->op == RcOp::kRead);
  CHECK(rc_engine_config(reads).op == RcOp::kRead);
  CHECK(rc_engine_config(reads).requester_config(0).op == RcOp::kRead);
  // The reorder engine counts READ PSNs in the RC engine's MTU unless told otherwise.
  CHECK(reads.reorder.path_mtu == 0);
  CHECK(reorder_config(reads).path_mtu == 4096);
  CHECK(reorder_config(parse(one_uplink("  reorder: {path_mtu: 2048}\n"))).path_mtu == 2048);

  // The dataplane takes what the config says.
  const RcTrafficEngineConfig r = rc_engine_config(c);
  CHECK(r.check().empty());
  CHECK(r.qps == 16);
  CHECK(r.role == RcQpRole::kRequester);
  CHECK(r.mtu == 4096);
  CHECK(r.messages_per_qp == 0);
  CHECK(r.retransmit_timeout_ns == 8'388'608);
  CHECK(r.first_local_qp == 0x100);
  CHECK(r.first_peer_qp == 0x200);
  CHECK(r.local_ip == 0xC0A80101);
  CHECK(r.peer_mac == e.peer_mac);
  CHECK(r.dscp == 46);
  CHECK_THROWS_AS(rc_engine_config(parse(one_uplink(kHost))), std::invalid_argument);
}

TEST_CASE("default path ids come from the link fingerprint, as LinkStateTable assigns them") {
  for (const char* layout : {"ts-high", "path-high"}) {
    INFO(layout);
    const std::string spray = std::string("  spray: {ppcid_layout: ") + layout + "}\n";
    for (int n : {1, 4, 8, 16}) {
      INFO(n << " uplinks");
      const NicConfig c = parse(uplinks(n) + spray);
      LinkStateTableConfig t;
      t.path_id_bits = path_id_bits(c);
      const LinkStateTable table(uplink_identities(c), t);
      std::set<uint8_t> ids;
      for (int i = 0; i < n; ++i) {
        CHECK(c.uplinks[i].path_id == table.at(i).path_id);
        CHECK(c.uplinks[i].path_id <= max_path_id(c.spray.ppcid_layout));
        ids.insert(c.uplinks[i].path_id);
      }
      CHECK(ids.size() == size_t(n));  // unique, even with 16 uplinks on 16 ids
    }
  }
  CHECK(path_id_bits(parse(one_uplink())) == 4);
  CHECK(path_id_bits(parse(one_uplink("  spray: {ppcid_layout: path-high}\n"))) == 8);

  // The ids follow the link, not its place in the list.
  const NicConfig a = parse(uplinks(8));
  std::string reversed = "nic:\n  uplinks:\n";
  for (int i = 7; i >= 0; --i) {
    reversed += "    - {name: up" + std::to_string(i) + ", device: d" + std::to_string(i) + "}\n";
  }
  const NicConfig b = parse(reversed);
  for (int i = 0; i < 8; ++i) {
    const std::string name = "up" + std::to_string(i);
    CHECK(a.uplinks[a.uplink_index(name)].path_id == b.uplinks[b.uplink_index(name)].path_id);
  }

  // With a peer MAC the link is named by the cable ("nic>mac"), so renaming the port keeps the id.
  const NicConfig m1 = parse("nic:\n  uplinks: [{name: a, device: x, peer_mac: \"02:00:00:00:01:07\"}]");
  const NicConfig m2 = parse("nic:\n  uplinks: [{name: b, device: x, peer_mac: \"02:00:00:00:01:07\"}]");
  CHECK(m1.uplinks[0].path_id == m2.uplinks[0].path_id);
  CHECK(identity_string(uplink_identities(m1)[0]) == "nic>02:00:00:00:01:07");
  CHECK(identity_string(uplink_identities(parse(one_uplink()))[0]) == "nic/up0");
}

TEST_CASE("path ids given in the file are kept; the others move around them") {
  const NicConfig free = parse(uplinks(4));
  // Give up3 the id up0 would get: up0 must take another, and all stay unique.
  const uint8_t taken = free.uplinks[0].path_id;
  std::string yaml = "nic:\n  uplinks:\n";
  for (int i = 0; i < 4; ++i) {
    yaml += "    - {name: up" + std::to_string(i) + ", device: d" +
            (i == 3 ? ", path_id: " + std::to_string(taken) : std::string()) + "}\n";
  }
  const NicConfig c = parse(yaml);
  CHECK(c.uplinks[3].path_id == taken);
  CHECK(c.uplinks[3].path_id_from_config);
  CHECK(c.uplinks[0].path_id != taken);
  std::set<uint8_t> ids;
  for (const auto& u : c.uplinks) ids.insert(u.path_id);
  CHECK(ids.size() == 4);

  // 15 fixed ids and one left to the fingerprint: it gets the last free id.
  std::string full = "nic:\n  uplinks:\n";
  for (int i = 0; i < 16; ++i) {
    full += "    - {name: up" + std::to_string(i) + ", device: d" +
            (i < 15 ? ", path_id: " + std::to_string(i + 1) : std::string()) + "}\n";
  }
  CHECK(parse(full).uplinks[15].path_id == 0);
}

TEST_CASE("the dataplane configs built from a config are accepted") {
  const NicConfig c = parse(uplinks(5) + "  seed: 9\n  spray: {mode: weighted}\n" +
                            "  reorder: {window: 64, hold_timeout_us: 0.5, max_qps: 32}\n");
  const SprayEngineConfig s = spray_engine_config(c);
  CHECK(s.check().empty());
  CHECK(s.mode == SprayMode::kWeighted);
  CHECK(s.layout == PpcidLayout::kTsHigh);
  CHECK(s.seed == 9);
  REQUIRE(s.path_ids.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(s.path_ids[i] == c.uplinks[i].path_id);
  CHECK_NOTHROW(SprayEngine(s));
  const ReorderConfig r = reorder_config(c);
  CHECK(r.check().empty());
  CHECK(r.window == 64);
  CHECK(r.hold_timeout_ns == 500);
  CHECK(r.max_qps == 32);
  CHECK(r.max_buffered == 65536);
  CHECK(rc_engine_config(c).check().empty());
}

TEST_CASE("errors name the file, the key and what is allowed") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"switch: {}", "test.yaml: switch: unknown key (allowed here: nic)"},
      {"nic: []", "test.yaml: nic: must be a map, got a list"},
      {"nic: {}", "test.yaml: nic.uplinks: required: a list of 1 to 16 uplinks"},
      {uplinks(17), "test.yaml: nic.uplinks: at most 16 uplinks, got 17"},
      {one_uplink("  hots: {device: x}\n"),
       "test.yaml: nic.hots: unknown key (allowed here: name|seed|mempool_mbufs|mbuf_data_room|"
       "host|uplinks|spray|receive|reorder|placement|control|rc_engine|probe|idle_backoff|"
       "anomaly|cc|transport|irn)"},
      {one_uplink("  cc: {mode: bbr}\n"),
       "test.yaml: nic.cc.mode: must be one of dcqcn|dcqcn-connectx|dcqcn-paper|dctcp|timely|hpcc|"
       "none, got \"bbr\""},
      {one_uplink("  cc: {rp: {rpg_time_rest: 300}}\n"),
       "test.yaml: nic.cc.rp.rpg_time_rest: not a DCQCN parameter (allowed: dce_tcp_g, "
       "dce_tcp_rtt, initial_alpha_value, rate_reduce_monitor_period, rate_to_set_on_first_cnp, "
       "rpg_min_dec_fac, rpg_min_rate, rpg_max_rate, rpg_time_reset, rpg_byte_reset, "
       "rpg_threshold, rpg_ai_rate, clamp_tgt_rate, clamp_tgt_rate_after_time_inc, "
       "rpg_hai_rate)"},
      {one_uplink("  cc: {rp: {dce_tcp_g: 1024}}\n"),
       "test.yaml: nic.cc.rp.dce_tcp_g: must be a number in [0, 1023], got \"1024\""},
      {one_uplink("  cc: {rp: {rpg_threshold: 1.5}}\n"),
       "test.yaml: nic.cc.rp.rpg_threshold: must be a whole number (stages)"},
      {one_uplink("  cc: {cnp_dscp: 64}\n"),
       "test.yaml: nic.cc.cnp_dscp: must be an integer in [0, 63], got \"64\""},
      {one_uplink("  cc: {ack_class: low}\n"),
       "test.yaml: nic.cc.ack_class: must be one of data|high, got \"low\""},
      {"nic:\n  uplinks: [{name: up0, device: a}, {name: up0, device: b}]",
       "test.yaml: nic.uplinks[1].name: uplink \"up0\" defined twice"},
      {"nic:\n  host: {device: h}\n  uplinks: [{name: host, device: a}]",
       "test.yaml: nic.uplinks[0].name: \"host\" is already the host port's name"},
      {"nic:\n  uplinks: [{name: up0}]", "test.yaml: nic.uplinks[0].device: required"},
      {"nic:\n  uplinks: [{name: up0, device: a, pathid: 1}]",
       "test.yaml: nic.uplinks[0].pathid: unknown key (allowed here: name|device|path_id|"
       "peer_mac|link)"},
      {"nic:\n  uplinks: [{name: a, device: a, path_id: 3}, {name: b, device: b, path_id: 3}]",
       "test.yaml: nic.uplinks[1].path_id: path id 3 is already uplink \"a\"'s: path ids must be "
       "unique"},
      {uplinks(3) + "    - {name: up3, device: d, path_id: 16}\n",
       "test.yaml: nic.uplinks[3].path_id: must be in [0, 15] with ppcid_layout ts-high "
       "(path-high allows [0, 255]), got 16"},
      {"nic:\n  spray: {ppcid_layout: path-high}\n  uplinks: [{name: a, device: a, path_id: 256}]",
       "test.yaml: nic.uplinks[0].path_id: must be an integer in [0, 255], got \"256\""},
      {"nic:\n  uplinks: [{name: a, device: a, path_id: -1}]",
       "test.yaml: nic.uplinks[0].path_id: must be an integer in [0, 255], got \"-1\""},
      {"nic:\n  uplinks: [{name: a, device: a, peer_mac: \"02:00:00:00:00\"}]",
       "test.yaml: nic.uplinks[0].peer_mac: must be a MAC address such as 02:00:00:00:00:01, got "
       "\"02:00:00:00:00\""},
      {"nic:\n  uplinks: [{name: a, device: a, link: {rate_gbps: fast}}]",
       "test.yaml: nic.uplinks[0].link.rate_gbps: must be a number in [0.001, 10000], got "
       "\"fast\""},
      {"nic:\n  uplinks: [{name: a, device: a, link: {up: maybe}}]",
       "test.yaml: nic.uplinks[0].link.up: must be true|false, got \"maybe\""},
      {"nic:\n  uplinks: [{name: a, device: a, link: {jitter_ns: 5}}]",
       "test.yaml: nic.uplinks[0].link.jitter_ns: unknown key (allowed here: rate_gbps|delay_ns|"
       "ber|loss|up)"},
      {one_uplink("  host: {name: h}\n"), "test.yaml: nic.host.device: required"},
      {one_uplink("  spray: {mode: random}\n"),
       "test.yaml: nic.spray.mode: must be one of flow|rr|weighted|adaptive, got \"random\""},
      {one_uplink("  spray: {ppcid_layout: ts_high}\n"),
       "test.yaml: nic.spray.ppcid_layout: must be one of ts-high|path-high, got \"ts_high\""},
      {one_uplink("  mbuf_data_room: 512\n"),
       "test.yaml: nic.mbuf_data_room: must be an integer in [1024, 65535], got \"512\""},
      {one_uplink("  reorder: {path_mtu: 1500}\n"),
       "test.yaml: nic.reorder.path_mtu: must be one of 0|256|512|1024|2048|4096, got \"1500\""},
      {one_uplink("  rc_engine: {op: send}\n"),
       "test.yaml: nic.rc_engine.op: must be one of write|read, got \"send\""},
      {one_uplink("  reorder: {window: 0}\n"),
       "test.yaml: nic.reorder.window: must be an integer in [1, 16384], got \"0\""},
      {one_uplink("  reorder: {hold_timeout_us: 0}\n"),
       "test.yaml: nic.reorder.hold_timeout_us: must be a number in [0.001, 1e+06], got \"0\""},
      {one_uplink("  reorder: {max_qps: 1048576}\n"),
       "test.yaml: nic.reorder.max_qps: max_qps x window must be at most 16777216 ring slots, got "
       "1048576 x 256"},
      {one_uplink("  reorder: {max_buffered: 0}\n"),
       "test.yaml: nic.reorder.max_buffered: must be an integer in [1, 4194304], got \"0\""},
      {one_uplink("  control: {period_ms: 0}\n"),
       "test.yaml: nic.control.period_ms: must be an integer in [1, 3600000], got \"0\""},
      {one_uplink(kHost + "  rc_engine: {qps: 2}\n"),
       "test.yaml: nic.rc_engine: only used when there is no host (then the RC traffic engine "
       "plays the host): remove rc_engine or host"},
      {one_uplink("  rc_engine: {mtu: 2048}\n"),
       "test.yaml: nic.rc_engine.mtu: must be one of 1024|4096, got \"2048\""},
      {one_uplink("  rc_engine: {role: client}\n"),
       "test.yaml: nic.rc_engine.role: must be one of requester|responder|both, got \"client\""},
      {one_uplink("  rc_engine: {qps: 0}\n"),
       "test.yaml: nic.rc_engine.qps: must be an integer in [1, 65536], got \"0\""},
      {one_uplink("  rc_engine: {max_in_flight: 64}\n"),
       "test.yaml: nic.rc_engine.max_in_flight: must be an integer in [66, 8388607], got \"64\""},
      {one_uplink("  rc_engine: {message_bytes: 0x80000001}\n"),
       "test.yaml: nic.rc_engine.message_bytes: must be an integer in [1, 2147483648], got "
       "\"0x80000001\""},
      {one_uplink("  rc_engine: {local_ip: 10.0.0.1/24}\n"),
       "test.yaml: nic.rc_engine.local_ip: must be an IPv4 address such as 10.0.0.1, got "
       "\"10.0.0.1/24\""},
      {one_uplink("  rc_engine: {peer_ip: 10.0.0.256}\n"),
       "test.yaml: nic.rc_engine.peer_ip: must be an IPv4 address such as 10.0.0.1, got "
       "\"10.0.0.256\""},
      {one_uplink("  rc_engine: {local_mac: \"02:00\"}\n"),
       "test.yaml: nic.rc_engine.local_mac: must be a MAC address such as 02:00:00:00:00:01, got "
       "\"02:00\""},
      {one_uplink("  rc_engine: {first_qp: 1}\n"),
       "test.yaml: nic.rc_engine.first_qp: must be an integer in [2, 16777215], got \"1\""},
      {one_uplink("  rc_engine: {first_qp: 0xFFFFFE}\n"),
       "test.yaml: nic.rc_engine.first_qp: QPs 0xfffffe to 0x1000001 (qps 4) run past the 24-bit "
       "QP number 0xffffff"},
      {one_uplink("  rc_engine: {qps: 2, peer_first_qp: 0xFFFFFF}\n"),
       "test.yaml: nic.rc_engine.peer_first_qp: QPs 0xffffff to 0x1000000 (qps 2) run past the "
       "24-bit QP number 0xffffff"},
      {one_uplink("  rc_engine: {first_psn: 0x1000000}\n"),
       "test.yaml: nic.rc_engine.first_psn: must be an integer in [0, 16777215], got "
       "\"0x1000000\""},
      {one_uplink("  rc_engine: {dscp: 64}\n"),
       "test.yaml: nic.rc_engine.dscp: must be an integer in [0, 63], got \"64\""},
      {one_uplink("  rc_engine: {retransmit_timeout_us: soon}\n"),
       "test.yaml: nic.rc_engine.retransmit_timeout_us: must be a number in [1, 1e+07], got "
       "\"soon\""},
      {one_uplink("  rc_engine: {msgs: 1}\n"),
       "test.yaml: nic.rc_engine.msgs: unknown key (allowed here: qps|role|op|message_bytes|mtu|"
       "max_in_flight|messages|retransmit_timeout_us|local_ip|peer_ip|local_mac|peer_mac|"
       "first_qp|peer_first_qp|first_psn|dscp|entropy|entropy_values|echo_entropy)"},
      // Cross-checks fail at the key the file gave.
      {one_uplink("  reorder: {max_qps: 4}\n  rc_engine: {qps: 8}\n"),
       "test.yaml: nic.rc_engine.qps: rc_engine.qps (8) must be at most reorder.max_qps (4): "
       "each QP needs a reorder context"},
      {one_uplink("  reorder: {max_qps: 2}\n"),
       "test.yaml: nic.reorder.max_qps: rc_engine.qps (4) must be at most reorder.max_qps (2): "
       "each QP needs a reorder context"},
      {one_uplink("  reorder: {hold_timeout_us: 70000}\n"),
       "test.yaml: nic.reorder.hold_timeout_us: reorder.hold_timeout_us (70000) must be below "
       "rc_engine.retransmit_timeout_us (67108.864): a gap held that long is retransmitted "
       "anyway"},
      {one_uplink("  rc_engine: {retransmit_timeout_us: 50}\n"),
       "test.yaml: nic.rc_engine.retransmit_timeout_us: reorder.hold_timeout_us (100) must be "
       "below rc_engine.retransmit_timeout_us (50): a gap held that long is retransmitted anyway"},
      {one_uplink("  mbuf_data_room: 2048\n  rc_engine: {mtu: 4096}\n"),
       "test.yaml: nic.mbuf_data_room: must be at least 4302 to hold a frame at rc_engine.mtu "
       "4096 (headroom 128 + MTU + 78 of headers), got 2048"},
  };
  for (const auto& [yaml, expected] : cases) {
    INFO(yaml);
    CHECK(error_of(yaml) == expected);
  }
  CHECK(error_of("nic: [").find("test.yaml: YAML syntax error") == 0);

  // The cc block: absent, none; present, dcqcn unless it says; rp keys over the preset.
  CHECK(!parse(one_uplink("")).cc.enabled());
  const control::NicConfig cc = parse(one_uplink(
      "  cc: {min_time_between_cnps_us: 0, ack_class: high, rp: {rpg_time_reset: 55, "
      "rpg_ai_rate: 40}}\n"));
  CHECK(cc.cc.mode == control::CcMode::kDcqcn);
  CHECK(cc.cc.cnp_interval_ns() == 0);
  CHECK(parse(one_uplink("  cc: {mode: dcqcn-connectx}\n")).cc.cnp_interval_ns() == 4'000);
  CHECK(parse(one_uplink("  cc: {mode: dcqcn-paper}\n")).cc.cnp_interval_ns() == 50'000);
  CHECK(cc.cc.ack_class == control::AckClass::kHigh);
  const DcqcnConfig d = cc.cc.dcqcn(100.0);
  CHECK(d.rpg_time_reset_ns == 55'000);
  CHECK(d.rpg_ai_rate_mbps == 40);
  CHECK(d.rpg_hai_rate_mbps == dcqcn_fabric_defaults(100.0).rpg_hai_rate_mbps);
  CHECK(parse(one_uplink("  cc: {mode: dcqcn-paper}\n")).cc.dcqcn(100.0).dce_tcp_g ==
        dcqcn_paper_defaults(100.0).dce_tcp_g);
  CHECK(parse(one_uplink("  cc: {mode: none}\n")).cc.mode == control::CcMode::kNone);

  // What the cross-checks refuse is fine without the RC engine or with reordering off.
  CHECK(parse(one_uplink(kHost + "  reorder: {max_qps: 2, hold_timeout_us: 70000}\n")).host);
  CHECK(parse(one_uplink("  receive: none\n")).rc_engine);
  CHECK(parse(one_uplink(kHost + "  mbuf_data_room: 2048\n")).mbuf_data_room == 2048);
}

TEST_CASE("receive: the three models, their blocks, and what each refuses") {
  const NicConfig none = parse(one_uplink("  receive: none\n"));
  CHECK(none.receive == ReceiveModel::kNone);
  CHECK_FALSE(none.reorder_enabled());
  CHECK_FALSE(rc_engine_config(none).ooo_placement);

  const NicConfig ooo =
      parse(one_uplink("  receive: ooo-placement\n  placement: {window: 512, nak_delay_us: 20.5}\n"
                       "  rc_engine: {max_in_flight: 256}\n"));
  CHECK(ooo.receive == ReceiveModel::kOooPlacement);
  CHECK_FALSE(ooo.reorder_enabled());
  CHECK(ooo.placement.window == 512);
  CHECK(ooo.placement.nak_delay_ns == 20'500);
  const RcTrafficEngineConfig e = rc_engine_config(ooo);
  CHECK(e.ooo_placement);
  CHECK(e.placement_config().window == 512);
  CHECK(e.placement_config().nak_delay_ns == 20'500);
  CHECK(e.requester_config(0).selective_retransmit);
  // window 0: the requester's max_in_flight, which it can never overflow.
  const NicConfig ooo_auto = parse(one_uplink("  receive: ooo-placement\n"));
  CHECK(rc_engine_config(ooo_auto).placement_config().window == 129);
  // The reorder engine's limits do not apply without it.
  CHECK(parse(one_uplink("  receive: ooo-placement\n  rc_engine: {qps: 5000}\n")).rc_engine);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {one_uplink("  receive: ooo\n"),
       "test.yaml: nic.receive: must be one of reorder-buffer|ooo-placement|none, got \"ooo\""},
      {one_uplink(kHost + "  receive: ooo-placement\n"),
       "test.yaml: nic.receive: ooo-placement is the RC traffic engine's placement responder; "
       "with a host port the host's RDMA stack receives: reorder-buffer or none"},
      {one_uplink("  reorder: {enabled: false}\n"),
       "test.yaml: nic.reorder.enabled: replaced by nic.receive: reorder-buffer | ooo-placement | "
       "none (enabled: false is receive: none)"},
      {one_uplink("  receive: none\n  reorder: {window: 64}\n"),
       "test.yaml: nic.reorder: the reorder engine's settings, used only with receive: "
       "reorder-buffer (receive is none): remove the block or change receive"},
      {one_uplink("  placement: {nak_delay_us: 5}\n"),
       "test.yaml: nic.placement: the placement responder's settings, used only with receive: "
       "ooo-placement (receive is reorder-buffer): remove the block or change receive"},
      {one_uplink("  receive: ooo-placement\n  placement: {window: 70000}\n"),
       "test.yaml: nic.placement.window: must be an integer in [0, 65536], got \"70000\""},
      {one_uplink("  receive: ooo-placement\n  placement: {bitmap: 5}\n"),
       "test.yaml: nic.placement.bitmap: unknown key (allowed here: window|nak_delay_us)"},
      {one_uplink("  receive: ooo-placement\n  placement: {nak_delay_us: 70000}\n"),
       "test.yaml: nic.placement.nak_delay_us: placement.nak_delay_us (70000) must be below "
       "rc_engine.retransmit_timeout_us (67108.864): a hole waited for that long is resent by "
       "the timer anyway"},
  };
  for (const auto& [yaml, expected] : cases) {
    INFO(yaml);
    CHECK(error_of(yaml) == expected);
  }
}

TEST_CASE("a missing nic file is named") {
  try {
    load_nic_config("/nonexistent/nic.yaml");
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == "/nonexistent/nic.yaml: cannot open file");
  }
}

TEST_CASE("configs/nic-spray-pcap.yaml loads: a host on pcap, four uplinks to pcap, rr") {
  const NicConfig c = load_nic_config(SPRAYNET_SOURCE_DIR "/configs/nic-spray-pcap.yaml");
  REQUIRE(c.host.has_value());
  CHECK(c.host->device.rfind("net_pcap", 0) == 0);
  CHECK_FALSE(c.rc_engine.has_value());
  REQUIRE(c.uplinks.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(c.uplinks[i].device.rfind("net_pcap", 0) == 0);
    CHECK(c.uplinks[i].device.find("tx_pcap=") != std::string::npos);
    CHECK(c.uplinks[i].path_id == i + 1);
  }
  CHECK(c.spray.mode == SprayMode::kRoundRobin);
  CHECK(spray_engine_config(c).check().empty());

  // Every nic-*.yaml in configs/ is a NIC config (the others are switch configs).
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SPRAYNET_SOURCE_DIR "/configs")) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("nic-", 0) != 0 || entry.path().extension() != ".yaml") continue;
    INFO(file);
    CHECK_NOTHROW(load_nic_config(entry.path().string()));
    ++loaded;
  }
  CHECK(loaded >= 1);
}

TEST_CASE("the help names every key with its default") {
  const std::string help = nic_config_help();
  for (const char* key :
       {"nic:", "name:", "seed:", "mempool_mbufs:", "mbuf_data_room:", "host:", "device:",
        "uplinks:", "path_id:", "peer_mac:", "link:", "rate_gbps:", "delay_ns:", "ber:", "loss:",
        "up:", "spray:", "mode:", "ppcid_layout:", "receive:", "reorder:", "placement:",
        "nak_delay_us:", "window:", "hold_timeout_us:", "max_qps:", "max_buffered:", "path_mtu:",
        "control:", "period_ms:", "rc_engine:", "qps:", "role:", "op:", "message_bytes:", "mtu:",
        "max_in_flight:", "messages:", "retransmit_timeout_us:", "local_ip:", "peer_ip:",
        "local_mac:", "first_qp:",
        "peer_first_qp:", "first_psn:", "dscp:", "transport:", "irn:", "rto_low_us:",
        "rto_low_packets:"}) {
    INFO(key);
    CHECK(help.find(key) != std::string::npos);
  }
  // Defaults and allowed values as the parser has them.
  for (const char* text :
       {"mode: rr", "flow | rr | weighted | adaptive", "ppcid_layout: ts-high",
        "ts-high | path-high", "window: 256", "1..16384", "hold_timeout_us: 100 ",
        "max_qps: 4096", "max_buffered: 65536", "period_ms: 200", "qps: 4", "role: both",
        "requester | responder | both", "op: write", "write | read", "path_mtu: 0", "mtu: 1024",
        "1024 | 4096", "max_in_flight: 129", "66..8388607", "messages: 100",
        "retransmit_timeout_us: 67108.864", "local_ip: 10.0.0.1", "peer_ip: 10.0.0.2",
        "local_mac: 02:53:50:00:0a:01", "peer_mac: 02:53:50:00:0b:01", "first_qp: 0x11",
        "first_psn: 0", "dscp: 26", "mbuf_data_room: 4480", "seed: 1", "rate_gbps: 100",
        "delay_ns: 1000", "0..15 with ts-high, 0..255 with path-high", "1..16 uplinks",
        "transport: rc", "rto_low_us: 100", "rto_low_packets: 3"}) {
    INFO(text);
    CHECK(help.find(text) != std::string::npos);
  }
}

TEST_CASE("nic probe: absent by default, defaults, the uplink's peer_mac, every key") {
  CHECK_FALSE(parse(one_uplink()).probe.has_value());
  const NicConfig d = parse(one_uplink("  probe: {}\n"));
  REQUIRE(d.probe.has_value());
  const LatencyProbeConfig defaults;
  CHECK(d.probe->uplink == "up0");
  CHECK(d.probe->uplink_index == 0);
  CHECK(d.probe->probe.rate_pps == defaults.rate_pps);
  CHECK(d.probe->probe.dst_ip == defaults.dst_ip);
  CHECK(d.probe->probe.dst_port == defaults.dst_port);
  CHECK(d.probe->probe.change_threshold_ns == defaults.change_threshold_ns);
  CHECK(d.probe->probe.eth.dst == defaults.eth.dst);

  const NicConfig c = parse(
      "nic:\n  uplinks:\n    - {name: a, device: net_ring0}\n"
      "    - {name: b, device: net_ring1, peer_mac: \"02:53:50:00:0b:fe\"}\n"
      "  probe: {uplink: b, rate_pps: 25000, src_ip: 10.1.0.1, dst_ip: 10.2.0.1, src_port: 4000,\n"
      "          dst_port: 9999, dscp: 10, ttl: 9, frame_length: 128, change_threshold_us: 2.5,\n"
      "          max_samples: 1000, sequence_window: 512}\n");
  const NicProbeSettings& p = *c.probe;
  CHECK(p.uplink == "b");
  CHECK(p.uplink_index == 1);
  CHECK(p.probe.eth.dst == MacAddress{0x02, 0x53, 0x50, 0x00, 0x0b, 0xfe});  // b's peer_mac
  CHECK(p.probe.rate_pps == 25000);
  CHECK(p.probe.src_ip == 0x0A010001);
  CHECK(p.probe.dst_ip == 0x0A020001);
  CHECK(p.probe.src_port == 4000);
  CHECK(p.probe.dst_port == 9999);
  CHECK(p.probe.dscp == 10);
  CHECK(p.probe.ttl == 9);
  CHECK(p.probe.frame_length == 128);
  CHECK(p.probe.change_threshold_ns == 2500);
  CHECK(p.probe.max_samples == 1000);
  CHECK(p.probe.sequence_window == 512);
  CHECK(parse(one_uplink("  probe: {dst_mac: \"02:00:00:00:00:09\"}\n")).probe->probe.eth.dst ==
        MacAddress{0x02, 0x00, 0x00, 0x00, 0x00, 0x09});
}

TEST_CASE("nic probe: errors name the key and what is allowed") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {one_uplink("  probe: {uplink: up7}\n"),
       "test.yaml: nic.probe.uplink: must name an uplink (up0), got \"up7\""},
      {one_uplink("  probe: {dst_port: 4791}\n"),
       "test.yaml: nic.probe.dst_port: must not be 4791 (RoCEv2's): probes are plain UDP the "
       "NIC recognises by port"},
      {one_uplink("  probe: {frame_length: 65}\n"),
       "test.yaml: nic.probe.frame_length: must be 0 (the smallest probe) or 66..9000, got 65"},
      {one_uplink("  probe: {rate_pps: 0}\n"), "test.yaml: nic.probe.rate_pps: "},
      {one_uplink("  probe: {ttl: 1}\n"), "test.yaml: nic.probe.ttl: "},
      {one_uplink("  probe: {mode: x}\n"), "test.yaml: nic.probe.mode: unknown key"},
  };
  for (const auto& [yaml, expected] : cases) {
    INFO(yaml);
    CHECK(error_of(yaml).rfind(expected, 0) == 0);
  }
}

TEST_CASE("idle_backoff: the programs' default, read, and bounded") {
  const NicConfig d = parse(one_uplink());
  CHECK(d.idle_backoff.max_sleep_us == 100);
  CHECK(d.idle_backoff.idle_polls == 256);
  const NicConfig c = parse(one_uplink("  idle_backoff: {max_sleep_us: 20, idle_polls: 0}\n"));
  CHECK(c.idle_backoff.max_sleep_us == 20);
  CHECK(c.idle_backoff.idle_polls == 0);
  CHECK(error_of(one_uplink("  idle_backoff: {idle_polls: -1}\n")) ==
        "test.yaml: nic.idle_backoff.idle_polls: must be an integer in [0, 100000000], got \"-1\"");
}

TEST_CASE("NIC names are checked like the switch's; a key with no value is refused") {
  CHECK(error_of("nic:\n  uplinks: [{name: 'up 0', device: net_ring0}]\n") ==
        "test.yaml: nic.uplinks[0].name: \"up 0\" may hold only letters, digits, '_', '-' and '.'");
  CHECK(error_of(one_uplink("  host: {name: '7', device: net_ring_host}\n")) ==
        "test.yaml: nic.host.name: \"7\" must not be digits only (telemetry would read it as an "
        "index)");
  CHECK(error_of(one_uplink("  name: ''\n")) == "test.yaml: nic.name: \"\" must not be empty");
  CHECK(error_of(one_uplink("  reorder:\n    window:\n")) ==
        "test.yaml: nic.reorder.window: has no value: give one, or leave the key out for its "
        "default");
}

TEST_CASE("rc_engine entropy: fixed by default; oblivious and reps with their values; echo on with reps") {
  const auto load = [](const std::string& engine) {
    return parse("nic:\n  uplinks:\n    - {name: up0, device: net_null0}\n  rc_engine: {" +
                 engine + "}\n");
  };
  const NicConfig d = load("qps: 1");
  CHECK(d.rc_engine->entropy == "fixed");
  CHECK_FALSE(d.rc_engine->echo_entropy);
  CHECK(rc_engine_config(d).entropy_values == 0);
  const NicConfig o = load("qps: 1, entropy: oblivious, entropy_values: 64");
  CHECK(rc_engine_config(o).entropy_values == 64);
  CHECK_FALSE(rc_engine_config(o).entropy_reps);
  CHECK_FALSE(rc_engine_config(o).echo_entropy);
  const NicConfig r = load("qps: 1, entropy: reps");
  CHECK(rc_engine_config(r).entropy_values == 256);
  CHECK(rc_engine_config(r).entropy_reps);
  CHECK(rc_engine_config(r).echo_entropy);
  CHECK(rc_engine_config(load("qps: 1, echo_entropy: true")).echo_entropy);
  CHECK_THROWS_WITH(load("entropy: random"), Catch::Contains("nic.rc_engine.entropy") &&
                                                 Catch::Contains("fixed|oblivious|reps"));
  CHECK_THROWS_WITH(load("entropy: reps, entropy_values: 100"),
                    Catch::Contains("nic.rc_engine.entropy_values") &&
                        Catch::Contains("power of two"));
  CHECK_THROWS_WITH(load("entropy_values: 1"), Catch::Contains("[2, 16384]"));
}

TEST_CASE("transport irn: the RC engine's IRN, its BDP cap, its two timeouts, what it refuses") {
  // Defaults: behind the reorder engine (which waited: NAK at once), RTO_high 320, RTO_low 100.
  const NicConfig d = parse(one_uplink("  transport: irn\n"));
  CHECK(d.irn);
  CHECK(d.rc_engine->retransmit_timeout_ns == 320'000);
  const RcTrafficEngineConfig e = rc_engine_config(d);
  CHECK(e.check().empty());
  CHECK(e.irn);
  CHECK(e.ooo_placement);
  CHECK(e.placement_config().sack);
  CHECK(e.placement_config().ack_every_packet);
  CHECK(e.placement_config().nak_delay_ns == 0);
  CHECK(e.requester_config(0).irn);
  CHECK(e.requester_config(0).retransmit_timeout_ns == 320'000);
  CHECK(e.requester_config(0).retransmit_timeout_low_ns == 100'000);
  CHECK(e.requester_config(0).rto_low_packets == 3);
  CHECK_FALSE(rc_engine_config(parse(one_uplink())).irn);

  // Out-of-order placement itself, a BDP cap of 25 (below rc's 66), every key given.
  const NicConfig o = parse(one_uplink(
      "  transport: irn\n  receive: ooo-placement\n  placement: {nak_delay_us: 20}\n"
      "  irn: {rto_low_us: 50, rto_low_packets: 2}\n"
      "  rc_engine: {max_in_flight: 25, retransmit_timeout_us: 400}\n"));
  const RcTrafficEngineConfig oe = rc_engine_config(o);
  CHECK(oe.check().empty());
  CHECK(oe.placement_config().nak_delay_ns == 20'000);
  CHECK(oe.placement_config().window == 25);
  CHECK(oe.requester_config(0).max_in_flight == 25);
  CHECK(oe.requester_config(0).check().empty());
  CHECK(oe.requester_config(0).retransmit_timeout_ns == 400'000);
  CHECK(oe.requester_config(0).retransmit_timeout_low_ns == 50'000);
  CHECK(oe.requester_config(0).rto_low_packets == 2);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {one_uplink("  transport: tcp\n"),
       "test.yaml: nic.transport: must be one of rc|irn, got \"tcp\""},
      {one_uplink(kHost + "  transport: irn\n"),
       "test.yaml: nic.transport: irn is the RC traffic engine's transport; with a host port the "
       "host's RDMA stack is the transport: rc"},
      {one_uplink("  transport: irn\n  receive: none\n"),
       "test.yaml: nic.receive: transport irn places out of order: reorder-buffer (the reorder "
       "engine in front of IRN's responder) or ooo-placement, not none"},
      {one_uplink("  irn: {rto_low_us: 50}\n"),
       "test.yaml: nic.irn: IRN's settings, used only with transport: irn: remove the block"},
      {one_uplink("  transport: irn\n  irn: {rto_low_us: 500}\n"),
       "test.yaml: nic.irn.rto_low_us: irn.rto_low_us (500) must be at most "
       "rc_engine.retransmit_timeout_us (320), RTO_high under transport irn"},
      {one_uplink("  transport: irn\n  irn: {rto: 5}\n"),
       "test.yaml: nic.irn.rto: unknown key (allowed here: rto_low_us|rto_low_packets)"},
      {one_uplink("  transport: irn\n  rc_engine: {max_in_flight: 1}\n"),
       "test.yaml: nic.rc_engine.max_in_flight: must be an integer in [2, 65536], got \"1\""},
      {one_uplink("  rc_engine: {max_in_flight: 25}\n"),
       "test.yaml: nic.rc_engine.max_in_flight: must be an integer in [66, 8388607], got \"25\""},
      {one_uplink("  transport: irn\n  rc_engine: {op: read}\n"),
       "test.yaml: nic.rc_engine.op: must be write with transport: irn (IRN's placement "
       "responder answers WRITEs only), got read"},
  };
  for (const auto& [yaml, expected] : cases) {
    INFO(yaml);
    CHECK(error_of(yaml) == expected);
  }
}
