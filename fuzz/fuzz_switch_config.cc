// switch_emu's config loader on arbitrary YAML: it loads, or throws ConfigError ("file: key:
// reason"); any other exception or a crash is a finding. What loads converts to the dataplane's
// TCAM config and rules.
#include <string>

#include "control/config_reader.h"
#include "control/switch_config.h"
#include "fuzz/support.h"

using namespace spraynet;
using spraynet::control::ConfigError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  control::SwitchConfig c;
  try {
    c = control::parse_switch_config(control::ConfigNode::load_string(text, "fuzz.yaml"));
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("fuzz.yaml: ", 0) == 0);
    return 0;
  }
  (void)control::to_tcam_config(c.tcam);
  for (const auto& r : c.tcam.rules) (void)control::to_tcam_rule(r);
  for (const auto& p : c.ports) FUZZ_CHECK(c.port_index(p.name) >= 0);
  return 0;
}
