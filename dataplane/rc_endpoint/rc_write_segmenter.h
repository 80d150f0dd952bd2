// Splits an RDMA WRITE message into RC packets the way Soft-RoCE (rxe) does: ONLY when it fits
// one path MTU, else FIRST (with RETH), MIDDLE..., LAST; one PSN per packet; AckReq on the last
// packet of the message. Used by roce_pcap and by the RC traffic engine alike.
#pragma once

#include <cstdint>

namespace spraynet {

// IB path MTUs (payload bytes per packet): 256, 512, 1024, 2048, 4096.
bool valid_path_mtu(uint32_t mtu);

struct RcWritePacket {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  uint32_t offset = 0;  // of this packet's payload within the message
  uint32_t length = 0;  // payload bytes
  bool has_reth = false;
  bool ack_req = false;
};

class RcWriteSegmenter {
 public:
  // mtu must satisfy valid_path_mtu(); a zero-length message is one WRITE ONLY packet.
  RcWriteSegmenter(uint32_t message_bytes, uint32_t mtu);

  uint32_t packets() const { return packets_; }
  // Packet `index` (0-based) of the message whose first packet carries `first_psn`.
  RcWritePacket packet(uint32_t index, uint32_t first_psn) const;

 private:
  uint32_t bytes_;
  uint32_t mtu_;
  uint32_t packets_;
};

}  // namespace spraynet
