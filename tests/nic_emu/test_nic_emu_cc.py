"""Congestion control with the real nic_emu on pcap ports, checked by independent tools.

B (responder, cc dcqcn) replays RDMA WRITEs that a switch marked CE (roce_pcap --tos: DSCP 26,
ECN 11) and answers each with a CNP to the sending QP: scapy decodes them as CNPs and tshark decodes their
headers (BTH opcode 0x81, DestQP the requester's QP, BECN set, DSCP 48, Not-ECT) and scapy recomputes every ICRC.
At most one CNP per QP per min_time_between_cnps. A (requester, cc dcqcn) replays B's capture:
its QPs take the CNPs, and their DCQCN rates are cut (nic_emu's report). Unmarked WRITEs get
ACKs and no CNP; a NIC without cc counts CE arrivals and sends nothing."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from scapy.all import Ether, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH, CNPPadding  # noqa: E402

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
ROCE_PCAP = os.environ.get("ROCE_PCAP", os.path.join(ROOT, "build", "nic_emu", "roce_pcap"))
TIMEOUT_S = 120
QPS, MESSAGES, BYTES, MTU = 2, 3, 8192, 1024
PACKETS = QPS * MESSAGES * (BYTES // MTU)
REQ_QP, RESP_QP = 0x40, 0x11


def run_nic(cfg_text, tmp, name):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(cfg_text)
    prefix = f"niccc{name}{os.getpid()}"
    stats = os.path.join(tmp, name + "-stats.json")
    r = subprocess.run([NIC_EMU, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
                        "--log-level", "lib.eal:error", "--", "--config", path,
                        "--idle-exit-ms", "300", "--stats", stats],
                       capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp)
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    st = None
    if os.path.exists(stats):
        with open(stats) as f:
            st = json.load(f)
    return r, st


def nic_yaml(name, rx, tx, engine, cc):
    y = (f"nic:\n  name: {name}\n  uplinks:\n"
         f"    - {{name: up0, device: \"net_pcap0,rx_pcap={rx},tx_pcap={tx}\", path_id: 1}}\n"
         "  spray: {mode: rr}\n  receive: none\n"
         f"  rc_engine: {{{engine}}}\n")
    return y + (f"  cc: {cc}\n" if cc else "")


def tshark_rows(path):
    out = subprocess.run(
        ["tshark", "-r", path, "-T", "fields", "-E", "separator=\t",
         "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
         "-e", "ip.dsfield.dscp", "-e", "ip.dsfield.ecn", "-e", "_ws.col.Info"],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def icrc_ok(frame):
    return Ether(frame)[BTH].compute_icrc(None) == frame[-4:]


class CongestionNotification(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="nic_emu_cc_")
        t = cls.tmp = cls._tmp.name
        cls.empty = os.path.join(t, "empty.pcap")
        with open(cls.empty, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))

        def writes(name, tos):
            path = os.path.join(t, name)
            subprocess.run([ROCE_PCAP, "--out", path, "--qps", str(QPS), "--messages",
                            str(MESSAGES), "--msg-bytes", str(BYTES), "--mtu", str(MTU),
                            "--first-qpn", str(RESP_QP), "--psn-start", "0", "--tos", str(tos)],
                           check=True, capture_output=True, timeout=TIMEOUT_S)
            return path

        cls.marked = writes("marked.pcap", (26 << 2) | 3)
        cls.unmarked = writes("unmarked.pcap", (26 << 2) | 2)
        responder = (f"qps: {QPS}, role: responder, first_qp: {RESP_QP}, "
                     f"peer_first_qp: {REQ_QP}, local_ip: 10.0.0.2, peer_ip: 10.0.0.1, "
                     "mtu: 1024")

        def b(name, rx, cc):
            tx = os.path.join(t, name + ".pcap")
            r, st = run_nic(nic_yaml(name, rx, tx, responder, cc), t, name)
            return r, st, tx

        cls.b_every = b("b_every", cls.marked, "{mode: dcqcn, min_time_between_cnps_us: 0}")
        cls.b_limited = b("b_limited", cls.marked,
                          "{mode: dcqcn, min_time_between_cnps_us: 1000000}")
        cls.b_unmarked = b("b_unmarked", cls.unmarked, "{mode: dcqcn}")
        cls.b_nocc = b("b_nocc", cls.marked, None)
        cls.b_ackhigh = b("b_ackhigh", cls.unmarked, "{mode: dcqcn, ack_class: high}")
        requester = (f"qps: {QPS}, role: requester, first_qp: {REQ_QP}, "
                     f"peer_first_qp: {RESP_QP}, messages: 1, message_bytes: 1024, mtu: 1024, "
                     "retransmit_timeout_us: 1000000")
        tx = os.path.join(t, "a.pcap")
        cls.a = run_nic(nic_yaml("a", cls.b_every[2], tx, requester, "{mode: dcqcn}"), t, "a")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def cnps(self, path):
        return [r for r in tshark_rows(path) if r[0] == "129"]

    def test_runs_are_clean(self):
        for r, st, _ in (self.b_every, self.b_limited, self.b_unmarked, self.b_nocc,
                         self.b_ackhigh):
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("mempool: 0 mbufs in use at exit", r.stdout)
        r, st = self.a
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", r.stdout)

    def test_every_marked_packet_gets_a_cnp_that_tshark_decodes(self):
        _, st, tx = self.b_every
        rows = self.cnps(tx)
        self.assertEqual(len(rows), PACKETS)
        for opcode, destqp, dscp, ecn, info in rows:
            self.assertIn(int(destqp, 0), (REQ_QP, REQ_QP + 1))  # the sender's QP
            self.assertEqual(dscp, "48")
            self.assertEqual(ecn, "0")  # Not-ECT: a CNP is never marked
            # Debian 12's Wireshark 4.0 names opcode 0x80 "CNP" and shows the spec's 0x81
            # (RoCEv2 Annex A17, what ConnectX sends) as unknown: the opcode is checked by value.
            self.assertEqual(opcode, "129")
        self.assertEqual(st["counters"]["ce_received"], PACKETS)
        self.assertEqual(st["counters"]["cnps_sent"], PACKETS)
        # Genuine: every frame's ICRC recomputed by scapy; a CNP is BTH + 16 reserved bytes.
        for p in rdpcap(tx):
            frame = raw(p)
            self.assertTrue(icrc_ok(frame))
            if frame[14 + 20 + 8] == 0x81:
                self.assertIn(CNPPadding, Ether(frame))  # scapy decodes it as a CNP
                self.assertEqual(len(frame), 14 + 20 + 8 + 12 + 16 + 4)
                self.assertEqual(frame[14 + 20 + 8 + 12:14 + 20 + 8 + 28], bytes(16))
                self.assertEqual(frame[14 + 20 + 8 + 4] & 0xC0, 0x40)  # BECN set, FECN clear

    def test_at_most_one_cnp_per_qp_per_interval(self):
        _, st, tx = self.b_limited
        rows = self.cnps(tx)
        self.assertEqual(sorted(int(r[1], 0) for r in rows), [REQ_QP, REQ_QP + 1])
        self.assertEqual(st["counters"]["cnps_suppressed"], PACKETS - QPS)

    def test_unmarked_writes_get_no_cnp(self):
        _, st, tx = self.b_unmarked
        self.assertEqual(self.cnps(tx), [])
        self.assertGreater(len(tshark_rows(tx)), 0)  # the ACKs
        self.assertEqual(st["counters"]["ce_received"], 0)

    def test_acks_on_the_data_class_or_the_cnp_class(self):
        # ack_class data (the default): ACKs carry the QP's DSCP 26; high: the CNP's 48. Never
        # ECN-capable either way.
        for (_, _, tx), dscp in ((self.b_unmarked, "26"), (self.b_ackhigh, "48")):
            acks = [r for r in tshark_rows(tx) if r[0] == "17"]
            self.assertGreater(len(acks), 0)
            self.assertEqual({(r[2], r[3]) for r in acks}, {(dscp, "0")}, tx)

    def test_without_cc_ce_is_counted_and_no_cnp_sent(self):
        _, st, tx = self.b_nocc
        self.assertEqual(self.cnps(tx), [])
        self.assertEqual(st["counters"]["ce_received"], PACKETS)
        self.assertEqual(st["counters"]["cnps_sent"], 0)

    def test_the_sender_takes_the_cnps_and_cuts_its_rates(self):
        r, st = self.a
        self.assertEqual(st["counters"]["cnps_received"], PACKETS)
        cc = st["rc_engine"]["cc"]
        self.assertEqual(cc["mode"], "dcqcn")
        self.assertEqual(cc["cnps"], PACKETS)
        # Cuts at most one per QP per rate_reduce_monitor_period (4 us): the CNPs replayed within
        # it merge into a deferred cut. By the end (hundreds of ms later) the rates recovered.
        self.assertGreaterEqual(cc["rate_cuts"], QPS)
        self.assertLessEqual(cc["rate_cuts"], PACKETS)
        self.assertGreaterEqual(cc["rate_cuts"] + cc["cuts_deferred"], PACKETS)
        # The requester's own WRITEs were sent ECT(0), as a NIC with cc on sends them.
        ecns = {row[3] for row in tshark_rows(os.path.join(self.tmp, "a.pcap")) if row[0] == "10"}
        self.assertEqual(ecns, {"2"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
