#include "dataplane/runtime/stop_signal.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace spraynet::runtime {

std::atomic<bool> StopSignal::flag_{false};

void StopSignal::on_signal(int) {
  flag_.store(true, std::memory_order_relaxed);
}

StopSignal::StopSignal() {
  flag_.store(false, std::memory_order_relaxed);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // Restart interrupted system calls: EAL's own threads (interrupts, telemetry) block in them
  // and the signal may land on any thread.
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &sa, &old_int_) != 0) {
    throw std::runtime_error(std::string("StopSignal: sigaction(SIGINT) failed: ") +
                             std::strerror(errno));
  }
  if (sigaction(SIGTERM, &sa, &old_term_) != 0) {
    const int err = errno;
    sigaction(SIGINT, &old_int_, nullptr);
    throw std::runtime_error(std::string("StopSignal: sigaction(SIGTERM) failed: ") +
                             std::strerror(err));
  }
}

StopSignal::~StopSignal() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
}

}  // namespace spraynet::runtime
