// nic_emu's config loader on arbitrary YAML: it loads, or throws ConfigError ("file: key:
// reason"); any other exception or a crash is a finding. What loads passes the dataplane's own
// checks (nic_config.h promises it): the spray engine's, the reorder engine's and the RC traffic
// engine's configs are valid.
#include <string>

#include "control/config_reader.h"
#include "control/nic_config.h"
#include "fuzz/support.h"

using namespace spraynet;
using spraynet::control::ConfigError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  control::NicConfig c;
  try {
    c = control::parse_nic_config(control::ConfigNode::load_string(text, "fuzz.yaml"));
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("fuzz.yaml: ", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(control::spray_engine_config(c).check().empty());
  FUZZ_CHECK(control::reorder_config(c).check().empty());
  if (c.rc_engine) FUZZ_CHECK(control::rc_engine_config(c).check().empty());
  (void)control::uplink_identities(c);
  (void)control::path_id_bits(c);
  return 0;
}
