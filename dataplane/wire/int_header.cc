#include "dataplane/wire/int_header.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/ipv4_ttl.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "dataplane/wire/vxlan_tunnel.h"

namespace spraynet {

namespace {

constexpr size_t kUdpHeader = 8;
// INT-MD header byte 0: Ver (7-4), D (3), E (2), M (1), reserved (0).
constexpr uint8_t kFlagD = 0x08, kFlagE = 0x04, kFlagM = 0x02;

// The two kinds of frame the operations run on: both give the frame's bytes, contiguous for at
// least head_len() of them (every header edited lies there), and can open or close bytes at an
// offset in that part. open/close return the frame's (possibly moved) first byte.
class VectorFrame {
 public:
  explicit VectorFrame(std::vector<uint8_t>& v) : v_(v) {}
  uint8_t* data() const { return v_.data(); }
  size_t head_len() const { return v_.size(); }
  size_t total_len() const { return v_.size(); }
  ParseStatus parse(ParsedPacket& out) const {
    return PacketParser().parse(v_.data(), v_.size(), out);
  }
  ParseStatus parse_at(size_t offset, ParsedPacket& out) const {
    return PacketParser().parse(v_.data() + offset, v_.size() - offset, out);
  }
  bool can_open(size_t /*n*/) const { return true; }
  uint8_t* open(size_t offset, size_t n) {
    v_.insert(v_.begin() + static_cast<std::ptrdiff_t>(offset), n, uint8_t{0});
    return v_.data();
  }
  uint8_t* close(size_t offset, size_t n) {
    const auto at = v_.begin() + static_cast<std::ptrdiff_t>(offset);
    v_.erase(at, at + static_cast<std::ptrdiff_t>(n));
    return v_.data();
  }

 private:
  std::vector<uint8_t>& v_;
};

// As vxlan_tunnel.cc and conweave_overlay.cc do: the bytes before the offset move into the
// headroom (prepend) or forward over the removed ones (adj); the payload never moves.
class MbufFrame {
 public:
  explicit MbufFrame(rte_mbuf* m) : m_(m) {}
  uint8_t* data() const { return rte_pktmbuf_mtod(m_, uint8_t*); }
  size_t head_len() const { return rte_pktmbuf_data_len(m_); }
  size_t total_len() const { return rte_pktmbuf_pkt_len(m_); }
  ParseStatus parse(ParsedPacket& out) const { return PacketParser().parse(m_, out); }
  ParseStatus parse_at(size_t offset, ParsedPacket& out) const {
    return PacketParser().parse_at(m_, offset, out);
  }
  bool can_open(size_t n) const { return rte_pktmbuf_headroom(m_) >= n; }
  uint8_t* open(size_t offset, size_t n) {
    const uint8_t* old = data();
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m_, static_cast<uint16_t>(n)));
    if (p == nullptr) return nullptr;  // can_open said there was room
    std::memmove(p, old, offset);
    return p;
  }
  uint8_t* close(size_t offset, size_t n) {
    uint8_t* p = data();
    std::memmove(p + n, p, offset);
    rte_pktmbuf_adj(m_, static_cast<uint16_t>(n));
    return data();
  }

 private:
  rte_mbuf* m_;
};

// The inner frame of a leaf overlay (vxlan_tunnel.h) inside either kind of frame above: a spine
// or leaf between the overlay's ends pushes its record on the inner packet's INT, and the outer
// IPv4 total length (its checksum patched) and UDP length grow with it (the outer UDP checksum
// is 0, RFC 7348).
template <typename Outer>
class InnerFrame {
 public:
  InnerFrame(Outer outer, size_t base) : outer_(outer), base_(base) {}
  uint8_t* data() const { return outer_.data() + base_; }
  size_t head_len() const { return outer_.head_len() - base_; }
  size_t total_len() const { return outer_.total_len(); }  // what goes on the wire
  ParseStatus parse(ParsedPacket& out) const { return outer_.parse_at(base_, out); }
  bool can_open(size_t n) const { return outer_.can_open(n); }
  uint8_t* open(size_t offset, size_t n) {
    uint8_t* f = outer_.open(base_ + offset, n);
    if (f == nullptr) return nullptr;
    add_outer_lengths(f, static_cast<int>(n));
    return f + base_;
  }
  uint8_t* close(size_t offset, size_t n) {
    uint8_t* f = outer_.close(base_ + offset, n);
    add_outer_lengths(f, -static_cast<int>(n));
    return f + base_;
  }

 private:
  static void add_outer_lengths(uint8_t* f, int delta) {
    uint8_t* ip = f + kVxlanOuterIpOffset;
    const uint16_t old_total = load_be16(ip + 2);
    const auto new_total = static_cast<uint16_t>(old_total + delta);
    store_be16(ip + 2, new_total);
    patch_ipv4_checksum(ip, old_total, new_total);
    uint8_t* udp = ip + 20;
    store_be16(udp + 4, static_cast<uint16_t>(load_be16(udp + 4) + delta));
  }

  Outer outer_;
  size_t base_;
};

// Adds delta to the IPv4 total length (its checksum patched, RFC 1624) and to the UDP length.
// The UDP checksum is left alone: see the header.
void add_lengths(uint8_t* f, const ParsedPacket& pp, int delta) {
  uint8_t* ip = f + pp.l3_offset;
  const uint16_t old_total = load_be16(ip + 2);
  const auto new_total = static_cast<uint16_t>(old_total + delta);
  store_be16(ip + 2, new_total);
  patch_ipv4_checksum(ip, old_total, new_total);
  uint8_t* udp = f + pp.l4_offset;
  store_be16(udp + 4, static_cast<uint16_t>(load_be16(udp + 4) + delta));
}

void write_record(uint8_t* r, const IntHopRecord& h) {
  const uint64_t cells = std::min<uint64_t>(h.qlen_bytes / kIntQlenCellBytes, kIntMaxQlenCells);
  store_be32(r, uint32_t{h.queue_id} << 24 | static_cast<uint32_t>(cells));
  store_be64(r + 4, h.egress_ts_ns);
  store_be64(r + 12, h.tx_bytes);
  store_be32(r + 20, h.line_rate_mbps);
}

IntHopRecord read_record(const uint8_t* r) {
  IntHopRecord h;
  h.queue_id = r[0];
  h.qlen_bytes = uint64_t{load_be24(r + 1)} * kIntQlenCellBytes;
  h.egress_ts_ns = load_be64(r + 4);
  h.tx_bytes = load_be64(r + 12);
  h.line_rate_mbps = load_be32(r + 20);
  return h;
}

// The INT of a frame the parser read as `st`/`pp`, whose first `head` bytes at `f` are
// contiguous; false for anything that is not INT of this format on `port`, with every length
// checked against the UDP payload and `head` before a byte is read.
bool read_int(const uint8_t* f, size_t head, ParseStatus st, const ParsedPacket& pp, uint16_t port,
              IntStack& out) {
  // RoCE behind INT parses as RoCE with int_offset (packet_parser.h); anything else on an INT
  // port that the parser did not take for RoCE is UDP, and this checks it and says why not.
  if (port == kRoceV2UdpPort || st != ParseStatus::kOk ||
      !(pp.kind == PacketKind::kUdp || (pp.kind == PacketKind::kRoce && pp.int_offset != 0)) ||
      load_be16(f + pp.l4_offset + 2) != port) {
    return false;
  }
  // The parser has checked that the UDP length is the IPv4 payload's and lies in the frame.
  const size_t shim = size_t{pp.l4_offset} + kUdpHeader;
  const size_t udp_payload = size_t{pp.udp_length} - kUdpHeader;
  if (udp_payload < kIntHeaderBytes || shim + kIntHeaderBytes > head) return false;
  const uint8_t* s = f + shim;
  if ((s[0] >> 4) != kIntTypeMd || ((s[0] >> 2) & 3) != kIntNptUdpPayload) return false;
  const size_t words = s[1];
  const size_t int_bytes = kIntShimBytes + words * 4;
  if (words * 4 < kIntMdHeaderBytes || int_bytes > udp_payload || shim + int_bytes > head) {
    return false;
  }
  const uint8_t* md = s + kIntShimBytes;
  if ((md[0] >> 4) != kIntMdVersion || (md[2] & 0x1F) != kIntHopMlWords ||
      load_be16(md + 4) != kIntInstructionBitmap || load_be16(md + 6) != kIntHpccDomainId ||
      load_be16(md + 8) != kIntHpccDsInstruction) {
    return false;
  }
  const size_t stack = words * 4 - kIntMdHeaderBytes;
  if (stack % kIntHopBytes != 0) return false;  // not whole records of Hop ML words
  const size_t n = stack / kIntHopBytes;
  // A source never allows more hops than the Length can count (int_insert refuses them).
  if (n + md[3] > kIntMaxHops) return false;
  out = IntStack{};
  out.nhop = static_cast<uint8_t>(n);
  out.original_dport = load_be16(s + 2);
  out.length_words = static_cast<uint8_t>(words);
  out.remaining_hops = md[3];
  out.discard = (md[0] & kFlagD) != 0;
  out.hops_exceeded = (md[0] & kFlagE) != 0;
  out.mtu_exceeded = (md[0] & kFlagM) != 0;
  out.ds_flags = load_be16(md + 10);
  out.shim_offset = static_cast<uint16_t>(shim);
  // The stack's top is the newest record: the last hop of the path.
  const uint8_t* top = md + kIntMdHeaderBytes;
  for (size_t k = 0; k < n; ++k) out.hop[n - 1 - k] = read_record(top + k * kIntHopBytes);
  return true;
}

template <typename Frame>
bool parse_frame(const Frame& frame, uint16_t port, ParsedPacket& pp, IntStack& out) {
  const ParseStatus st = frame.parse(pp);
  return read_int(frame.data(), frame.head_len(), st, pp, port, out);
}

std::optional<IntStack> parse_bytes(std::span<const uint8_t> frame, uint16_t port) {
  ParsedPacket pp;
  IntStack st;
  const ParseStatus s = PacketParser().parse(frame.data(), frame.size(), pp);
  if (!read_int(frame.data(), frame.size(), s, pp, port, st)) return std::nullopt;
  return st;
}

template <typename Frame>
bool insert(Frame frame, uint8_t max_hops, uint16_t port) {
  if (port == kRoceV2UdpPort || max_hops > kIntMaxHops) return false;
  ParsedPacket pp;
  if (frame.parse(pp) != ParseStatus::kOk || pp.kind != PacketKind::kRoce || pp.int_offset != 0) {
    return false;
  }
  if (size_t{pp.ip_total_length} + kIntHeaderBytes > 0xFFFF) return false;
  const size_t shim = size_t{pp.l4_offset} + kUdpHeader;
  if (!frame.can_open(kIntHeaderBytes)) return false;
  uint8_t* f = frame.open(shim, kIntHeaderBytes);
  if (f == nullptr) return false;
  uint8_t* s = f + shim;
  s[0] = static_cast<uint8_t>(kIntTypeMd << 4 | kIntNptUdpPayload << 2);
  s[1] = kIntMdHeaderBytes / 4;  // the header, no records yet
  store_be16(s + 2, pp.dst_port);
  uint8_t* md = s + kIntShimBytes;
  md[0] = kIntMdVersion << 4;  // D, E, M clear
  md[1] = 0;
  md[2] = kIntHopMlWords;
  md[3] = max_hops;
  store_be16(md + 4, kIntInstructionBitmap);
  store_be16(md + 6, kIntHpccDomainId);
  store_be16(md + 8, kIntHpccDsInstruction);
  store_be16(md + 10, 0);  // DS flags
  store_be16(f + pp.l4_offset + 2, port);
  add_lengths(f, pp, static_cast<int>(kIntHeaderBytes));
  return true;
}

template <typename Frame>
IntPushResult push(Frame frame, const IntHopRecord& record, uint16_t port, size_t max_frame_len) {
  ParsedPacket pp;
  IntStack st;
  if (!parse_frame(frame, port, pp, st)) return IntPushResult::kNotInt;
  const size_t md = size_t{st.shim_offset} + kIntShimBytes;
  if (st.remaining_hops == 0) {
    frame.data()[md] |= kFlagE;
    return IntPushResult::kHopsExceeded;
  }
  if (size_t{pp.ip_total_length} + kIntHopBytes > 0xFFFF ||
      frame.total_len() + kIntHopBytes > max_frame_len || !frame.can_open(kIntHopBytes)) {
    frame.data()[md] |= kFlagM;
    return IntPushResult::kMtuExceeded;
  }
  const size_t top = md + kIntMdHeaderBytes;
  uint8_t* f = frame.open(top, kIntHopBytes);
  if (f == nullptr) return IntPushResult::kNotInt;
  write_record(f + top, record);
  f[st.shim_offset + 1] = static_cast<uint8_t>(st.length_words + kIntHopMlWords);
  f[md + 3] = static_cast<uint8_t>(st.remaining_hops - 1);
  add_lengths(f, pp, static_cast<int>(kIntHopBytes));
  return IntPushResult::kPushed;
}

// push on the frame, or, when it is no INT frame, on a leaf overlay's inner frame in it.
template <typename Frame>
IntPushResult push_here_or_inner(Frame frame, const IntHopRecord& record, uint16_t port,
                                 size_t max_frame_len) {
  const IntPushResult r = push(frame, record, port, max_frame_len);
  if (r != IntPushResult::kNotInt) return r;
  const size_t inner = vxlan_inner_frame_offset(frame.data(), frame.head_len());
  return inner == 0 ? r : push(InnerFrame(frame, inner), record, port, max_frame_len);
}

template <typename Frame>
bool strip(Frame frame, uint16_t port, IntStack* taken) {
  ParsedPacket pp;
  IntStack st;
  if (!parse_frame(frame, port, pp, st)) return false;
  if (taken != nullptr) *taken = st;
  const size_t n = st.int_bytes();
  uint8_t* f = frame.close(st.shim_offset, n);
  store_be16(f + pp.l4_offset + 2, st.original_dport);
  add_lengths(f, pp, -static_cast<int>(n));
  return true;
}

}  // namespace

std::string_view to_string(IntPushResult r) {
  switch (r) {
    case IntPushResult::kPushed:
      return "pushed";
    case IntPushResult::kHopsExceeded:
      return "hops_exceeded";
    case IntPushResult::kMtuExceeded:
      return "mtu_exceeded";
    case IntPushResult::kNotInt:
      return "not_int";
  }
  return "invalid";
}

bool int_insert(std::vector<uint8_t>& frame, uint8_t max_hops, uint16_t port) {
  return insert(VectorFrame(frame), max_hops, port);
}

IntPushResult int_push_hop(std::vector<uint8_t>& frame, const IntHopRecord& record, uint16_t port,
                           size_t max_frame_len) {
  return push_here_or_inner(VectorFrame(frame), record, port, max_frame_len);
}

std::optional<IntStack> int_parse(std::span<const uint8_t> frame, uint16_t port) {
  if (auto st = parse_bytes(frame, port)) return st;
  const size_t inner = vxlan_inner_frame_offset(frame.data(), frame.size());
  if (inner == 0) return std::nullopt;
  return parse_bytes(frame.subspan(inner), port);
}

bool int_strip(std::vector<uint8_t>& frame, uint16_t port, IntStack* taken) {
  return strip(VectorFrame(frame), port, taken);
}

bool int_insert(rte_mbuf* m, uint8_t max_hops, uint16_t port) {
  return insert(MbufFrame(m), max_hops, port);
}

IntPushResult int_push_hop(rte_mbuf* m, const IntHopRecord& record, uint16_t port,
                           size_t max_frame_len) {
  return push_here_or_inner(MbufFrame(m), record, port, max_frame_len);
}

bool int_make_headroom(rte_mbuf* m, size_t bytes) {
  const size_t head = rte_pktmbuf_headroom(m);
  if (head >= bytes) return true;
  const size_t shift = bytes - head;
  const size_t tail = size_t{m->buf_len} - m->data_off - m->data_len;  // the first segment's
  if (tail < shift || !RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1) return false;
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  std::memmove(d + shift, d, m->data_len);
  m->data_off = static_cast<uint16_t>(m->data_off + shift);
  return true;
}

std::optional<IntStack> int_parse(const rte_mbuf* m, uint16_t port) {
  ParsedPacket pp;
  IntStack st;
  // Read only: the frame wrapper's mutators are not used.
  const MbufFrame frame(const_cast<rte_mbuf*>(m));
  if (parse_frame(frame, port, pp, st)) return st;
  const size_t inner = vxlan_inner_frame_offset(frame.data(), frame.head_len());
  if (inner == 0 || !parse_frame(InnerFrame(frame, inner), port, pp, st)) return std::nullopt;
  return st;
}

bool int_strip(rte_mbuf* m, uint16_t port, IntStack* taken) {
  return strip(MbufFrame(m), port, taken);
}

}  // namespace spraynet
