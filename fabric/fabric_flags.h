// fabric_emu's flags: each a string applied over the config (the YAML file first, then the flags
// given), validated the same way either way; --help's text with its default.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fabric/fabric_config.h"

namespace spraynet::fabric {

struct Flag {
  std::string name;
  std::string help;  // --help's text, with the default in parentheses
  std::string value;
  std::function<void(FabricConfig&, const std::string&)> apply;
};

// Every flag fabric_emu takes beside the command-line-only ones (--config, --scenario, ...).
std::vector<Flag> make_flags();

}  // namespace spraynet::fabric
