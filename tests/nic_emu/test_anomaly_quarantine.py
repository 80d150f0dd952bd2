#!/usr/bin/python3
"""PPCID anomaly detection and the quarantine response, with real processes:

  switch_emu (telemetry acting commands on) takes RoCEv2 traffic on a veth (net_af_packet) and
  sends it out of two net_pcap ports, `normal` and `honeypot`;
  nic_emu reads two uplink pcaps of sprayed traffic (4 QPs, genuine PPCIDs) into which forged
  packets of one QP are mixed; it flags that QP and its control side pushes a quarantine rule to
  the switch's DPDK telemetry socket (/spraynet/tcam_add);
  then 10,000 packets of that QP with consecutive PSNs go through the switch: the output pcaps,
  read back, hold 9,500 on the honeypot and 500 on the normal path (PSN % 100 < 5); another QP
  to the same host stays on the normal path.

A push to a switch without acting commands is refused with its reason, and a push to a socket
that does not exist fails cleanly: both counted, nic_emu exits 0. Root (veth). Nothing waits by
sleeping: every wait is on a condition with a bound."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "switch_emu"))
import pcaplib as P  # noqa: E402
from test_switch_emu import (DPDK_RUN_DIR, SwitchProcess, unique_prefix,  # noqa: E402
                             wait_for)

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
NIC_TIMEOUT_S = 120  # one nic_emu run on pcap input, start to exit: a bound, not a wait
SWITCH_RX_S = 60     # the switch has received what was sent on the veth

VICTIM_QP, OTHER_QP = 0x12, 0x13
CLEAN_QPS = (0x11, 0x12, 0x13, 0x14)
HOST_IP = "10.0.0.2"
SPLIT_PACKETS, FIRST_PSN, KEEP_PERCENT = 10_000, 1000, 5


def check_nibble(qp, psn):
    x = (qp ^ psn) & 0xFFFFFF
    n = 0
    for shift in range(0, 24, 4):
        n ^= x >> shift
    return n & 0xF


def ppcid(path_id, qp, psn, ts=0x5A):
    """ts-high: timestamp 15-8, path id 7-4, check nibble 3-0 (dataplane/wire/ppcid.h)."""
    return (ts << 8) | ((path_id & 0xF) << 4) | check_nibble(qp, psn)


def icrc(l3):
    """RoCEv2 ICRC over the IPv4 datagram (its last 4 bytes the ICRC field): TOS, TTL, IP and
    UDP checksums and the BTH's reserved byte masked to ones; little-endian."""
    b = bytearray(l3[:-4])
    b[1] = 0xFF
    b[8] = 0xFF
    b[10:12] = b"\xff\xff"
    b[26:28] = b"\xff\xff"
    b[32] = 0xFF
    return struct.pack("<I", zlib.crc32(bytes(b), zlib.crc32(b"\xff" * 8)))


def roce(qp, psn, udp_checksum=0, dst=HOST_IP, dst_mac=b"\x02\x00\x00\x00\x00\x02"):
    """RC SEND ONLY (0x04) with 32 bytes of payload and a valid ICRC; the UDP checksum as given
    (0, or a PPCID: the ICRC masks it)."""
    payload = bytes([qp & 0xFF]) * 32
    bth = struct.pack("!BBHII", 0x04, 0, 0xFFFF, qp & 0xFFFFFF, psn & 0xFFFFFF)
    body = bth + payload + b"\0\0\0\0"
    udp = struct.pack("!HHHH", 0xC000 | qp, 4791, 8 + len(body), udp_checksum) + body
    ip = bytearray(P.ipv4_header(P.ip_bytes("10.0.0.1"), P.ip_bytes(dst), P.PROTO_UDP, len(udp),
                                 ident=psn & 0xFFFF) + udp)
    ip[-4:] = icrc(bytes(ip))
    return P.ether(dst_mac, b"\x02\x00\x00\x00\x00\x01", P.ETH_IPV4, bytes(ip))


def roce_qp_psn(frame):
    """(DestQP, PSN) of a RoCEv2 frame, None for anything else."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != P.PROTO_UDP:
        return None
    ihl = (frame[14] & 0xF) * 4
    udp = 14 + ihl
    if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != 4791:
        return None
    bth = udp + 8
    return (int.from_bytes(frame[bth + 5:bth + 8], "big"),
            int.from_bytes(frame[bth + 9:bth + 12], "big"))


def nic_config(tmp, name, socket_path):
    ups = ""
    for i in range(2):
        ups += (f"    - {{name: up{i}, device: \"net_pcap{i},rx_pcap={tmp}/{name}-in{i}.pcap,"
                f"tx_pcap={tmp}/{name}-out{i}.pcap\", path_id: {i + 1}}}\n")
    return f"""nic:
  name: {name}
  host: {{name: host, device: "net_pcap2,tx_pcap={tmp}/{name}-host.pcap"}}
  uplinks:
{ups}  spray: {{mode: rr}}
  anomaly:
    enabled: true
    quarantine:
      enabled: true
      switch_socket: {socket_path}
      honeypot_port: honeypot
      keep_percent: {KEEP_PERCENT}
      rule_id_base: 900
      timeout_ms: 5000
"""


def write_nic_inputs(tmp, name):
    """Uplink i carries path id i + 1: 100 packets of each clean QP spread over both uplinks in
    PSN order per uplink (their order across uplinks is the reorder engine's business), and on
    up0 three forged packets of the victim QP between them, each naming up1's path with a valid
    check nibble (a sprayer never writes another cable's id)."""
    frames = [[], []]
    psn = {qp: 0 for qp in CLEAN_QPS}
    for rnd in range(100):
        for qp in CLEAN_QPS:
            u = (rnd + qp) % 2
            frames[u].append(roce(qp, psn[qp], ppcid(u + 1, qp, psn[qp])))
            psn[qp] += 1
        if rnd in (30, 60, 90):
            p = psn[VICTIM_QP] + 500
            frames[0].append(roce(VICTIM_QP, p, ppcid(2, VICTIM_QP, p)))
    for u in range(2):
        P.write_pcap(os.path.join(tmp, f"{name}-in{u}.pcap"), frames[u])
    return sum(len(f) for f in frames)


def run_nic(tmp, name, socket_path):
    cfg = os.path.join(tmp, f"{name}.yaml")
    with open(cfg, "w") as f:
        f.write(nic_config(tmp, name, socket_path))
    sent = write_nic_inputs(tmp, name)
    prefix = unique_prefix(name)
    stats = os.path.join(tmp, f"{name}.stats.json")
    try:
        r = subprocess.run([NIC_EMU, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
                            "--log-level", "lib.eal:error", "--", "--config", cfg, "--stats",
                            stats, "--idle-exit-ms", "300"],
                           capture_output=True, text=True, timeout=NIC_TIMEOUT_S, cwd=tmp)
    finally:
        shutil.rmtree(os.path.join(DPDK_RUN_DIR, prefix), ignore_errors=True)
    report = None
    if os.path.exists(stats):
        with open(stats) as f:
            report = json.load(f)
    return r, report, sent


def switch_socket(prefix):
    return os.path.join(DPDK_RUN_DIR, prefix, "dpdk_telemetry.v2")


@unittest.skipUnless(os.geteuid() == 0, "needs root (veth)")
class AnomalyQuarantine(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="anomaly_quarantine_")
        self.tmp = self._tmp.name
        self.switches = []

    def tearDown(self):
        for sw in self.switches:
            sw.kill()
        self._tmp.cleanup()

    def start_switch(self, name, ports, *args):
        config = os.path.join(self.tmp, f"{name}.yaml")
        with open(config, "w") as f:
            f.write(f"name: {name}\nports:\n{ports}routes:\n  - {{prefix: 10.0.0.0/8, port: normal}}\n")
        prefix = unique_prefix(name)
        sw = SwitchProcess(prefix, config, self.tmp, *args)
        self.switches.append(sw)
        return sw, prefix

    def check_flagged(self, r, report, sent):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", r.stdout)
        a = report["anomaly"]
        self.assertTrue(a["enabled"])
        self.assertEqual(a["packets"], sent)
        self.assertEqual(a["qps_flagged"], 1, a)
        self.assertEqual(a["anomalous_wrong_uplink"], 3, a)  # wrong uplink is tested first
        q = a["flagged"][0]
        self.assertEqual((q["dest_qp"], q["reason"], q["uplink"], q["dst_ip"]),
                         (VICTIM_QP, "wrong_uplink", "up0", HOST_IP))
        self.assertEqual(q["anomalous_packets"], 3)
        log = r.stdout + r.stderr
        self.assertEqual(log.count("flagged: wrong_uplink"), 1, log)
        self.assertIn("QP 0x000012 flagged", log)
        return a["quarantine"]

    def test_forged_packets_flag_the_qp_and_its_quarantine_splits_95_5(self):
        veth = f"qa{os.getpid() % 100000}"
        outside, inside = f"{veth}a", f"{veth}b"
        subprocess.run(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside],
                       check=True, capture_output=True)
        try:
            for i in (outside, inside):
                with open(f"/proc/sys/net/ipv6/conf/{i}/disable_ipv6", "w") as f:
                    f.write("1")  # no router solicitations into the switch
                subprocess.run(["ip", "link", "set", i, "up"], check=True, capture_output=True)
            self.split_through_switch(outside, inside)
        finally:
            subprocess.run(["ip", "link", "del", outside], capture_output=True)

    def split_through_switch(self, outside, inside):
        normal, honeypot = (os.path.join(self.tmp, f"{n}.pcap") for n in ("normal", "honeypot"))
        sw, prefix = self.start_switch(
            "qsw",
            f"  - {{name: in, device: \"net_af_packet0,iface={inside},qdisc_bypass=1,"
            f"framecnt=4096\"}}\n"
            f"  - {{name: normal, device: \"net_pcap1,tx_pcap={normal}\"}}\n"
            f"  - {{name: honeypot, device: \"net_pcap2,tx_pcap={honeypot}\"}}\n",
            "--telemetry-acting")
        refusing, refusing_prefix = self.start_switch(
            "qref", "  - {name: normal, device: net_ring0}\n  - {name: honeypot, device: net_ring1}\n")
        t = sw.telemetry()
        self.addCleanup(t.close)
        refusing.telemetry().close()

        # nic_emu flags the forged QP and pushes the rule to the switch.
        r, report, sent = run_nic(self.tmp, "nic", switch_socket(prefix))
        q = self.check_flagged(r, report, sent)
        self.assertEqual((q["pushes"], q["push_failures"]), (1, 0), q)
        rule = q["rules"][0]
        self.assertEqual((rule["rule_id"], rule["dest_qp"], rule["dst_ip"], rule["admitted"]),
                         (900, VICTIM_QP, HOST_IP, True), rule)
        self.assertIn("quarantine", rule["detail"])

        # A switch without acting commands refuses, with its reason; a missing socket fails.
        r2, report2, _ = run_nic(self.tmp, "nic2", switch_socket(refusing_prefix))
        q2 = self.check_flagged(r2, report2, sent)
        self.assertEqual((q2["pushes"], q2["push_failures"]), (0, 1), q2)
        self.assertIn("acting commands are disabled", q2["rules"][0]["detail"])
        self.assertIn("acting commands are disabled", r2.stdout + r2.stderr)
        r3, report3, _ = run_nic(self.tmp, "nic3", os.path.join(self.tmp, "no-such.sock"))
        q3 = self.check_flagged(r3, report3, sent)
        self.assertEqual((q3["pushes"], q3["push_failures"]), (0, 1), q3)
        self.assertIn("connect", q3["rules"][0]["detail"])

        # The victim QP's traffic, and another QP's, through the quarantined switch.
        with open(f"/sys/class/net/{inside}/address") as f:
            mac = bytes.fromhex(f.read().strip().replace(":", ""))
        frames = [roce(VICTIM_QP, FIRST_PSN + i, dst_mac=mac) for i in range(SPLIT_PACKETS)]
        frames += [roce(OTHER_QP, i, dst_mac=mac) for i in range(200)]

        def in_rx():
            return t.query("/spraynet/port,in")["rx_packets"]

        base = in_rx()
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
            s.bind((outside, 0))
            for start in range(0, len(frames), 1000):
                for fr in frames[start:start + 1000]:
                    s.send(fr)
                n = start + len(frames[start:start + 1000])
                # The af_packet ring holds 4096 frames: the next chunk waits until these are in.
                wait_for(lambda: in_rx() - base >= n, SWITCH_RX_S, f"the switch to receive {n}")
        t.close()
        self.assertEqual(sw.stop(), 0, sw.stderr())
        stats = sw.stats()
        self.assertEqual(stats["counters"]["quarantined"], SPLIT_PACKETS * (100 - KEEP_PERCENT) // 100)
        self.assertEqual(stats["counters"]["quarantine_kept"], SPLIT_PACKETS * KEEP_PERCENT // 100)

        seen = {}
        for name, path in (("normal", normal), ("honeypot", honeypot)):
            c = Counter()
            for frame in P.read_pcap(path):
                qp_psn = roce_qp_psn(frame)
                if qp_psn is None:
                    continue
                qp, psn = qp_psn
                c[qp] += 1
                if qp == VICTIM_QP:
                    # Deterministic by PSN: each packet is on the side its PSN says.
                    self.assertEqual(name == "normal", psn % 100 < KEEP_PERCENT, (name, psn))
            seen[name] = c
        hp, nm = seen["honeypot"][VICTIM_QP], seen["normal"][VICTIM_QP]
        self.assertEqual(hp + nm, SPLIT_PACKETS)
        self.assertLessEqual(abs(hp / SPLIT_PACKETS - 0.95), 0.01, (hp, nm))
        self.assertLessEqual(abs(nm / SPLIT_PACKETS - 0.05), 0.01, (hp, nm))
        self.assertEqual((hp, nm), (9500, 500))  # exact: 10,000 consecutive PSNs
        self.assertEqual(seen["normal"][OTHER_QP], 200)
        self.assertEqual(seen["honeypot"][OTHER_QP], 0)
        print(f"\n  quarantine split over {SPLIT_PACKETS} packets: honeypot {hp}, normal {nm}",
              file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
