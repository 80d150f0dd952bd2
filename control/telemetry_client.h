// A client of DPDK's telemetry v2 socket, for a program's control side talking to another
// program (nic_emu pushing a quarantine rule to switch_emu): connect a SOCK_SEQPACKET Unix
// socket, read the JSON greeting (it gives max_output_len), send one "command,params" string,
// read the one JSON reply. Blocking with a timeout on each step: never call it from an lcore.
#pragma once

#include <cstdint>
#include <string>

namespace spraynet::control {

struct TelemetryReply {
  bool ok = false;    // a reply arrived (whatever it says)
  std::string text;   // the reply as sent: {"<command>": <value>}
  std::string error;  // when !ok: what failed (connect, greeting, send, reply), with errno text
};

TelemetryReply telemetry_request(const std::string& socket_path, const std::string& request,
                                 uint64_t timeout_ms);

}  // namespace spraynet::control
