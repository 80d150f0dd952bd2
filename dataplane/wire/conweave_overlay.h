// ConWeave's overlay between leaves (Song et al., SIGCOMM 2023; conweave-ns3 carries the same
// fields as packet tags, the paper's Tofino2 code as a header): the VXLAN tunnel of
// vxlan_tunnel.h with flags I | W (0x28), ConWeave's fields in VXLAN's reserved bits and 8 more
// bytes after the VXLAN word (58 bytes in all on every link between the leaves):
//   byte 1   message (bits 7-6: 0 data, 1 RTT reply, 2 CLEAR, 3 NOTIFY) | flag (bits 5-4, data:
//            1 DATA, 2 INIT = RTT request, 3 TAIL) | phase (bit 3: sent on the new path)
//   byte 2   epoch
//   byte 3   the source leaf's uplink (bits 3-0)
//   byte 4-6 VNI;  byte 7 the sending leaf's id
//   extra    data: the source leaf's send time and this epoch's TAIL's (ns, 32 bits each);
//            RTT reply, CLEAR, NOTIFY: the flow's 64-bit key (for NOTIFY 0: it names a path)
// Data packets carry the inner frame untouched (its ICRC stays valid; a CE mark on the outer
// header is copied in on the way out, RFC 6040). The control messages (RTT reply, CLEAR,
// NOTIFY) are frames of their own from the destination leaf to the source leaf, 60 bytes,
// carried in a class PFC does not pause (its DSCP is the caller's).
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <optional>

#include "dataplane/wire/vxlan_tunnel.h"

namespace spraynet {

inline constexpr uint8_t kVxlanFlagConweave = 0x20;
inline constexpr uint16_t kConweaveOverlayBytes = kVxlanOuterBytes + 8;

enum class ConweaveFlag : uint8_t { kData = 1, kInit = 2, kTail = 3 };
enum class ConweaveMessage : uint8_t { kData = 0, kRttReply = 1, kClear = 2, kNotify = 3 };

// What a data packet carries between the leaves.
struct ConweaveTag {
  uint8_t member = 0;  // the source leaf's uplink (for NOTIFY)
  uint8_t epoch = 0;   // wraps: compared as serial numbers
  uint8_t phase = 0;   // 1: sent on the new path after this epoch's TAIL
  ConweaveFlag flag = ConweaveFlag::kData;
  uint32_t ts_tx = 0;    // the source leaf's clock when it sent the packet (ns, low 32 bits)
  uint32_t ts_tail = 0;  // this epoch's TAIL's ts_tx, 0 before the reroute
};

struct ConweaveWire {
  ConweaveMessage message = ConweaveMessage::kData;
  ConweaveTag tag;   // data: all of it; control: epoch, phase, member
  uint8_t leaf = 0;  // the sending leaf
  uint32_t vni = 0;
  uint64_t flow_key = 0;  // control messages
};

// Wraps an IPv4 frame for the destination leaf. False, unchanged, without 58 bytes of headroom.
bool conweave_encapsulate(rte_mbuf* m, const VxlanTunnel& tunnel, const ConweaveTag& tag,
                          uint8_t leaf, uint32_t vni);
// Writes a control message into the empty mbuf `m` (60 bytes). False when it has no room.
bool conweave_control(rte_mbuf* m, const uint8_t macs[12], const VxlanTunnel& tunnel, uint8_t dscp,
                      const ConweaveWire& message);
// The fields of a frame with the overlay (a data frame needs an inner Ethernet header after it),
// and its outer destination in *dst_vtep; nullopt otherwise.
std::optional<ConweaveWire> conweave_parse(const rte_mbuf* m, uint32_t* dst_vtep = nullptr);
// Strips a data frame's overlay (see above). False, unchanged, for anything else.
bool conweave_decapsulate(rte_mbuf* m);

}  // namespace spraynet
