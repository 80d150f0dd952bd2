// What every spraynet program on EAL does with its command line, in one place:
//   PROGRAM [EAL arguments] -- [program options]
// The two halves are split before anything starts, the program's half is parsed (and its config
// read) before EAL comes up, so that a mistake is the only thing printed; and every program
// exits by one scheme.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/runtime/poll_loop.h"

namespace spraynet::runtime {

// Exit codes of every program (README "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,  // a device, port or runtime error
  kExitUsage = 2,    // bad command line or config
  kExitLeak = 3,     // mbufs not returned to the pool at exit
};

struct ProgramArgs {
  std::vector<std::string> eal;  // argv[0], then everything before `--`
  std::vector<std::string> app;  // argv[0], then everything after `--`
  bool separator = false;        // `--` was given
};
ProgramArgs split_program_args(int argc, char** argv);

// Parses args.app into `app`. Returns nullopt to go on; otherwise the exit code, having printed
// what to print: the help (exit 0) for --help/-h on either side; one line "NAME: reason" for a
// parse error (exit 2), unexpected arguments named in the order given; and, for one of the
// program's options given before `--` (where EAL would take it and print its whole usage),
// a line saying that program options follow `--`.
std::optional<int> parse_program_args(CLI::App& app, const ProgramArgs& args, std::string_view name);
// The app's long options nearest to a mistyped one (edit distance, or starting with it), the
// closest first, at most three: what "did you mean" names.
std::vector<std::string> nearest_options(const CLI::App& app, const std::string& typed);

// The idle back-off's options, the same in every program on poll-mode lcores, with the defaults
// for lcores that share cores (kProgramIdleBackoff): --idle-backoff-us (the longest sleep; 0:
// busy polling, for benchmarks) and --idle-polls.
inline constexpr IdleBackoffConfig kProgramIdleBackoff{
    .max_sleep_ns = 100'000, .min_sleep_ns = 1'000, .idle_polls = 256};
struct IdleBackoffOptions {
  uint64_t max_sleep_us = kProgramIdleBackoff.max_sleep_ns / 1000;
  unsigned idle_polls = kProgramIdleBackoff.idle_polls;
  IdleBackoffConfig config() const {
    IdleBackoffConfig c = kProgramIdleBackoff;
    c.max_sleep_ns = max_sleep_us * 1000;
    c.idle_polls = idle_polls;
    return c;
  }
};
void add_idle_backoff_options(CLI::App& app, IdleBackoffOptions& o);
// After parsing: an option not given on the command line takes the config's value.
void resolve_idle_backoff(const CLI::App& app, IdleBackoffOptions& o, uint64_t config_max_sleep_us,
                          unsigned config_idle_polls);

// For a program without EAL (roce_pcap, fabric_emu): every argument is the program's.
inline ProgramArgs all_program_args(int argc, char** argv) {
  ProgramArgs a;
  for (int i = 0; i < argc; ++i) a.app.emplace_back(argv[i]);
  if (a.app.empty()) a.app.emplace_back("program");
  a.eal.push_back(a.app.front());
  a.separator = true;
  return a;
}

}  // namespace spraynet::runtime
