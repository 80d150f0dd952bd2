#!/usr/bin/env bash
# The main job, on its embedded default: 64 RoCEv2 QPs of RDMA WRITE traffic (roce_pcap) go
# through a real switch_emu (DPDK, net_pcap ports) that spreads them over 8 uplinks by per-flow
# ECMP (CRC32C of the 5-tuple, mod 8), then the script shows what each uplink got: the classic
# picture of ECMP with few, large flows. nic_emu (issue 5) will add spraying to this job.
# Output goes to out/run/ (or $1): roce.pcap, portK.pcap, switch.yaml, stats.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/run}
mkdir -p "$OUT"

scripts/setup.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build nic_emu/roce_pcap switch_emu/switch_emu >/dev/null

# 64 QPs (an 8x8 AllReduce step's worth), 8 messages of 64 KiB each at MTU 4096.
build/nic_emu/roce_pcap --out "$OUT/roce.pcap" --qps 64 --messages 8 --msg-bytes 65536 \
  --mtu 4096 --seed 1
echo
scripts/switch-pcap.sh "$OUT/roce.pcap" "$OUT" --ports 8 --mode ecmp --seed 0
echo
echo "QPs per uplink (tshark reads infiniband.bth.destqp in each output pcap):"
total=0
for i in 0 1 2 3 4 5 6 7; do
  tshark -r "$OUT/port$i.pcap" -T fields -e infiniband.bth.destqp 2>/dev/null >"$OUT/port$i.qps"
  qps=$(sort -u "$OUT/port$i.qps" | wc -l)
  pkts=$(wc -l <"$OUT/port$i.qps")
  rm -f "$OUT/port$i.qps"
  total=$((total + pkts))
  bar=$(printf '%*s' $((pkts / 64)) '' | tr ' ' '#')
  printf "  uplink %d: %3d QPs %6d packets %s\n" "$i" "$qps" "$pkts" "$bar"
done
echo "  total:             $total packets (each QP stays on one uplink: per-flow ECMP)"
echo
echo "full counters: $OUT/stats.json"
