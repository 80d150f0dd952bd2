#include "dataplane/runtime/eal.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "tests/dataplane/runtime/eal_child_path.h"

using spraynet::runtime::Eal;

extern char** environ;

namespace {

struct Child {
  int status = -1;
  std::string out, err;
};

std::string read_all(int fd) {
  std::string s;
  std::array<char, 4096> buf;
  ssize_t n;
  while ((n = read(fd, buf.data(), buf.size())) > 0) s.append(buf.data(), static_cast<size_t>(n));
  return s;
}

// Runs eal_child with `args` and collects its exit status and output. EAL in this process is
// already up (the test main), and a process can bring EAL up only once.
Child run_child(std::vector<std::string> args) {
  args.insert(args.begin(), SPRAYNET_EAL_CHILD);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2], err[2];
  REQUIRE(pipe(out) == 0);
  REQUIRE(pipe(err) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  pid_t pid;
  const int ret = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  REQUIRE(ret == 0);
  Child c;
  // stderr is small (a few log lines), so reading stdout to the end first cannot block it.
  c.out = read_all(out[0]);
  c.err = read_all(err[0]);
  close(out[0]);
  close(err[0]);
  REQUIRE(waitpid(pid, &c.status, 0) == pid);
  return c;
}

std::vector<std::string> eal_args(const std::string& tag) {
  return {"--no-huge",
          "-m",
          "64",
          "--no-pci",
          "-l",
          "0",
          "--file-prefix",
          "spraynet-eal-" + std::to_string(getpid()) + "-" + tag};
}

}  // namespace

TEST_CASE("Eal consumes EAL's arguments and leaves the application's", "[eal]") {
  auto args = eal_args("ok");
  for (const char* a : {"--vdev", "net_null_eal0", "--", "--config", "x.yaml", "-v"}) {
    args.emplace_back(a);
  }
  const Child c = run_child(args);
  INFO(c.err);
  REQUIRE(WIFEXITED(c.status));
  CHECK(WEXITSTATUS(c.status) == 0);
  CHECK(c.out == std::string("arg ") + SPRAYNET_EAL_CHILD +
                     "\narg --config\narg x.yaml\narg -v\n"
                     "argc 4 last null\n"
                     "port 0 net_null_eal0\n");
  // EAL's start-up narration is debug: a normal run does not show it, and nothing bypasses
  // the bridge (no bare "EAL:" or "TELEMETRY:" lines).
  CHECK_THAT(c.err, !Catch::Contains("EAL: Detected"));
  CHECK_THAT(c.err, !Catch::Contains("legacy socket"));
}

TEST_CASE("EAL's start-up lines go through spdlog, at debug", "[eal]") {
  setenv("SPRAYNET_LOG_LEVEL", "debug", 1);
  const Child c = run_child(eal_args("debug"));
  unsetenv("SPRAYNET_LOG_LEVEL");
  INFO(c.err);
  // The bridge is up before rte_eal_init.
  CHECK_THAT(c.err, Catch::Contains("[dpdk] [debug] EAL: Detected"));
}

TEST_CASE("Eal with no application arguments leaves only the program name", "[eal]") {
  const Child c = run_child(eal_args("bare"));
  INFO(c.err);
  CHECK(c.out == std::string("arg ") + SPRAYNET_EAL_CHILD + "\nargc 1 last null\n");
}

TEST_CASE("Eal throws naming DPDK's reason when EAL refuses", "[eal]") {
  auto args = eal_args("bad");
  args.emplace_back("--no-such-eal-option");
  const Child c = run_child(args);
  REQUIRE(WIFEXITED(c.status));
  CHECK(WEXITSTATUS(c.status) == 1);
  // EAL prints its usage text to stdout before giving up.
  CHECK_THAT(c.out, Catch::EndsWith("\nerror rte_eal_init failed: Invalid argument\n"));
  CHECK_THAT(c.err, Catch::Contains("[dpdk] [error] EAL: Invalid 'command line' arguments."));
}

TEST_CASE("a second Eal in one process is refused", "[eal]") {
  // The test main has brought EAL up already.
  std::vector<std::string> args = {"again", "--no-huge", "--no-pci"};
  CHECK_THROWS_WITH(Eal(args), "rte_eal_init failed: Operation already in progress");
}
