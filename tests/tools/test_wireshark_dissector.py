#!/usr/bin/python3
"""tools/wireshark/spraynet.lua in tshark, checked against what the project's own programs wrote.

roce_pcap writes RDMA WRITEs (UDP checksum 0: no PPCID; some QPs ECN CE), scripts/spray-pcap.sh
sprays them with the real nic_emu over 4 uplinks in each PPCID layout, and a nic_emu responder
with congestion control answers CE-marked WRITEs with CNPs. For every packet tshark's
spraynet.* fields must equal the PPCID decoded here from the bytes (ARCHITECTURE.md's layout),
the path id of the uplink the NIC sent it on and the layout in nic_emu's report. Captures with
corrupted check nibbles are read under both layouts; under the other one, a receiving nic_emu
configured so (scripts/reorder-pcap.sh) counts each verdict (the C++ ppcid_read) as often as the
dissector gives it. Sprayed and unsprayed frames wrapped here in CONGA's VXLAN overlay
(dataplane/wire/conga_overlay.h) must show the spraynet.conga.* fields read back from the bytes
written (only with VXLAN flags I and C, FB_LBTag and FB_Metric only with FB valid) and still the
inner RoCEv2 packet's PPCID, not the outer UDP checksum. Frames in ConWeave's overlay
(dataplane/wire/conweave_overlay.h: VXLAN flags I and W, 8 more bytes) must show the
spraynet.conweave.* fields read back from the bytes, the inner RoCEv2 packet dissected after the 8
bytes (data) or nothing after them (control messages); CONGA and plain VXLAN frames must dissect
as Wireshark's own VXLAN dissector has them. Skips when tshark is missing or runs no Lua scripts
(as root, init.lua decides).

Run by meson with NIC_EMU and ROCE_PCAP set; Debian's /usr/bin/python3 has scapy."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from scapy.all import IP, UDP, Ether, Raw, raw, rdpcap, wrpcap  # noqa: E402

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
ROCE_PCAP = os.environ.get("ROCE_PCAP", os.path.join(ROOT, "build", "nic_emu", "roce_pcap"))
LUA = os.path.join(ROOT, "tools", "wireshark", "spraynet.lua")
SCRIPTS = os.path.join(ROOT, "scripts")
TIMEOUT_S = 120
UPLINKS = 4  # spray-pcap.sh: uplink k has path id k + 1
LAYOUTS = ("ts-high", "path-high")
OTHER = {"ts-high": "path-high", "path-high": "ts-high"}
CNP = 0x81
TSHARK_HOME = tempfile.TemporaryDirectory(prefix="wireshark_home_")
FIELDS = ["ppcid", "layout", "path_id", "timestamp", "check", "check_ok", "layout_swapped",
          "verdict", "ecn_ce", "cnp", "expert.bad_check", "expert.layout_mismatch",
          "expert.unknown_path"]
CONGA_FIELDS = ["conga.lbtag", "conga.ce", "conga.fb_valid", "conga.fb_lbtag", "conga.fb_metric",
                "conga.vni", "conga.src_leaf"]
VXLAN_PORT = 4789
VXLAN_I, VXLAN_C = 0x08, 0x40  # VXLAN flags: VNI valid, CONGA fields present
VXLAN_W = 0x20  # VXLAN flag: ConWeave fields present
OVERLAY = 14 + 20 + 8 + 8  # outer Ethernet, IPv4, UDP, VXLAN
CONWEAVE_FIELDS = ["conweave.message", "conweave.flag", "conweave.phase", "conweave.epoch",
                   "conweave.uplink", "conweave.vni", "conweave.leaf", "conweave.ts_tx",
                   "conweave.ts_tail", "conweave.flow_key"]
# conweave_overlay.h's names: byte 1 bits 7-6 (message) and, for data, bits 5-4 (flag).
CW_DATA, CW_RTT_REPLY, CW_CLEAR, CW_NOTIFY = 0, 1, 2, 3
CW_MESSAGE_NAMES = {CW_DATA: "data", CW_RTT_REPLY: "RTT reply", CW_CLEAR: "CLEAR",
                    CW_NOTIFY: "NOTIFY"}
CW_FLAG_DATA, CW_FLAG_INIT, CW_FLAG_TAIL = 1, 2, 3
CW_FLAG_NAMES = {CW_FLAG_DATA: "DATA", CW_FLAG_INIT: "INIT", CW_FLAG_TAIL: "TAIL"}
CONTROL_DSCP = 48  # switch_emu's control_dscp default


def run(cmd, **kw):
    # An empty HOME keeps the user's Wireshark preferences and plugins (an installed copy of
    # spraynet.lua would register first and be the one tested) out of tshark; nothing else
    # run here reads HOME.
    env = dict(os.environ, NIC_EMU=NIC_EMU, HOME=TSHARK_HOME.name)
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                          check=True, **kw)


def lua_unavailable(tmp):
    """Why tshark cannot run the dissector here, or None."""
    if shutil.which("tshark") is None:
        return "tshark is not installed (scripts/setup.sh installs it)"
    if "with Lua" not in run(["tshark", "-v"]).stdout:
        return "this tshark is built without Lua"
    probe = os.path.join(tmp, "probe.lua")
    with open(probe, "w") as f:
        f.write('print("spraynet-lua-probe")\n')
    try:
        out = run(["tshark", "-X", f"lua_script:{probe}", "-r", empty_pcap(tmp)])
    except subprocess.CalledProcessError as e:
        out = e
    if "spraynet-lua-probe" not in out.stdout:
        return ("tshark runs no Lua scripts here (as root: run_user_scripts_when_superuser "
                "or enable_lua is false in Wireshark's init.lua): " + out.stderr.strip())
    return None


def empty_pcap(tmp):
    path = os.path.join(tmp, "empty.pcap")
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    return path


def tshark(path, *prefs, fields=FIELDS, extra=()):
    """One dict of spraynet.* values per packet (None where a field is absent), and of the
    fields named in extra under their full names."""
    cmd = ["tshark", "-X", f"lua_script:{LUA}", "-r", path, "-T", "fields",
           "-E", "separator=\t", "-e", "frame.number"]
    for p in prefs:
        cmd += ["-o", f"spraynet.{p}"]
    names = list(fields) + list(extra)
    for f in fields:
        cmd += ["-e", "spraynet." + f]
    for f in extra:
        cmd += ["-e", f]
    rows = []
    for line in run(cmd).stdout.splitlines():
        vals = line.split("\t")[1:]
        rows.append({f: v or None for f, v in zip(names, vals)})
    return rows


def tshark_tree(path, lua):
    """tshark -V's packet trees, one list of lines per packet, with the spraynet script or
    without any."""
    cmd = ["tshark", *(["-X", f"lua_script:{LUA}"] if lua else []), "-r", path, "-V"]
    packets = []
    for line in run(cmd).stdout.splitlines():
        # Blank lines also part a packet's tree from its hex dump: only "Frame N:" starts one.
        if line.startswith("Frame "):
            packets.append([])
        packets[-1].append(line)
    return packets


def without_spraynet(lines):
    """A packet tree without the postdissector's top-level PPCID and CONGA trees (a line at
    column 0 opens a tree); any other spraynet tree stays in, to be caught."""
    out, skipping = [], False
    for line in lines:
        if not line.startswith(" "):
            skipping = re.match(r"spraynet (PPCID|no PPCID|CONGA overlay)", line) is not None
        if not skipping:
            out.append(line)
    return out


def flag(v):
    """tshark prints booleans as 1/0 (Wireshark 4.0) or True/False (4.2 on)."""
    return {"1": True, "True": True, "0": False, "False": False}[v]


def check_nibble(qp, psn):
    x, n = (qp ^ psn) & 0xFFFFFF, 0
    for shift in range(0, 24, 4):
        n ^= x >> shift
    return n & 0xF


def decode(ppcid, layout):
    """(path id, timestamp hash) of a PPCID under a layout (docs/ARCHITECTURE.md)."""
    high, mid = ppcid >> 8, (ppcid >> 4) & 0xF
    return (mid, high) if layout == "ts-high" else (high, mid)


def expected(ppcid, qp, psn, configured, known):
    """(verdict, path id, layout) as a receiving NIC with these path ids classifies it."""
    if ppcid & 0xF != check_nibble(qp, psn):
        return "bad_check", decode(ppcid, configured)[0], configured
    path = decode(ppcid, configured)[0]
    if path in known:
        return "ok", path, configured
    theirs = decode(ppcid, OTHER[configured])[0]
    if theirs in known:
        return "layout_mismatch", theirs, OTHER[configured]
    return "unknown_path", path, configured


def wire(frame):
    """(UDP checksum, ECN, BTH opcode, DestQP, PSN) from the bytes (untagged IPv4)."""
    udp = 14 + (frame[14] & 0xF) * 4
    dport, csum = struct.unpack("!H2xH", frame[udp + 2:udp + 8])
    assert dport == 4791, dport
    bth = udp + 8
    return (csum, frame[15] & 3, frame[bth], int.from_bytes(frame[bth + 5:bth + 8], "big"),
            int.from_bytes(frame[bth + 9:bth + 12], "big"))


def vxlan_word(flags, lbtag, ce, fb, vni, src_leaf):
    """The 8 VXLAN bytes as dataplane/wire/conga_overlay.h lays them out; fb is (FB_LBTag,
    FB_Metric), or None for FB valid 0 (byte 2 then 0, as conga_encapsulate writes it)."""
    b1 = lbtag << 4 | ce << 1 | (fb is not None)
    b2 = fb[0] << 4 | fb[1] << 1 if fb else 0
    return bytes([flags, b1, b2, 0]) + vni.to_bytes(3, "big") + bytes([src_leaf])


def overlay(inner, word, ecn=None):
    """inner in the overlay as a source leaf wraps it: the inner MACs, IPv4 with the inner DSCP
    and ECN (or this ECN: a spine's mark), DF, TTL 64, UDP from 0xC000 | hash with checksum 0."""
    tos = inner[15] if ecn is None else inner[15] & ~3 | ecn
    outer = IP(src="10.0.0.255", dst="10.0.1.255", tos=tos, ttl=64, flags="DF", id=0)
    return inner[:14] + raw(outer / UDP(sport=0xC123, dport=VXLAN_PORT, chksum=0)
                            / Raw(word + inner))


def conweave_word(message, flag, phase, epoch, uplink, vni, leaf, flags=VXLAN_I | VXLAN_W):
    """The 8 VXLAN bytes as dataplane/wire/conweave_overlay.h lays them out."""
    b1 = message << 6 | flag << 4 | phase << 3
    return bytes([flags, b1, epoch, uplink]) + vni.to_bytes(3, "big") + bytes([leaf])


def conweave_data(inner, word, ts_tx, ts_tail, ecn=None):
    """inner in ConWeave's overlay: the VXLAN word, the send and TAIL times, the inner frame."""
    return overlay(inner, word + struct.pack("!II", ts_tx, ts_tail), ecn)


def conweave_control(macs, word, flow_key):
    """A control message as conweave_control() writes it: the outer headers with DSCP
    control_dscp, the VXLAN word, the flow key and 2 bytes of padding to Ethernet's 60."""
    outer = IP(src="10.0.1.255", dst="10.0.0.255", tos=CONTROL_DSCP << 2, ttl=64, flags="DF",
               id=0)
    return macs[:12] + b"\x08\x00" + raw(outer / UDP(sport=0xC001, dport=VXLAN_PORT, chksum=0)
                                         / Raw(word + flow_key.to_bytes(8, "big"))) + b"\0\0"


def conweave(frame):
    """(spraynet.conweave.* values read from the bytes, the inner frame or None): the fields only
    for UDP to 4789 with VXLAN flags I and W; a data frame's flag, times and inner frame, a
    control message's flow key."""
    udp = 14 + (frame[14] & 0xF) * 4
    if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != VXLAN_PORT:
        return {}, frame
    vx, extra = frame[udp + 8:udp + 16], frame[udp + 16:udp + 24]
    if vx[0] & (VXLAN_I | VXLAN_W) != VXLAN_I | VXLAN_W:
        return {}, frame[udp + 16:]
    message = vx[1] >> 6
    fields = {"conweave.message": message, "conweave.phase": vx[1] >> 3 & 1,
              "conweave.epoch": vx[2], "conweave.uplink": vx[3] & 0xF,
              "conweave.vni": int.from_bytes(vx[4:7], "big"), "conweave.leaf": vx[7]}
    if message == CW_DATA:
        ts_tx, ts_tail = struct.unpack("!II", extra)
        fields.update({"conweave.flag": vx[1] >> 4 & 3, "conweave.ts_tx": ts_tx,
                       "conweave.ts_tail": ts_tail})
        return fields, frame[udp + 24:]
    fields["conweave.flow_key"] = int.from_bytes(extra, "big")
    return fields, None


def conga(frame):
    """(spraynet.conga.* values read from the bytes, the frame RoCEv2 is read from): the fields
    only for UDP to 4789 with VXLAN flags I and C, the FB ones only with FB valid."""
    udp = 14 + (frame[14] & 0xF) * 4
    if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != VXLAN_PORT:
        return {}, frame
    vx, inner = frame[udp + 8:udp + 16], frame[udp + 16:]
    if vx[0] & (VXLAN_I | VXLAN_C) != VXLAN_I | VXLAN_C:
        return {}, inner
    fields = {"conga.lbtag": vx[1] >> 4, "conga.ce": vx[1] >> 1 & 7,
              "conga.fb_valid": vx[1] & 1, "conga.vni": int.from_bytes(vx[4:7], "big"),
              "conga.src_leaf": vx[7]}
    if vx[1] & 1:
        fields.update({"conga.fb_lbtag": vx[2] >> 4, "conga.fb_metric": vx[2] >> 1 & 7})
    return fields, inner


def frames(path):
    return [raw(p) for p in rdpcap(path)]


def uplinks(out):
    """The uplink captures of a spray-pcap.sh directory as one file, for one tshark run:
    (its path, [(uplink, frame)] in its order)."""
    sent = [(k, f) for k in range(UPLINKS) for f in frames(os.path.join(out, f"uplink{k}.pcap"))]
    path = os.path.join(out, "uplinks.pcap")
    wrpcap(path, [Ether(f) for _, f in sent])
    return path, sent


class WiresharkDissector(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="wireshark_dissector_")
        t = cls.tmp = cls._tmp.name

        def writes(name, *args):
            path = os.path.join(t, name)
            run([ROCE_PCAP, "--out", path, "--mtu", "1024", *args])
            return path

        # 64 unmarked WRITEs of QPs 0x11-0x14 (ECT(0)), then 8 CE-marked ones of QPs 0x21-0x22.
        ect = writes("ect.pcap", "--qps", "4", "--messages", "4", "--msg-bytes", "4096",
                     "--first-qpn", "17", "--tos", str(26 << 2 | 2))
        cls.marked = writes("marked.pcap", "--qps", "2", "--messages", "2", "--msg-bytes",
                            "2048", "--first-qpn", "33", "--psn-start", "0",
                            "--tos", str(26 << 2 | 3))
        cls.host = os.path.join(t, "host.pcap")
        wrpcap(cls.host, rdpcap(ect) + rdpcap(cls.marked))

        # A nic_emu run is mostly EAL start-up and its idle exit: two at a time.
        with ThreadPoolExecutor(2) as pool:
            sprays = {lay: pool.submit(cls.spray, lay) for lay in LAYOUTS}
            cnp = pool.submit(cls.cnp_responder)
            cls.spray_out = {lay: s.result() for lay, s in sprays.items()}
            cls.cnp_pcap = cnp.result()
            cls.corrupted = set()  # the frames whose check nibble corrupt() changed
            cls.bad = {lay: cls.corrupt(lay) for lay in LAYOUTS}
            # A receiving NIC per capture, configured with the other layout: it counts bad
            # checks and swapped layouts both (one under its own layout would add 6 s and only
            # ok and bad_check, which spray-stats.json and the bytes already pin down).
            receivers = {lay: pool.submit(cls.receive, lay, OTHER[lay]) for lay in LAYOUTS}
            cls.received = {(lay, OTHER[lay]): r.result() for lay, r in receivers.items()}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    @classmethod
    def spray(cls, layout):
        out = os.path.join(cls.tmp, layout)
        run([os.path.join(SCRIPTS, "spray-pcap.sh"), cls.host, out, "--uplinks", str(UPLINKS),
             "--layout", layout])
        with open(os.path.join(out, "spray-stats.json")) as f:
            return out, json.load(f)

    @classmethod
    def cnp_responder(cls):
        """A responder NIC with DCQCN: an ACK per message and a CNP per CE-marked WRITE."""
        cfg, tx = os.path.join(cls.tmp, "cnp.yaml"), os.path.join(cls.tmp, "cnp.pcap")
        with open(cfg, "w") as f:
            f.write("nic:\n  name: cnp\n  uplinks:\n"
                    f"    - {{name: up0, device: \"net_pcap0,rx_pcap={cls.marked},"
                    f"tx_pcap={tx}\", path_id: 1}}\n"
                    "  spray: {mode: rr}\n  receive: none\n"
                    "  rc_engine: {qps: 2, role: responder, first_qp: 33, peer_first_qp: 64, "
                    "local_ip: 10.0.0.2, peer_ip: 10.0.0.1, mtu: 1024}\n"
                    "  cc: {mode: dcqcn, min_time_between_cnps_us: 0}\n")
        prefix = f"wsdissector{os.getpid()}"
        try:
            run([NIC_EMU, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
                 "--log-level", "lib.eal:error", "--", "--config", cfg, "--idle-exit-ms", "300"])
        finally:
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        return tx

    @classmethod
    def corrupt(cls, layout):
        """Copies of the uplink captures with every third packet's check nibble changed (the
        UDP checksum field is masked by the ICRC, so the packets stay valid RoCEv2)."""
        src, out = cls.spray_out[layout][0], os.path.join(cls.tmp, layout + "-bad")
        os.makedirs(out)
        for k in range(UPLINKS):
            pkts = []
            for i, frame in enumerate(frames(os.path.join(src, f"uplink{k}.pcap"))):
                if i % 3 == 0:
                    frame = bytearray(frame)
                    frame[14 + 20 + 7] ^= 1 + i % 15  # low byte of the UDP checksum
                    frame = bytes(frame)
                    cls.corrupted.add(frame)
                pkts.append(Ether(frame))
            wrpcap(os.path.join(out, f"uplink{k}.pcap"), pkts)
        return out

    @classmethod
    def receive(cls, layout, rx_layout):
        """reorder-pcap.sh's nic_emu over a corrupted capture: its ppcid counters."""
        out = os.path.join(cls.tmp, f"{layout}-bad-as-{rx_layout}")
        shutil.copytree(cls.bad[layout], out)  # the script writes its config into the dir
        run([os.path.join(SCRIPTS, "reorder-pcap.sh"), out, os.path.join(out, "host.pcap"),
             "--layout", rx_layout, "--no-reorder"])
        with open(os.path.join(out, "reorder-stats.json")) as f:
            return json.load(f)["ppcid"]

    def assert_ppcid(self, row, frame, configured, known, what):
        csum, ecn, opcode, qp, psn = wire(frame)
        verdict, path, layout = expected(csum, qp, psn, configured, known)
        self.assertEqual(int(row["ppcid"], 0), csum, what)
        self.assertEqual(row["verdict"], verdict, what)
        self.assertEqual(row["layout"], layout, what)
        self.assertEqual(int(row["path_id"]), path, what)
        self.assertEqual(int(row["timestamp"], 0), decode(csum, layout)[1], what)
        self.assertEqual(int(row["check"], 0), csum & 0xF, what)
        self.assertEqual(flag(row["check_ok"]), verdict != "bad_check", what)
        self.assertEqual(flag(row["layout_swapped"]), verdict == "layout_mismatch", what)
        for v in ("bad_check", "layout_mismatch", "unknown_path"):
            self.assertEqual(row["expert." + v] is not None, verdict == v, what)
        self.assertEqual(flag(row["ecn_ce"]), ecn == 3, what)
        self.assertEqual(flag(row["cnp"]), opcode == CNP, what)
        return verdict, path

    def test_unsprayed_packets_carry_no_ppcid(self):
        rows, sent = tshark(self.host), frames(self.host)
        self.assertEqual(len(rows), len(sent))
        for i, (row, frame) in enumerate(zip(rows, sent)):
            csum, ecn, opcode, _, _ = wire(frame)
            self.assertEqual(csum, 0)
            self.assertEqual((row["ppcid"], row["verdict"], row["path_id"], row["check_ok"]),
                             ("0x0000", "absent", None, None), f"packet {i + 1}")
            self.assertEqual(flag(row["ecn_ce"]), ecn == 3)
            self.assertEqual(flag(row["cnp"]), opcode == CNP)
        self.assertEqual(sum(flag(r["ecn_ce"]) for r in rows), 8)

    def test_sprayed_packets_decode_as_the_nic_wrote_them(self):
        for layout in LAYOUTS:
            out, report = self.spray_out[layout]
            self.assertEqual(report["spray"]["ppcid_layout"], layout)
            path, sent = uplinks(out)
            self.assertEqual(len(sent), report["spray"]["ppcid_written"])
            self.assertEqual(len(sent), len(frames(self.host)))
            self.assertEqual(Counter(k for k, _ in sent),
                             dict(enumerate(report["spray"]["uplink_packets"])))
            # ts-high is the dissector's default: its run sets no layout preference.
            rows = tshark(path, *([] if layout == "ts-high" else [f"layout:{layout}"]))
            self.assertEqual(len(rows), len(sent))
            for i, (row, (k, frame)) in enumerate(zip(rows, sent)):
                # Every path id counts as known here: the layout alone decides.
                verdict, path_id = self.assert_ppcid(row, frame, layout, range(256),
                                                     f"{layout} uplink {k}, packet {i + 1}")
                self.assertEqual((verdict, path_id), ("ok", report["ports"][k]["path_id"]))
                self.assertEqual(path_id, k + 1)
            self.assertEqual(sum(flag(r["ecn_ce"]) for r in rows), 8)

    def test_corrupted_and_swapped_ppcids_are_flagged_as_the_receiving_nic_counts_them(self):
        known = set(range(1, UPLINKS + 1))  # reorder-pcap.sh's receiver knows paths 1-4
        for layout in LAYOUTS:
            path, sent = uplinks(self.bad[layout])
            for rx in LAYOUTS:
                with self.subTest(sent=layout, read_as=rx):
                    rows = tshark(path, f"layout:{rx}", f"known_paths:1-{UPLINKS}")
                    self.assertEqual(len(rows), len(sent))
                    counts, by_path = Counter(), Counter()
                    for i, (row, (k, frame)) in enumerate(zip(rows, sent)):
                        verdict, path_id = self.assert_ppcid(
                            row, frame, rx, known, f"{layout} as {rx}, packet {i + 1}")
                        self.assertEqual(verdict == "bad_check", frame in self.corrupted)
                        if verdict == "layout_mismatch":
                            self.assertEqual(path_id, k + 1)  # the uplink's, unswapped
                        counts[verdict] += 1
                        if verdict == "ok":
                            by_path[str(path_id)] += 1
                    self.assertGreater(counts["bad_check"], 0)
                    if rx == layout:
                        self.assertEqual(counts["ok"] + counts["bad_check"], len(sent))
                        continue
                    # Read as ts-high, a path-high PPCID's path id is its 4 timestamp bits, often
                    # the same for a whole burst: when they name a known path (1-4) no mismatch
                    # shows (each verdict is still checked above, frame by frame).
                    # Read the other way, the id is the 8-bit timestamp hash: almost never 1-4.
                    if not (layout == "path-high" and rx == "ts-high"):
                        self.assertGreater(counts["layout_mismatch"], 0)
                    nic = self.received[(layout, rx)]
                    verdicts = ("ok", "bad_check", "layout_mismatch", "unknown_path", "absent")
                    self.assertEqual({v: nic[v] for v in verdicts},
                                     {v: counts[v] for v in verdicts})
                    self.assertEqual(nic["by_path_id"], by_path)

    def test_path_unknown_under_both_layouts_is_noted(self):
        # Paths 8-15 name none of the uplinks (1-4) and hardly a timestamp hash (bits 15-8).
        path, sent = uplinks(self.spray_out["ts-high"][0])
        rows = tshark(path, "known_paths:8-15")
        self.assertEqual(len(rows), len(sent))
        verdicts = Counter(
            self.assert_ppcid(row, frame, "ts-high", range(8, 16), f"packet {i + 1}")[0]
            for i, (row, (_, frame)) in enumerate(zip(rows, sent)))
        self.assertGreater(verdicts["unknown_path"], 0)

    def test_conga_overlay_fields_and_the_inner_ppcid(self):
        sprayed = [f for k in range(UPLINKS)
                   for f in frames(os.path.join(self.spray_out["ts-high"][0], f"uplink{k}.pcap"))]
        ect = next(f for f in sprayed if wire(f)[1] != 3)
        ce = next(f for f in sprayed if wire(f)[1] == 3)
        unsprayed = frames(self.host)[0]
        # (what, VXLAN flags, (LBTag, CE, (FB_LBTag, FB_Metric) or None, VNI, source leaf), inner
        # frame, outer ECN or None to copy the inner one); flags None: the inner frame, bare.
        cases = [
            ("CONGA with feedback", VXLAN_I | VXLAN_C, (5, 3, (9, 6), 1, 2), ect, None),
            ("CONGA, every field at its maximum", VXLAN_I | VXLAN_C,
             (15, 7, (15, 7), 0xFFFFFF, 255), ce, None),
            ("CONGA without feedback, unsprayed inner", VXLAN_I | VXLAN_C, (3, 0, None, 1, 0),
             unsprayed, None),
            ("CONGA, outer CE on an ECT inner", VXLAN_I | VXLAN_C, (1, 7, None, 7, 4), ect, 3),
            # The same bits as the first case, but without C they are plain VXLAN's reserved ones.
            ("plain VXLAN", VXLAN_I, (5, 3, (9, 6), 1, 2), ect, None),
            ("C without I", VXLAN_C, (5, 3, (9, 6), 1, 2), ect, None),
            ("no overlay", None, None, ect, None),
        ]
        path = os.path.join(self.tmp, "conga.pcap")
        wrpcap(path, [Ether(inner if flags is None else overlay(inner, vxlan_word(flags, *f), ecn))
                      for _, flags, f, inner, ecn in cases])
        sent = frames(path)
        rows = tshark(path, fields=FIELDS + CONGA_FIELDS)
        self.assertEqual(len(rows), len(cases))
        carrying = 0
        for (what, flags, f, inner, ecn), row, frame in zip(cases, rows, sent):
            want, roce = conga(frame)  # from the bytes as written
            if want:
                # The test's encoder agrees with the header's layout, field by field.
                lbtag, ce_metric, fb, vni, leaf = f
                self.assertEqual(want, {"conga.lbtag": lbtag, "conga.ce": ce_metric,
                                        "conga.fb_valid": int(fb is not None), "conga.vni": vni,
                                        "conga.src_leaf": leaf,
                                        **({"conga.fb_lbtag": fb[0], "conga.fb_metric": fb[1]}
                                           if fb else {})}, what)
                carrying += 1
            for name in CONGA_FIELDS:
                got = row[name]
                if name == "conga.fb_valid" and got is not None:
                    got = int(flag(got))
                elif got is not None:
                    got = int(got, 0)
                self.assertEqual(got, want.get(name), f"{what}: {name}")
            # The PPCID and the rest come from the inner RoCEv2 packet (UDP to 4791), never the
            # outer UDP header to 4789 with its checksum 0.
            self.assertEqual(roce, inner, what)
            csum, inner_ecn, opcode, _, _ = wire(roce)
            if csum:
                self.assert_ppcid(row, roce, "ts-high", range(256), what)
            else:
                self.assertEqual((row["ppcid"], row["verdict"], row["path_id"]),
                                 ("0x0000", "absent", None), what)
                self.assertEqual(flag(row["ecn_ce"]), inner_ecn == 3, what)
                self.assertEqual(flag(row["cnp"]), opcode == CNP, what)
            if ecn is not None:  # the spine's mark is on the outer header only
                self.assertEqual((frame[15] & 3, inner_ecn, flag(row["ecn_ce"])),
                                 (ecn, 2, False), what)
        self.assertEqual(carrying, 4)

    def sprayed_and_unsprayed(self):
        """(an ECT sprayed frame, a CE-marked sprayed frame, an unsprayed frame): genuine RoCEv2
        from roce_pcap and nic_emu."""
        sprayed = [f for k in range(UPLINKS)
                   for f in frames(os.path.join(self.spray_out["ts-high"][0], f"uplink{k}.pcap"))]
        return (next(f for f in sprayed if wire(f)[1] != 3),
                next(f for f in sprayed if wire(f)[1] == 3), frames(self.host)[0])

    def assert_conweave_fields(self, row, want, what):
        for name in CONWEAVE_FIELDS:
            got = row[name]
            self.assertEqual(None if got is None else int(got, 0), want.get(name),
                             f"{what}: {name}")

    def test_conweave_data_frames_and_the_inner_roce_packet(self):
        ect, ce, unsprayed = self.sprayed_and_unsprayed()
        # (what, (message, flag, phase, epoch, uplink, VNI, leaf), ts_tx, ts_tail, inner frame,
        # outer ECN or None to copy the inner one)
        cases = [
            ("INIT, phase 0", (CW_DATA, CW_FLAG_INIT, 0, 200, 6, 0x000102, 9), 0x11223344, 0,
             ect, None),
            # The TAIL carries its own send time as the epoch's TAIL time.
            ("TAIL, phase 0", (CW_DATA, CW_FLAG_TAIL, 0, 200, 6, 0x000102, 9), 0x11225566,
             0x11225566, ce, None),
            ("DATA, phase 1 after the reroute, outer CE on an ECT inner",
             (CW_DATA, CW_FLAG_DATA, 1, 201, 2, 7, 9), 0x11227788, 0x11225566, ect, 3),
            ("every field at its maximum, unsprayed inner",
             (CW_DATA, CW_FLAG_DATA, 1, 255, 15, 0xFFFFFF, 255), 0xFFFFFFFF, 0xFFFFFFFF,
             unsprayed, None),
        ]
        path = os.path.join(self.tmp, "conweave-data.pcap")
        wrpcap(path, [Ether(conweave_data(inner, conweave_word(*f), tx, tail, ecn))
                      for _, f, tx, tail, inner, ecn in cases])
        sent = frames(path)
        rows = tshark(path, fields=FIELDS + CONWEAVE_FIELDS,
                      extra=["frame.protocols", "infiniband.bth.destqp", "infiniband.bth.psn",
                             "_ws.col.Info"])
        self.assertEqual(len(rows), len(cases))
        for (what, f, tx, tail, inner, ecn), row, frame in zip(cases, rows, sent):
            want, roce = conweave(frame)  # from the bytes as written
            message, flag_, phase, epoch, uplink, vni, leaf = f
            # The test's encoder agrees with the header's layout, field by field.
            self.assertEqual(want, {"conweave.message": message, "conweave.flag": flag_,
                                    "conweave.phase": phase, "conweave.epoch": epoch,
                                    "conweave.uplink": uplink, "conweave.vni": vni,
                                    "conweave.leaf": leaf, "conweave.ts_tx": tx,
                                    "conweave.ts_tail": tail}, what)
            self.assertEqual(roce, inner, what)
            self.assert_conweave_fields(row, want, what)
            # The inner frame starts after the 8 extra bytes, not after the VXLAN word, and is
            # dissected through to the BTH; Wireshark's VXLAN dissector is left out.
            self.assertEqual(row["frame.protocols"].split(":")[:10],
                             ["eth", "ethertype", "ip", "udp", "spraynet.conweave",
                              "eth", "ethertype", "ip", "udp", "infiniband"], what)
            csum, inner_ecn, opcode, qp, psn = wire(roce)
            self.assertEqual((int(row["infiniband.bth.destqp"], 0),
                              int(row["infiniband.bth.psn"])), (qp, psn), what)
            if csum:
                self.assert_ppcid(row, roce, "ts-high", range(256), what)
            else:
                self.assertEqual((row["ppcid"], row["verdict"], row["path_id"]),
                                 ("0x0000", "absent", None), what)
                self.assertEqual(flag(row["ecn_ce"]), inner_ecn == 3, what)
                self.assertEqual(flag(row["cnp"]), opcode == CNP, what)
            if ecn is not None:  # the spine's mark is on the outer header only
                self.assertEqual((frame[15] & 3, inner_ecn, flag(row["ecn_ce"])),
                                 (ecn, 2, False), what)
            summary = (f" [ConWeave leaf {want['conweave.leaf']} data "
                       f"{CW_FLAG_NAMES[want['conweave.flag']]} epoch {want['conweave.epoch']} "
                       f"phase {want['conweave.phase']} uplink {want['conweave.uplink']}]")
            info = row["_ws.col.Info"]
            self.assertIn(summary, info, what)
            self.assertTrue(info.startswith("RC RDMA Write"), what)  # the inner packet's
            if csum:
                self.assertLess(info.index(summary), info.index(" [PPCID path "), what)

    def test_conweave_control_messages(self):
        macs = frames(self.host)[0]
        key = 0x0102030405060708
        # (what, (message, flag, phase, epoch, uplink, VNI, leaf)); bits 5-4 hold the flag
        # conweave_control() leaves at its default (DATA), which means nothing in a control frame.
        cases = [
            ("RTT reply", (CW_RTT_REPLY, CW_FLAG_DATA, 0, 7, 5, 0x000102, 1)),
            ("CLEAR", (CW_CLEAR, CW_FLAG_DATA, 0, 7, 5, 0x000102, 1)),
            ("NOTIFY of uplink 3, phase 1", (CW_NOTIFY, CW_FLAG_DATA, 1, 8, 3, 0x000102, 1)),
        ]
        path = os.path.join(self.tmp, "conweave-control.pcap")
        wrpcap(path, [Ether(conweave_control(macs, conweave_word(*f), key)) for _, f in cases])
        sent = frames(path)
        rows = tshark(path, fields=FIELDS + CONWEAVE_FIELDS,
                      extra=["frame.protocols", "eth.padding", "infiniband.bth.psn",
                             "_ws.col.Protocol", "_ws.col.Info"])
        self.assertEqual(len(rows), len(cases))
        for (what, f), row, frame in zip(cases, rows, sent):
            udp = 14 + (frame[14] & 0xF) * 4
            self.assertEqual((len(frame), struct.unpack("!H", frame[16:18])[0],
                              struct.unpack("!H", frame[udp + 4:udp + 6])[0]), (60, 44, 24), what)
            want, inner = conweave(frame)
            message, _, phase, epoch, uplink, vni, leaf = f
            self.assertEqual(want, {"conweave.message": message, "conweave.phase": phase,
                                    "conweave.epoch": epoch, "conweave.uplink": uplink,
                                    "conweave.vni": vni, "conweave.leaf": leaf,
                                    "conweave.flow_key": key}, what)
            self.assertIsNone(inner, what)
            self.assert_conweave_fields(row, want, what)  # no flag, ts_tx or ts_tail
            # Nothing after the flow key but the Ethernet padding: no inner frame, no RoCE.
            self.assertEqual(row["frame.protocols"], "eth:ethertype:ip:udp:spraynet.conweave",
                             what)
            self.assertEqual(row["eth.padding"], frame[udp + 24:].hex(), what)
            self.assertEqual((row["infiniband.bth.psn"], row["ppcid"], row["verdict"]),
                             (None, None, None), what)
            self.assertEqual(row["_ws.col.Protocol"], "ConWeave", what)
            self.assertEqual(row["_ws.col.Info"],
                             f"[ConWeave leaf {want['conweave.leaf']} "
                             f"{CW_MESSAGE_NAMES[want['conweave.message']]} "
                             f"epoch {want['conweave.epoch']}]", what)

    def test_conga_and_plain_vxlan_dissect_as_wiresharks_own(self):
        # Taking UDP 4789 from Wireshark's VXLAN dissector must change nothing for the frames it
        # hands back: their trees are the ones tshark gives with no script at all, but for the
        # spraynet trees the postdissector adds and the one more entry in frame.protocols.
        ect, _, unsprayed = self.sprayed_and_unsprayed()
        cases = [("CONGA", VXLAN_I | VXLAN_C, (5, 3, (9, 6), 1, 2), ect),
                 ("CONGA, unsprayed inner", VXLAN_I | VXLAN_C, (3, 0, None, 1, 0), unsprayed),
                 ("plain VXLAN", VXLAN_I, (0, 0, None, 0x000102, 0), ect),
                 ("W without I", VXLAN_W, (0, 0, None, 0x000102, 0), ect),
                 ("C without I", VXLAN_C, (5, 3, (9, 6), 1, 2), ect)]
        path = os.path.join(self.tmp, "vxlan.pcap")
        wrpcap(path, [Ether(overlay(inner, vxlan_word(flags, *f))) for _, flags, f, inner in cases])
        own, ours = tshark_tree(path, lua=False), tshark_tree(path, lua=True)
        self.assertEqual((len(own), len(ours)), (len(cases), len(cases)))
        protocols = "    [Protocols in frame: "
        for (what, *_), theirs, mine in zip(cases, own, ours):
            expect = [line.replace(":udp:vxlan:", ":udp:spraynet.conweave:vxlan:", 1)
                      if line.startswith(protocols) else line for line in theirs]
            self.assertEqual(sum(line.startswith(protocols) for line in expect), 1, what)
            self.assertIn(":udp:spraynet.conweave:vxlan:", "\n".join(expect), what)
            self.assertEqual(without_spraynet(mine), expect, what)
        rows = tshark(path, fields=CONWEAVE_FIELDS + ["conga.src_leaf"])
        self.assertEqual([r["conga.src_leaf"] is not None for r in rows],
                         [True, True, False, False, False])
        self.assertTrue(all(r[name] is None for r in rows for name in CONWEAVE_FIELDS))

    def test_cnps_and_ce_are_marked(self):
        rows, sent = tshark(self.cnp_pcap), frames(self.cnp_pcap)
        self.assertEqual(len(rows), len(sent))
        cnps = 0
        for i, (row, frame) in enumerate(zip(rows, sent)):
            csum, ecn, opcode, _, _ = wire(frame)
            self.assertEqual(flag(row["cnp"]), opcode == CNP, f"packet {i + 1}")
            self.assertEqual(flag(row["ecn_ce"]), ecn == 3, f"packet {i + 1}")
            if csum:
                self.assert_ppcid(row, frame, "ts-high", range(256), f"packet {i + 1}")
            else:
                self.assertEqual(row["verdict"], "absent")
            cnps += opcode == CNP
        self.assertEqual(cnps, 8)  # one per CE-marked WRITE with no minimum gap


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="wireshark_lua_probe_") as probe_dir:
        reason = lua_unavailable(probe_dir)
    if reason:
        print("skipped:", reason)
        sys.exit(77)  # meson's SKIP
    unittest.main(verbosity=2)
