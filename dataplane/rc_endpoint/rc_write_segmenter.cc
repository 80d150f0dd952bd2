#include "dataplane/rc_endpoint/rc_write_segmenter.h"

#include <stdexcept>

#include "dataplane/wire/roce_headers.h"

namespace spraynet {

bool valid_path_mtu(uint32_t mtu) {
  return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

RcWriteSegmenter::RcWriteSegmenter(uint32_t message_bytes, uint32_t mtu)
    : bytes_(message_bytes), mtu_(mtu) {
  if (!valid_path_mtu(mtu)) throw std::invalid_argument("path MTU must be 256..4096, a power of 2");
  packets_ = message_bytes == 0 ? 1 : (message_bytes + mtu - 1) / mtu;
}

RcWritePacket RcWriteSegmenter::packet(uint32_t index, uint32_t first_psn) const {
  RcWritePacket p;
  p.psn = psn_add(first_psn, index);
  p.offset = index * mtu_;
  p.length = index + 1 < packets_ ? mtu_ : bytes_ - p.offset;
  const bool first = index == 0;
  const bool last = index + 1 == packets_;
  if (first && last) {
    p.opcode = opcode::kRcWriteOnly;
  } else if (first) {
    p.opcode = opcode::kRcWriteFirst;
  } else if (last) {
    p.opcode = opcode::kRcWriteLast;
  } else {
    p.opcode = opcode::kRcWriteMiddle;
  }
  p.has_reth = first;
  p.ack_req = last;
  return p;
}

}  // namespace spraynet
