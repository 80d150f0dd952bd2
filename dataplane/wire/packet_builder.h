// Builds genuine Ethernet / [802.1Q] / IPv4 / UDP frames and RoCEv2 packets on top of them
// (BTH, RETH/AETH/ImmDt as the opcode requires, payload, pad to 4 bytes, ICRC), into a byte
// buffer or straight into an mbuf. The IPv4 header checksum and the ICRC are always right.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/wire/roce_headers.h"

struct rte_mbuf;
struct rte_mempool;

namespace spraynet {

class PayloadStore;

using MacAddress = std::array<uint8_t, 6>;

struct EthernetSpec {
  MacAddress dst{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  MacAddress src{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  bool vlan = false;  // one 802.1Q tag carrying pcp and vlan_id
  uint8_t pcp = 0;
  uint16_t vlan_id = 0;
};

struct Ipv4Spec {
  uint32_t src = 0;  // host byte order
  uint32_t dst = 0;
  uint8_t tos = 0;
  uint8_t ttl = 64;
  uint16_t id = 0;
  bool dont_fragment = true;  // RoCEv2 requires DF
};

struct UdpSpec {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint16_t checksum = 0;  // written as given: 0 (none) or, on sprayed RoCE packets, a PPCID
};

struct FrameSpec {
  EthernetSpec eth;
  Ipv4Spec ip;
  UdpSpec udp;
  std::span<const uint8_t> payload;  // UDP payload, or RoCE payload for build_roce_frame
};

struct RoceSpec {
  uint8_t opcode = opcode::kRcWriteOnly;
  bool solicited = false;
  bool migreq = false;
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
  // RETH (WRITE FIRST/ONLY, READ REQUEST)
  uint64_t virtual_address = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
  // AETH (ACK, READ RESPONSE FIRST/LAST/ONLY, ATOMIC ACK)
  uint8_t syndrome = aeth::kAck;
  uint32_t msn = 0;
  // ImmDt
  uint32_t immediate = 0;
};

inline constexpr size_t kMinFrameLength = 60;  // without FCS

size_t udp_frame_length(const FrameSpec& f);
// Returns the frame length, or 0 when `out` is too small. The UDP destination port is f.udp's.
size_t build_udp_frame(std::span<uint8_t> out, const FrameSpec& f);

// Frame length for a RoCE packet, or 0 for an opcode roce_extension_length() does not know.
size_t roce_frame_length(const FrameSpec& f, const RoceSpec& r);
// UDP destination port is forced to 4791. Returns the frame length, or 0 when the opcode is
// unknown or `out` is too small.
size_t build_roce_frame(std::span<uint8_t> out, const FrameSpec& f, const RoceSpec& r);

// The same into a fresh mbuf from `pool`; nullptr when the pool is empty or the frame does not
// fit one segment.
rte_mbuf* build_udp_mbuf(rte_mempool* pool, const FrameSpec& f);
rte_mbuf* build_roce_mbuf(rte_mempool* pool, const FrameSpec& f, const RoceSpec& r);

// The same frame, but when f.payload lies in `store` (may be null) and is not tiny, or does
// not fit one segment, as a chain of three: the headers, the payload attached from the store
// (no copy), and the pad and ICRC; the last two from the store's segment pool, if it has one.
// nullptr when a pool is empty or the frame is impossible.
rte_mbuf* build_roce_mbuf(rte_mempool* pool, const FrameSpec& f, const RoceSpec& r,
                          PayloadStore* store);

}  // namespace spraynet
