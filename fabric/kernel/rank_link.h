// What the ranks of one fabric_emu run say to each other (`--mpi`): the run's logical processes
// (fabric.h) are shared out among ranks, one rank per process (on one machine or several), and
// between rounds the ranks agree on the next round and trade the frames that cross between them.
// The Fabric sees only this interface; MpiRankLink carries it over MPI. Every call is collective:
// every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace spraynet::fabric {

class RankLink {
 public:
  virtual ~RankLink() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t size() const = 0;
  // In place, element by element over every rank: the smallest of `mins`, the sum of `sums`.
  virtual void reduce(std::span<uint64_t> mins, std::span<uint64_t> sums) = 0;
  // to[r]: the bytes for rank r (to[rank()] is ignored). Returns what each rank sent this one.
  virtual std::vector<std::string> exchange(const std::vector<std::string>& to) = 0;
  // Every rank's `mine`, on every rank, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

}  // namespace spraynet::fabric
