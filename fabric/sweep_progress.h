// fabric_emu's progress line for a sweep of runs (see the class).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace spraynet::fabric {

// One progress line for the whole sweep: runs done of the total and where each run in progress
// is in virtual time. A terminal gets the line updated in place (at most 5 times a second); a
// file or pipe a plain line every 10 s of wall time (no carriage returns in a log). Nothing in
// the first second, nothing with --quiet.
class SweepProgress {
 public:
  SweepProgress(size_t total, size_t jobs, bool quiet)
      : total_(total),
        slots_(jobs),
        quiet_(quiet),
        tty_(isatty(STDERR_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}

  void start(size_t job, size_t run, std::string what, uint64_t seed, uint64_t duration_ns) {
    std::lock_guard<std::mutex> lock(m_);
    slots_[job] = {true, run, std::move(what), seed, duration_ns, 0, 0};
  }
  void update(size_t job, uint64_t vt, uint64_t hops) {
    std::lock_guard<std::mutex> lock(m_);
    slots_[job].vt = vt;
    slots_[job].hops = hops;
    print();
  }
  // `hops`: the run's packet-hops when it completed (0 when abandoned or failed).
  void finish(size_t job, uint64_t hops, bool completed) {
    std::lock_guard<std::mutex> lock(m_);
    slots_[job].active = false;
    hops_done_ += hops;
    if (completed) ++done_;
  }
  // Ends the terminal's line, so that what follows starts on its own.
  void end() {
    std::lock_guard<std::mutex> lock(m_);
    if (shown_ && tty_) std::fprintf(stderr, "\n");
    shown_ = false;
  }

 private:
  struct Slot {
    bool active = false;
    size_t run = 0;  // its index in the sweep: the runs in progress are shown in run order
    std::string what;
    uint64_t seed = 0;
    uint64_t duration_ns = 0;
    uint64_t vt = 0;
    uint64_t hops = 0;
  };

  void print();  // under m_

  std::mutex m_;
  size_t total_;
  size_t done_ = 0;
  std::vector<Slot> slots_;
  uint64_t hops_done_ = 0;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double last_ = 0;
  bool shown_ = false;
};

}  // namespace spraynet::fabric
