// Commands under /spraynet/ on DPDK's telemetry socket, so that `dpdk-telemetry.py` (or any
// client of the socket protocol) reads spraynet's counters and tables.
//
// DPDK 22.11 gives a callback only the command name, no context pointer, so one trampoline
// dispatches every /spraynet/ command by name to the handler registered here. Handlers return
// JSON; nested objects are flattened into "outer/inner" keys and arrays become telemetry
// containers, because the 22.11 data model is one level deep. Handlers run on DPDK's telemetry
// thread, not on an lcore: they may only read what is safe to read concurrently.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>

struct rte_tel_data;

namespace spraynet::control {

class TelemetryCommands {
 public:
  // The handler gets the parameters after the comma ("/spraynet/port,3" -> "3") and returns a
  // JSON object or array; throwing std::invalid_argument answers with {"error": what()}.
  using Handler = std::function<nlohmann::json(std::string_view params)>;

  // Registers `command` (which must start with /spraynet/) with DPDK, or replaces its handler.
  // Throws std::runtime_error when DPDK refuses the command.
  static void add(const std::string& command, const std::string& help, Handler handler);
  // Handlers cannot be unregistered from DPDK; after clear() the commands answer
  // {"error": "not available"}. Programs call it before the objects the handlers read go away.
  static void clear();

  // Declared after the objects the handlers read: whatever way the scope ends (an exception
  // included), the commands stop reading them first.
  class ClearOnExit {
   public:
    ClearOnExit() = default;
    ~ClearOnExit() { clear(); }
    ClearOnExit(const ClearOnExit&) = delete;
    ClearOnExit& operator=(const ClearOnExit&) = delete;
  };

  // The conversion used for replies, exposed for tests.
  static int to_telemetry(const nlohmann::json& reply, rte_tel_data* d);
  // Runs a registered handler directly and returns its reply (tests).
  static nlohmann::json call(const std::string& command, std::string_view params);
};

}  // namespace spraynet::control
