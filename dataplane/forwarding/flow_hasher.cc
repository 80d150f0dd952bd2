#include "dataplane/forwarding/flow_hasher.h"

#include <rte_hash_crc.h>
#include <zlib.h>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

std::string_view to_string(HashAlgorithm algorithm) {
  return algorithm == HashAlgorithm::kCrc32c ? "crc32c" : "crc32";
}

std::optional<HashAlgorithm> parse_hash_algorithm(std::string_view name) {
  if (name == "crc32c") return HashAlgorithm::kCrc32c;
  if (name == "crc32") return HashAlgorithm::kCrc32;
  return std::nullopt;
}

size_t FlowHasher::key_bytes(const FlowKey& key, uint8_t* out) const {
  store_be32(out, key.src_ip);
  store_be32(out + 4, key.dst_ip);
  store_be16(out + 8, key.src_port);
  store_be16(out + 10, key.dst_port);
  out[12] = key.proto();
  if (!config_.dest_qp_in_key) return kKeyBytes;
  store_be24(out + 13, key.dest_qp());
  return kKeyBytesWithQp;
}

uint32_t FlowHasher::hash(const FlowKey& key) const {
  // rte_hash_crc reads 8/4/2-byte words straight from the buffer: keep it aligned.
  alignas(8) uint8_t bytes[kKeyBytesWithQp];
  const size_t len = key_bytes(key, bytes);
  if (config_.algorithm == HashAlgorithm::kCrc32c) {
    return rte_hash_crc(bytes, static_cast<uint32_t>(len), config_.seed);
  }
  return static_cast<uint32_t>(crc32(config_.seed, bytes, static_cast<uInt>(len)));
}

}  // namespace spraynet
