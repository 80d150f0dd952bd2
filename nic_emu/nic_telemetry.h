// What nic_emu's telemetry commands read, with the locks each needs (NicShared).
#pragma once

#include <nlohmann/json.hpp>

#include "control/quarantine_pusher.h"
#include "nic_emu/nic_lcore.h"

namespace spraynet::nic_emu {

// /spraynet/spray: spray_json under the control lock, then the node lock. The control thread
// publishes the spray weights under the control lock and frees the old ones after a grace
// period that waits only for the lcore (an RCU reader); a telemetry thread is no RCU reader, so
// it must hold the control lock for as long as it reads them.
nlohmann::json spray_telemetry(NicShared& s);

// The quarantine response: {"enabled": false} without a pusher, else its pushes, failures and
// every rule it pushed or tried (the pusher's own lock; no node lock).
nlohmann::json quarantine_json(const control::QuarantinePusher* pusher);

// /spraynet/anomaly: anomaly_json under the node lock, with "quarantine": quarantine_json.
nlohmann::json anomaly_telemetry(NicShared& s, const control::QuarantinePusher* pusher);

}  // namespace spraynet::nic_emu
