"""The programs and places the switch_emu suites share (test_switch_emu.py, test_af_xdp.py):
meson points SWITCH_EMU and ROCE_PCAP at the built programs; run by hand, the build/ beside the
source tree. Importing this also puts tests/support/ on the path (pcaplib, waiting)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT = os.path.join(HERE, "..", "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
SWITCH_EMU = os.environ.get("SWITCH_EMU", os.path.join(ROOT, "build", "switch_emu", "switch_emu"))
ROCE_PCAP = os.environ.get("ROCE_PCAP", os.path.join(ROOT, "build", "nic_emu", "roce_pcap"))
PYTHON = "/usr/bin/python3"  # Debian's, where scapy lives
# Where EAL keeps a process's runtime files (its telemetry socket among them).
DPDK_RUN_DIR = "/var/run/dpdk" if os.geteuid() == 0 else os.path.join(
    os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "dpdk")
