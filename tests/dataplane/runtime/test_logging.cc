#include "dataplane/runtime/logging.h"

#include <rte_dev.h>
#include <rte_log.h>
#include <spdlog/sinks/ostream_sink.h>
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

using spraynet::runtime::bridge_dpdk_log;
using spraynet::runtime::logger;
using spraynet::runtime::set_level;

namespace {

// Adds an ostream sink to a logger for the lifetime of the capture.
class Capture {
 public:
  explicit Capture(std::shared_ptr<spdlog::logger> log) : log_(std::move(log)) {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink_->set_pattern("%n|%l|%v");
    log_->sinks().push_back(sink_);
  }
  ~Capture() { log_->sinks().pop_back(); }
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> log_;
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace

TEST_CASE("one logger per component, all on one sink", "[logging]") {
  auto a = logger("component_a");
  CHECK(a->name() == "component_a");
  CHECK(logger("component_a") == a);
  auto b = logger("component_b");
  CHECK(b != a);
  REQUIRE(a->sinks().size() == 1);
  REQUIRE(b->sinks().size() == 1);
  CHECK(a->sinks()[0] == b->sinks()[0]);
}

TEST_CASE("DPDK's log lines arrive in the dpdk logger at their own level", "[logging]") {
  bridge_dpdk_log();
  set_level("debug");
  rte_log_set_level(RTE_LOGTYPE_USER1, RTE_LOG_DEBUG);
  {
    Capture cap(logger("dpdk"));
    rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_USER1, "USER1: careful %d\n", 42);
    rte_log(RTE_LOG_ERR, RTE_LOGTYPE_USER1, "USER1: broken\n");
    rte_log(RTE_LOG_CRIT, RTE_LOGTYPE_USER1, "USER1: on fire\n");
    rte_log(RTE_LOG_NOTICE, RTE_LOGTYPE_USER1, "USER1: notice\n");
    rte_log(RTE_LOG_INFO, RTE_LOGTYPE_USER1, "USER1: fyi\n");
    rte_log(RTE_LOG_DEBUG, RTE_LOGTYPE_USER1, "USER1: details\n");
    rte_log(RTE_LOG_INFO, RTE_LOGTYPE_USER1, "USER1: two\nlines\n");
    CHECK(cap.text() ==
          "dpdk|warning|USER1: careful 42\n"
          "dpdk|error|USER1: broken\n"
          "dpdk|critical|USER1: on fire\n"
          "dpdk|info|USER1: notice\n"
          "dpdk|info|USER1: fyi\n"
          "dpdk|debug|USER1: details\n"
          "dpdk|info|USER1: two\n"
          "dpdk|info|lines\n");
  }
  {
    // And DPDK's own: EAL refusing a device it cannot parse.
    Capture cap(logger("dpdk"));
    CHECK(rte_dev_probe("net_not_a_driver0") < 0);
    CHECK_THAT(cap.text(),
               Catch::Contains("dpdk|error|EAL: failed to parse device \"net_not_a_driver0\""));
  }
  set_level("info");
  {
    Capture cap(logger("dpdk"));
    rte_log(RTE_LOG_DEBUG, RTE_LOGTYPE_USER1, "USER1: filtered by spdlog\n");
    CHECK(cap.text().empty());
  }
  rte_log_set_level(RTE_LOGTYPE_USER1, RTE_LOG_INFO);
}

TEST_CASE("set_level applies to every logger and names the levels it accepts", "[logging]") {
  auto before = logger("level_before");
  set_level("warn");
  CHECK(before->level() == spdlog::level::warn);
  CHECK(logger("level_after")->level() == spdlog::level::warn);
  set_level("off");
  CHECK(before->level() == spdlog::level::off);
  CHECK_THROWS_WITH(set_level("verbose"),
                    "unknown log level \"verbose\": use one of "
                    "trace|debug|info|warn|error|critical|off");
  CHECK(before->level() == spdlog::level::off);
  set_level("info");
  CHECK(before->level() == spdlog::level::info);
}
