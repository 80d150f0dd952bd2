// RankLink over MPI (OpenMPI from Debian's packages; built only where meson finds it). One object
// per process: it initialises MPI (MPI_Init) and finalises it when it goes; MPI_COMM_WORLD's
// ranks are the fabric's ranks. Throws std::runtime_error when MPI cannot start.
#pragma once

#include "fabric/kernel/rank_link.h"

namespace spraynet::fabric {

class MpiRankLink final : public RankLink {
 public:
  MpiRankLink();
  ~MpiRankLink() override;
  MpiRankLink(const MpiRankLink&) = delete;
  MpiRankLink& operator=(const MpiRankLink&) = delete;
  // Ends every rank of the run with `code` (a rank that failed cannot leave the others waiting
  // in a collective call).
  [[noreturn]] void abort(int code);
  // This rank's host name (MPI_Get_processor_name), for messages.
  std::string host() const;
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  void reduce(std::span<uint64_t> mins, std::span<uint64_t> sums) override;
  std::vector<std::string> exchange(const std::vector<std::string>& to) override;
  std::vector<std::string> all_gather(const std::string& mine) override;

 private:
  uint32_t rank_ = 0;
  uint32_t size_ = 1;
};

}  // namespace spraynet::fabric
