#include "dataplane/runtime/program_args.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace spraynet::runtime {

void add_idle_backoff_options(CLI::App& app, IdleBackoffOptions& o) {
  app.add_option("--idle-backoff-us", o.max_sleep_us,
                 "adaptive idle back-off: after --idle-polls empty poll rounds the lcore sleeps "
                 "1 us, doubling up to this many us, until a packet moves; lets several DPDK "
                 "processes share cores. 0: busy polling (benchmarks, a core per lcore). "
                 "Overrides the config's idle_backoff.max_sleep_us")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--idle-polls", o.idle_polls,
                 "empty poll rounds in a row before the idle back-off's first sleep; overrides "
                 "the config's idle_backoff.idle_polls")
      ->check(CLI::Range(0U, 100'000'000U))
      ->capture_default_str();
}

void resolve_idle_backoff(const CLI::App& app, IdleBackoffOptions& o, uint64_t config_max_sleep_us,
                          unsigned config_idle_polls) {
  if (app.count("--idle-backoff-us") == 0) o.max_sleep_us = config_max_sleep_us;
  if (app.count("--idle-polls") == 0) o.idle_polls = config_idle_polls;
}

ProgramArgs split_program_args(int argc, char** argv) {
  ProgramArgs a;
  const std::string prog = argc > 0 ? argv[0] : "program";
  a.eal.push_back(prog);
  a.app.push_back(prog);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!a.separator && arg == "--") {
      a.separator = true;
      continue;
    }
    (a.separator ? a.app : a.eal).push_back(arg);
  }
  return a;
}

namespace {

// "--config=x" and "--config" both name --config.
std::string option_name(const std::string& arg) {
  const size_t eq = arg.find('=');
  return eq == std::string::npos ? arg : arg.substr(0, eq);
}

}  // namespace

std::optional<int> parse_program_args(CLI::App& app, const ProgramArgs& args, std::string_view name) {
  for (const auto* side : {&args.app, &args.eal}) {
    for (size_t i = 1; i < side->size(); ++i) {
      const std::string& a = (*side)[i];
      // --help after `--`, or anywhere when there is no `--` (EAL's own --help is not wanted).
      if ((a == "--help" || a == "-h") && (side == &args.app || !args.separator)) {
        std::cout << app.help();
        return kExitOk;
      }
    }
  }
  // A program option before `--` would reach EAL, which prints its whole usage for it.
  std::vector<std::string> misplaced;
  for (size_t i = 1; i < args.eal.size(); ++i) {
    const std::string opt = option_name(args.eal[i]);
    // --log-level is EAL's too (DPDK's log level): before `--` it is EAL's.
    if (opt == "--log-level") continue;
    if (opt.rfind("--", 0) == 0 && opt.size() > 2 && app.get_option_no_throw(opt) != nullptr) {
      misplaced.push_back(opt);
    }
  }
  if (!misplaced.empty()) {
    std::string list;
    for (const auto& m : misplaced) list += (list.empty() ? "" : " ") + m;
    std::fprintf(stderr,
                 "%.*s: program options go after `--` (%.*s [EAL arguments] -- %s ...): %s %s "
                 "before it\n",
                 static_cast<int>(name.size()), name.data(), static_cast<int>(name.size()),
                 name.data(), misplaced.front().c_str(), list.c_str(),
                 misplaced.size() == 1 ? "is" : "are");
    return kExitUsage;
  }
  // CLI11 wants the arguments in reverse order in a vector (and names extras in that order).
  std::vector<std::string> rest(args.app.rbegin(), args.app.rend() - 1);
  try {
    app.parse(rest);
  } catch (const CLI::ExtrasError&) {
    std::string list;
    for (const auto& x : app.remaining()) list += (list.empty() ? "" : " ") + x;
    std::fprintf(stderr, "%.*s: unexpected arguments: %s (see --help)\n",
                 static_cast<int>(name.size()), name.data(), list.c_str());
    for (const auto& x : app.remaining()) {
      if (x.rfind("--", 0) != 0) continue;
      const std::vector<std::string> near = nearest_options(app, option_name(x));
      if (near.empty()) continue;
      std::string names;
      for (const auto& n : near) names += (names.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "%.*s: %s: did you mean %s?\n", static_cast<int>(name.size()),
                   name.data(), option_name(x).c_str(), names.c_str());
    }
    return kExitUsage;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%.*s: %s (see --help)\n", static_cast<int>(name.size()), name.data(),
                 e.what());
    return kExitUsage;
  }
  return std::nullopt;
}

std::vector<std::string> nearest_options(const CLI::App& app, const std::string& typed) {
  // Levenshtein distance to each long option name; the closest few within a third of the
  // typed name's length (at least 2 edits), and any option that starts with what was typed.
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, typed.size() / 3);
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) {
      const std::string cand = "--" + l;
      const size_t d = distance(typed, cand);
      const bool prefix = typed.size() > 3 && cand.rfind(typed, 0) == 0;
      if (d <= limit || prefix) scored.emplace_back(prefix ? 0 : d, cand);
    }
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, n] : scored) {
    if (out.size() == 3) break;
    out.push_back(n);
  }
  return out;
}

}  // namespace spraynet::runtime
