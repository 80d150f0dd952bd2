// Every setting of a fabric run, once: its name, its --help text, the values it takes and how it
// sets the config. fabric_emu's flags (--leaves 4) and the `fabric:` map of a config file or
// scenario (leaves: 4) are both read through this table, so that a new key is one entry and the
// two spellings cannot drift apart in range, default or meaning.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fabric/fabric_config.h"

namespace spraynet::fabric {

struct ConfigKey {
  std::string name;  // the flag's spelling, "hosts-per-leaf"; the YAML key has '_' for '-'
  std::string help;  // --help's text, with the default in parentheses
  // Sets the config from one value; throws std::invalid_argument with the reason only (the
  // caller names the flag, or the file and the key).
  std::function<void(FabricConfig&, const std::string&)> set;
  // The flag may be given again and the YAML value is a list, each item applied in turn (event).
  bool repeatable = false;
  // The YAML value may be a list, read as its items joined by commas (mode: [ecmp, spray]).
  bool comma_list = false;

  std::string yaml_key() const;
};

// The table, in --help's order.
const std::vector<ConfigKey>& config_keys();

}  // namespace spraynet::fabric
