// fabric_emu's configuration, topology and workload plans: what the flags and YAML say, the
// nodes and cables a topology makes, and the QPs a workload gives each host.
#include "fabric/fabric_config.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "control/config_reader.h"
#include "fabric/config_keys.h"
#include "fabric/flow_size_cdf.h"
#include "fabric/topology.h"
#include "fabric/workload.h"

using namespace spraynet;
using namespace spraynet::fabric;

TEST_CASE("durations, seeds, modes and events parse; bad ones say what is accepted") {
  CHECK(parse_duration_ns("500us") == 500'000);
  CHECK(parse_duration_ns("1.5ms") == 1'500'000);
  CHECK(parse_duration_ns("2000ns") == 2000);
  CHECK(parse_duration_ns("1s") == 1'000'000'000);
  CHECK_THROWS_WITH(parse_duration_ns("5 parsecs"), Catch::Contains("ns | us | ms | s"));
  CHECK_THROWS_AS(parse_duration_ns("-1us"), std::invalid_argument);
  CHECK(parse_seed_range("1-20") == std::pair<uint64_t, uint64_t>{1, 20});
  CHECK(parse_seed_range("7") == std::pair<uint64_t, uint64_t>{7, 7});
  CHECK_THROWS_AS(parse_seed_range("9-3"), std::invalid_argument);
  CHECK(parse_mode_list("ecmp,spray-noreorder") ==
        std::vector<FabricMode>{FabricMode::kEcmp, FabricMode::kSprayNoReorder});
  CHECK_THROWS_WITH(parse_mode_list("ecmp,sprey"), Catch::Contains("spray-noreorder"));
  CHECK_THROWS_WITH(parse_mode_list("ecmp,ecmp"), Catch::Contains("twice"));

  const FabricEvent down = parse_fabric_event("link-down:leaf0-spine3@500us");
  CHECK(down.kind == FabricEvent::Kind::kLinkDown);
  CHECK(down.target == "leaf0-spine3");
  CHECK(down.at_ns == 500'000);
  const FabricEvent ber = parse_fabric_event("ber:leaf1-spine2#1=1e-6@1ms");
  CHECK(ber.kind == FabricEvent::Kind::kBer);
  CHECK(ber.target == "leaf1-spine2#1");
  CHECK(ber.value == Approx(1e-6));
  const FabricEvent bg = parse_fabric_event("background:spine2=0.85");
  CHECK(bg.kind == FabricEvent::Kind::kBackground);
  CHECK(bg.at_ns == 0);
  CHECK_THROWS_WITH(parse_fabric_event("link-down:leaf0-spine3"), Catch::Contains("no time"));
  CHECK_THROWS_WITH(parse_fabric_event("rate:leaf0-spine3@1us"), Catch::Contains("=VALUE"));
  CHECK_THROWS_WITH(parse_fabric_event("flap:leaf0-spine3@1us"), Catch::Contains("accepted"));
  CHECK_THROWS_AS(parse_fabric_event("background:spine2=1.5"), std::invalid_argument);
  // Background on a link, timed, and as a square wave.
  const FabricEvent wave = parse_fabric_event("background:h0-p1.leaf0=0.8@1ms~500us");
  CHECK(wave.kind == FabricEvent::Kind::kBackground);
  CHECK(wave.target == "h0-p1.leaf0");
  CHECK(wave.value == Approx(0.8));
  CHECK(wave.at_ns == 1'000'000);
  CHECK(wave.toggle_ns == 500'000);
  CHECK(parse_fabric_event("background:spine2=0.5@2ms").toggle_ns == 0);
  CHECK_THROWS_WITH(parse_fabric_event("rate:leaf0-spine3=50@1us~1us"),
                    Catch::Contains("only background takes ~P"));
  CHECK_THROWS_WITH(parse_fabric_event("background:spine2=0.5@1ms~0us"), Catch::Contains("~P"));
  CHECK_THROWS_WITH(parse_fabric_event("background:spine2=0.5@1ms~soon"),
                    Catch::Contains("background:SWITCH|LINK"));
}

TEST_CASE("YAML: nic_control_period_us, and its bad values") {
  CHECK(FabricConfig{}.nic_control_period_ns == 200'000'000);
  const FabricConfig c =
      parse_fabric_config_yaml("fabric:\n  nic_control_period_us: 200\n", "f.yaml");
  CHECK(c.nic_control_period_ns == 200'000);
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  nic_control_period_us: 0\n", "f.yaml"),
                    Catch::Contains("f.yaml") && Catch::Contains("nic_control_period_us"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  nic_control_period_us: fast\n", "f.yaml"),
                    Catch::Contains("nic_control_period_us"));
  FabricConfig d;
  d.nic_control_period_ns = 10;
  CHECK(d.check() == "nic-control-period-us: at least 1");
}

TEST_CASE("YAML: every key read, unknown keys and bad values name the file and the key") {
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  leaves: 4\n  spines: 2\n  hosts_per_leaf: 3\n  mode: [ecmp, dlb]\n"
      "  duration: 3ms\n  seeds: 2-5\n  udp_sport: fixed\n  hash_seed: same\n"
      "  event: ['link-down:leaf0-spine1@10us']\n  pfc_watchdog_action: forward\n",
      "f.yaml");
  CHECK(c.leaves == 4);
  CHECK(c.spines == 2);
  CHECK(c.hosts() == 12);
  CHECK(c.modes == std::vector<FabricMode>{FabricMode::kEcmp, FabricMode::kDlb});
  CHECK(c.duration_ns == 3'000'000);
  CHECK(c.seed_first == 2);
  CHECK(c.seed_last == 5);
  CHECK(c.udp_sport_fixed);
  CHECK(c.same_hash_seed);
  CHECK(c.pfc_watchdog_action == "forward");
  REQUIRE(c.events.size() == 1);
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  spinez: 3\n", "f.yaml"),
                    Catch::Contains("f.yaml") && Catch::Contains("spinez"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  pfc_watchdog_action: alert\n", "f.yaml"),
                    Catch::Contains("pfc_watchdog_action") && Catch::Contains("drop|forward"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  mtu: 1500\n", "f.yaml"),
                    Catch::Contains("fabric.mtu") && Catch::Contains("4096"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  mode: ecmp,bogus\n", "f.yaml"),
                    Catch::Contains("fabric.mode"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  leaves: 1\n", "f.yaml"),
                    Catch::Contains("permutation"));
  CHECK(c.op == "write");
  CHECK(parse_fabric_config_yaml("fabric:\n  op: read\n", "f.yaml").op == "read");
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  op: send\n", "f.yaml"),
                    Catch::Contains("fabric.op") && Catch::Contains("write|read"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  op: read\n  workload: incast\n", "f.yaml"),
                    Catch::Contains("op read") && Catch::Contains("permutation"));
}

TEST_CASE("receive: the NICs' model per mode, and the pairs that contradict each other") {
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  receive: ooo-placement\n  placement_nak_delay_us: 40\n", "f.yaml");
  CHECK(c.receive == "ooo-placement");
  CHECK(c.placement_nak_delay_ns == 40'000);
  CHECK(c.effective_receive(FabricMode::kSpray) == "ooo-placement");
  CHECK(c.effective_receive(FabricMode::kEcmp) == "ooo-placement");
  const FabricConfig d;  // reorder-buffer: today's "engine on in spray mode only"
  CHECK(d.effective_receive(FabricMode::kSpray) == "reorder-buffer");
  CHECK(d.effective_receive(FabricMode::kSprayNoReorder) == "none");
  CHECK(d.effective_receive(FabricMode::kEcmp) == "none");
  // DRILL chooses per packet at the leaf, so it reorders like spraying and gets the engine.
  CHECK(d.effective_receive(FabricMode::kDrill) == "reorder-buffer");
  CHECK(d.effective_receive(FabricMode::kDlb) == "none");
  CHECK_THROWS_WITH(
      parse_fabric_config_yaml("fabric:\n  receive: ooo-placement\n  mode: spray,spray-noreorder\n",
                               "f.yaml"),
      Catch::Contains("fabric.receive") &&
          Catch::Contains("spray-noreorder is spray with receive none"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  receive: on\n", "f.yaml"),
                    Catch::Contains("fabric.receive") && Catch::Contains("ooo-placement"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  reorder: off\n", "f.yaml"),
                    Catch::Contains("fabric.reorder") && Catch::Contains("replaced by receive"));
}

TEST_CASE("filters, one-way link events, per-host PPCID layouts, fabric paths, checksum restore") {
  const FabricEvent f = parse_fabric_event("filter:h8-leaf1=udp4791-nonzero-csum");
  CHECK(f.kind == FabricEvent::Kind::kFilter);
  CHECK(f.target == "h8-leaf1");
  CHECK(f.value == 1);
  CHECK(f.at_ns == 0);
  const FabricEvent off = parse_fabric_event("filter:h8=off@2ms");
  CHECK(off.value == 0);
  CHECK(off.at_ns == 2'000'000);
  CHECK_THROWS_WITH(parse_fabric_event("filter:h8=tcp"),
                    Catch::Contains("udp4791-nonzero-csum") && Catch::Contains("=off"));
  const FabricEvent oneway = parse_fabric_event("rate:spine3>leaf1=10@500us");
  CHECK(oneway.target == "spine3>leaf1");
  CHECK_THROWS_WITH(parse_fabric_event("link-down:spine3>leaf1@1us"),
                    Catch::Contains("only ber and rate"));

  CHECK(parse_ppcid_layout_host("h3=path-high") ==
        std::pair<std::string, std::string>{"h3", "path-high"});
  CHECK_THROWS_WITH(parse_ppcid_layout_host("h3=sideways"),
                    Catch::Contains("ppcid-layout-host") && Catch::Contains("ts-high | path-high"));
  CHECK_THROWS_WITH(parse_ppcid_layout_host("leaf0=ts-high"), Catch::Contains("HOST like h3"));
  CHECK(parse_fabric_paths("auto") == 0);
  CHECK(parse_fabric_paths("8") == 8);
  CHECK_THROWS_WITH(parse_fabric_paths("0"), Catch::Contains("auto or 1..256"));

  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  ppcid_layout_host: [h3=path-high]\n  fabric_paths: 8\n"
      "  nic_restore_checksum: false\n  event: ['filter:h3=udp4791-nonzero-csum']\n",
      "f.yaml");
  CHECK(c.host_ppcid_layout("h3") == "path-high");
  CHECK(c.host_ppcid_layout("h4") == "ts-high");
  CHECK(c.fabric_paths == 8);
  CHECK_FALSE(c.nic_restore_checksum);
  CHECK_THROWS_WITH(
      parse_fabric_config_yaml("fabric:\n  ppcid_layout_host: [h99=ts-high]\n", "f.yaml"),
      Catch::Contains("fabric.ppcid_layout_host") && Catch::Contains("h0..h15"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml(
                        "fabric:\n  ppcid_layout_host: [h1=ts-high, h1=path-high]\n", "f.yaml"),
                    Catch::Contains("given twice"));
  CHECK_THROWS_WITH(
      parse_fabric_config_yaml("fabric:\n  ppcid_layout_host: [h1=diagonal]\n", "f.yaml"),
      Catch::Contains("fabric.ppcid_layout_host") && Catch::Contains("ts-high | path-high"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  fabric_paths: 32\n", "f.yaml"),
                    Catch::Contains("fabric.fabric_paths") && Catch::Contains("at most 16"));
  CHECK(
      parse_fabric_config_yaml("fabric:\n  fabric_paths: 32\n  ppcid_layout: path-high\n", "f.yaml")
          .fabric_paths == 32);
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  fabric_paths: many\n", "f.yaml"),
                    Catch::Contains("fabric.fabric_paths") && Catch::Contains("auto or 1..256"));
  CHECK_THROWS_WITH(
      parse_fabric_config_yaml("fabric:\n  nic_restore_checksum: maybe\n", "f.yaml"),
      Catch::Contains("fabric.nic_restore_checksum") && Catch::Contains("true|false"));
  CHECK_THROWS_WITH(
      parse_fabric_config_yaml("fabric:\n  event: ['filter:h1=drop-all']\n", "f.yaml"),
      Catch::Contains("fabric.event") && Catch::Contains("udp4791-nonzero-csum"));

  // The topology gives the one host its layout and every spraying NIC the path count.
  const Topology t(c, FabricMode::kSpray, 1);
  CHECK(t.hosts()[3].nic.spray.ppcid_layout == PpcidLayout::kPathHigh);
  CHECK(t.hosts()[4].nic.spray.ppcid_layout == PpcidLayout::kTsHigh);
  CHECK(t.hosts()[4].nic.spray.fabric_paths == 8);
  // One direction of a link: only the sending end.
  const auto ends = t.find_link_ends("spine3>leaf1");
  REQUIRE(ends.size() == 1);
  CHECK(t.node_name(ends[0].first) == "spine3");
  CHECK(t.find_link_ends("leaf1-spine3").size() == 2);
  CHECK(t.find_link_ends("spine3>leaf9").empty());
  CHECK(t.find_host("h3") == 3u);
  CHECK_FALSE(t.find_host("h99"));
}

TEST_CASE("every fabric-*.yaml in configs/ loads") {
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(SPRAYNET_SOURCE_DIR "/configs")) {
    if (!e.path().filename().string().starts_with("fabric-")) continue;
    INFO(e.path().string());
    REQUIRE_NOTHROW(load_fabric_config(e.path().string()));
    ++loaded;
  }
  CHECK(loaded >= 1);
}

TEST_CASE("topology: nodes, ports, cables, groups and routes of a leaf-spine fabric") {
  FabricConfig c;
  c.leaves = 3;
  c.spines = 4;
  c.hosts_per_leaf = 2;
  c.links_per_spine = 2;
  c.planes = 2;
  const Topology t(c, FabricMode::kEcmp, 1);
  CHECK(t.hosts().size() == 6);
  CHECK(t.switches().size() == 2 * (3 + 4));
  // Cables: per plane, one per host and one per (leaf, spine, parallel link).
  CHECK(t.cables().size() == 2 * (6 + 3 * 4 * 2));
  const SwitchSpec& leaf = t.switches()[t.leaf_index(1, 2)];
  CHECK(leaf.name == "p1.leaf2");
  CHECK(leaf.config.ports.size() == 2 + 4 * 2);
  CHECK(leaf.leaf_group[2] == -1);
  REQUIRE(leaf.leaf_group[0] >= 0);
  CHECK(leaf.config.groups[leaf.leaf_group[0]].ports.size() == 8);
  const SwitchSpec& spine = t.switches()[t.spine_index(0, 3)];
  CHECK(spine.config.ports.size() == 3 * 2);
  CHECK(spine.config.routes.size() == 3);
  CHECK(spine.config.pfc.watchdog_action == "drop");
  FabricConfig forward = c;
  forward.pfc_watchdog_action = "forward";
  CHECK(Topology(forward, FabricMode::kEcmp, 1).switches()[0].config.pfc.watchdog_action ==
        "forward");
  CHECK(t.hosts()[5].ip == Topology::host_ip(2, 1));
  CHECK(t.hosts()[0].nic.uplinks.size() == 2);  // one per plane
  CHECK(t.find_cables("leaf0-spine3").size() == 2);   // both parallel links
  CHECK(t.find_cables("leaf0-spine3#1").size() == 1);
  CHECK(t.find_cables("p1.leaf0-spine3").size() == 2);  // the plane prefix carries over
  CHECK(t.find_cables("leaf9-spine3").empty());
  CHECK(t.find_switch("spine2").has_value());
  CHECK_FALSE(t.find_switch("spine9").has_value());
  // Per-switch hash seeds differ; "same" makes them equal.
  CHECK(t.switches()[0].config.hash.seed != t.switches()[1].config.hash.seed);
  c.same_hash_seed = true;
  const Topology same(c, FabricMode::kEcmp, 1);
  CHECK(same.switches()[0].config.hash.seed == same.switches()[1].config.hash.seed);
  // Modes: spray NICs name fabric paths and reorder; ecmp-qp hashes DestQP.
  const Topology spray(c, FabricMode::kSpray, 1);
  CHECK(spray.hosts()[0].nic.spray.fabric_paths == 16);
  CHECK(spray.hosts()[0].nic.receive == control::ReceiveModel::kReorderBuffer);
  CHECK(t.hosts()[0].nic.receive == control::ReceiveModel::kNone);
  CHECK(Topology(c, FabricMode::kSprayNoReorder, 1).hosts()[0].nic.receive ==
        control::ReceiveModel::kNone);
  FabricConfig ooo = c;
  ooo.receive = "ooo-placement";
  CHECK(Topology(ooo, FabricMode::kSpray, 1).hosts()[0].nic.receive ==
        control::ReceiveModel::kOooPlacement);
  CHECK(Topology(ooo, FabricMode::kEcmp, 1).hosts()[0].nic.receive ==
        control::ReceiveModel::kOooPlacement);
  FabricConfig none = c;
  none.receive = "none";
  CHECK(Topology(none, FabricMode::kSpray, 1).hosts()[0].nic.receive ==
        control::ReceiveModel::kNone);
  CHECK(Topology(c, FabricMode::kEcmpQp, 1).switches()[0].config.hash.dest_qp);
}

TEST_CASE("topology: three tiers, pods, super-spines, their names, routes and YAML") {
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  tiers: 3\n  pods: 2\n  leaves: 3\n  spines: 4\n  super_spines: 2\n"
      "  hosts_per_leaf: 2\n  links_per_spine: 2\n  links_per_super: 2\n  planes: 2\n"
      "  spine_super_gbps: 400\n",
      "f.yaml");
  CHECK(c.tiers == 3);
  CHECK(c.pods == 2);
  CHECK(c.total_leaves() == 6);
  CHECK(c.hosts() == 12);
  CHECK(c.spine_super_rate() == 400);
  CHECK(c.leaf_spine_rate() == c.link_gbps);
  // 4 spines x 2 links at the leaf, 2 super-spines x 2 links at the spine: 32 path choices.
  CHECK(c.effective_ppcid_layout() == "path-high");
  const Topology t(c, FabricMode::kEcmp, 1);
  CHECK(t.hosts().size() == 12);
  // Per plane: 6 leaves, 2 x 4 spines, 4 super-spine planes of 2.
  CHECK(t.switches().size() == 2 * (6 + 8 + 8));
  // Per plane: a cable per host, per (leaf, spine, link), per (pod, spine, super-spine, link).
  CHECK(t.cables().size() == 2 * (12 + 6 * 4 * 2 + 2 * 4 * 2 * 2));
  const SwitchSpec& leaf = t.switches()[t.leaf_index(1, 4)];  // pod 1's second leaf
  CHECK(leaf.name == "p1.pod1.leaf1");
  CHECK(leaf.pod == 1);
  CHECK(leaf.leaf_group[3] >= 0);   // pod 1's leaf 0
  CHECK(leaf.leaf_group[4] == -1);  // itself
  // Pod 0's leaves: a /24 each over every uplink, so that a spine can be withdrawn towards one.
  for (uint32_t d = 0; d < 3; ++d) {
    REQUIRE(leaf.leaf_group[d] >= 0);
    CHECK(leaf.config.groups[leaf.leaf_group[d]].ports.size() == 8);
  }
  CHECK(leaf.config.routes.size() == 2 + 5);  // its hosts, every other leaf
  CHECK(leaf.pod_group.empty());
  const SwitchSpec& spine = t.switches()[t.spine_index(0, 3, 1)];
  CHECK(spine.name == "pod1.spine3");
  CHECK(spine.tier == Tier::kSpine);
  CHECK(spine.config.ports.size() == 3 * 2 + 2 * 2);
  CHECK(spine.config.ports[3 * 2].link.rate_gbps == 400);
  CHECK(spine.config.routes.size() == 3 + 1);  // its pod's leaves, the other pod
  REQUIRE(spine.pod_group[0] >= 0);
  CHECK(spine.config.groups[spine.pod_group[0]].ports.size() == 4);
  const SwitchSpec& super = t.switches()[t.super_index(1, 3, 1)];
  CHECK(super.name == "p1.super3.1");
  CHECK(super.tier == Tier::kSuper);
  CHECK(super.config.ports.size() == 2 * 2);
  CHECK(super.config.routes.size() == 2);
  CHECK(t.hosts()[7].ip == Topology::host_ip(0, 1, 1));  // pod 1, leaf 0, host 1: 10.1.0.2
  CHECK(t.hosts()[7].ip == 0x0A010002u);
  // Cable names at every tier, with the short forms.
  CHECK(t.find_cables("pod0.leaf1-pod0.spine3").size() == 2);
  CHECK(t.find_cables("pod0.leaf1-spine3").size() == 2);       // the pod carries over
  CHECK(t.find_cables("p1.pod0.leaf1-spine3#1").size() == 1);  // plane and pod
  CHECK(t.find_cables("pod1.spine3-super3.1").size() == 2);
  CHECK(t.find_cables("pod1.spine3-super3.1#0").size() == 1);
  CHECK(t.find_cables("p1.pod1.spine3-super3.1").size() == 2);  // the plane carries over
  CHECK(t.find_cables("pod1.spine3-super2.1").empty());         // not its super-spine plane
  CHECK(t.find_link_ends("super3.1>pod1.spine3").size() == 2);  // one direction, both links
  CHECK(t.find_switch("p1.super0.0").has_value());
  // Spray: the spine sprays up and down by the path id, up by its next digit (id / the leaf's
  // 8 uplinks); the NICs rotate through 8 x 4 ids, one per (leaf uplink, spine link up).
  const Topology spray(c, FabricMode::kSpray, 1);
  const SwitchSpec& sspine = spray.switches()[spray.spine_index(0, 3, 1)];
  CHECK(sspine.config.groups[sspine.pod_group[0]].mode == "ecmp");
  CHECK(sspine.config.groups[sspine.pod_group[0]].spray_path_divisor == 8);
  CHECK(sspine.config.groups[0].spray_path_divisor == 1);  // down to its pod's leaf 0
  REQUIRE(sspine.config.tcam.rules.size() == 1);
  CHECK(sspine.config.tcam.rules[0].action == "spray");
  CHECK(sspine.config.tcam.rules[0].dst.length == 0);  // every destination
  CHECK(spray.hosts()[0].nic.spray.fabric_paths == 32);
  FabricConfig narrow = c;
  narrow.ppcid_layout = "ts-high";  // 16 ids: fewer than the 32 pairs
  CHECK(Topology(narrow, FabricMode::kSpray, 1).hosts()[0].nic.spray.fabric_paths == 16);
  FabricConfig two_tier;
  CHECK(Topology(two_tier, FabricMode::kSpray, 1).hosts()[0].nic.spray.fabric_paths == 16);
  // Refused: pods on two tiers, a third tier too big.
  FabricConfig two;
  two.pods = 2;
  CHECK(two.check().starts_with("pods:"));
  FabricConfig four = c;
  four.tiers = 4;
  CHECK(four.check() == "tiers: 2 | 3");
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  tiers: 4\n", "f.yaml"),
                    Catch::Contains("f.yaml") && Catch::Contains("tiers"));
}

TEST_CASE("oversubscription per tier sets the link rates from the counts") {
  using Ratios = std::vector<std::pair<double, double>>;
  CHECK(parse_oversubscription("1:1,2:1") == Ratios{{1, 1}, {2, 1}});
  CHECK(parse_oversubscription("3:1.5") == Ratios{{3, 1.5}});
  CHECK(format_oversubscription({{1, 1}, {2, 1}}) == "1:1,2:1");
  for (const char* bad : {"", "2", "2:", ":1", "0:1", "1:-1", "1:1,", "1:1,,2:1", "a:b", "1:1:1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_oversubscription(bad),
                      Catch::Contains("A:B per tier, leaf first, A and B > 0"));
  }
  // 2 pods x 2 leaves x 8 hosts, 4 spines x 2 links, 4 super-spines: the leaf 1:1 gives 8 hosts'
  // 800 Gbit/s to 8 uplinks (100 each); the spine 2:1 gives 4 x 100 down to 4 links up, 50 each.
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  tiers: 3\n  pods: 2\n  leaves: 2\n  spines: 4\n  links_per_spine: 2\n"
      "  super_spines: 4\n  hosts_per_leaf: 8\n  oversubscription: 1:1,2:1\n",
      "f.yaml");
  CHECK(c.check().empty());
  CHECK(c.leaf_spine_rate() == 100);
  CHECK(c.spine_super_rate() == 50);
  const Topology t(c, FabricMode::kEcmp, 1);
  CHECK(t.switches()[t.spine_index(0, 0, 0)].config.ports[4].link.rate_gbps == 50);   // up
  CHECK(t.switches()[t.spine_index(0, 0, 0)].config.ports[3].link.rate_gbps == 100);  // down
  FabricConfig leaf_only = c;
  leaf_only.oversubscription = {{4, 1}};  // 800 Gbit/s of hosts over 8 uplinks of 25
  CHECK(leaf_only.leaf_spine_rate() == 25);
  CHECK(leaf_only.spine_super_rate() == c.link_gbps);
  // Refused, naming the key and what it allows.
  FabricConfig both = c;
  both.leaf_spine_gbps = 200;
  CHECK(both.check().starts_with("oversubscription: sets the leaf-spine rate"));
  FabricConfig both_spine = c;
  both_spine.spine_super_gbps = 200;
  CHECK(both_spine.check().starts_with("oversubscription: its second ratio"));
  FabricConfig two_tier;
  two_tier.oversubscription = {{1, 1}, {2, 1}};
  CHECK(two_tier.check() ==
        "oversubscription: 1:1,2:1 gives 2 ratios, a 2-tier fabric has 1 (leaf)");
  two_tier.oversubscription = {{1000, 1}};
  CHECK(two_tier.check().starts_with(
      "oversubscription: 1000:1 makes the leaf-spine links 0.1 Gbit/s"));
  CHECK(two_tier.check().ends_with("allowed 1..1600"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  oversubscription: 1-1\n", "f.yaml"),
                    Catch::Contains("f.yaml") && Catch::Contains("oversubscription") &&
                        Catch::Contains("A:B per tier"));
}

TEST_CASE("workloads: permutation crosses leaves one-to-one, allreduce rings, alltoall pairs") {
  FabricConfig c;
  c.leaves = 4;
  c.hosts_per_leaf = 4;
  c.qps_per_host = 2;
  const Topology t(c, FabricMode::kEcmp, 3);
  const WorkloadPlan perm(c, t, 3, nullptr);
  CHECK_FALSE(perm.finite());
  CHECK(perm.flows().size() == 16 * 2);
  std::map<uint32_t, int> received;
  for (const QpFlow& f : perm.flows()) {
    CHECK(t.hosts()[f.src].leaf != t.hosts()[f.dst].leaf);
    ++received[f.dst];
  }
  CHECK(received.size() == 16);  // a permutation: every host receives, exactly qps_per_host
  for (const auto& [h, n] : received) CHECK(n == 2);
  // Another seed, another permutation and other QP numbers.
  const WorkloadPlan other(c, t, 4, nullptr);
  bool differs = false;
  for (size_t i = 0; i < perm.flows().size(); ++i) {
    differs = differs || perm.flows()[i].dst != other.flows()[i].dst ||
              perm.flows()[i].src_qpn != other.flows()[i].src_qpn;
  }
  CHECK(differs);
  // Each engine is a valid RC engine config.
  for (const auto& e : perm.engines()) CHECK(e.check().empty());

  c.workload = Workload::kAllreduce;
  c.channels = 2;
  c.bytes = 1 << 20;
  const WorkloadPlan ring(c, t, 3, nullptr);
  CHECK(ring.finite());
  CHECK(ring.ranks() == 16);
  CHECK(ring.messages_total() == 2u * 15 * 16 * 2);  // 2(n-1) steps x ranks x channels
  CHECK(ring.initial_posts().size() == 16 * 2);       // step 0 of every rank and channel
  // The completion of a step makes the next rank's next step due, on the same channel.
  const Post& first = ring.initial_posts()[0];
  std::vector<Post> due;
  WorkloadPlan copy = ring;
  copy.on_completion(first.host, first.qp_index, 1000, due);
  REQUIRE(due.size() == 1);
  CHECK(due[0].host != first.host);
  CHECK(due[0].at_ns == 1000);

  c.workload = Workload::kAlltoall;
  c.bytes = 4096;
  const WorkloadPlan a2a(c, t, 3, nullptr);
  CHECK(a2a.flows().size() == 16u * 15);
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const QpFlow& f : a2a.flows()) pairs.insert({f.src, f.dst});
  CHECK(pairs.size() == 16u * 15);

  c.workload = Workload::kCdf;
  c.duration_ns = 5'000'000;
  const FlowSizeCdf cdf = FlowSizeCdf::builtin("alistorage2019");
  const WorkloadPlan poisson(c, t, 3, &cdf);
  CHECK(poisson.messages_total() == poisson.initial_posts().size());
  CHECK(poisson.messages_total() > 50);
  for (const Post& p : poisson.initial_posts()) CHECK(p.at_ns < c.duration_ns);
  // Offered load within 15% of the asked one over the window (Poisson, 16 hosts, 5 ms).
  const double offered = static_cast<double>(poisson.bytes_total()) * 8.0 /
                         (16 * c.link_gbps * 1e9 * c.duration_ns * 1e-9);
  CHECK(offered == Approx(c.load).epsilon(0.15));
}

TEST_CASE("YAML: a key given twice is refused with both lines; events past the end are refused") {
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  spines: 2\n  spines: 4\n", "f.yaml"),
                    Catch::Contains("f.yaml: fabric.spines: duplicate key") &&
                        Catch::Contains("line 2 and again at line 3"));
  // Nested maps and lists of maps too (a scenario's runs, a switch's groups).
  CHECK_THROWS_WITH(
      control::ConfigNode::load_string("a:\n  - b: 1\n    b: 2\n", "g.yaml"),
      Catch::Contains("g.yaml: a[0].b: duplicate key"));
  CHECK_NOTHROW(control::ConfigNode::load_string("a:\n  - b: 1\n  - b: 2\n", "g.yaml"));
  FabricConfig c;
  c.duration_ns = 100'000;
  c.events.push_back(parse_fabric_event("link-down:leaf0-spine1@5ms"));
  CHECK_THAT(c.check(), Catch::Contains("after the end of the run") && Catch::Contains("100 us"));
  c.events.back() = parse_fabric_event("link-down:leaf0-spine1@100us");
  CHECK(c.check().empty());
  // cdf runs until done, within 5 durations + 1 ms: an event inside that is fine.
  c.workload = Workload::kCdf;
  c.events.back() = parse_fabric_event("link-down:leaf0-spine1@1400us");
  CHECK(c.check().empty());
  c.events.back() = parse_fabric_event("link-down:leaf0-spine1@1600us");
  CHECK_FALSE(c.check().empty());
}

TEST_CASE("YAML: output keys, and durations without a unit") {
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  json: r.json\n  timeseries: t.csv\n  plots: p\n  csv: c\n", "f.yaml");
  CHECK(c.json_file == "r.json");
  CHECK(c.timeseries_file == "t.csv");
  CHECK(c.plots_dir == "p");
  CHECK(c.csv_dir == "c");
  // Zero needs no unit (issue 39: --warmup 0 was refused); any other bare number does.
  CHECK(parse_duration_ns("0") == 0);
  CHECK_THROWS_WITH(parse_duration_ns("5"), Catch::Contains("has no unit"));
  CHECK_THROWS_WITH(parse_duration_ns("-5us"), Catch::Contains("cannot be negative"));
  CHECK(parse_duration_ns("0us") == 0);
}

TEST_CASE("YAML: warmup 0 is none, network_load is the per-host load converted") {
  const FabricConfig w =
      parse_fabric_config_yaml("fabric:\n  duration: 1ms\n  warmup: 0\n", "f.yaml");
  CHECK(w.warmup() == 0);
  CHECK(FabricConfig{}.warmup() == FabricConfig{}.duration_ns / 5);
  // 2 leaves x 2 spines x 4 hosts: share 4/7, uplinks / host ports 0.5.
  const FabricConfig c = parse_fabric_config_yaml(
      "fabric:\n  leaves: 2\n  spines: 2\n  hosts_per_leaf: 4\n  workload: cdf\n  "
      "network_load: 0.6\n",
      "f.yaml");
  CHECK(c.host_load() == Approx(0.6 * 0.5 / (4.0 / 7.0)));
  CHECK(c.offered_network_load() == Approx(0.6));
  // A load over it replaces it.
  const FabricConfig l = parse_fabric_config_yaml("fabric:\n  load: 0.3\n", "g.yaml", c);
  CHECK(l.network_load == 0);
  CHECK(l.host_load() == Approx(0.3));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  workload: cdf\n  load: 0.3\n  "
                                             "network_load: 0.3\n",
                                             "f.yaml"),
                    Catch::Contains("not both"));
  CHECK_THROWS_WITH(parse_fabric_config_yaml("fabric:\n  load: 0.3\n", "f.yaml"),
                    Catch::Contains("only with workload cdf"));
}

TEST_CASE("one table: every key is a flag and a YAML key, read the same way, refused by name") {
  const std::vector<ConfigKey>& keys = config_keys();
  std::set<std::string> names;
  for (const ConfigKey& k : keys) {
    CHECK(names.insert(k.name).second);  // each once
    CHECK_FALSE(k.help.empty());
    CHECK(k.yaml_key().find('-') == std::string::npos);
  }
  // Values that are no value of anything: every key but the free-text ones refuses them in YAML,
  // naming the file and its key.
  const std::set<std::string> free_text = {"json", "timeseries", "csv", "plots"};
  for (const ConfigKey& k : keys) {
    if (free_text.count(k.name) != 0) continue;
    const std::string yaml = "fabric:\n  " + k.yaml_key() + ": " +
                             (k.repeatable ? "['#bogus#']" : "'#bogus#'") + "\n";
    CHECK_THROWS_WITH(parse_fabric_config_yaml(yaml, "f.yaml"),
                      Catch::Contains("f.yaml") && Catch::Contains("fabric." + k.yaml_key()));
  }
  // The same values through the flags' setters and through YAML: the same config.
  const std::vector<std::pair<std::string, std::string>> given = {
      {"leaves", "4"},           {"dlb-gap-us", "4.35"},
      {"mode", "ecmp,letflow"},  {"letflow-timeout-us", "250"},
      {"pfc", "off"},            {"cnp-dscp", "40"},
      {"event", "link-down:leaf0-spine1@10us"},
      {"duration", "3ms"},       {"seeds", "2-3"}};
  FabricConfig by_flags;
  std::string yaml = "fabric:\n";
  for (const auto& [name, value] : given) {
    const auto k = std::find_if(keys.begin(), keys.end(),
                                [&](const ConfigKey& key) { return key.name == name; });
    REQUIRE(k != keys.end());
    k->set(by_flags, value);
    yaml += "  " + k->yaml_key() + ": " + (k->repeatable ? "['" + value + "']" : "'" + value + "'") +
            "\n";
  }
  const FabricConfig by_yaml = parse_fabric_config_yaml(yaml, "f.yaml");
  CHECK(by_yaml.leaves == 4);
  CHECK(by_flags.leaves == 4);
  CHECK(by_yaml.dlb_gap_ns == 4350);  // rounded, not truncated to 4349
  CHECK(by_flags.dlb_gap_ns == 4350);
  CHECK(by_yaml.modes == std::vector<FabricMode>{FabricMode::kEcmp, FabricMode::kLetflow});
  CHECK(by_flags.modes == by_yaml.modes);
  CHECK(by_yaml.letflow_timeout_ns == 250'000);
  CHECK(by_flags.letflow_timeout_ns == 250'000);
  CHECK_FALSE(by_yaml.pfc);
  CHECK_FALSE(by_flags.pfc);
  CHECK(by_yaml.cc.cnp_dscp == 40);
  CHECK(by_flags.cc.cnp_dscp == 40);
  CHECK(by_yaml.events.size() == 1);
  CHECK(by_flags.events.size() == 1);
  CHECK(by_yaml.duration_ns == 3'000'000);
  CHECK(by_flags.duration_ns == 3'000'000);
  CHECK(by_yaml.seed_last == 3);
  CHECK(by_flags.seed_last == 3);
  // A YAML list of modes is the comma list.
  CHECK(parse_fabric_config_yaml("fabric:\n  mode: [dlb, letflow]\n", "f.yaml").modes ==
        std::vector<FabricMode>{FabricMode::kDlb, FabricMode::kLetflow});
}
