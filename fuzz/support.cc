#include "fuzz/support.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace spraynet::fuzz {
namespace {

bool eal_up = false;
std::string runtime_dir;

// libFuzzer leaves through exit() after -max_total_time / -runs: EAL's runtime directory
// (/var/run/dpdk/PREFIX) would otherwise stay behind, one per run. A crash leaves it (the
// process dies in the sanitizer's handler); scripts/fuzz.sh removes those.
void remove_runtime_dir() {
  if (runtime_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(runtime_dir, ec);
}

}  // namespace

void fail(const char* what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

void init_eal(const char* argv0) {
  if (eal_up) return;
  // scripts/fuzz.sh names the prefix, so that it can remove the runtime directory of a run that
  // died in a sanitizer's handler.
  const char* named = std::getenv("SPRAYNET_FUZZ_FILE_PREFIX");
  const std::string prefix =
      named != nullptr && named[0] != '\0' ? named : "spraynet-fuzz-" + std::to_string(getpid());
  std::vector<std::string> args = {argv0 != nullptr ? argv0 : "fuzz",
                                   "--no-huge",
                                   "--no-pci",
                                   "-m",
                                   "256",
                                   "--file-prefix",
                                   prefix,
                                   "--no-telemetry",
                                   "--log-level",
                                   "lib.eal:error"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
    std::abort();
  }
  eal_up = true;
  runtime_dir = rte_eal_get_runtime_dir();
  std::atexit(remove_runtime_dir);
}

rte_mempool* make_pool(const char* name, unsigned n, uint16_t data_room) {
  rte_mempool* p = rte_pktmbuf_pool_create(name, n, 0, 0, data_room, SOCKET_ID_ANY);
  if (p == nullptr) {
    std::fprintf(stderr, "rte_pktmbuf_pool_create %s: %s\n", name, rte_strerror(rte_errno));
    std::abort();
  }
  return p;
}

void check_pool_whole(rte_mempool* pool) {
  const unsigned out = rte_mempool_in_use_count(pool);
  if (out != 0) {
    std::fprintf(stderr, "mempool %s: %u mbufs still out after the input (leak)\n", pool->name,
                 out);
    std::abort();
  }
}

rte_mbuf* chain_from(rte_mempool* pool, std::span<const uint8_t> bytes,
                     std::span<const size_t> cuts) {
  rte_mbuf* head = nullptr;
  rte_mbuf* last = nullptr;
  size_t at = 0;
  size_t cut = 0;
  do {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) {
      rte_pktmbuf_free(head);
      return nullptr;
    }
    const size_t room = rte_pktmbuf_tailroom(m);
    size_t len = bytes.size() - at;
    if (cut < cuts.size()) len = std::min(len, cuts[cut++]);
    len = std::min(len, room);
    char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
    if (len != 0) std::copy_n(bytes.data() + at, len, reinterpret_cast<uint8_t*>(d));
    at += len;
    if (head == nullptr) {
      head = m;
    } else {
      last->next = m;
      head->nb_segs++;
      head->pkt_len += static_cast<uint32_t>(len);
    }
    last = m;
  } while (at < bytes.size());
  return head;
}

}  // namespace spraynet::fuzz
