// roce_pcap: writes genuine RoCEv2 RC RDMA WRITE traffic to a pcap file, segmented and
// numbered as Soft-RoCE (rxe) sends it, for net_pcap ports, Pktgen, Wireshark and the tests.
#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "dataplane/rc_endpoint/rc_write_segmenter.h"
#include "dataplane/runtime/program_args.h"
#include "dataplane/wire/packet_builder.h"

namespace {

using namespace spraynet;

// rxe picks a QP's UDP source port as 0xC000 + hash_32(qpn, 14): the kernel's multiplicative
// hash with the 32-bit golden ratio, keeping the top 14 bits.
uint16_t rxe_source_port(uint32_t qpn) {
  const uint32_t h = (qpn * 0x61C88647u) >> (32 - 14);
  return static_cast<uint16_t>(0xC000 + (h & 0x3FFF));
}

struct QpState {
  uint32_t qpn = 0;
  uint16_t sport = 0;
  uint32_t psn = 0;  // first PSN of the current message
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint32_t message = 0;  // messages completed
  uint32_t packet = 0;   // next packet within the current message
};

uint32_t parse_ipv4(const std::string& s, const char* option) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) {
    throw CLI::ValidationError(option, "not an IPv4 address: " + s);
  }
  return ntohl(a.s_addr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "roce_pcap: write RoCEv2 RC RDMA WRITE traffic to a pcap file.\n"
      "Each QP sends --messages messages of --msg-bytes bytes, segmented at --mtu into\n"
      "WRITE FIRST/MIDDLE/LAST (or ONLY) packets as Soft-RoCE does, AckReq set on the last\n"
      "packet of each message, one UDP source port per QP in 0xC000-0xFFFF (rxe's formula).\n"
      "QPs are interleaved packet by packet; timestamps are spaced at --gbps line rate.\n"
      "Every packet carries a valid IPv4 checksum and ICRC; the UDP checksum is 0."};
  std::string out;
  unsigned qps = 1, messages = 1, mtu = 1024;
  uint32_t msg_bytes = 4096;
  int64_t psn_start = -1;
  uint64_t seed = 1;
  std::string src_ip = "10.0.0.1", dst_ip = "10.0.0.2";
  unsigned tos = 0;
  double gbps = 100.0;
  uint32_t first_qpn = 0x11;
  std::string timestamps = "ns";

  app.add_option("--out", out, "output pcap file")->required();
  app.add_option("--qps", qps, "number of queue pairs")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  app.add_option("--messages", messages, "RDMA WRITE messages per QP")
      ->check(CLI::Range(1u, 100000000u))
      ->capture_default_str();
  app.add_option("--msg-bytes", msg_bytes, "bytes per message (0 allowed: one empty WRITE ONLY)")
      ->check(CLI::Range(0u, 0x7FFFFFFFu))
      ->capture_default_str();
  app.add_option("--mtu", mtu, "path MTU in payload bytes")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}))
      ->capture_default_str();
  app.add_option("--psn-start", psn_start,
                 "first PSN of every QP (default: random per QP from --seed, as rxe does)")
      ->check(CLI::Range(int64_t{0}, int64_t{0xFFFFFF}));
  app.add_option("--seed", seed, "seed for PSNs, rkeys and payload bytes")->capture_default_str();
  app.add_option("--first-qpn", first_qpn, "QP number of the first QP; QP i is first+i")
      ->check(CLI::Range(1u, 0xFFFFFFu))
      ->capture_default_str();
  app.add_option("--src-ip", src_ip, "requester IPv4 address")->capture_default_str();
  app.add_option("--dst-ip", dst_ip, "responder IPv4 address")->capture_default_str();
  app.add_option("--tos", tos, "IPv4 TOS byte (DSCP << 2 | ECN)")
      ->check(CLI::Range(0u, 255u))
      ->capture_default_str();
  app.add_option("--gbps", gbps, "line rate used to space the timestamps")
      ->check(CLI::Range(0.001, 10000.0))
      ->capture_default_str();
  // Pktgen-DPDK's own pcap reader (-s P:FILE) knows only the microsecond format's magic.
  app.add_option("--timestamps", timestamps,
                 "pcap timestamp precision: ns (nanosecond pcap) or us (classic microsecond "
                 "pcap, which Pktgen-DPDK reads)")
      ->check(CLI::IsMember({"ns", "us"}))
      ->capture_default_str();

  uint32_t sip = 0, dip = 0;
  if (const auto code = spraynet::runtime::parse_program_args(
          app, spraynet::runtime::all_program_args(argc, argv), "roce_pcap")) {
    return *code;
  }
  try {
    sip = parse_ipv4(src_ip, "--src-ip");
    dip = parse_ipv4(dst_ip, "--dst-ip");
    if (first_qpn + uint64_t{qps} - 1 > 0xFFFFFF) {
      throw CLI::ValidationError("--qps", "--first-qpn + --qps runs past QP number 0xFFFFFF");
    }
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "roce_pcap: %s\n", e.what());
    return spraynet::runtime::kExitUsage;
  }

  std::mt19937_64 rng(seed);
  std::vector<QpState> qp(qps);
  for (unsigned i = 0; i < qps; ++i) {
    qp[i].qpn = first_qpn + i;
    qp[i].sport = rxe_source_port(qp[i].qpn);
    qp[i].psn =
        psn_start >= 0 ? static_cast<uint32_t>(psn_start) : static_cast<uint32_t>(rng() & kPsnMask);
    qp[i].rkey = static_cast<uint32_t>(rng());
    qp[i].va = 0x00007f0000000000ull + (uint64_t{i} << 32);
  }
  std::vector<uint8_t> payload(mtu);
  std::vector<uint8_t> frame(18 + 20 + 8 + kBthSize + kRethSize + 4096 + 4 + 4);

  const bool nano = timestamps == "ns";
  pcap_t* dead = pcap_open_dead_with_tstamp_precision(
      DLT_EN10MB, 65535, nano ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
  pcap_dumper_t* dumper = pcap_dump_open(dead, out.c_str());
  if (dumper == nullptr) {
    std::fprintf(stderr, "roce_pcap: --out %s: %s\n", out.c_str(), pcap_geterr(dead));
    pcap_close(dead);
    return 1;
  }

  const RcWriteSegmenter seg(msg_bytes, mtu);
  FrameSpec f;
  f.ip.src = sip;
  f.ip.dst = dip;
  f.ip.tos = static_cast<uint8_t>(tos);
  uint16_t ip_id = 0;
  uint64_t t_ns = 0;
  uint64_t written = 0;
  unsigned active = qps;
  while (active > 0) {
    active = 0;
    for (auto& q : qp) {
      if (q.message == messages) continue;
      ++active;
      const RcWritePacket p = seg.packet(q.packet, q.psn);
      for (auto& b : std::span(payload.data(), p.length)) b = static_cast<uint8_t>(rng());
      f.payload = std::span<const uint8_t>(payload.data(), p.length);
      f.udp.src_port = q.sport;
      f.ip.id = ip_id++;
      RoceSpec r;
      r.opcode = p.opcode;
      r.dest_qp = q.qpn;
      r.psn = p.psn;
      r.ack_req = p.ack_req;
      r.virtual_address = q.va + uint64_t{q.message} * msg_bytes;
      r.rkey = q.rkey;
      r.dma_length = msg_bytes;
      const size_t len = build_roce_frame(frame, f, r);

      pcap_pkthdr h{};
      h.ts.tv_sec = static_cast<time_t>(t_ns / 1000000000ull);
      // The field holds nanoseconds in a nanosecond pcap, microseconds in a classic one.
      h.ts.tv_usec =
          static_cast<suseconds_t>(nano ? t_ns % 1000000000ull : t_ns % 1000000000ull / 1000);
      h.caplen = h.len = static_cast<bpf_u_int32>(len);
      pcap_dump(reinterpret_cast<u_char*>(dumper), &h, frame.data());
      ++written;
      // Preamble, SFD and inter-frame gap (20 bytes) and the FCS (4) occupy the wire too.
      t_ns += static_cast<uint64_t>((len + 24) * 8 / gbps);

      if (++q.packet == seg.packets()) {  // message done: the next one starts at the next PSN
        q.packet = 0;
        ++q.message;
        q.psn = psn_add(p.psn, 1);
      }
    }
  }
  pcap_dump_close(dumper);
  pcap_close(dead);
  std::printf("roce_pcap: wrote %llu packets (%u QPs x %u messages x %u bytes, MTU %u) to %s\n",
              static_cast<unsigned long long>(written), qps, messages, msg_bytes, mtu, out.c_str());
  return 0;
}
