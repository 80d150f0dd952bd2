#include "control/telemetry_commands.h"

#include <rte_telemetry.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>

namespace spraynet::control {

namespace {

// The one registry of this process: DPDK's callback has no context argument (see header).
struct Registry {
  std::mutex mutex;
  std::map<std::string, TelemetryCommands::Handler, std::less<>> handlers;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string telemetry_name(std::string name) {
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '/';
    if (!ok) c = '_';
  }
  return name;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A float's name and scale on the socket (the header lists the rules).
std::pair<std::string, double> float_unit(const std::string& key) {
  const size_t slash = key.rfind('/');
  const std::string head = slash == std::string::npos ? "" : key.substr(0, slash + 1);
  const std::string leaf = key.substr(head.size());
  // The segment above the leaf: "completion_ns" of "rc/completion_ns/mean".
  std::string parent = head.empty() ? "" : head.substr(0, head.size() - 1);
  if (const size_t up = parent.rfind('/'); up != std::string::npos) parent.erase(0, up + 1);
  if (ends_with(leaf, "_gbps")) return {head + leaf.substr(0, leaf.size() - 5) + "_mbps", 1e3};
  for (const char* unit : {"_ns", "_us", "_ms", "_bytes", "_pps", "_mbps", "_kbps"}) {
    if (ends_with(leaf, unit) || ends_with(parent, unit)) return {key, 1.0};
  }
  if (leaf == "ber" || leaf == "frame_loss_ratio" || leaf == "loss_rate") {
    return {key + "_ppq", 1e15};
  }
  return {key + "_ppm", 1e6};
}

// x in a unit `scale` times smaller, as a whole JSON number (saturating); NaN and infinities
// stay floats (to_telemetry sends them as text: JSON has no number for them).
nlohmann::json whole(double x, double scale) {
  const double v = std::nearbyint(x * scale);
  if (!std::isfinite(v)) return x;
  if (v >= 18446744073709551615.0) return std::numeric_limits<uint64_t>::max();
  if (v >= 0) return static_cast<uint64_t>(v);
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// An array of numbers: whole in the unit of `key` when any is a float (the key renamed).
nlohmann::json flat_array(std::string& key, const nlohmann::json& a) {
  const bool floats =
      std::any_of(a.begin(), a.end(), [](const auto& v) { return v.is_number_float(); });
  if (!floats) return a;
  const auto [name, scale] = float_unit(key);
  key = name;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : a) out.push_back(v.is_number() ? whole(v.get<double>(), scale) : v);
  return out;
}

void flatten_into(nlohmann::json& out, const std::string& prefix, const nlohmann::json& obj) {
  for (const auto& [k, v] : obj.items()) {
    std::string name = telemetry_name(prefix.empty() ? k : prefix + "/" + k);
    if (v.is_object()) {
      flatten_into(out, name, v);
    } else if (v.is_array() && !v.empty() && v.front().is_object()) {
      // Arrays of objects (per-class counters, ...) become "name/<index>/field" entries.
      for (size_t i = 0; i < v.size(); ++i) flatten_into(out, name + "/" + std::to_string(i), v[i]);
    } else if (v.is_array()) {
      nlohmann::json a = flat_array(name, v);
      out[name] = std::move(a);
    } else if (v.is_boolean()) {
      out[name] = uint64_t{v.get<bool>() ? 1u : 0u};
    } else if (v.is_number_float()) {
      const auto [unit_name, scale] = float_unit(name);
      out[unit_name] = whole(v.get<double>(), scale);
    } else if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= 0) {
      out[name] = static_cast<uint64_t>(v.get<int64_t>());
    } else {
      out[name] = v;  // strings, unsigned and negative integers, null
    }
  }
}

// A number rte_tel_data can carry: u64, or a 32-bit int; anything else as text.
bool fits_int(const nlohmann::json& v) {
  if (!v.is_number_integer() || v.is_number_unsigned()) return false;
  const int64_t x = v.get<int64_t>();
  return x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max();
}

std::string text_of(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// An array into `d` (already started or not: `start` says), by the widest type it needs.
void fill_array(rte_tel_data* d, const nlohmann::json& a) {
  const bool all_u64 = std::all_of(
      a.begin(), a.end(), [](const auto& v) { return v.is_number_unsigned() || v.is_boolean(); });
  const bool all_int = std::all_of(a.begin(), a.end(), [](const auto& v) {
    return v.is_number_unsigned() ? v.template get<uint64_t>() <= INT32_MAX : fits_int(v);
  });
  if (!a.empty() && all_u64) {
    rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
    for (const auto& v : a) {
      rte_tel_data_add_array_u64(d, v.is_boolean() ? uint64_t{v.get<bool>()} : v.get<uint64_t>());
    }
  } else if (!a.empty() && all_int) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const auto& v : a) rte_tel_data_add_array_int(d, static_cast<int>(v.get<int64_t>()));
  } else if (a.empty()) {
    rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  } else {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    for (const auto& v : a) rte_tel_data_add_array_string(d, text_of(v).c_str());
  }
}

int trampoline(const char* cmd, const char* params, rte_tel_data* d) {
  nlohmann::json reply;
  try {
    reply = TelemetryCommands::call(cmd, params == nullptr ? "" : params);
  } catch (const std::exception& e) {
    reply = {{"error", e.what()}};
  }
  return TelemetryCommands::to_telemetry(reply, d);
}

}  // namespace

nlohmann::json TelemetryCommands::flatten(const nlohmann::json& reply) {
  nlohmann::json out = nlohmann::json::object();
  if (reply.is_array() && !(!reply.empty() && reply.front().is_object())) {
    std::string key = "value";
    return flat_array(key, reply);
  }
  if (reply.is_array()) {
    // An array of objects (nic_emu's ports): "<index>/field" entries.
    for (size_t i = 0; i < reply.size(); ++i) flatten_into(out, std::to_string(i), reply[i]);
  } else if (reply.is_object()) {
    flatten_into(out, "", reply);
  }
  return out;
}

int TelemetryCommands::to_telemetry(const nlohmann::json& reply, rte_tel_data* d) {
  const nlohmann::json flat = flatten(reply);
  if (flat.is_array()) {
    fill_array(d, flat);
    return 0;
  }
  rte_tel_data_start_dict(d);
  for (const auto& [name, v] : flat.items()) {
    if (v.is_array()) {
      rte_tel_data* c = rte_tel_data_alloc();
      if (c == nullptr) continue;
      fill_array(c, v);
      rte_tel_data_add_dict_container(d, name.c_str(), c, 0);
    } else if (v.is_number_unsigned()) {
      rte_tel_data_add_dict_u64(d, name.c_str(), v.get<uint64_t>());
    } else if (fits_int(v)) {
      rte_tel_data_add_dict_int(d, name.c_str(), static_cast<int>(v.get<int64_t>()));
    } else if (!v.is_null()) {
      rte_tel_data_add_dict_string(d, name.c_str(), text_of(v).c_str());
    }
  }
  return 0;
}

nlohmann::json TelemetryCommands::call(const std::string& command, std::string_view params) {
  Handler h;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().handlers.find(command);
    if (it == registry().handlers.end() || !it->second) return {{"error", "not available"}};
    h = it->second;
  }
  try {
    return h(params);
  } catch (const std::invalid_argument& e) {
    return {{"error", e.what()}};
  }
}

void TelemetryCommands::add(const std::string& command, const std::string& help, Handler handler) {
  if (command.rfind("/spraynet/", 0) != 0) {
    throw std::invalid_argument("telemetry command must start with /spraynet/: " + command);
  }
  // DPDK 22.11 answers -EINVAL both for these and for a command registered twice; checking them
  // here leaves -EINVAL meaning only the latter (a help text of 128 bytes or more would otherwise
  // leave the command silently unregistered: it answers null).
  constexpr size_t kMaxCommand = 56;  // MAX_CMD_LEN in lib/telemetry/telemetry.c
  if (command.size() >= kMaxCommand) {
    throw std::invalid_argument("telemetry command longer than 55 bytes: " + command);
  }
  if (help.size() >= RTE_TEL_MAX_STRING_LEN) {
    throw std::invalid_argument("telemetry help of " + command + " is " +
                                std::to_string(help.size()) + " bytes; at most " +
                                std::to_string(RTE_TEL_MAX_STRING_LEN - 1));
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto [it, inserted] = registry().handlers.insert_or_assign(command, std::move(handler));
  (void)it;
  if (inserted) {
    const int rc = rte_telemetry_register_cmd(command.c_str(), trampoline, help.c_str());
    // -EINVAL also means "already registered", which happens after clear(): keep the handler.
    if (rc != 0 && rc != -EINVAL) {
      registry().handlers.erase(command);
      throw std::runtime_error("rte_telemetry_register_cmd(" + command + ") failed: " +
                               std::to_string(rc));
    }
  }
}

void TelemetryCommands::clear() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (auto& [name, h] : registry().handlers) h = nullptr;
}

}  // namespace spraynet::control
