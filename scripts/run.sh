#!/usr/bin/env bash
# The main job, on its embedded default. Today (issue 2, the foundation) that is: build, write
# genuine RoCEv2 RC RDMA WRITE traffic with roce_pcap, and show how Wireshark's dissector reads
# it. switch_emu and nic_emu do not exist yet (issues 3 and 5); when they do, this script runs
# this traffic through them. Output goes to out/run/ (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/run}
mkdir -p "$OUT"

scripts/setup.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build nic_emu/roce_pcap >/dev/null

# 8 QPs (one AllReduce ring step's worth), 16 messages of 64 KiB each, MTU 4096.
build/nic_emu/roce_pcap --out "$OUT/roce.pcap" --qps 8 --messages 16 --msg-bytes 65536 \
  --mtu 4096 --seed 1

echo
echo "packets per QP and UDP source port (tshark, infiniband.bth.*):"
tshark -r "$OUT/roce.pcap" -T fields -e infiniband.bth.destqp -e udp.srcport 2>/dev/null \
  | sort | uniq -c | awk '{printf "  QP %s  sport %5s  %6d packets\n", $2, $3, $1}'
echo "opcodes:"
tshark -r "$OUT/roce.pcap" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c \
  | awk '{n[6]="RDMA WRITE FIRST"; n[7]="RDMA WRITE MIDDLE"; n[8]="RDMA WRITE LAST";
          n[10]="RDMA WRITE ONLY"; printf "  %-18s %6d\n", n[$2], $1}'
echo "AckReq set on:  $(tshark -r "$OUT/roce.pcap" -Y 'infiniband.bth.a == 1' 2>/dev/null | wc -l) packets"
echo
echo "next: switch_emu (issue 3) and nic_emu (issue 5) are not built yet; open $OUT/roce.pcap in"
echo "Wireshark, or feed it to a DPDK net_pcap port (--vdev net_pcap0,rx_pcap=$OUT/roce.pcap)."
