// ControlThread: the control loop on its own thread, on a clock it is handed. The clocks here are
// virtual (atomics the test moves), so what the thread does is decided by the test, not by
// wall-clock speed; the test waits for the thread with a condition variable, never a sleep.
#include "control/control_thread.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "control/control_loop.h"
#include "control/switch_config.h"
#include "dataplane/runtime/node_gate.h"
#include "switch_emu/switch_node.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using namespace spraynet::control;

namespace {

constexpr uint64_t kPeriod = 200'000'000;

const char* kYaml = R"(
ports:
  - {name: in0, device: x}
  - {name: p0, device: x}
  - {name: p1, device: x}
groups:
  - {name: g, mode: weighted, ports: [p0, p1]}
routes:
  - {prefix: 0.0.0.0/0, group: g}
)";

}  // namespace

TEST_CASE("the control thread ticks at the boundaries its clock reaches, then stops promptly") {
  test::TestPool pool(1023);
  {
    const SwitchConfig cfg = parse_switch_config(ConfigNode::load_string(kYaml, "t.yaml"));
    switch_emu::SwitchNode node(cfg, pool.get());
    runtime::NodeGate node_lock;
    std::mutex control_lock;
    ControlTarget target = control_target_of(node);
    target.node_lock = &node_lock;
    ControlLoop loop(target, 0);

    // The clock moves one period per read until it has reached 5 periods; the test waits until
    // the thread has read it past that point.
    std::mutex m;
    std::condition_variable cv;
    uint64_t reads = 0;
    std::atomic<uint64_t> now{0};
    auto clock = [&] {
      std::lock_guard<std::mutex> g(m);
      if (now < 5 * kPeriod) now += kPeriod;
      ++reads;
      cv.notify_all();
      return now.load();
    };
    {
      // max_wait is an hour: only the boundaries (reached at once here) and stop() wake it.
      ControlThread thread(loop, control_lock, clock, 3'600'000'000'000ull);
      {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return reads >= 6; });
      }
      thread.stop();  // wakes it from an hour-long wait
      std::lock_guard<std::mutex> g(control_lock);
      CHECK(thread.ticks() == 5);
      CHECK(thread.errors() == 0);
      CHECK(loop.counters().ticks == 5);
      CHECK(loop.counters().missed_periods == 0);
      CHECK(loop.counters().publications == 5);
      CHECK(loop.next_event_ns() == 6 * kPeriod);
      thread.stop();  // idempotent
    }
  }
  CHECK(pool.whole());
}

TEST_CASE("a control thread started late ticks once for the boundaries it missed") {
  test::TestPool pool(1023);
  {
    const SwitchConfig cfg = parse_switch_config(ConfigNode::load_string(kYaml, "t.yaml"));
    switch_emu::SwitchNode node(cfg, pool.get());
    std::mutex control_lock;
    ControlLoop loop(control_target_of(node), 0);
    // The first pass runs before the thread looks at stop(): one tick over three periods.
    ControlThread thread(loop, control_lock, [] { return 3 * kPeriod + 5; });
    thread.stop();
    CHECK(thread.ticks() == 1);
    CHECK(loop.counters().missed_periods == 2);
    CHECK(loop.next_event_ns() == 4 * kPeriod);
  }
  CHECK(pool.whole());
}
