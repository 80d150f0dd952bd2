// The conservative kernel's toy model (token_model.h) across MPI ranks: run under
// `mpirun -np N`, each rank runs its share of the LPs (on 2 threads), every rank's traces are
// gathered, and the whole must equal the sequential reference, for the ring and the mesh.
// Prints one line per shape on rank 0; exits 0 when both hold, 1 otherwise (on every rank).
#include <cstdio>
#include <exception>
#include <string>

#include "fabric/kernel/mpi_rank_link.h"
#include "fabric/kernel/rank_bytes.h"
#include "tests/fabric/token_model.h"

using namespace spraynet::fabric;
using namespace spraynet::fabric::toy;

namespace {

// Every rank's LPs' traces, put together on every rank.
Traces gathered(MpiRankLink& link, const Traces& mine) {
  ByteWriter w;
  for (uint32_t lp = 0; lp < mine.size(); ++lp) {
    if (mine[lp].empty()) continue;
    w.put(lp);
    w.put_vector(mine[lp]);
  }
  Traces all(mine.size());
  for (const std::string& bytes : link.all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto lp = r.get<uint32_t>();
      all.at(lp) = r.get_vector<TraceEntry>();
    }
  }
  return all;
}

}  // namespace

int main() {
  try {
    MpiRankLink link;
    bool ok = true;
    const struct {
      const char* name;
      Shape shape;
      uint32_t lps, tokens;
    } cases[] = {{"ring", Shape::kRing, 5, 12}, {"mesh", Shape::kMesh, 7, 40}};
    for (const auto& c : cases) {
      const Traces ref = run_sequential(c.shape, c.lps, c.tokens);
      const Traces all = gathered(link, run_kernel(c.shape, c.lps, c.tokens, 2, &link));
      const bool same = all == ref;
      ok = ok && same;
      if (link.rank() == 0) {
        std::printf("kernel over %u ranks, %s of %u LPs: %s\n", link.size(), c.name, c.lps,
                    same ? "the sequential reference's trace" : "DIFFERS from the reference");
      }
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_mpi_toy: %s\n", e.what());
    return 2;
  }
}
