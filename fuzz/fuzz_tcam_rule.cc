// The TCAM rule parser as telemetry's tcam_add and the config's tcam.rules[] use it: YAML text
// -> parse_tcam_rule (a bad rule is a ConfigError naming the key) -> to_tcam_rule -> Tcam::add,
// commit, and a lookup of packets at the rule's corners. A YAML map with `rules:` is a list of
// rules (tcam.rules[]), anything else one rule. Any exception but ConfigError is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include "control/config_reader.h"
#include "control/switch_config.h"
#include "dataplane/forwarding/tcam.h"
#include "dataplane/wire/packet_parser.h"
#include "fuzz/support.h"

using namespace spraynet;
using spraynet::control::ConfigError;
using spraynet::control::ConfigNode;

namespace {

control::SwitchConfig* switch_config = nullptr;

ParsedPacket packet_at(const TcamRule& r, bool low) {
  ParsedPacket p;
  p.kind = PacketKind::kRoce;
  p.src_ip = r.src_ip;
  p.dst_ip = r.dst_ip;
  p.ip_proto = r.ip_proto;
  p.src_port = low ? r.src_port_lo : r.src_port_hi;
  p.dst_port = low ? r.dst_port_lo : r.dst_port_hi;
  p.dest_qp = low ? r.dest_qp_lo : r.dest_qp_hi;
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::init_eal(*argc > 0 ? (*argv)[0] : nullptr);  // rte_acl allocates from EAL's heap
  // Two ports and a partition for the rules to name.
  switch_config = new control::SwitchConfig(control::parse_switch_config(ConfigNode::load_string(
      "ports:\n  - {name: p0, device: 'net_null0'}\n  - {name: p1, device: 'net_null1'}\n"
      "tcam:\n  partitions:\n    - {name: spray, capacity: 4}\n    - {name: roce, capacity: 1}\n",
      "fuzz-base.yaml")));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<TcamRule> rules;
  try {
    const ConfigNode root = ConfigNode::load_string(text, "tcam_add");
    if (root.has("rules")) {
      for (const ConfigNode& n : root.list("rules")) {
        rules.push_back(control::to_tcam_rule(control::parse_tcam_rule(*switch_config, n)));
      }
    } else {
      rules.push_back(control::to_tcam_rule(control::parse_tcam_rule(*switch_config, root)));
    }
  } catch (const ConfigError& e) {
    FUZZ_CHECK(e.what() != nullptr && e.what()[0] != '\0');
    return 0;
  }
  if (rules.size() > 64) return 0;
  Tcam tcam(control::to_tcam_config(switch_config->tcam));
  std::vector<const TcamRule*> admitted;
  for (const TcamRule& r : rules) {
    const TcamRefusal why = tcam.add(r);
    // What the parser accepted is a valid rule (its partition may still be unknown).
    FUZZ_CHECK(why != TcamRefusal::kInvalidRule);
    if (why == TcamRefusal::kNone) admitted.push_back(&r);
  }
  FUZZ_CHECK(tcam.commit());
  for (const TcamRule* rule : admitted) {
    const TcamRule& r = *rule;
    const ParsedPacket lo = packet_at(r, true);
    const ParsedPacket hi = packet_at(r, false);
    const ParsedPacket* pkts[2] = {&lo, &hi};
    TcamMatch m[2];
    tcam.classify(pkts, 2, m);
    // Each corner packet matches this rule or one that outranks it.
    FUZZ_CHECK(m[0].matched && m[1].matched);
  }
  tcam.reclaim_retired();
  return 0;
}
