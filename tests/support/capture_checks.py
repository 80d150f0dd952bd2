"""What the capture tests of nic_emu and switch_emu share: a DPDK program run with EAL's test
options and its runtime directory removed after, and the checks every captured frame passes
(its IPv4 header checksum, scapy's ICRC)."""
import json
import os
import shutil
import struct
import subprocess

from scapy.all import Ether  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402


def run_dpdk(cmd, tmp, prefix, timeout_s=120):
    """cmd[0] with --no-huge, 1 GB, no PCI, its own --file-prefix, then cmd[1:] after '--'."""
    r = subprocess.run(cmd[:1] + ["--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
                                  "--log-level", "lib.eal:error", "--"] + cmd[1:],
                       capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    return r


def ipv4_checksum(header):
    s = sum(struct.unpack(f"!{len(header) // 2}H", bytes(header)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_ok(frame):
    """The IPv4 header checksum of an untagged Ethernet frame holds."""
    ihl = (frame[14] & 0xF) * 4
    return ipv4_checksum(frame[14:14 + ihl]) == 0


def icrc_ok(frame):
    """The RoCEv2 frame's ICRC is the one scapy computes."""
    return Ether(frame)[BTH].compute_icrc(None) == frame[-4:]


def run_with_config(program, tmp, name, config_text, prefix):
    """`program --config NAME.yaml --idle-exit-ms 300 --stats NAME-stats.json` in tmp, the YAML
    being config_text: the run, and the stats it wrote (None when it wrote none)."""
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(config_text)
    stats = os.path.join(tmp, name + "-stats.json")
    r = run_dpdk([program, "--config", path, "--idle-exit-ms", "300", "--stats", stats], tmp,
                 prefix)
    st = None
    if os.path.exists(stats):
        with open(stats) as f:
            st = json.load(f)
    return r, st
