#include "dataplane/wire/icrc.h"

#include <immintrin.h>
#include <isa-l/crc.h>
#include <rte_mbuf.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/payload_store.h"

namespace spraynet {

namespace {
// The CRC of the 8 bytes of 0xFF and the masked IPv4, UDP and BTH headers at `ip`; sets
// `masked_len` to how many bytes of `ip` that covered.
uint32_t icrc_of_headers(const uint8_t* ip, size_t& masked_len) {
  static constexpr uint8_t kPrefix[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
  masked_len = ihl + 8 + 12;  // IPv4 header (with options), UDP, BTH
  uint8_t head[60 + 8 + 12];
  std::memcpy(head, ip, masked_len);
  head[1] = 0xFF;                        // TOS (DSCP+ECN)
  head[8] = 0xFF;                        // TTL
  head[10] = head[11] = 0xFF;            // header checksum
  head[ihl + 6] = head[ihl + 7] = 0xFF;  // UDP checksum
  head[ihl + 8 + 4] = 0xFF;              // BTH FECN|BECN|reserved

  // ISA-L's crc32_gzip_refl is zlib's crc32 (same reflected polynomial, same chaining) with
  // PCLMULQDQ folding: several times faster on the payload, which is most of the bytes.
  static const uint32_t prefix_crc = crc32_gzip_refl(0, kPrefix, sizeof kPrefix);
  return crc32_gzip_refl(prefix_crc, head, masked_len);
}
}  // namespace

namespace {
// a(x) * b(x) mod P in CRC-32's reflected bit order (bit i is x^(31-i)): what zlib's
// multmodp does in 32 shift-and-add steps, as one carry-less multiply and a 4-byte reduction.
// The product of two reflected 32-bit values, shifted left once, is the 64-bit reflected
// product R(x) = H(x) x^32 + L(x), H in its low word; R mod P = (H x^32 mod P) + L, and
// H x^32 mod P is H run through four zero bytes of the byte-wise CRC register.
__attribute__((target("pclmul"))) uint32_t multmodp_clmul(uint32_t a, uint32_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                         _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  const uint64_t r = static_cast<uint64_t>(_mm_cvtsi128_si64(p)) << 1;
  static const z_crc_t* const table = get_crc_table();
  uint32_t h = static_cast<uint32_t>(r);
  for (int i = 0; i < 4; ++i) h = static_cast<uint32_t>(table[h & 0xFF]) ^ (h >> 8);
  return h ^ static_cast<uint32_t>(r >> 32);
}
}  // namespace

uint32_t crc32_combine_with_op(uint32_t crc1, uint32_t crc2, uint32_t op) {
  static const bool clmul = __builtin_cpu_supports("pclmul");
  if (!clmul) return static_cast<uint32_t>(crc32_combine_op(crc1, crc2, op));
  return multmodp_clmul(op, crc1) ^ crc2;
}

uint32_t compute_icrc(const uint8_t* ip, size_t len) {
  size_t masked_len = 0;
  const uint32_t crc = icrc_of_headers(ip, masked_len);
  return crc32_gzip_refl(crc, ip + masked_len, len - masked_len);
}

uint32_t compute_icrc(const rte_mbuf* m, size_t l3_offset, size_t len, const PayloadStore* store) {
  const uint8_t* ip = rte_pktmbuf_mtod_offset(m, const uint8_t*, l3_offset);
  size_t masked_len = 0;
  uint32_t crc = icrc_of_headers(ip, masked_len);
  size_t left = len - masked_len;
  // The rest of the first segment, then each further one, up to `len` bytes in all.
  const uint8_t* data = ip + masked_len;
  size_t avail = m->data_len - l3_offset - masked_len;
  for (const rte_mbuf* seg = m;;) {
    const size_t n = std::min(left, avail);
    if (n != 0) {
      // Only an external buffer can be the store's: the headers and copied payloads are not
      // looked up.
      const bool lent = store != nullptr && RTE_MBUF_HAS_EXTBUF(seg);
      if (const auto known = lent ? store->crc(data, n) : std::nullopt) {
        crc = crc32_combine_with_op(crc, known->crc, known->combine_op);
      } else {
        crc = crc32_gzip_refl(crc, data, n);
      }
      left -= n;
    }
    seg = seg->next;
    if (left == 0 || seg == nullptr) break;
    data = rte_pktmbuf_mtod(seg, const uint8_t*);
    avail = seg->data_len;
  }
  return crc;
}

bool verify_icrc(const rte_mbuf* m, size_t l3_offset, size_t len, const PayloadStore* store) {
  if (l3_offset + 1 > m->data_len) return false;
  const size_t masked_len = size_t{rte_pktmbuf_mtod(m, const uint8_t*)[l3_offset] & 0x0Fu} * 4 + 20;
  // The masked headers must be in the first segment, and the ICRC after them.
  if (l3_offset + masked_len > m->data_len || len < masked_len + 4 ||
      l3_offset + len > m->pkt_len) {
    return false;
  }
  uint8_t copy[4];
  const auto* stored = static_cast<const uint8_t*>(
      rte_pktmbuf_read(m, static_cast<uint32_t>(l3_offset + len - 4), 4, copy));
  return stored != nullptr && compute_icrc(m, l3_offset, len - 4, store) == load_icrc(stored);
}

uint32_t load_icrc(const uint8_t* b) {
  return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

bool verify_icrc(const uint8_t* ip, size_t len) {
  return compute_icrc(ip, len - 4) == load_icrc(ip + len - 4);
}

void write_icrc(uint8_t* ip, size_t len) {
  const uint32_t icrc = compute_icrc(ip, len);
  ip[len] = static_cast<uint8_t>(icrc);
  ip[len + 1] = static_cast<uint8_t>(icrc >> 8);
  ip[len + 2] = static_cast<uint8_t>(icrc >> 16);
  ip[len + 3] = static_cast<uint8_t>(icrc >> 24);
}

}  // namespace spraynet
