#include "control/quarantine_pusher.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "control/config_reader.h"
#include "control/telemetry_client.h"

namespace spraynet::control {

namespace {

constexpr const char* kCommand = "/spraynet/tcam_add";

}  // namespace

std::string quarantine_rule_yaml(const QuarantinePushConfig& config, uint32_t rule_id,
                                 const QuarantineTarget& target) {
  return fmt::format(
      "{{id: {}, priority: {}, match: {{dst: {}/32, dest_qp: {}}}, action: quarantine, port: "
      "{}, keep_percent: {}}}",
      rule_id, config.priority, format_ipv4(target.dst_ip), target.dest_qp, config.honeypot_port,
      config.keep_percent);
}

QuarantinePusher::QuarantinePusher(QuarantinePushConfig config, Collect collect,
                                   std::shared_ptr<spdlog::logger> logger)
    : config_(std::move(config)), collect_(std::move(collect)), logger_(std::move(logger)) {}

QuarantinePusher::~QuarantinePusher() {
  stop();
}

void QuarantinePusher::start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(wake_lock_);
    while (!stopping_) {
      l.unlock();
      run_once();
      l.lock();
      wake_.wait_for(l, std::chrono::milliseconds(config_.period_ms), [this] { return stopping_; });
    }
  });
}

void QuarantinePusher::stop() {
  {
    std::lock_guard<std::mutex> l(wake_lock_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  run_once();
}

void QuarantinePusher::run_once() {
  std::lock_guard<std::mutex> l(run_lock_);
  scratch_.clear();
  collect_(scratch_);
  for (const QuarantineTarget& t : scratch_) push(t, config_.rule_id_base + next_index_++);
}

QuarantinePush QuarantinePusher::push(const QuarantineTarget& target, uint32_t rule_id) {
  QuarantinePush p{rule_id, target, false, {}};
  const std::string request =
      std::string(kCommand) + "," + quarantine_rule_yaml(config_, rule_id, target);
  const TelemetryReply r = telemetry_request(config_.switch_socket, request, config_.timeout_ms);
  if (!r.ok) {
    p.detail = r.error;
  } else {
    const auto j = nlohmann::json::parse(r.text, nullptr, false);
    const nlohmann::json* v = j.is_object() && j.contains(kCommand) ? &j[kCommand] : nullptr;
    if (v != nullptr && v->is_object() && v->value("ok", 0) == 1) {
      p.admitted = true;
      p.detail = v->dump();
    } else if (v != nullptr && v->is_object() && v->contains("error")) {
      p.detail = (*v)["error"].is_string() ? (*v)["error"].get<std::string>() : v->dump();
    } else if (v != nullptr && v->is_null()) {
      p.detail = "the switch has no " + std::string(kCommand) + " command";
    } else {
      p.detail = "unexpected reply: " + r.text.substr(0, 300);
    }
  }
  if (p.admitted) {
    ++pushes_;
    if (logger_) {
      logger_->info("quarantine: QP 0x{:06x} to {}: rule {} pushed to {}: {}", target.dest_qp,
                    format_ipv4(target.dst_ip), rule_id, config_.switch_socket, p.detail);
    }
  } else {
    ++failures_;
    if (logger_) {
      logger_->warn("quarantine: QP 0x{:06x} to {}: rule {} not pushed to {}: {}", target.dest_qp,
                    format_ipv4(target.dst_ip), rule_id, config_.switch_socket, p.detail);
    }
  }
  std::lock_guard<std::mutex> l(history_lock_);
  history_.push_back(p);
  return p;
}

std::vector<QuarantinePush> QuarantinePusher::history() const {
  std::lock_guard<std::mutex> l(history_lock_);
  return history_;
}

}  // namespace spraynet::control
