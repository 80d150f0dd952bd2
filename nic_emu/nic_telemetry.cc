#include "nic_emu/nic_telemetry.h"

#include <mutex>

#include "control/config_reader.h"
#include "nic_emu/nic_report.h"

namespace spraynet::nic_emu {

nlohmann::json spray_telemetry(NicShared& s) {
  // The order the control thread takes them in (ControlLoop::sample takes the node lock while
  // its tick holds the control lock).
  std::lock_guard<std::mutex> c(s.control_lock);
  std::lock_guard<runtime::NodeGate> g(s.lock);
  return spray_json(*s.node);
}

nlohmann::json quarantine_json(const control::QuarantinePusher* pusher) {
  if (pusher == nullptr) return {{"enabled", false}};
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& p : pusher->history()) {
    rules.push_back({{"rule_id", p.rule_id},
                     {"dest_qp", p.target.dest_qp},
                     {"dst_ip", control::format_ipv4(p.target.dst_ip)},
                     {"admitted", p.admitted},
                     {"detail", p.detail}});
  }
  return {{"enabled", true},
          {"switch_socket", pusher->config().switch_socket},
          {"honeypot_port", pusher->config().honeypot_port},
          {"keep_percent", pusher->config().keep_percent},
          {"pushes", pusher->pushes()},
          {"push_failures", pusher->failures()},
          {"rules", rules}};
}

nlohmann::json anomaly_telemetry(NicShared& s, const control::QuarantinePusher* pusher) {
  nlohmann::json j;
  {
    std::lock_guard<runtime::NodeGate> g(s.lock);
    j = anomaly_json(*s.node);
  }
  j["quarantine"] = quarantine_json(pusher);
  return j;
}

}  // namespace spraynet::nic_emu
