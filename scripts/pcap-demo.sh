#!/usr/bin/env bash
# The pcap walk-through: 64 RoCEv2 QPs of RDMA WRITE traffic (roce_pcap) go
# through a real switch_emu (DPDK, net_pcap ports) that spreads them over 8 uplinks by per-flow
# ECMP (CRC32C of the 5-tuple, mod 8), then the script shows what each uplink got: the classic
# picture of ECMP with few, large flows. Then the same capture goes through a real nic_emu that
# sprays it per packet over 8 uplinks with a PPCID in each packet (scripts/spray-pcap.sh), and a
# second nic_emu takes those 8 uplink captures and puts every QP back into PSN order
# (scripts/reorder-pcap.sh): spraying and its reorder engine, side by side with ECMP.
# Output goes to out/pcap-demo/ (or $1): roce.pcap, portK.pcap, switch.yaml, stats.json, and under
# spray/: uplinkK.pcap, delivered.pcap, spray-stats.json, reorder-stats.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/pcap-demo}
mkdir -p "$OUT"

# QPs and packets on each of the 8 uplink captures PREFIX0.pcap .. PREFIX7.pcap (tshark reads
# infiniband.bth.destqp), a bar per uplink, then the total with NOTE.
per_uplink() {
  local prefix=$1 note=$2 total=0 i qps pkts bar
  for i in 0 1 2 3 4 5 6 7; do
    tshark -r "$prefix$i.pcap" -T fields -e infiniband.bth.destqp 2>/dev/null >"$prefix$i.qps"
    qps=$(sort -u "$prefix$i.qps" | wc -l)
    pkts=$(wc -l <"$prefix$i.qps")
    rm -f "$prefix$i.qps"
    total=$((total + pkts))
    bar=$(printf '%*s' $((pkts / 64)) '' | tr ' ' '#')
    printf "  uplink %d: %3d QPs %6d packets %s\n" "$i" "$qps" "$pkts" "$bar"
  done
  echo "  total:             $total packets ($note)"
}

scripts/setup.sh
# shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
. scripts/build_dir.sh && ensure_build_dir build
ninja -C build nic_emu/roce_pcap switch_emu/switch_emu nic_emu/nic_emu >/dev/null

# 64 QPs (an 8x8 AllReduce step's worth), 8 messages of 64 KiB each at MTU 4096.
build/nic_emu/roce_pcap --out "$OUT/roce.pcap" --qps 64 --messages 8 --msg-bytes 65536 \
  --mtu 4096 --seed 1
echo
scripts/switch-pcap.sh "$OUT/roce.pcap" "$OUT" --ports 8 --mode ecmp --seed 0
echo
echo "QPs per uplink (tshark reads infiniband.bth.destqp in each output pcap):"
per_uplink "$OUT/port" "each QP stays on one uplink: per-flow ECMP"
echo
echo "full counters: $OUT/stats.json"

echo
echo "The same 64 QPs sprayed per packet by nic_emu (round robin per QP, PPCID in the UDP checksum):"
scripts/spray-pcap.sh "$OUT/roce.pcap" "$OUT/spray" --uplinks 8 --mode rr >/dev/null
per_uplink "$OUT/spray/uplink" "every QP on every uplink"
echo
echo "A receiving nic_emu with those 8 captures as its uplinks (reorder engine on):"
scripts/reorder-pcap.sh "$OUT/spray" "$OUT/spray/delivered.pcap" | grep -E "^(port |host|ppcid|reorder)"
echo "  (net_pcap replays each uplink's capture as fast as it reads it, one uplink after the"
echo "   other, so nearly every packet arrives ahead of its turn: 'after hold' counts those the"
echo "   engine held and released in PSN order; 'gaps timed out 0' says none was given up)"
# tshark: delivered PSNs per QP must rise by one each (mod 2^24).
tshark -r "$OUT/spray/delivered.pcap" -T fields -e infiniband.bth.destqp -e infiniband.bth.psn \
  2>/dev/null | awk '{ q = $1; p = $2 + 0;
    if (q in last && (p - last[q] + 16777216) % 16777216 != 1) bad++; last[q] = p; n++ }
    END { printf "  delivered to the host: %d packets, %d out of PSN order\n", n, bad + 0 }'
echo "full counters: $OUT/spray/spray-stats.json, $OUT/spray/reorder-stats.json"
