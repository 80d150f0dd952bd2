#include "dataplane/runtime/logging.h"

#include <mutex>

#include <deque>

#include <rte_log.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace spraynet::runtime {
namespace {

// The logger that owns the shared sink. Keeping the sink in spdlog's registry (rather than in
// a static of our own) means every component logger finds it the same way, from any thread.
constexpr const char* kRootName = "spraynet";
constexpr const char* kPattern = "[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v";

// Another thread may register the same name between our get() and register_logger();
// spdlog then throws, and the winner's logger is the one to use.
std::shared_ptr<spdlog::logger> get_or_register(std::shared_ptr<spdlog::logger> fresh) {
  try {
    spdlog::register_logger(fresh);
    return fresh;
  } catch (const spdlog::spdlog_ex&) {
    if (auto existing = spdlog::get(fresh->name())) return existing;
    throw;
  }
}

std::shared_ptr<spdlog::logger> make_logger(std::string name, std::vector<spdlog::sink_ptr> sinks) {
  auto l = std::make_shared<spdlog::logger>(std::move(name), sinks.begin(), sinks.end());
  l->set_pattern(kPattern);
  l->set_level(spdlog::get_level());
  return l;
}

std::shared_ptr<spdlog::logger> root() {
  if (auto r = spdlog::get(kRootName)) return r;
  return get_or_register(
      make_logger(kRootName, {std::make_shared<spdlog::sinks::stderr_color_sink_mt>()}));
}

spdlog::level::level_enum from_dpdk(int level) {
  switch (level) {
    case RTE_LOG_EMERG:
    case RTE_LOG_ALERT:
    case RTE_LOG_CRIT:
      return spdlog::level::critical;
    case RTE_LOG_ERR:
      return spdlog::level::err;
    case RTE_LOG_WARNING:
      return spdlog::level::warn;
    case RTE_LOG_DEBUG:
      return spdlog::level::debug;
    default:  // NOTICE, INFO, and 0: nothing logged on this thread yet
      return spdlog::level::info;
  }
}

// The stream is unbuffered, so glibc formats each rte_log() call into one write() here, on the
// thread that logged it: rte_log_cur_msg_loglevel() is that message's level. A message may hold
// several lines (usage text); each becomes its own record.
std::mutex& error_lock() {
  static std::mutex m;
  return m;
}
std::deque<std::string>& recent_errors() {
  static std::deque<std::string> lines;
  return lines;
}

ssize_t dpdk_log_write(void*, const char* buf, size_t size) {
  const auto log = logger("dpdk");
  auto level = from_dpdk(rte_log_cur_msg_loglevel());
  // EAL's start-up narration (lcores detected, IOVA mode, sockets...) at INFO/NOTICE is debug
  // here, so that a normal run prints only what a user should read; its warnings and errors,
  // and every other component's lines, keep their level.
  if (rte_log_cur_msg_logtype() == RTE_LOGTYPE_EAL && level == spdlog::level::info) {
    level = spdlog::level::debug;
  }
  const bool error = level >= spdlog::level::err;
  std::string_view rest(buf, size);
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // DPDK 22.11 warns on every start that no legacy telemetry callbacks exist: it has nothing
    // to do with us (the v2 socket is up), so it is debug here.
    const bool legacy_notice = line.find("No legacy callbacks, legacy socket not created") !=
                               std::string_view::npos;
    if (!line.empty()) log->log(legacy_notice ? spdlog::level::debug : level, "{}", line);
    if (error && !line.empty()) {
      std::lock_guard<std::mutex> g(error_lock());
      auto& lines = recent_errors();
      lines.emplace_back(line);
      if (lines.size() > 8) lines.pop_front();
    }
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(std::string_view component) {
  const std::string name(component);
  if (auto l = spdlog::get(name)) return l;
  auto r = root();
  if (name == kRootName) return r;
  return get_or_register(make_logger(name, r->sinks()));
}

std::vector<std::string> recent_dpdk_errors() {
  std::lock_guard<std::mutex> g(error_lock());
  return {recent_errors().begin(), recent_errors().end()};
}

void bridge_dpdk_log() {
  logger("dpdk");  // created now, so that a bad sink set-up shows here and not mid-log
  // No cookie: glibc allocates the FILE where LeakSanitizer does not look, so anything only it
  // points to would be reported as leaked; the logger is found by name instead.
  cookie_io_functions_t io{};
  io.write = dpdk_log_write;
  FILE* f = fopencookie(nullptr, "w", io);
  if (f == nullptr) throw std::runtime_error("bridge_dpdk_log: fopencookie failed");
  setvbuf(f, nullptr, _IONBF, 0);
  // DPDK keeps the stream until the process ends (rte_eal_cleanup closes only its default
  // stream), so it is never closed; a second call leaves the first stream unused.
  rte_openlog_stream(f);
}

void set_level(std::string_view level) {
  static constexpr std::string_view kNames[] = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  static constexpr spdlog::level::level_enum kLevels[] = {
      spdlog::level::trace, spdlog::level::debug,    spdlog::level::info, spdlog::level::warn,
      spdlog::level::err,   spdlog::level::critical, spdlog::level::off};
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (level == kNames[i]) {
      spdlog::set_level(kLevels[i]);
      return;
    }
  }
  throw std::invalid_argument("unknown log level \"" + std::string(level) +
                              "\": use one of trace|debug|info|warn|error|critical|off");
}

}  // namespace spraynet::runtime
