// --config FILE: the `fabric:` map applied over a FabricConfig, every key checked (errors name
// the file, the key and what is allowed).
#include "fabric/fabric_config.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "control/config_reader.h"
#include "fabric/config_keys.h"

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
  const std::vector<ConfigKey>& keys = config_keys();
  if (!n.is_map()) n.fail_here("must be a map");
  for (const auto& kv : n.yaml()) {
    const std::string k = kv.first.Scalar();
    const bool known = std::any_of(keys.begin(), keys.end(),
                                   [&](const ConfigKey& key) { return key.yaml_key() == k; });
    if (known) continue;
    std::string allowed;
    for (const ConfigKey& key : keys) allowed += (allowed.empty() ? "" : "|") + key.yaml_key();
    n.fail(k, "unknown key (allowed here: " + allowed + ")");
  }
  c.source = n.file();
  if (n.has("load") && n.has("network_load")) {
    n.fail("network_load",
           "give load (a fraction of each host's line rate) or network_load (of the leaf "
           "uplinks' capacity), not both");
  }
  // In the table's order, whatever the file's, as the flags are.
  for (const ConfigKey& key : keys) {
    const std::string k = key.yaml_key();
    if (!n.has(k)) continue;
    std::vector<std::string> values;
    if (key.repeatable) {
      values = n.string_list(k);
    } else if (key.comma_list && n.yaml()[k].IsSequence()) {
      std::string joined;
      for (const std::string& v : n.string_list(k)) joined += (joined.empty() ? "" : ",") + v;
      values.push_back(joined);
    } else {
      values.push_back(n.string(k));
    }
    for (const std::string& v : values) {
      try {
        key.set(c, v);
      } catch (const std::invalid_argument& e) {
        n.fail(k, e.what());
      }
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
