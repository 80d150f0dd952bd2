#!/usr/bin/python3
"""The latency probe in the nic_emu PROGRAM, on real DPDK ports: a net_ring uplink (a vdev whose
transmit ring is its receive ring, so every frame comes back) carries the RC traffic engine's
RoCEv2 WRITEs and, alongside them, the probes. The report (--stats), the exit summary and the
telemetry reply (/spraynet/probe, over the socket while the program runs) are checked for every
field, their order (min <= p50 <= p99 <= p99.9 <= max), nothing lost on a path that cannot lose,
and a whole mempool at exit. Config errors name the file and the key.

Run by meson with NIC_EMU set."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from waiting import wait_for  # noqa: E402

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
TIMEOUT_S = 120  # one program run, start to exit; a bound, not a wait

FIELDS = ("sent", "count", "lost", "out_of_order", "duplicates", "malformed", "clock_backwards",
          "min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns", "jitter_ns", "change_threshold_ns",
          "changes_over_threshold", "samples", "sample_cap_hit", "uplink", "rate_pps", "dst_ip",
          "dst_port", "arrivals", "pool_empty", "egress_refused")

CONFIG = """nic:
  name: probe-loop
  uplinks:
    - {{name: u0, device: "net_ring0"}}
  spray: {{mode: flow}}
  rc_engine: {{qps: 2, messages: {messages}, message_bytes: 16384}}
  probe: {{rate_pps: {rate}, change_threshold_us: 2, dst_ip: 10.9.0.1, dscp: 26}}
"""


def eal(prefix):
    return [NIC_EMU, "-l", "0", "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
            "--log-level", "lib.eal:error", "--"]


class ProbeOnRingUplink(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="nic_emu_probe_")
        cls.tmp = cls._tmp.name
        cfg = os.path.join(cls.tmp, "loop.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(messages=400, rate=20000))
        cls.stats = os.path.join(cls.tmp, "stats.json")
        prefix = f"nicprobe{os.getpid()}"
        cls.result = subprocess.run(eal(prefix) + ["--config", cfg, "--stats", cls.stats],
                                 capture_output=True, text=True, timeout=TIMEOUT_S)
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        with open(cls.stats) as f:
            cls.report = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_run_is_clean(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", self.result.stdout)
        self.assertEqual(self.report["mempool_in_use_at_exit"], 0)
        self.assertEqual(self.report["rc_engine"]["requester"]["messages_completed"], 800)

    def test_report_has_every_field_in_order(self):
        p = self.report["probe"]
        for k in FIELDS:
            self.assertIn(k, p)
        self.assertGreater(p["count"], 0)
        self.assertLessEqual(p["min_ns"], p["p50_ns"])
        self.assertLessEqual(p["p50_ns"], p["p99_ns"])
        self.assertLessEqual(p["p99_ns"], p["p999_ns"])
        self.assertLessEqual(p["p999_ns"], p["max_ns"])
        self.assertGreater(p["min_ns"], 0)
        self.assertGreaterEqual(p["jitter_ns"], 0.0)
        self.assertLessEqual(p["changes_over_threshold"], p["count"])
        self.assertEqual(p["change_threshold_ns"], 2000)
        self.assertEqual((p["uplink"], p["rate_pps"], p["dst_ip"], p["dst_port"]),
                         ("u0", 20000, "10.9.0.1", 7777))
        self.assertEqual(p["samples"], p["count"])
        self.assertFalse(p["sample_cap_hit"])
        self.assertFalse(p["sending"])  # stopped before the end, then drained

    def test_a_loopback_loses_nothing_and_the_load_is_untouched(self):
        p = self.report["probe"]
        # Every probe made was queued (none refused, the pool never ran dry) and came back.
        self.assertEqual((p["pool_empty"], p["egress_refused"]), (0, 0))
        self.assertEqual(p["lost"], 0, p)
        self.assertEqual(p["count"], p["sent"])
        self.assertEqual(p["arrivals"], p["sent"])
        self.assertEqual((p["duplicates"], p["malformed"], p["clock_backwards"]), (0, 0, 0))
        # Probes are consumed: the RC engine got only RoCE (no parse drops), retransmitted nothing.
        self.assertEqual(self.report["drops"]["total"], 0)
        self.assertEqual(self.report["rc_engine"]["requester"]["packets_retransmitted"], 0)
        self.assertEqual(self.report["delivered"],
                         self.report["ports"][0]["rx_packets"] - p["arrivals"])

    def test_summary_line(self):
        p = self.report["probe"]
        self.assertIn(f"probe: sent {p['sent']}, received {p['count']}, lost 0, out of order "
                      f"{p['out_of_order']}, duplicates 0; latency us min ", self.result.stdout)


class ProbeOverTelemetry(unittest.TestCase):
    def test_probe_reply_while_running(self):
        with tempfile.TemporaryDirectory(prefix="nic_emu_probe_t_") as tmp:
            cfg = os.path.join(tmp, "loop.yaml")
            with open(cfg, "w") as f:
                f.write(CONFIG.format(messages=0, rate=5000))  # 0: WRITEs until stopped
            prefix = f"nicprobet{os.getpid()}"
            proc = subprocess.Popen(eal(prefix) + ["--config", cfg, "--duration-ms", "20000",
                                                   "--stats", os.path.join(tmp, "s.json")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                reply = self.query(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2", "/spraynet/probe",
                                   proc)
            finally:
                proc.terminate()
                out, err = proc.communicate(timeout=TIMEOUT_S)
                shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
            self.assertEqual(proc.returncode, 0, out + err)
            self.assertIn("mempool: 0 mbufs in use at exit", out)
            p = reply["/spraynet/probe"]
            for k in FIELDS:
                self.assertIn(k, p)
            self.assertTrue(p["sending"])
            self.assertGreater(p["count"], 0)
            self.assertLessEqual(p["min_ns"], p["p50_ns"])
            self.assertLessEqual(p["p99_ns"], p["max_ns"])

    def query(self, path, command, proc):
        """The reply once the socket is there and the probe has counted something (bounded)."""
        def counted():
            if not os.path.exists(path):
                return None
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.connect(path)
                json.loads(s.recv(16384))  # the greeting
                s.send(command.encode())
                reply = json.loads(s.recv(65536))
            # null until the program has registered its commands (after EAL's socket is up)
            return reply if (reply.get(command) or {}).get("count", 0) > 0 else None
        return wait_for(counted, 60, f"a {command} reply with probes counted", proc=proc)


class ProbeConfigErrors(unittest.TestCase):
    def run_config(self, probe_line):
        with tempfile.TemporaryDirectory(prefix="nic_emu_probe_e_") as tmp:
            cfg = os.path.join(tmp, "bad.yaml")
            with open(cfg, "w") as f:
                f.write("nic:\n  uplinks:\n    - {name: u0, device: net_ring0}\n"
                        f"  probe: {probe_line}\n")
            r = subprocess.run([NIC_EMU, "--", "--config", cfg], capture_output=True, text=True,
                               timeout=TIMEOUT_S)
            return r, cfg

    def test_errors_name_file_key_and_allowed_values(self):
        for line, key, text in (
                ("{uplink: u9}", "nic.probe.uplink", "must name an uplink (u0)"),
                ("{dst_port: 4791}", "nic.probe.dst_port", "4791"),
                ("{rate_pps: 0}", "nic.probe.rate_pps", "100000000"),
                ("{frame_length: 40}", "nic.probe.frame_length", "66..9000"),
                ("{speed: 1}", "nic.probe", "speed")):
            r, cfg = self.run_config(line)
            self.assertEqual(r.returncode, 2, line + r.stderr)
            self.assertIn(f"nic_emu: {cfg}: {key}", r.stderr)
            self.assertIn(text, r.stderr)
            self.assertEqual(r.stdout, "")

    def test_help_lists_the_probe_keys(self):
        r = subprocess.run([NIC_EMU, "--help"], capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0)
        for k in ("probe:", "rate_pps: 1000", "change_threshold_us: 10", "dst_port: 7777",
                  "max_samples:", "sequence_window:"):
            self.assertIn(k, r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
