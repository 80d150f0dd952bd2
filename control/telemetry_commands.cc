#include "control/telemetry_commands.h"
#include <cstdio>
#include <cmath>

#include <rte_telemetry.h>

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

rte_tel_data* array_container(const nlohmann::json& a) {
  rte_tel_data* c = rte_tel_data_alloc();
  if (c == nullptr) return nullptr;
  const bool strings = !a.empty() && a.front().is_string();
  rte_tel_data_start_array(c, strings ? RTE_TEL_STRING_VAL : RTE_TEL_U64_VAL);
  for (const auto& v : a) {
    if (strings) {
      rte_tel_data_add_array_string(c, v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
    } else {
      rte_tel_data_add_array_u64(c, v.is_number() ? v.get<uint64_t>() : uint64_t{v.is_boolean() && v.get<bool>()});
    }
  }
  return c;
}

void add_flat(rte_tel_data* d, const std::string& prefix, const nlohmann::json& obj) {
  for (const auto& [key, v] : obj.items()) {
    const std::string name = telemetry_name(prefix.empty() ? key : prefix + "/" + key);
    if (v.is_object()) {
      add_flat(d, name, v);
    } else if (v.is_array() && !v.empty() && v.front().is_object()) {
      // Arrays of objects (per-class counters, ...) become "name/<index>/field" entries.
      for (size_t i = 0; i < v.size(); ++i) add_flat(d, name + "/" + std::to_string(i), v[i]);
    } else if (v.is_array()) {
      if (rte_tel_data* c = array_container(v)) rte_tel_data_add_dict_container(d, name.c_str(), c, 0);
    } else if (v.is_string()) {
      rte_tel_data_add_dict_string(d, name.c_str(), v.get<std::string>().c_str());
    } else if (v.is_boolean()) {
      rte_tel_data_add_dict_u64(d, name.c_str(), v.get<bool>() ? 1 : 0);
    } else if (v.is_number_unsigned()) {
      rte_tel_data_add_dict_u64(d, name.c_str(), v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      rte_tel_data_add_dict_int(d, name.c_str(), static_cast<int>(v.get<int64_t>()));
    } else if (v.is_number_float()) {
      // 22.11 has no float type: floats travel as strings, rounded for people (6 significant
      // digits; an EWMA decaying to 1.6e-21 reads 0).
      const double x = v.get<double>();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", std::fabs(x) < 1e-15 ? 0.0 : x);
      rte_tel_data_add_dict_string(d, name.c_str(), buf);
    }
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

int TelemetryCommands::to_telemetry(const nlohmann::json& reply, rte_tel_data* d) {
  if (reply.is_array()) {
    const bool strings = !reply.empty() && reply.front().is_string();
    rte_tel_data_start_array(d, strings ? RTE_TEL_STRING_VAL : RTE_TEL_U64_VAL);
    for (const auto& v : reply) {
      if (strings) {
        rte_tel_data_add_array_string(d, v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
      } else {
        rte_tel_data_add_array_u64(d, v.is_number() ? v.get<uint64_t>() : 0);
      }
    }
    return 0;
  }
  rte_tel_data_start_dict(d);
  if (reply.is_object()) add_flat(d, "", reply);
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
