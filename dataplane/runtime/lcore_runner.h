// Runs one function on a set of EAL lcores and waits for all of them.
#pragma once

#include <functional>
#include <vector>

namespace spraynet::runtime {

// Workers are launched with rte_eal_remote_launch; if the main lcore is in the set, its share
// runs in the calling thread (which must then be the main lcore), so a set of only the main
// lcore needs no worker at all. `index` is the lcore's position in the set, 0..n-1.
class LcoreRunner {
 public:
  using Fn = std::function<void(unsigned lcore_id, unsigned index)>;

  // Throws std::invalid_argument for an empty set, a duplicate, or an lcore EAL did not enable.
  explicit LcoreRunner(std::vector<unsigned> lcores);
  // Every enabled lcore, main first.
  static std::vector<unsigned> all_lcores();

  const std::vector<unsigned>& lcores() const { return lcores_; }

  // Returns when every lcore has returned. If any threw, the exception of the lowest index is
  // rethrown after all have finished; a worker that cannot be launched throws too.
  void run(const Fn& fn) const;

 private:
  std::vector<unsigned> lcores_;
};

}  // namespace spraynet::runtime
