#include "dataplane/forwarding/flow_hasher.h"

#include <rte_hash_crc.h>
#include <zlib.h>

#include <bit>

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
  if (config_.algorithm == HashAlgorithm::kCrc32c) {
    // rte_hash_crc over key_bytes' bytes (8-byte words, then 4, then 1, as it reads them), with
    // the words made in registers: the bytes never go through memory. Little-endian words of the
    // big-endian key bytes.
    static_assert(std::endian::native == std::endian::little);
    const uint64_t addresses =
        uint64_t{__builtin_bswap32(key.src_ip)} | uint64_t{__builtin_bswap32(key.dst_ip)} << 32;
    const uint32_t ports =
        uint32_t{__builtin_bswap16(key.src_port)} | uint32_t{__builtin_bswap16(key.dst_port)} << 16;
    const uint32_t h = rte_hash_crc_8byte(addresses, config_.seed);
    if (!config_.dest_qp_in_key)
      return rte_hash_crc_1byte(key.proto(), rte_hash_crc_4byte(ports, h));
    // Bytes 8-15: the ports, the protocol, DestQP big-endian in three bytes.
    const uint32_t qp = key.dest_qp();
    const uint64_t rest = uint64_t{ports} | uint64_t{key.proto()} << 32 |
                          uint64_t{(qp >> 16) & 0xFF} << 40 | uint64_t{(qp >> 8) & 0xFF} << 48 |
                          uint64_t{qp & 0xFF} << 56;
    return rte_hash_crc_8byte(rest, h);
  }
  alignas(8) uint8_t bytes[kKeyBytesWithQp];
  const size_t len = key_bytes(key, bytes);
  return static_cast<uint32_t>(crc32(config_.seed, bytes, static_cast<uInt>(len)));
}

}  // namespace spraynet
