#include "nic_emu/nic_telemetry.h"

#include <mutex>

#include "nic_emu/nic_report.h"

namespace spraynet::nic_emu {

nlohmann::json spray_telemetry(NicShared& s) {
  // The order the control thread takes them in (ControlLoop::sample takes the node lock while
  // its tick holds the control lock).
  std::lock_guard<std::mutex> c(s.control_lock);
  std::lock_guard<std::mutex> g(s.lock);
  return spray_json(*s.node);
}

}  // namespace spraynet::nic_emu
