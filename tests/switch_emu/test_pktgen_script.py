#!/usr/bin/python3
"""scripts/pktgen.sh end to end: it builds Pktgen-DPDK from the shared tarball (or reuses the
build), measures latency through a real switch_emu on veth with Pktgen's latency mode and with
the built-in probe, and prints both. Checked here: its JSON has both sets of figures, in order
(min <= p50 <= p99 <= p99.9 <= max), probes measured on both sides, nothing leaked, and nothing
left behind (namespaces, processes, EAL runtime directories). Without a tarball the script
skips with one line and exit 77, which this test passes on to meson (SKIP).

Run by meson as root with SPRAYNET_BUILD_DIR set; Debian's /usr/bin/python3."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
SCRIPT = os.path.join(ROOT, "scripts", "pktgen.sh")
TIMEOUT_S = 600  # a first run builds Pktgen (about a minute on 2 busy cores); a bound
RUN = {}


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = (line.split()[0] for line in out.splitlines() if line.strip())
    return {n for n in names if re.fullmatch(r"sppg\d+-(gen|dut)", n)}  # pktgen.sh's own


def run_script():
    RUN["tmp"] = tempfile.TemporaryDirectory(prefix="pktgen_sh_")
    RUN["out"] = os.path.join(RUN["tmp"].name, "out")
    RUN["netns_before"] = namespaces()
    RUN["result"] = subprocess.run([SCRIPT, "--duration", "3", "--out", RUN["out"]],
                                   capture_output=True, text=True, timeout=TIMEOUT_S)


def cleanup():
    RUN["tmp"].cleanup()


class PktgenScript(unittest.TestCase):
    def setUp(self):
        self.r = RUN["result"]
        self.assertEqual(self.r.returncode, 0, self.r.stdout + self.r.stderr)
        with open(os.path.join(RUN["out"], "pktgen.json")) as f:
            self.j = json.load(f)

    def ordered(self, figures):
        keys = ["min_us", "p50_us", "p99_us", "p999_us", "max_us"]
        values = [figures[k] for k in keys]
        self.assertEqual(values, sorted(values), figures)
        self.assertGreater(figures["min_us"], 0)
        self.assertGreaterEqual(figures["jitter_us"], 0)
        self.assertLessEqual(figures["changes_over_threshold"], figures["count"])

    def test_pktgen_measured_through_the_switch(self):
        page, samples = self.j["pktgen_page"], self.j["pktgen_samples"]
        for k in ("count", "skipped", "min_us", "avg_us", "max_us", "changes_over_threshold"):
            self.assertIn(k, page)
        self.assertGreater(page["count"], 0)
        self.assertGreater(samples["count"], 0)
        self.ordered(samples)
        # The sampler kept the packets the page counted (it may miss the last few at stop).
        self.assertLessEqual(samples["count"], page["count"])
        self.assertAlmostEqual(samples["min_us"], page["min_us"], delta=0.1)

    def test_builtin_probe_on_the_same_path(self):
        p = self.j["builtin_probe"]
        self.assertGreater(p["count"], 0)
        self.ordered(p)
        self.assertEqual(p["duplicates"], 0, p)
        # af_packet drops what its rings cannot hold while an lcore is descheduled (a busy 2-core
        # machine): some loss is the path's, not the probe's, but most probes come back.
        self.assertLess(p["lost"], p["count"], p)
        self.assertGreater(self.j["builtin_load"]["tx_packets"], 0)
        with open(os.path.join(RUN["out"], "nic.json")) as f:
            nic = json.load(f)
        self.assertEqual(nic["mempool_in_use_at_exit"], 0)
        for name in ("switch-pktgen", "switch-probe"):
            with open(os.path.join(RUN["out"], name + ".json")) as f:
                sw = json.load(f)
            self.assertEqual(sw["mempool_in_use_at_exit"], 0, name)
            self.assertGreater(sw["ports"][0]["rx_packets"], 0, name)
            self.assertEqual(sw["drops"]["no_route"], 0, name)

    def test_table_side_by_side(self):
        out = self.r.stdout
        self.assertIn("latency through switch_emu", out)
        header = next(line for line in out.splitlines() if "built-in probe" in line)
        self.assertIn("Pktgen page", header)
        self.assertIn("Pktgen samples", header)
        for label in ("probes due (rate x duration)", "probes sent", "probes received, measured",
                      "p99.9 us", "jitter us (RFC 3550)", "changes > 10 us"):
            self.assertIn(label, out)

    def test_nothing_left_behind(self):
        self.assertEqual(namespaces(), RUN["netns_before"])
        left = subprocess.run(["pgrep", "-f", r"file-prefix sppg[0-9]+(sw|pg|nic)"],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout, "")
        self.assertEqual(glob.glob("/var/run/dpdk/sppg*"), [])


class BuiltinOnly(unittest.TestCase):
    """--builtin-only needs no tarball: the built-in probe alone through switch_emu on veth."""

    def test_builtin_probe_alone(self):
        with tempfile.TemporaryDirectory(prefix="pktgen_sh_b_") as tmp:
            r = subprocess.run([SCRIPT, "--builtin-only", "--tarball", "/nonexistent",
                                "--duration", "2", "--out", tmp],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            if r.returncode == 77:
                self.skipTest(r.stderr.strip())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(tmp, "pktgen.json")) as f:
                j = json.load(f)
            self.assertNotIn("pktgen_page", j)
            p = j["builtin_probe"]
            self.assertGreater(p["count"], 0)
            values = [p[k] for k in ("min_us", "p50_us", "p99_us", "p999_us", "max_us")]
            self.assertEqual(values, sorted(values))
            self.assertNotIn("Pktgen page", r.stdout)
            self.assertNotIn("Pktgen:", r.stdout)  # its footnote only when it ran
            # What was due, sent and received: received = sent - lost, sent <= due.
            self.assertEqual(p["count"] + p["lost"], p["sent"], p)
            self.assertLessEqual(p["sent"], p["due"], p)
            for label in ("probes due", "probes sent", "probes received, measured"):
                self.assertIn(label, r.stdout)
            self.assertIn("built-in probe", r.stdout)
            self.assertEqual(j["switch"]["builtin"]["pipeline_drops"], 0)


class WithoutTarball(unittest.TestCase):
    def test_skips_with_one_line_and_77(self):
        r = subprocess.run([SCRIPT, "--tarball", "/nonexistent/pktgen.tar.gz"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 77)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("pktgen.sh: skipped: no Pktgen-DPDK source tarball "
                                            "at /nonexistent/pktgen.tar.gz"), r.stderr)

    def test_bad_option_exits_2(self):
        r = subprocess.run([SCRIPT, "--rate", "fast"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("RATE must be a whole number", r.stderr)


if __name__ == "__main__":
    run_script()
    try:
        skipped = RUN["result"].returncode == 77
        if skipped:
            # Pktgen cannot be built or run here (the script said why): the rest still runs,
            # then meson is told SKIP (77), since Pktgen measured nothing.
            sys.stderr.write(RUN["result"].stderr)
            PktgenScript = unittest.skip("pktgen.sh exited 77")(PktgenScript)  # noqa: F811
        ok = unittest.main(exit=False, verbosity=2).result.wasSuccessful()
        sys.exit(1 if not ok else 77 if skipped else 0)
    finally:
        cleanup()
