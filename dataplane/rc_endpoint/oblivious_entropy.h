// Oblivious entropy spraying at the NIC (Ultra Ethernet's "oblivious" multipath; htsim's
// UecMpOblivious in csg-htsim sim/uec_mp.cpp): a RoCEv2 QP writes a different UDP source port,
// the entropy that ECMP switches hash, into each packet it sends, so that plain ECMP switches
// spread one QP's packets over every path without knowing anything of spraying. The values are
// a per-QP permutation of `values` entropies: packet k takes (k mod values) XOR a mask drawn at
// random for each round of `values` packets, so every value is used once per round, in an order
// that changes every round and differs between QPs. The QP's rxe port gives the bits above the
// permuted ones, so two QPs use different ports. Nothing is learnt from feedback (REPS does).
#pragma once

#include <cstdint>

namespace spraynet {

class ObliviousEntropy {
 public:
  static constexpr uint32_t kMaxValues = 1u << 14;  // rxe's source ports: 0xC000 + 14 bits

  // `values`: a power of two in [1, 2^14] (throws std::invalid_argument otherwise); `base_port`:
  // the QP's fixed UDP source port, whose bits above the permuted ones every packet keeps;
  // `seed`: the rounds' masks (the same seed, the same ports).
  ObliviousEntropy(uint32_t values, uint16_t base_port, uint64_t seed);

  // The UDP source port of the next packet.
  uint16_t next();

  uint32_t values() const { return mask_ + 1; }

 private:
  uint32_t draw();  // splitmix64's top 32 bits

  uint32_t mask_;
  uint16_t base_;  // the base port with the permuted bits cleared
  uint32_t index_ = 0;
  uint32_t xor_ = 0;
  uint64_t state_;
};

}  // namespace spraynet
