#include "dataplane/runtime/stop_signal.h"

#include <catch2/catch.hpp>

#include <csignal>

using spraynet::runtime::StopSignal;

namespace {

void previous_handler(int) {}

void (*current_handler(int sig))(int) {
  struct sigaction sa {};
  sigaction(sig, nullptr, &sa);
  return sa.sa_handler;
}

}  // namespace

TEST_CASE("a stop signal starts clear and is set by request()", "[stop_signal]") {
  StopSignal stop;
  CHECK_FALSE(stop.requested());
  stop.request();
  CHECK(stop.requested());
}

TEST_CASE("SIGTERM and SIGINT set the flag instead of ending the process", "[stop_signal]") {
  for (int sig : {SIGTERM, SIGINT}) {
    StopSignal stop;
    REQUIRE_FALSE(stop.requested());
    REQUIRE(std::raise(sig) == 0);
    CHECK(stop.requested());
  }
}

TEST_CASE("a new stop signal clears what an earlier one was asked", "[stop_signal]") {
  {
    StopSignal first;
    first.request();
  }
  StopSignal second;
  CHECK_FALSE(second.requested());
}

TEST_CASE("the handlers that were there before come back", "[stop_signal]") {
  std::signal(SIGTERM, previous_handler);
  const auto int_before = current_handler(SIGINT);
  {
    StopSignal stop;
    CHECK(current_handler(SIGTERM) != previous_handler);
  }
  CHECK(current_handler(SIGTERM) == previous_handler);
  CHECK(current_handler(SIGINT) == int_before);
  std::signal(SIGTERM, SIG_DFL);
}
