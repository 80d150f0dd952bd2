#!/usr/bin/env python3
"""The cdf workload's load as papers state it (issue 39): --network-load turned into the
per-host load by the formula of docs/fabric_emu.md, checked against what the test computes
itself (from the CDF file, the topology and flows.csv); the overload warning; carried_load;
refusals naming the flag (exit 2); --warmup 0; the presets' --quick forms.

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree."""
import csv
import json
import os
import subprocess
import tempfile
import unittest

EMU = os.path.abspath(os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu"))
SRC = os.path.abspath(os.environ.get("SPRAYNET_SOURCE_DIR", "."))
# 2 leaves x 2 spines x 4 hosts, one link each: uplinks / host ports = 0.5 (2:1).
SMALL = ["--leaves", "2", "--spines", "2", "--hosts-per-leaf", "4"]
CDF = ["--workload", "cdf", "--cdf", "alistorage2019"]


def emu(*args):
    return subprocess.run([EMU, *args], capture_output=True, text=True, timeout=600)


def run_json(*args, codes=(0,)):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = emu("--reproducible", "--json", out, "--csv", d, *args)
        if p.returncode not in codes:
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n"
                                 f"{p.stdout}\n{p.stderr}")
        with open(out) as f:
            report = json.load(f)
        with open(os.path.join(d, "flows.csv")) as f:
            flows = list(csv.DictReader(f))
        return p, report, flows


def cdf_mean(path):
    """The piecewise-linear CDF's mean, from its points (bytes, percent)."""
    pts = []
    with open(path) as f:
        for line in f:
            line = line.split("#")[0].split()
            if line:
                pts.append((float(line[0]), float(line[1]) / 100.0))
    return sum((p1 - p0) * (s0 + s1) / 2 for (s0, p0), (s1, p1) in zip(pts, pts[1:]))


class NetworkLoad(unittest.TestCase):
    def test_conversion(self):
        # 8 hosts, 4 per leaf: inter-leaf share 4/7; uplinks 2 x 100G for 4 x 100G of hosts.
        hosts, per_leaf, duration_s, network = 8, 4, 0.002, 0.6
        share = (hosts - per_leaf) / (hosts - 1)
        host_load = network * (2 * 100) / (per_leaf * 100 * share)
        p, r, flows = run_json(*SMALL, *CDF, "--network-load", str(network), "--duration",
                               "2ms", "--mode", "spray", "--quiet")
        c = r["config"]
        self.assertAlmostEqual(c["load"], host_load, places=9)
        self.assertAlmostEqual(c["network_load"], network, places=9)
        self.assertEqual(c["load_given"], "network_load")
        # The flows drawn: Poisson, so within 10% of the expected count (sd about 2%).
        mean = cdf_mean(os.path.join(SRC, "fabric", "cdfs", "alistorage2019.txt"))
        expected = hosts * host_load * 100e9 / (8 * mean) * duration_s
        posted = r["runs"][0]["messages_posted"]
        self.assertLess(abs(posted - expected) / expected, 0.10, (posted, expected))
        # Their bytes (every flow its own QP; all completed) against the offered bytes: the
        # sizes' spread is wide, so 30%.
        self.assertTrue(r["runs"][0]["completed"])
        offered = sum(int(f["bytes_completed"]) for f in flows) * 8 / (hosts * 100e9 * duration_s)
        self.assertLess(abs(offered - host_load) / host_load, 0.30, (offered, host_load))
        self.assertIn("load: %.3f of each host's line rate (from network-load)" % host_load,
                      p.stdout)
        self.assertIn("inter-leaf offered load 0.600 of the leaf uplinks' capacity", p.stdout)
        self.assertIn("cdf alistorage2019, mean flow %.0f bytes" % mean, p.stdout)
        self.assertIn("spray reorder engine + rxe", p.stdout)

    def test_header_names_receive_models(self):
        p, r, _ = run_json(*SMALL, *CDF, "--load", "0.2", "--duration", "300us", "--mode",
                           "ecmp,drill", "--quiet")
        self.assertIn("load: 0.200 of each host's line rate (load)", p.stdout)
        self.assertIn("ecmp rxe alone", p.stdout)
        self.assertIn("drill reorder engine + rxe (receive reorder-buffer: the default", p.stdout)
        self.assertEqual(r["config"]["load_given"], "load")
        self.assertNotIn("warnings", r)

    def test_plan_on_stderr(self):
        p, _, _ = run_json(*SMALL, *CDF, "--load", "0.2", "--duration", "300us", "--mode", "ecmp")
        self.assertIn("cdf plan: alistorage2019, mean flow", p.stderr)
        self.assertIn("flows and", p.stderr)

    def test_overload_warning(self):
        # Per-host 0.9 x share 4/7 / 0.5 = 1.029 of the uplinks.
        p, r, _ = run_json(*SMALL, *CDF, "--load", "0.9", "--duration", "200us", "--mode",
                           "ecmp", "--quiet", codes=(0, 5))
        self.assertIn("warning: overload: the inter-leaf traffic offers 1.029", p.stderr)
        self.assertTrue(any(w.startswith("overload: ") for w in r["warnings"]), r.get("warnings"))
        self.assertAlmostEqual(r["config"]["network_load"], 0.9 * (4 / 7) / 0.5, places=9)

    def test_carried_load(self):
        p, r, _ = run_json(*SMALL, *CDF, "--load", "0.3", "--duration", "1ms", "--warmup",
                           "200us", "--mode", "ecmp,spray", "--quiet")
        for run in r["runs"]:
            self.assertEqual(run["carried_window_us"], [200.0, 1000.0])
            # From the goodput samples (100 us each) within the window, as the JSON gives them.
            samples = [g for t, g in run["goodput_timeline"] if 200.0 < t <= 1000.0]
            self.assertAlmostEqual(run["carried_load"], sum(samples) / len(samples), places=9)
            # Below the line rate, near the offered 0.3 (Poisson and flows in flight).
            self.assertGreater(run["carried_load"], 0.1)
            self.assertLess(run["carried_load"], 0.6)
        self.assertIn("carried_load", r["summary"]["ecmp"])
        self.assertIn("load: offered 0.300 of the hosts' line rate", p.stdout)
        self.assertIn("not the carried load", p.stdout)


class Refusals(unittest.TestCase):
    def refused(self, args, *words):
        p = emu(*args)
        self.assertEqual(p.returncode, 2, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)
        return p

    def test_cdf_flags_with_another_workload(self):
        for flag, value in (("--cdf", "websearch"), ("--load", "0.3"), ("--network-load", "0.3")):
            self.refused([*SMALL, "--workload", "permutation", flag, value], flag + ":",
                         "only with --workload cdf")
        self.refused([*SMALL, "--workload", "incast", "--load", "0.3"], "--load:",
                     "workload incast would ignore it")

    def test_yaml_cdf_keys_with_another_workload(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("fabric:\n  workload: permutation\n  load: 0.3\n")
            f.flush()
            self.refused(["--config", f.name], f.name, "load", "only with workload cdf")

    def test_load_and_network_load(self):
        self.refused([*SMALL, *CDF, "--load", "0.3", "--network-load", "0.3"],
                     "--load and --network-load: give one")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("fabric:\n  workload: cdf\n  load: 0.3\n  network_load: 0.3\n")
            f.flush()
            self.refused(["--config", f.name], f.name, "network_load", "not both")

    def test_network_load_ranges(self):
        self.refused([*SMALL, *CDF, "--network-load", "1.2"], "--network-load:",
                     "needs each host to offer 1.050", "at most 1.143")
        self.refused([*SMALL, *CDF, "--network-load", "3"], "--network-load: must be a number in [0.001, 2], got '3'")
        self.refused(["--leaves", "1", "--hosts-per-leaf", "4", *CDF, "--network-load", "0.5"],
                     "--network-load:", "one leaf")

    def test_kilobyte_cdf(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("0 0\n1 50\n1000 100\n")  # "KB": at most 1000 bytes
            f.flush()
            p = self.refused([*SMALL, "--workload", "cdf", "--cdf", f.name, "--duration", "50us"],
                             "--cdf " + f.name, "largest flow is 1000 bytes", "kilobytes",
                             "--force")
            forced = emu(*SMALL, "--workload", "cdf", "--cdf", f.name, "--duration", "50us",
                         "--mode", "ecmp", "--force", "--quiet")
            self.assertIn(forced.returncode, (0, 5), forced.stderr)

    def test_plan_limit(self):
        self.refused(["--leaves", "8", "--spines", "8", "--hosts-per-leaf", "16", *CDF, "--load",
                      "1", "--duration", "10s"], "cdf plan: about 391 M flows",
                     "above the limit of 50 M", "--force")

    def test_warmup(self):
        p = emu(*SMALL, "--workload", "permutation", "--warmup", "0", "--duration", "200us",
                "--mode", "ecmp", "--quiet", "--reproducible", "--json", "/dev/stdout")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout[p.stdout.index("{"):p.stdout.rindex("}") + 1])
        self.assertEqual(r["config"]["warmup_us"], 0.0)
        self.assertEqual(r["runs"][0]["window_us"][0], 0.0)
        self.refused([*SMALL, "--warmup", "5"], "--warmup:", "has no unit")


class Presets(unittest.TestCase):
    def test_list(self):
        p = emu("--scenario", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("conweave-os2       [preset]", p.stdout)
        self.assertIn("hpcc-websearch     [preset]", p.stdout)

    def test_conweave_quick(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = emu("--scenario", "conweave-os2", "--quick", "--seeds", "1", "--mode",
                    "ecmp,spray", "--reproducible", "--json", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                r = json.load(f)
        self.assertIn("preset conweave-os2 (--quick)", p.stdout)
        self.assertIn("4 leaves x 4 spines x 8 hosts per leaf", p.stdout)
        self.assertIn("leaf 8:4 (host ports : uplinks) = 2.00", p.stdout)
        self.assertIn("MTU 1024", p.stdout)
        self.assertIn("ECN conweave", p.stdout)
        self.assertIn("cdf alistorage2019", p.stdout)
        self.assertIn("load: 0.250 of each host's line rate (load)", p.stdout)
        self.assertEqual(r["preset"]["name"], "conweave-os2")
        self.assertTrue(r["preset"]["quick"])
        c = r["runs"]["base"]["config"]
        self.assertEqual(c["cc"]["rp"]["rpg_ai_rate"], 40)
        self.assertEqual(c["cc"]["rp"]["rpg_time_reset"], 300)
        self.assertEqual(c["pfc_pool_bytes"], 9437184)
        # A QP per message: one spray rule per leaf, so no QP falls back to ECMP.
        self.assertEqual(c["spray_rules"], "all-roce")
        (spray,) = [x for x in r["runs"]["base"]["runs"] if x["mode"] == "spray"]
        self.assertEqual(spray["tcam_fallback_qps"], 0)
        self.assertNotIn("scenario", r)

    def test_conweave_full_config(self):
        # The full form's header without running it: its plan is on stderr, then --duration 1us
        # over it ends the run at once.
        p = emu("--scenario", "conweave-os2", "--mode", "ecmp", "--duration", "100us",
                "--warmup", "0", "--reproducible")
        self.assertIn(p.returncode, (0, 5), p.stderr)
        self.assertIn("8 leaves x 8 spines x 16 hosts per leaf", p.stdout)
        self.assertIn("leaf 16:8 (host ports : uplinks) = 2.00", p.stdout)
        self.assertIn("inter-leaf offered load 0.441 of the leaf uplinks' capacity", p.stdout)

    def test_hpcc_quick_runs(self):
        p = emu("--scenario", "hpcc-websearch", "--quick", "--mode", "ecmp", "--reproducible")
        self.assertEqual(p.returncode, 0, p.stderr)
        for load in ("0.300", "0.500", "0.700"):
            self.assertIn(f"load: {load} of each host's line rate (load)", p.stdout)
        for run in ("load30", "load50", "load70"):
            self.assertIn(f"run {run}: fabric_emu: 4 leaves x 2 spines x 8 hosts per leaf",
                          p.stdout)
        self.assertIn("cdf websearch", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
