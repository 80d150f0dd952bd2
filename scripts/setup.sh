#!/usr/bin/env bash
# Installs every build, test and tool dependency of spraynet from Debian's packages.
# Idempotent: when everything is present it checks with dpkg and returns in well under a second.
set -euo pipefail

PKGS=(
  # build
  build-essential g++ meson ninja-build pkg-config
  # DPDK 22.11 (libdpdk pkg-config, PMDs: ring, null, pcap, af_packet, tap, memif) and its tools
  libdpdk-dev dpdk dpdk-dev libpcap-dev
  # libraries
  libspdlog-dev libfmt-dev catch2 libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev
  libibverbs-dev libisal-dev
  # test and tool dependencies
  tshark python3 python3-scapy python3-matplotlib iproute2 ethtool iputils-ping
  # scripts/spraynet_exporter.py: telemetry counters for Prometheus
  python3-prometheus-client
  # fabric_emu --mpi (one run across processes and machines) and its test's mpirun
  libopenmpi-dev openmpi-bin
  # the deployment scripts (e2e.sh reads the reports with jq; a test runs shellcheck)
  jq shellcheck
  # fuzzing (scripts/fuzz.sh: clang's libFuzzer and sanitizers) and formatting
  clang libclang-rt-14-dev clang-format
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# tshark's package asks whether non-root users may capture; answer for it.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
