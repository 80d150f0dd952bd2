// A frame on its way from one rank of a fabric_emu --mpi run to another: packed as bytes where it
// leaves (and freed there), rebuilt from the receiving rank's own pools where it arrives, segment
// for segment: a segment attached from the PayloadStore travels as (region, offset) and is
// attached again from the receiver's store (every rank builds the same store), the others as
// their bytes, with the head's metadata and dynamic fields. The frame that arrives is the frame
// that left, down to which pool each segment came from.
#pragma once

#include <rte_mbuf.h>

#include "dataplane/wire/payload_store.h"
#include "fabric/kernel/rank_bytes.h"

namespace spraynet::fabric {

class FramePacker {
 public:
  // `segment_pool`: the pool of a shared payload's small segments (may be null or == pool).
  FramePacker(const PayloadStore& store, rte_mempool* pool, rte_mempool* segment_pool)
      : store_(store), pool_(pool), segment_pool_(segment_pool) {}
  // Appends `m` to `w` and frees it.
  void pack(ByteWriter& w, rte_mbuf* m) const;
  // The frame pack() wrote. Throws std::runtime_error when a pool is empty or the bytes do not
  // read as a frame (a rank from another build).
  rte_mbuf* unpack(ByteReader& r) const;

 private:
  const PayloadStore& store_;
  rte_mempool* pool_;
  rte_mempool* segment_pool_;
};

}  // namespace spraynet::fabric
