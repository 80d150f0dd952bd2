// RcuDomain: rte_rcu_qsbr as the dataplane's readers and the control thread use it.
#include "dataplane/runtime/rcu_domain.h"

#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/poll_loop.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using runtime::RcuDomain;

TEST_CASE("RcuDomain refuses bad sizes, unknown ids and a reader id registered twice") {
  CHECK_THROWS_AS(RcuDomain(0), std::invalid_argument);
  CHECK_THROWS_AS(RcuDomain(RTE_MAX_LCORE + 1), std::invalid_argument);
  RcuDomain d(4);
  CHECK_THROWS_AS(d.register_reader(4), std::out_of_range);
  d.register_reader(1);
  CHECK_THROWS_AS(d.register_reader(1), std::logic_error);
  d.unregister_reader(1);
  d.register_reader(1);  // free again once unregistered
  d.unregister_reader(1);
}

TEST_CASE("a grace period ends only when every online reader has quiesced") {
  RcuDomain d(3);
  d.synchronize();  // no reader: at once
  CHECK(d.grace_periods() == 1);

  d.register_reader(0);
  d.register_reader(2);
  d.online(0);
  d.online(2);
  const uint64_t token = d.start();
  CHECK_FALSE(d.check(token));
  d.quiescent(0);
  CHECK_FALSE(d.check(token));  // reader 2 may still hold the old table
  d.quiescent(2);
  CHECK(d.check(token));

  // An offline reader is not waited for.
  d.offline(2);
  const uint64_t t2 = d.start();
  CHECK_FALSE(d.check(t2));
  d.quiescent(0);
  CHECK(d.check(t2));
  d.offline(0);
  d.synchronize();  // both offline: at once
  d.unregister_reader(0);
  d.unregister_reader(2);
}

namespace {

// A table the writer publishes; readers check `magic` on every read, and the writer poisons it
// just before freeing, so a reader that could still see a freed table fails the check (and
// ASan reports the use after free).
struct Table {
  static constexpr uint64_t kMagic = 0x5350524159524355ull;
  uint64_t magic = kMagic;
  uint64_t sequence = 0;
};

class TableReader : public runtime::BurstHandler {
 public:
  explicit TableReader(const std::atomic<const Table*>& table) : table_(table) {}
  void on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t, runtime::TxSink&) override {
    rte_pktmbuf_free_bulk(pkts, n);
  }
  void on_poll(uint64_t, runtime::TxSink&) override {
    const Table* t = table_.load(std::memory_order_acquire);
    if (t->magic != Table::kMagic) ++bad_reads;
    if (t->sequence < last_sequence) ++went_back;
    last_sequence = t->sequence;
    ++reads;
  }
  uint64_t reads = 0, bad_reads = 0, went_back = 0, last_sequence = 0;

 private:
  const std::atomic<const Table*>& table_;
};

}  // namespace

TEST_CASE("a PollLoop on another lcore is a reader: 10,000 publications, no freed table read") {
  const auto lcores = runtime::LcoreRunner::all_lcores();
  if (lcores.size() < 2) {
    WARN("only one lcore enabled: the reader lcore cannot run here");
    return;
  }
  test::TestPool pool(1023);
  rte_ring* rx = rte_ring_create("rcu_rx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  rte_ring* tx = rte_ring_create("rcu_tx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  REQUIRE(rte_eth_from_rings("rcu_port", &rx, 1, &tx, 1, SOCKET_ID_ANY) >= 0);
  {
    runtime::Port port(runtime::PortConfig{"net_ring_rcu_port"}, pool.get());
    RcuDomain domain(2);
    std::atomic<const Table*> current{new Table};
    TableReader reader(current);
    runtime::TscClock clock;
    runtime::PollLoopConfig cfg;
    cfg.rcu = &domain;
    cfg.rcu_reader_id = 1;
    runtime::PollLoop loop({{&port, 0}}, {{&port, 0}}, reader, clock, cfg);
    runtime::StopSignal stop;
    std::atomic<bool> writer_done{false};

    // Index 0 (the main lcore) is the writer, as a control thread would be; index 1 reads.
    runtime::LcoreRunner({lcores[0], lcores[1]}).run([&](unsigned, unsigned index) {
      if (index == 1) {
        loop.run(stop);
        return;
      }
      for (uint64_t seq = 1; seq <= 10'000; ++seq) {
        auto* next = new Table;
        next->sequence = seq;
        const Table* old = current.exchange(next, std::memory_order_acq_rel);
        domain.synchronize();
        const_cast<Table*>(old)->magic = 0;  // poison, then free
        delete old;
      }
      writer_done = true;
      stop.request();
    });
    CHECK(writer_done);
    CHECK(domain.grace_periods() == 10'000);
    CHECK(reader.bad_reads == 0);
    CHECK(reader.went_back == 0);
    CHECK(reader.reads > 0);
    delete current.load();
    // The loop unregistered its reader id when it stopped: the id is free again.
    domain.register_reader(1);
    domain.unregister_reader(1);
  }
  rte_ring_free(rx);
  rte_ring_free(tx);
  CHECK(pool.whole());
}
