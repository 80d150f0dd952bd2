"""IRN on captures, end to end through the real programs on pcap ports (issue 44): A (nic_emu
requester, transport irn) sends RDMA WRITEs; four of them are taken out of the capture here
(the loss); B (nic_emu responder, transport irn) places the rest out of order and NAKs each new
gap with the first PSN it misses and a SACK of what it has beyond it (dataplane/wire/irn_sack.h:
after the AETH, under the ICRC); A2 (the requester again) reads B's answers and resends exactly
the four lost PSNs, each once. Every frame has the ICRC scapy computes and a valid IPv4 checksum;
tshark decodes the NAKs as InfiniBand ACKNOWLEDGEs with the NAK syndrome and, with the project's
dissector (tools/wireshark/spraynet.lua), their SACK."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from scapy.all import IP, UDP, Ether, Raw, rdpcap, wrpcap  # noqa: E402
from scapy.contrib.roce import AETH, BTH  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from capture_checks import icrc_ok, ip_ok, run_with_config  # noqa: E402

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
LUA = os.path.join(ROOT, "tools", "wireshark", "spraynet.lua")
TIMEOUT_S = 120
MESSAGES, BYTES, MTU = 2, 16384, 1024
PACKETS = MESSAGES * (BYTES // MTU)
LOST = {3, 4, 10, 20}
REQ_QP, RESP_QP = 0x40, 0x11
NAK_PSN_SEQUENCE_ERROR = 0x60
ACK_OPCODE = 0x11


def run_nic(tmp, name, rx, tx, engine, extra="", fast_uplink=False):
    link = ", link: {rate_gbps: 10000, delay_ns: 0}" if fast_uplink else ""
    return run_with_config(
        NIC_EMU, tmp, name,
        f"nic:\n  name: {name}\n  uplinks:\n"
        f"    - {{name: up0, device: \"net_pcap0,rx_pcap={rx},tx_pcap={tx}\", "
        f"path_id: 1{link}}}\n"
        "  spray: {mode: flow}\n  transport: irn\n  receive: ooo-placement\n"
        "  placement: {nak_delay_us: 0}\n"
        f"  rc_engine: {{{engine}}}\n  cc: {{mode: none}}\n{extra}",
        f"irnsack{name}{os.getpid()}")


def sack_of(frame):
    """The SACK after a NAK's AETH, read per irn_sack.h: the PSNs it says arrived, or None."""
    p = Ether(frame)[BTH]
    ext = bytes(p[AETH].payload)  # scapy keeps the ICRC in BTH's own field
    if not ext:
        return None
    bits, reserved = struct.unpack_from("!HH", ext)
    assert bits % 32 == 0 and 32 <= bits <= 1024 and reserved == 0, (bits, reserved)
    assert len(ext) == 4 + bits // 8, len(ext)
    got = set()
    for i in range(bits):
        if ext[4 + i // 8] & (0x80 >> (i % 8)):
            got.add(p.psn + 1 + i)
    return got


class IrnSackOnCaptures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="irn_sack_")
        t = cls.tmp = cls._tmp.name
        empty = os.path.join(t, "empty.pcap")
        with open(empty, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        # Timeouts of a second: the programs exit idle (300 ms) before any timer, so every
        # resend on A2's capture is a SACK's.
        requester = (f"qps: 1, role: requester, first_qp: {REQ_QP}, peer_first_qp: {RESP_QP}, "
                     f"messages: {MESSAGES}, message_bytes: {BYTES}, mtu: {MTU}, "
                     "max_in_flight: 64, local_ip: 10.0.0.1, peer_ip: 10.0.0.2, "
                     "retransmit_timeout_us: 1000000")
        responder = (f"qps: 1, role: responder, first_qp: {RESP_QP}, peer_first_qp: {REQ_QP}, "
                     f"local_ip: 10.0.0.2, peer_ip: 10.0.0.1, mtu: {MTU}, max_in_flight: 64")
        slow = "  irn: {rto_low_us: 1000000}\n"
        cls.a_pcap = os.path.join(t, "a.pcap")
        cls.a = run_nic(t, "a", empty, cls.a_pcap, requester, slow)
        cls.sent = [bytes(p) for p in rdpcap(cls.a_pcap)]
        cls.lossy_pcap = os.path.join(t, "lossy.pcap")
        cls.kept = [f for f in cls.sent if Ether(f)[BTH].psn not in LOST]
        wrpcap(cls.lossy_pcap, [Ether(f) for f in cls.kept])
        cls.b_pcap = os.path.join(t, "b.pcap")
        cls.b = run_nic(t, "b", cls.lossy_pcap, cls.b_pcap, responder)
        cls.answers = [bytes(p) for p in rdpcap(cls.b_pcap)]
        # A2 must have sent before the answers reach it (a pcap port delivers at once): 2048
        # UDP datagrams to the discard port go first, 64 receive bursts during which A2's
        # polls send its 32 packets (the uplink at 10 Tbit/s never holds them back).
        cls.a2_pcap = os.path.join(t, "a2.pcap")
        cls.a2_rx = os.path.join(t, "a2-rx.pcap")
        wrpcap(cls.a2_rx, [Ether(dst="02:53:50:00:0a:01", src="02:53:50:00:0b:01") /
                           IP(src="10.0.0.2", dst="10.0.0.1") / UDP(sport=9, dport=9) /
                           Raw(b"x" * 18)] * 2048 + [Ether(f) for f in cls.answers])
        cls.a2 = run_nic(t, "a2", cls.a2_rx, cls.a2_pcap,
                         requester.replace("mtu: 1024", "mtu: 1024"), slow, fast_uplink=True)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def naks(self):
        return [f for f in self.answers
                if Ether(f)[BTH].opcode == ACK_OPCODE
                and Ether(f)[AETH].syndrome == NAK_PSN_SEQUENCE_ERROR]

    def test_programs_ran_clean(self):
        for name, (r, st) in (("a", self.a), ("b", self.b), ("a2", self.a2)):
            self.assertEqual(r.returncode, 0, name + r.stdout + r.stderr)
            self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)
            self.assertIsNotNone(st, name)
        self.assertEqual(len(self.sent), PACKETS)
        self.assertEqual(len(self.kept), PACKETS - len(LOST))

    def test_every_frame_is_genuine(self):
        for f in self.sent + self.answers:
            self.assertTrue(ip_ok(f))
            self.assertTrue(icrc_ok(f), Ether(f).summary())

    def test_each_nak_names_the_first_missing_psn_and_sacks_what_arrived(self):
        naks = self.naks()
        self.assertGreater(len(naks), 0)
        arrived = [Ether(f)[BTH].psn for f in self.kept]
        holes = set()
        for nak in naks:
            p = Ether(nak)[BTH]
            self.assertEqual(p.dqpn, REQ_QP)
            self.assertEqual(p.psn, min(LOST))  # the first missing PSN: it never arrives
            sack = sack_of(nak)
            self.assertIsNotNone(sack)
            top = max(sack)
            # What B had when it sent this NAK: every kept PSN beyond the named one, up to the
            # highest SACKed (they arrive in order here, so exactly those up to it).
            self.assertEqual(sack, {q for q in arrived if p.psn < q <= top})
            holes |= {q for q in range(p.psn, top) if q not in sack}
        self.assertEqual(holes, LOST)
        # One NAK per gap: each NAK reveals a gap the one before it did not.
        self.assertEqual(len(naks), 3)  # {3, 4}, {10}, {20}
        st = self.b[1]["rc_engine"]
        self.assertEqual(st["transport"]["name"], "irn")
        self.assertEqual(st["placement"]["sack_naks"], len(naks))

    def test_the_requester_resends_exactly_the_lost_psns(self):
        out = [Ether(f)[BTH].psn for f in (bytes(p) for p in rdpcap(self.a2_pcap))]
        first = sorted(set(out))
        self.assertEqual(first, list(range(PACKETS)))
        again = list(out)
        for psn in first:
            again.remove(psn)
        self.assertEqual(sorted(again), sorted(LOST))  # each lost PSN once, nothing else
        tr = self.a2[1]["rc_engine"]["transport"]
        self.assertEqual(tr["sack_naks"], len(self.naks()))
        # 5..9, 11..19, 21..31: the SACKs' union, as far as A2 had sent when they came.
        self.assertGreater(tr["sacked_packets"], 14)
        self.assertLessEqual(tr["sacked_packets"], 27)
        self.assertGreater(tr["resends_skipped"], 0)  # a later NAK names 3 again: not resent
        self.assertEqual(self.a2[1]["rc_engine"]["requester"]["packets_retransmitted"],
                         len(LOST))

    def test_tshark_decodes_the_naks_and_their_sack(self):
        if shutil.which("tshark") is None:
            self.skipTest("tshark is not installed")
        home = tempfile.mkdtemp(prefix="wireshark_home_", dir=self.tmp)
        out = subprocess.run(
            ["tshark", "-X", f"lua_script:{LUA}", "-r", self.b_pcap, "-T", "fields",
             "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,",
             "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn",
             "-e", "infiniband.aeth.syndrome", "-e", "spraynet.sack.bits",
             "-e", "spraynet.sack.psn"],
            capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, HOME=home))
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split("\t") for line in out.stdout.splitlines()]
        self.assertEqual(len(rows), len(self.answers))
        decoded = 0
        for row, f in zip(rows, self.answers):
            p = Ether(f)[BTH]
            self.assertEqual((int(row[0]), int(row[1])), (ACK_OPCODE, p.psn))
            self.assertEqual(int(row[2], 0), Ether(f)[AETH].syndrome)
            sack = sack_of(f)
            if sack is None:
                self.assertEqual((row[3], row[4]), ("", ""))
                continue
            decoded += 1
            self.assertEqual(int(row[3]), (max(sack) - p.psn - 1) // 32 * 32 + 32)
            self.assertEqual({int(x) for x in row[4].split(",")}, sack)
        self.assertEqual(decoded, len(self.naks()))


if __name__ == "__main__":
    unittest.main()
