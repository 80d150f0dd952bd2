#!/usr/bin/env bash
# Two hosts and a switch on veth pairs, in network namespaces (root only):
#
#   netns ${P}-a: eth0 10.0.1.1/24 ──veth── ${P}-sw-a ┐
#                                                       ├─ switch_emu (net_af_packet ports)
#   netns ${P}-b: eth0 10.0.2.1/24 ──veth── ${P}-sw-b ┘
#
# Each host routes everything via a gateway (.254) whose MAC is its switch port's, with a
# static neighbour entry: switch_emu routes and does not answer ARP. MACs are fixed so that
# configs can name the next hops (configs/veth.yaml's peer_mac):
#   host a eth0 02:53:50:00:0a:01   switch side PREFIX-sw-a 02:53:50:00:0a:fe
#   host b eth0 02:53:50:00:0b:01   switch side PREFIX-sw-b 02:53:50:00:0b:fe Checksum offload is off on
# every veth end, so the kernel never hands DPDK a packet with a partial checksum.
#   scripts/topology.sh up [PREFIX]     create (PREFIX defaults to spn)
#   scripts/topology.sh down [PREFIX]   remove
#   scripts/topology.sh macs [PREFIX]   print "a-host a-switch b-host b-switch" MACs
set -euo pipefail
cmd=${1:-}
P=${2:-spn}

mac_of() {  # [netns] dev
  if [ $# -eq 2 ]; then ip netns exec "$1" cat "/sys/class/net/$2/address"; else cat "/sys/class/net/$1/address"; fi
}

case "$cmd" in
  up)
    for h in a b; do
      ip netns add "$P-$h"
      ip link add "$P-sw-$h" address "02:53:50:00:0$h:fe" type veth peer name "$P-$h-eth0" \
        address "02:53:50:00:0$h:01"
      ip link set "$P-$h-eth0" netns "$P-$h"
      ip netns exec "$P-$h" ip link set "$P-$h-eth0" name eth0
      ip netns exec "$P-$h" ip link set lo up
      ip netns exec "$P-$h" ip link set eth0 up
      ip link set "$P-sw-$h" up
      ethtool -K "$P-sw-$h" tx off rx off >/dev/null 2>&1 || true
      ip netns exec "$P-$h" ethtool -K eth0 tx off rx off >/dev/null 2>&1 || true
      # IPv6 would send router solicitations and DAD into the switch; keep the wire quiet.
      sysctl -qw "net.ipv6.conf.$P-sw-$h.disable_ipv6=1" || true
      ip netns exec "$P-$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
    done
    net=1
    for h in a b; do
      ip netns exec "$P-$h" ip addr add "10.0.$net.1/24" dev eth0
      ip netns exec "$P-$h" ip neigh replace "10.0.$net.254" lladdr "$(mac_of "$P-sw-$h")" dev eth0 nud permanent
      ip netns exec "$P-$h" ip route add default via "10.0.$net.254"
      net=$((net + 1))
    done
    ;;
  down)
    for h in a b; do
      ip netns del "$P-$h" 2>/dev/null || true
      ip link del "$P-sw-$h" 2>/dev/null || true
    done
    ;;
  macs)
    echo "$(mac_of "$P-a" eth0) $(mac_of "$P-sw-a") $(mac_of "$P-b" eth0) $(mac_of "$P-sw-b")"
    ;;
  *)
    echo "usage: scripts/topology.sh up|down|macs [PREFIX]" >&2
    exit 2
    ;;
esac
