#!/usr/bin/python3
"""scripts/spraynet_exporter.py against a real switch_emu: two net_pcap ingress ports replay
pcaps whose frames the switch forwards or drops for known causes (a different mix on each
port), two net_pcap uplinks in a weighted group take what is forwarded. Once every frame has
been received and nothing is queued (the counters stand still), the exporter is started and
scraped over HTTP (urllib), and every value checked is compared with what the telemetry socket
says at that moment: per-port rx/tx, drops by cause switch-wide and per ingress port, egress
class counters, group member packets and bucket shares, link-state rows. Also: telemetry sends
numbers as JSON numbers, the exporter never sends an acting command, says so when the socket
is missing, and reports spraynet_up 0 once the switch is gone.

Run by meson (tests/switch_emu/meson.build) with SWITCH_EMU set; Debian's /usr/bin/python3
(python3-prometheus-client, scapy for the shared helpers)."""
import importlib.util
import os
import re
import signal
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pcaplib as P  # noqa: E402
from test_switch_emu import (  # noqa: E402
    TELEMETRY_READY_S, ROOT, SwitchProcess, TempDirTest, unique_prefix, wait_for)

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

EXPORTER = os.path.join(ROOT, "scripts", "spraynet_exporter.py")
PYTHON = "/usr/bin/python3"
EXPORTER_READY_S = 30
HTTP_TIMEOUT_S = 30


def load_exporter():
    spec = importlib.util.spec_from_file_location("spraynet_exporter", EXPORTER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def frames_in0():
    """in0: 40 routed UDP frames (many flows), 5 ARP (parse_not_ipv4), 3 to 192.0.2.x
    (no_route)."""
    good = [P.udp_frame(P.ip_bytes("10.1.0.1"), P.ip_bytes(f"10.2.0.{i % 200 + 1}"),
                        1000 + i, 4791, bytes(64 + i)) for i in range(40)]
    arp = [P.ether(P.MAC_DST, P.MAC_SRC, P.ETH_ARP, bytes(28)) for _ in range(5)]
    noroute = [P.udp_frame(P.ip_bytes("10.1.0.1"), P.ip_bytes(f"192.0.2.{i}"), 7, 7, b"x" * 20)
               for i in range(3)]
    return good + arp + noroute, {"parse_not_ipv4": 5, "no_route": 3}


def frames_in1():
    """in1: 30 routed frames, 4 with TTL 1 (ttl_expired), 2 with a bad IPv4 header checksum
    (parse_bad_ip_checksum)."""
    good = [P.udp_frame(P.ip_bytes("10.3.0.1"), P.ip_bytes(f"10.4.0.{i + 1}"), 2000 + i, 80,
                        bytes(100)) for i in range(30)]
    ttl1 = [P.udp_frame(P.ip_bytes("10.3.0.1"), P.ip_bytes("10.4.0.9"), 5, 5, b"t" * 20, ttl=1)
            for _ in range(4)]
    bad = []
    for i in range(2):
        f = bytearray(P.udp_frame(P.ip_bytes("10.3.0.1"), P.ip_bytes("10.4.0.8"), 6, 6 + i,
                                  b"c" * 20))
        f[14 + 10] ^= 0xFF
        bad.append(bytes(f))
    return good + ttl1 + bad, {"ttl_expired": 4, "parse_bad_ip_checksum": 2}


def numeric_strings(reply, path=""):
    """Every value in a telemetry reply that is a number written as a string."""
    out = []
    if isinstance(reply, dict):
        for k, v in reply.items():
            out += numeric_strings(v, f"{path}/{k}")
    elif isinstance(reply, list):
        for i, v in enumerate(reply):
            out += numeric_strings(v, f"{path}[{i}]")
    elif isinstance(reply, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", reply):
        out.append((path, reply))
    return out


class Scrape:
    """A parsed scrape: value(name, **labels) for the one sample with those labels."""

    def __init__(self, text):
        self.samples = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                self.samples.setdefault(s.name, []).append((s.labels, s.value))

    def value(self, name, **labels):
        want = {k: str(v) for k, v in labels.items()}
        hits = [v for lab, v in self.samples.get(name, []) if all(lab.get(k) == x
                                                                    for k, x in want.items())]
        if len(hits) != 1:
            raise AssertionError(f"{name}{want}: {len(hits)} samples in the scrape, want 1 "
                                 f"(have {self.samples.get(name, [])[:5]}...)")
        return hits[0]

    def labels(self, name):
        return [lab for lab, _ in self.samples.get(name, [])]


class Exporter:
    """scripts/spraynet_exporter.py serving on a free port of 127.0.0.1."""

    def __init__(self, tmp, *args):
        self.err_path = os.path.join(tmp, "exporter.stderr")
        self._err = open(self.err_path, "w")
        self.proc = subprocess.Popen([PYTHON, EXPORTER, "--listen", "127.0.0.1:0", *args],
                                     stdout=subprocess.DEVNULL, stderr=self._err)

        def serving():
            m = re.search(r"serving (http://\S+/metrics)", self.stderr())
            return m.group(1) if m else None
        self.url = wait_for(serving, EXPORTER_READY_S, "the exporter's 'serving' line",
                            proc=self.proc)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def get(self, accept=None):
        req = urllib.request.Request(self.url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the exporter did not exit within 20 s of SIGTERM")
        finally:
            self._err.close()
        return rc


class ExporterCommandLine(TempDirTest):
    def test_help_says_what_it_reads_and_refuses(self):
        r = subprocess.run([PYTHON, EXPORTER, "--help"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("--file-prefix", "--socket", "--listen", "127.0.0.1:9464", "/metrics",
                     "OpenMetrics", "/spraynet/port", "/spraynet/link_set", "refused"):
            self.assertIn(word, r.stdout)

    def test_missing_socket_is_a_clear_error(self):
        prefix = unique_prefix("nosock")
        r = subprocess.run([PYTHON, EXPORTER, "--file-prefix", prefix], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no telemetry socket at ", r.stderr)
        self.assertIn(f"/{prefix}/dpdk_telemetry.v2", r.stderr)
        self.assertIn(f"--file-prefix {prefix}", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        r = subprocess.run([PYTHON, EXPORTER, "--listen", "nowhere", "--socket", "/nonexistent"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--listen nowhere", r.stderr)

    def test_acting_commands_are_refused_before_sending(self):
        mod = load_exporter()
        client = mod.TelemetryClient("/nonexistent/socket")  # never connected: nothing sent
        for cmd in ("/spraynet/link_set,out,down", "/spraynet/link_rate,out,10",
                    "/spraynet/link_ber,out,0.1", "/spraynet/link_loss,out,0.5",
                    "/spraynet/tcam_add,{id: 1, action: drop}", "/spraynet/tcam_remove,1",
                    "/spraynet/group_mode,g,dlb", "/spraynet/whatever", "/eal/params"):
            with self.assertRaises(mod.RefusedCommand, msg=cmd):
                client.query(cmd)
        self.assertIsNone(client.sock)
        # Every read-only command is one the programs register, none of them acting.
        self.assertFalse(mod.READ_ONLY_COMMANDS & mod.ACTING_COMMANDS)


class ScrapeMatchesTelemetry(TempDirTest):
    def test_scrape_equals_telemetry_after_traffic(self):
        f0, drops0 = frames_in0()
        f1, drops1 = frames_in1()
        pcap0, pcap1 = os.path.join(self.tmp, "in0.pcap"), os.path.join(self.tmp, "in1.pcap")
        P.write_pcap(pcap0, f0)
        P.write_pcap(pcap1, f1)
        config = os.path.join(self.tmp, "prom.yaml")
        with open(config, "w") as f:
            f.write(f"""name: prom-switch
ports:
  - {{name: in0, device: "net_pcap0,rx_pcap={pcap0}"}}
  - {{name: in1, device: "net_pcap1,rx_pcap={pcap1}"}}
  - {{name: up0, device: "net_pcap2,tx_pcap={self.tmp}/up0.pcap", link: {{rate_gbps: 10}}}}
  - {{name: up1, device: "net_pcap3,tx_pcap={self.tmp}/up1.pcap", link: {{rate_gbps: 25}}}}
groups:
  - {{name: g, mode: weighted, ports: [up0, up1], weights: [1, 3]}}
routes:
  - {{prefix: 10.0.0.0/8, group: g}}
control: {{period_ms: 100}}
""")
        prefix = unique_prefix("prom")
        sw = SwitchProcess(prefix, config, self.tmp)
        self.exporter = None
        try:
            t = sw.telemetry()
            try:
                self._check(sw, t, prefix, len(f0), len(f1), drops0, drops1)
            finally:
                t.close()
            exporter = self.exporter
            rc = sw.stop(signal.SIGTERM)
            # The switch is gone: the exporter stays up and says so.
            status, _, text = exporter.get()
            self.assertEqual(status, 200)
            self.assertEqual(Scrape(text).value("spraynet_up"), 0.0, text)
            self.assertEqual(exporter.stop(), 0, exporter.stderr())
            self.assertIn("no telemetry socket", exporter.stderr())
        except BaseException:
            sw.kill()
            if self.exporter is not None and self.exporter.proc.poll() is None:
                self.exporter.proc.kill()
                self.exporter.proc.wait()
            raise
        self.assertEqual(rc, 0, sw.stdout() + sw.stderr())
        # The exporter sent no acting command: switch_emu logs every one it refuses.
        self.assertNotIn("refused /spraynet/", sw.stderr())
        # The end-of-run report has the drops per ingress port too.
        st = sw.stats()
        for p, want in (("in0", drops0), ("in1", drops1)):
            port = next(x for x in st["ports"] if x["name"] == p)
            for cause, n in want.items():
                self.assertEqual(port["drops"][cause], n, (p, port["drops"]))
        self.assertIn("  arrived on in0: 8, no_route 3, parse_not_ipv4 5\n", sw.stdout())
        self.assertIn("  arrived on in1: 6, parse_bad_ip_checksum 2, ttl_expired 4\n", sw.stdout())

    def _check(self, sw, t, prefix, n0, n1, drops0, drops1):
        # Every frame received, nothing queued or in flight: the counters stand still.
        def settled():
            a = t.query("/spraynet/accounting")
            p0, p1 = t.query("/spraynet/port,in0"), t.query("/spraynet/port,in1")
            # The control loop has published the weighted table (period 100 ms) since start.
            published = t.query("/spraynet/buckets,g")["sequence"] >= 2
            return (p0["rx_packets"] == n0 and p1["rx_packets"] == n1 and a["balanced"] == 1
                    and a["egress/queued"] == 0 and a["egress/in_flight"] == 0 and published)
        wait_for(settled, TELEMETRY_READY_S, "every frame received and sent on, the bucket "
                 "table published", proc=sw.proc)

        ports = t.query("/spraynet/ports")
        self.assertEqual(ports, ["in0", "in1", "up0", "up1"])
        before = {p: t.query(f"/spraynet/port,{p}") for p in ports}
        drops_before = t.query("/spraynet/drops")
        table = ("size", "member_buckets")
        buckets_before = {k: t.query("/spraynet/buckets,g")[k] for k in table}

        # Numbers are JSON numbers in every reading command (no "10" for 10).
        for cmd in ["/spraynet/port,up0", "/spraynet/drops", "/spraynet/counters",
                    "/spraynet/accounting", "/spraynet/group,g", "/spraynet/tcam",
                    "/spraynet/link_state", "/spraynet/buckets,g", "/spraynet/lcores",
                    "/spraynet/pfc_buffer", "/spraynet/pfc,up0"]:
            reply = t.query(cmd)
            self.assertEqual(numeric_strings(reply), [], cmd)
        self.assertEqual(before["up0"]["rate_mbps"], 10000)
        self.assertEqual(before["up1"]["rate_mbps"], 25000)
        self.assertNotIn("rate_gbps", before["up0"])

        # Per ingress port drops, as the pcaps were made.
        for p, want in (("in0", drops0), ("in1", drops1)):
            for cause, n in want.items():
                self.assertEqual(before[p][f"drops/{cause}"], n, (p, cause))
            self.assertEqual(before[p]["drops/total"], sum(want.values()), p)
        self.assertEqual(drops_before["total"], sum(drops0.values()) + sum(drops1.values()))
        self.assertEqual(before["in0"]["drops/ttl_expired"], 0)
        self.assertEqual(before["in1"]["drops/parse_not_ipv4"], 0)

        self.exporter = Exporter(self.tmp, "--file-prefix", prefix, "--wait", "10")
        status, ctype, text = self.exporter.get()
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/plain"), ctype)
        s = Scrape(text)
        # The same moment, seen from the socket again: nothing moved meanwhile.
        after = {p: t.query(f"/spraynet/port,{p}") for p in ports}
        drops = t.query("/spraynet/drops")
        counters = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "forwarded_packets")
        for p in ports:
            for c in counters:
                self.assertEqual(after[p][c], before[p][c], (p, c, "moved during the scrape"))
        self.assertEqual(drops, drops_before)

        name = prefix  # the switch label defaults to the file prefix
        self.assertEqual(s.value("spraynet_up"), 1.0)
        for p in ports:
            lab = {"switch": name, "port": p}
            for c in counters:
                self.assertEqual(s.value(f"spraynet_switch_port_{c}_total", **lab), after[p][c],
                                 (p, c))
            self.assertEqual(s.value("spraynet_switch_port_link_up", **lab), after[p]["link_up"])
            self.assertEqual(s.value("spraynet_switch_port_queued_bytes", **lab),
                             after[p]["queued_bytes"])
            self.assertEqual(s.value("spraynet_switch_port_rate_bytes_per_second", **lab),
                             after[p]["rate_mbps"] * 1e6 / 8)
            # Every drop cause of every ingress port.
            causes = [k[len("drops/"):] for k in after[p] if k.startswith("drops/")
                      and k != "drops/total"]
            self.assertGreater(len(causes), 20, p)
            for cause in causes:
                self.assertEqual(s.value("spraynet_switch_ingress_drops_total", cause=cause,
                                         **lab), after[p][f"drops/{cause}"], (p, cause))
            # Per-class egress counters.
            for tc in range(8):
                for c in ("transmitted_packets", "transmitted_bytes", "enqueued"):
                    self.assertEqual(s.value(f"spraynet_switch_class_{c}_total", **lab,
                                             **{"class": tc}),
                                     after[p][f"classes/{tc}/{c}"], (p, tc, c))
                self.assertEqual(s.value("spraynet_switch_egress_drops_total", cause="queue_full",
                                         **lab, **{"class": tc}),
                                 after[p][f"classes/{tc}/drops_queue_full"])
            # The PMD's own counters.
            self.assertEqual(s.value("spraynet_switch_ethdev_ipackets_total", **lab),
                             after[p]["dpdk/ipackets"])
        # The nonzero ones, named: at least one cause per ingress port.
        self.assertEqual(s.value("spraynet_switch_ingress_drops_total", switch=name, port="in0",
                                 cause="parse_not_ipv4"), 5)
        self.assertEqual(s.value("spraynet_switch_ingress_drops_total", switch=name, port="in1",
                                 cause="ttl_expired"), 4)
        for cause, v in drops.items():
            if cause != "total":
                self.assertEqual(s.value("spraynet_switch_drops_total", switch=name, cause=cause),
                                 v, cause)
        # Traffic went out on both uplinks, every frame accounted for.
        tx = sum(s.value("spraynet_switch_port_tx_packets_total", switch=name, port=u)
                 for u in ("up0", "up1"))
        self.assertEqual(tx, n0 + n1 - sum(drops0.values()) - sum(drops1.values()))

        # The group: packets per member, bucket shares from the published table.
        g = t.query("/spraynet/group,g")
        b = t.query("/spraynet/buckets,g")
        self.assertEqual({k: b[k] for k in table}, buckets_before,
                         "the bucket table changed during the scrape")
        for m, port in enumerate(g["members"]):
            lab = {"switch": name, "group": "g", "port": port}
            self.assertEqual(s.value("spraynet_switch_group_member_packets_total", **lab),
                             g["member_packets"][m])
            self.assertEqual(s.value("spraynet_switch_group_member_buckets", **lab),
                             b["member_buckets"][m])
            self.assertAlmostEqual(s.value("spraynet_switch_group_bucket_share_ratio", **lab),
                                   b["member_buckets"][m] / b["size"])
        self.assertGreater(sum(g["member_packets"]), 0)

        # Link-state rows: the fields that do not move once traffic stops.
        ls = t.query("/spraynet/link_state")
        for i, p in enumerate(ports):
            lab = {"switch": name, "port": p}
            for field in ("up", "path_id", "queued_bytes", "paused"):
                self.assertEqual(s.value(f"spraynet_switch_link_{field}", **lab),
                                 ls[f"links/{i}/{field}"], (p, field))
            self.assertEqual(s.value("spraynet_switch_link_rate_bytes_per_second", **lab),
                             ls[f"links/{i}/rate_mbps"] * 1e6 / 8)
            self.assertEqual(s.value("spraynet_switch_link_ber_ratio", **lab),
                             ls[f"links/{i}/ber_ppq"] / 1e15)
            u = s.value("spraynet_switch_link_utilisation_ratio", **lab)
            self.assertTrue(0.0 <= u <= 1.0, (p, u))

        # OpenMetrics when asked for, as Prometheus asks.
        status, ctype, om = self.exporter.get(
            "application/openmetrics-text; version=0.0.1,text/plain;version=0.0.4;q=0.5")
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("application/openmetrics-text"), ctype)
        self.assertTrue(om.rstrip().endswith("# EOF"), om[-200:])
        self.assertIn(f'spraynet_switch_ingress_drops_total{{cause="no_route",port="in0",'
                      f'switch="{name}"}} 3.0', om)
        # Anything but /metrics is not found.
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(self.exporter.url.replace("/metrics", "/nothing"),
                                   timeout=HTTP_TIMEOUT_S)
        self.assertEqual(e.exception.code, 404)


if __name__ == "__main__":
    unittest.main()
