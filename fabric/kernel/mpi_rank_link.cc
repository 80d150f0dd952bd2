#include "fabric/kernel/mpi_rank_link.h"

#include <mpi.h>

#include <cstdlib>
#include <stdexcept>

namespace spraynet::fabric {
namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

// MPI counts are ints: a round's frames for one rank stay far below 2 GiB.
int to_int(size_t n) {
  if (n > static_cast<size_t>(INT32_MAX)) throw std::runtime_error("MPI: message over 2 GiB");
  return static_cast<int>(n);
}

}  // namespace

MpiRankLink::MpiRankLink() {
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  if (initialised == 0) check(MPI_Init(nullptr, nullptr), "MPI_Init");
  int r = 0, s = 1;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &s), "MPI_Comm_size");
  rank_ = static_cast<uint32_t>(r);
  size_ = static_cast<uint32_t>(s);
}

MpiRankLink::~MpiRankLink() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised == 0) MPI_Finalize();
}

void MpiRankLink::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this is for the compiler
}

std::string MpiRankLink::host() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int n = 0;
  if (MPI_Get_processor_name(name, &n) != MPI_SUCCESS) return "?";
  return std::string(name, static_cast<size_t>(n));
}

void MpiRankLink::reduce(std::span<uint64_t> mins, std::span<uint64_t> sums) {
  if (!mins.empty()) {
    check(MPI_Allreduce(MPI_IN_PLACE, mins.data(), to_int(mins.size()), MPI_UINT64_T, MPI_MIN,
                        MPI_COMM_WORLD),
          "MPI_Allreduce(min)");
  }
  if (!sums.empty()) {
    check(MPI_Allreduce(MPI_IN_PLACE, sums.data(), to_int(sums.size()), MPI_UINT64_T, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce(sum)");
  }
}

std::vector<std::string> MpiRankLink::exchange(const std::vector<std::string>& to) {
  std::vector<int> send_n(size_), recv_n(size_), send_at(size_), recv_at(size_);
  std::string out;
  for (uint32_t r = 0; r < size_; ++r) {
    send_at[r] = to_int(out.size());
    if (r != rank_ && r < to.size()) out += to[r];
    send_n[r] = to_int(out.size()) - send_at[r];
  }
  check(MPI_Alltoall(send_n.data(), 1, MPI_INT, recv_n.data(), 1, MPI_INT, MPI_COMM_WORLD),
        "MPI_Alltoall");
  size_t total = 0;
  for (uint32_t r = 0; r < size_; ++r) {
    recv_at[r] = to_int(total);
    total += static_cast<size_t>(recv_n[r]);
  }
  std::string in(total, '\0');
  check(MPI_Alltoallv(out.data(), send_n.data(), send_at.data(), MPI_BYTE, in.data(), recv_n.data(),
                      recv_at.data(), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Alltoallv");
  std::vector<std::string> from(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    from[r] = in.substr(static_cast<size_t>(recv_at[r]), static_cast<size_t>(recv_n[r]));
  }
  return from;
}

std::vector<std::string> MpiRankLink::all_gather(const std::string& mine) {
  std::vector<int> n(size_), at(size_);
  const int my_n = to_int(mine.size());
  check(MPI_Allgather(&my_n, 1, MPI_INT, n.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  size_t total = 0;
  for (uint32_t r = 0; r < size_; ++r) {
    at[r] = to_int(total);
    total += static_cast<size_t>(n[r]);
  }
  std::string all(total, '\0');
  check(MPI_Allgatherv(mine.data(), my_n, MPI_BYTE, all.data(), n.data(), at.data(), MPI_BYTE,
                       MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    out[r] = all.substr(static_cast<size_t>(at[r]), static_cast<size_t>(n[r]));
  }
  return out;
}

}  // namespace spraynet::fabric
