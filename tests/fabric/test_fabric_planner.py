#!/usr/bin/env python3
"""What a fabric planner meets in the first hour (issue 27), end to end on real fabric_emu runs
at small sizes: every mode lossless and finished on 1, 2 and 4 planes, unfinished runs said
loudly, spraying on every tier with a choice, the table's columns, CSV, refused config mistakes,
a copied tree that still runs.

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree."""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

EMU = os.path.abspath(os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu"))
SRC = os.path.abspath(os.environ.get("SPRAYNET_SOURCE_DIR", "."))
MODES = "ecmp,ecmp-qp,weighted,dlb,drill,spray,spray-noreorder"
SMALL = ["--leaves", "2", "--spines", "2", "--hosts-per-leaf", "4"]


def emu(*args, cwd=None, env=None):
    return subprocess.run([EMU, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env=env)


def report(*args):
    """Runs with --json; returns (process, report)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = emu("--quiet", "--reproducible", "--json", out, *args)
        if p.returncode not in (0, 5):
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        with open(out) as f:
            return p, json.load(f)


class Lossless(unittest.TestCase):
    WORKLOADS = {
        "permutation": ["--duration", "300us"],
        "alltoall": ["--bytes", "65536", "--duration", "5ms"],
        "incast": ["--incast-senders", "7", "--bytes", "262144", "--duration", "5ms"],
    }

    def test_every_mode_lossless_and_finished_on_1_2_4_planes(self):
        for planes in ("1", "2", "4"):
            for workload, extra in self.WORKLOADS.items():
                with self.subTest(planes=planes, workload=workload):
                    p, rep = report(*SMALL, "--planes", planes, "--workload", workload, *extra,
                                    "--mode", MODES, "--seeds", "1-2")
                    self.assertEqual(len(rep["runs"]), 14)
                    for r in rep["runs"]:
                        what = (planes, workload, r["mode"], r["seed"])
                        # Nothing dropped on the lossless class, anywhere, in any mode.
                        self.assertEqual(r["lossless_drops"],
                                         {"queue_full": 0, "headroom_overflow": 0}, what)
                        self.assertEqual(r["drops"]["queue_full"], 0, what)
                        self.assertTrue(r["mempool_whole"], what)
                        if r["mode"] == "spray-noreorder":
                            # The counter-example: rxe alone NAKs every reordering and a NAK it
                            # ignores mid-retry waits for the 67 ms timer. Lossless all the same;
                            # unfinished, it says so.
                            if not r["completed"]:
                                self.assertFalse(r["ok"], what)
                                self.assertIn("unfinished", r["warnings"][0], what)
                            continue
                        self.assertTrue(r["completed"], what)
                        self.assertEqual(r["warnings"], [], what)
                        if workload != "permutation":
                            self.assertEqual(r["messages_completed"], r["messages_expected"], what)
                    bad = [r for r in rep["runs"] if r["warnings"]]
                    self.assertEqual(p.returncode, 5 if bad else 0, p.stderr)

    def test_two_plane_incast_of_the_issue(self):
        # The planner's run: 15 senders, 2 planes, ecmp. Before the fix: 0 of 15 messages,
        # 45 queue_full drops on the lossless class and exit status 0.
        p, rep = report("--leaves", "2", "--spines", "4", "--hosts-per-leaf", "8", "--planes", "2",
                        "--workload", "incast", "--incast-senders", "15", "--bytes", "1048576",
                        "--mode", "ecmp,dlb", "--seeds", "1", "--duration", "5ms")
        self.assertEqual(p.returncode, 0, p.stderr)
        for r in rep["runs"]:
            self.assertTrue(r["completed"], r["mode"])
            self.assertEqual(r["messages_completed"], 15)
            self.assertEqual(r["drops"]["queue_full"], 0)
            self.assertGreater(r["throughput_fraction"], 0.04)  # ceiling 0.98 / 15 = 0.065


class Unfinished(unittest.TestCase):
    def test_unfinished_run_is_said_loudly(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = emu(*SMALL, "--workload", "alltoall", "--bytes", "1048576", "--duration", "50us",
                    "--mode", "ecmp,spray", "--quiet", "--json", out)
            self.assertEqual(p.returncode, 5, p.stderr)
            with open(out) as f:
                rep = json.load(f)
        for r in rep["runs"]:
            self.assertFalse(r["completed"])
            self.assertFalse(r["ok"])
            self.assertLess(r["messages_completed"], r["messages_expected"])
        # stderr names each unfinished run, the table marks its row
        for mode in ("ecmp", "spray"):
            self.assertRegex(p.stderr, rf"warning: {mode} seed 1: unfinished: \d+ of 56 messages")
        rows = [l for l in p.stdout.splitlines() if l.startswith(("ecmp ", "spray "))]
        self.assertEqual(len(rows), 2)
        for row in rows:
            self.assertRegex(row, r" \d+/56! ")

    def test_finished_run_exits_0_without_warning(self):
        p = emu(*SMALL, "--workload", "alltoall", "--bytes", "65536", "--duration", "5ms",
                "--mode", "ecmp", "--quiet")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("warning", p.stderr)
        self.assertRegex(p.stdout, r"ecmp +1 +56/56 ")


class SprayEveryTier(unittest.TestCase):
    def test_spines_spray_on_parallel_links(self):
        # 4 links per spine: the spine's choice among them follows the mode too. Before: spray
        # plateaued near 0.79 with downlinks imbalanced 0.5-1.7 while uplinks sat near 0.
        _, rep = report(*SMALL[:4], "--hosts-per-leaf", "8", "--links-per-spine", "4",
                        "--mode", "spray", "--seeds", "1-3", "--duration", "1ms")
        for r in rep["runs"]:
            self.assertGreaterEqual(r["throughput_fraction"], 0.95, r["seed"])
            self.assertLess(r["downlink_util"]["imbalance"], 0.1, r["seed"])
            self.assertLess(r["uplink_util"]["imbalance"], 0.1, r["seed"])
            self.assertEqual(r["retx_rate"], 0)


class Table(unittest.TestCase):
    def test_header_columns_and_legend(self):
        p = emu(*SMALL, "--links-per-spine", "2", "--mode", "ecmp,spray", "--duration", "300us",
                "--event", "link-down:leaf0-spine1@100us", "--quiet")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout
        self.assertIn("2 links per spine", out)
        self.assertIn("oversubscription: leaf 4:4 (host ports : uplinks) = 1.00", out)
        self.assertIn("events: link-down:leaf0-spine1@100us", out)
        self.assertRegex(out, r"ideal ceiling: 0\.98\d of the line rate")
        header = [l for l in out.splitlines() if l.startswith("mode ")][0].split()
        for col in ("done", "throughput", "downlink", "ll", "drops"):
            self.assertIn(col, header)
        # The legend names the JSON fields and says how FCT percentiles are aggregated.
        self.assertIn("downlink_util.imbalance", out)
        self.assertIn("the mean over seeds of each run's percentile", out)

    def test_allreduce_has_no_duplicate_column(self):
        p = emu(*SMALL, "--workload", "allreduce", "--bytes", "1048576", "--mode", "ecmp",
                "--duration", "20ms", "--quiet")
        self.assertEqual(p.returncode, 0, p.stderr)
        header = [l for l in p.stdout.splitlines() if l.startswith("mode ")][0]
        self.assertIn("busbw/line", header)
        self.assertNotIn("throughput", header)


class Csv(unittest.TestCase):
    def test_csv_summary_runs_flows(self):
        with tempfile.TemporaryDirectory() as d:
            p = emu(*SMALL, "--planes", "2", "--mode", "ecmp,spray", "--seeds", "1-2",
                    "--workload", "alltoall", "--bytes", "65536", "--duration", "5ms",
                    "--event", "link-down:leaf0-spine1@20us", "--csv", d, "--quiet")
            self.assertIn(p.returncode, (0, 5), p.stderr)
            with open(os.path.join(d, "summary.csv")) as f:
                summary = list(csv.DictReader(f))
            with open(os.path.join(d, "runs.csv")) as f:
                runs = list(csv.DictReader(f))
            with open(os.path.join(d, "flows.csv")) as f:
                flows = list(csv.DictReader(f))
        self.assertEqual([r["mode"] for r in summary], ["ecmp", "spray"])
        self.assertEqual(len(runs), 4)
        self.assertEqual(len(flows), 4 * 56)  # every ordered pair of 8 hosts, per run
        for r in runs:
            self.assertEqual(r["failover_event_us"], "20")
            self.assertNotEqual(r["failover_recovery_us"], "")
        for f in flows:
            self.assertNotEqual(f["src"], f["dst"])
            self.assertIn(f["hops"], ("2", "4"))
            if int(f["messages_completed"]) > 0:
                self.assertGreaterEqual(float(f["slowdown_mean"]), 1.0)
            # each packet came in on one of the receiver's two planes
            self.assertIn("packets_plane1", f)
        ecmp = [f for f in flows if f["mode"] == "ecmp"]
        # per-flow: one QP, one plane
        for f in ecmp:
            self.assertTrue(int(f["packets_plane0"]) == 0 or int(f["packets_plane1"]) == 0, f)
        s = summary[0]
        self.assertNotEqual(s["slowdown_p99"], "")
        self.assertNotEqual(s["host_uplink_util_mean"], "")


class ConfigMistakes(unittest.TestCase):
    def yaml(self, d, text):
        path = os.path.join(d, "f.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_duplicate_key_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.yaml(d, "fabric:\n  spines: 2\n  leaves: 2\n  spines: 4\n")
            p = emu("--config", path, "--duration", "10us", "--quiet")
        self.assertEqual(p.returncode, 2)
        self.assertIn("fabric.spines: duplicate key: given at line 2 and again at line 4", p.stderr)

    def test_event_after_the_end_refused(self):
        p = emu("--duration", "100us", "--event", "link-down:leaf0-spine1@5ms", "--quiet")
        self.assertEqual(p.returncode, 2)
        self.assertIn("after the end of the run", p.stderr)
        self.assertIn("link-down:leaf0-spine1@5ms", p.stderr)

    def test_flag_errors(self):
        p = emu("--duraton", "1ms")
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean --duration", p.stderr)
        p = emu("--duration", "abc")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--duration: 'abc' is not a time", p.stderr)
        p = emu("--duration", "5")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--duration: '5' has no unit", p.stderr)
        self.assertNotIn("non-negative", p.stderr)
        # Zero needs no unit (issue 39), and a run of zero is refused for what it is.
        p = emu("--duration", "0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--duration: at least 1us", p.stderr)

    def test_yaml_output_keys(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "from-yaml.json")
            path = self.yaml(d, f"fabric:\n  leaves: 2\n  spines: 2\n  hosts_per_leaf: 2\n"
                                f"  duration: 50us\n  mode: ecmp\n  json: {out}\n  csv: {d}/c\n")
            p = emu("--config", path, "--quiet")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                self.assertEqual(json.load(f)["config"]["spines"], 2)
            self.assertTrue(os.path.exists(os.path.join(d, "c", "flows.csv")))


class Progress(unittest.TestCase):
    def test_no_carriage_returns_when_stderr_is_a_file(self):
        # A run of more than a second of wall time: the progress line appears only on a terminal.
        p = emu("--leaves", "4", "--spines", "8", "--hosts-per-leaf", "16", "--link-gbps", "400",
                "--mode", "spray", "--duration", "800us")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\r", p.stderr)


class CopiedTree(unittest.TestCase):
    def test_copied_tree_finds_its_own_files(self):
        # A tree copied elsewhere: fabric_emu in COPY/build/fabric/ reads COPY/configs/scenarios,
        # not the tree it was built from (a scenario only the copy has shows it).
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "copy")
            os.makedirs(os.path.join(copy, "build", "fabric"))
            shutil.copytree(os.path.join(SRC, "configs"), os.path.join(copy, "configs"))
            shutil.copytree(os.path.join(SRC, "scripts"), os.path.join(copy, "scripts"))
            shutil.copy(os.path.join(copy, "configs", "scenarios", "failover.yaml"),
                        os.path.join(copy, "configs", "scenarios", "only-in-the-copy.yaml"))
            exe = os.path.join(copy, "build", "fabric", "fabric_emu")
            shutil.copy(EMU, exe)
            env = {k: v for k, v in os.environ.items()
                   if k not in ("SPRAYNET_SOURCE_DIR", "SPRAYNET_SCENARIOS")}
            p = subprocess.run([exe, "--scenario", "list"], capture_output=True, text=True,
                               timeout=120, cwd=d, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("only-in-the-copy", p.stdout)

    def test_build_dir_of_another_tree_is_configured_again(self):
        # scripts/build_dir.sh: a build dir whose meson-info names another tree (a `cp -r` of a
        # clone) is removed and set up again for this tree, saying so. meson is replaced on PATH
        # by a recorder: what is checked is the script's decision, not meson.
        with tempfile.TemporaryDirectory() as d:
            bindir = os.path.join(d, "bin")
            os.makedirs(bindir)
            with open(os.path.join(bindir, "meson"), "w") as f:
                f.write('#!/bin/sh\necho "$@" > "$2.meson-args"\nmkdir -p "$2" && touch "$2/build.ninja"\n')
            os.chmod(os.path.join(bindir, "meson"), 0o755)
            build = os.path.join(d, "build")
            os.makedirs(os.path.join(build, "meson-info"))
            with open(os.path.join(build, "meson-info", "meson-info.json"), "w") as f:
                json.dump({"directories": {"source": "/elsewhere/spraynet",
                                           "build": "/elsewhere/spraynet/build"}}, f)
            with open(os.path.join(build, "build.ninja"), "w") as f:
                f.write("# the old tree's\n")
            script = os.path.join(SRC, "scripts", "build_dir.sh")
            env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
            p = subprocess.run(["bash", "-c", f". '{script}' && ensure_build_dir '{build}' -Dx=y"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("configured for another tree (/elsewhere/spraynet)", p.stderr)
            with open(build + ".meson-args") as f:
                args = f.read().split()
            self.assertEqual(args, ["setup", build, os.path.realpath(SRC), "-Dx=y"])
            self.assertFalse(os.path.exists(os.path.join(build, "meson-info")))
            # Configured for this tree: left alone.
            os.remove(build + ".meson-args")
            os.makedirs(os.path.join(build, "meson-info"))
            with open(os.path.join(build, "meson-info", "meson-info.json"), "w") as f:
                json.dump({"directories": {"source": os.path.realpath(SRC),
                                           "build": os.path.realpath(build)}}, f)
            p = subprocess.run(["bash", "-c", f". '{script}' && ensure_build_dir '{build}'"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, "")
            self.assertFalse(os.path.exists(build + ".meson-args"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
