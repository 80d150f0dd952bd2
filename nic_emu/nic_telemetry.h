// What nic_emu's telemetry commands read, with the locks each needs (NicShared).
#pragma once

#include <nlohmann/json.hpp>

#include "nic_emu/nic_lcore.h"

namespace spraynet::nic_emu {

// /spraynet/spray: spray_json under the control lock, then the node lock. The control thread
// publishes the spray weights under the control lock and frees the old ones after a grace
// period that waits only for the lcore (an RCU reader); a telemetry thread is no RCU reader, so
// it must hold the control lock for as long as it reads them.
nlohmann::json spray_telemetry(NicShared& s);

}  // namespace spraynet::nic_emu
