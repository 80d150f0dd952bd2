// Commands under /spraynet/ on DPDK's telemetry socket, so that `dpdk-telemetry.py` (or any
// client of the socket protocol) reads spraynet's counters and tables.
//
// DPDK 22.11 gives a callback only the command name, no context pointer, so one trampoline
// dispatches every /spraynet/ command by name to the handler registered here. Handlers return
// JSON; nested objects are flattened into "outer/inner" keys and arrays become telemetry
// containers, because the 22.11 data model is one level deep. Handlers run on DPDK's telemetry
// thread, not on an lcore: they may only read what is safe to read concurrently.
//
// Every number on the socket is a JSON number. 22.11's rte_tel_data has no float type (only
// u64, a 32-bit int and strings, which it quotes), so a float travels as a whole number in a
// unit its key names, rounded to the nearest (the reports, --stats, keep the floats):
//   *_gbps                            -> *_mbps, x 1e3   (rate_gbps 10 -> rate_mbps 10000)
//   *_ns, *_us, *_ms, *_bytes, *_pps, *_mbps, *_kbps, or a field of an object so named
//   (completion_ns/mean)              -> the same key, rounded
//   ber, frame_loss_ratio, loss_rate  -> *_ppq, x 1e15   (parts per quadrillion: 1e-12 -> 1000)
//   any other float (utilisation, paused_fraction, alpha, ...) -> *_ppm, x 1e6
// An array with a float in it is renamed and scaled as a whole. Integers >= 0 go as u64, negative
// ones as int (as text past 32 bits, as NaN and infinities do); booleans as 0/1. A reply that is
// an array of objects becomes "<index>/field" entries.
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

  // The conversion used for replies, exposed for tests: flatten() gives what to_telemetry()
  // sends, as JSON (an object of flat keys, or an array).
  static nlohmann::json flatten(const nlohmann::json& reply);
  static int to_telemetry(const nlohmann::json& reply, rte_tel_data* d);
  // Runs a registered handler directly and returns its reply (tests).
  static nlohmann::json call(const std::string& command, std::string_view params);
};

}  // namespace spraynet::control
