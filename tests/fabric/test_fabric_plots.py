#!/usr/bin/env python3
"""scripts/fabric_plots.py on a small synthetic fabric_emu report: every PNG is written and is
a real PNG; a missing time series or missing optional report fields only skip plots; an
unreadable or malformed input fails with a message.

Run: python3 tests/fabric/test_fabric_plots.py   (FABRIC_PLOTS=path overrides the script)
"""

import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.environ.get("FABRIC_PLOTS", os.path.join(REPO, "scripts", "fabric_plots.py"))

ALL_PNGS = ["uplink_util.png", "fct_cdf.png", "slowdown.png", "reorder_depth.png",
            "pfc_timeline.png"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MODES = ["ecmp", "dlb", "spray"]
SEEDS = [1, 2]


def make_report(rng):
    runs = []
    for mi, mode in enumerate(MODES):
        for seed in SEEDS:
            scale = [40.0, 25.0, 12.0][mi]
            samples = [rng.lognormvariate(0, 1.2) * scale for _ in range(800)]
            bins = [6667, 20000, 30000, 50000, 73077, 200000, 1000000, 2000000, 5000000, 30000000]
            slowdown = [{"bin_hi_bytes": b, "count": 50 + i,
                         "p50": 1.0 + scale / 20 * (1 + i / 5),
                         "p99": 2.0 + scale / 4 * (1 + i / 3)} for i, b in enumerate(bins)]
            if mode == "ecmp":
                hist = [[0, 100000]]
                timeline = [[0.0, 0], [120.0, 3], [180.5, 5], [260.0, 1], [400.0, 0]]
            else:
                hist = [[d, int(50000 / (1 + d) ** (1.5 if mode == "spray" else 3))]
                        for d in range(0, 40)]
                timeline = [] if mode == "spray" else [[300.0, 1], [310.0, 0]]
            runs.append({
                "mode": mode, "workload": "websearch", "seed": seed,
                "throughput_fraction": 0.9 - 0.1 * mi,
                "fct_us": {"p50": 10.0, "p99": 200.0, "max": 900.0},
                "fct_samples_us": samples,
                "slowdown": slowdown,
                "reorder": {"max_depth": hist[-1][0], "p99_depth": 7, "timeouts": mi,
                            "depth_histogram": hist},
                "pfc": {"pause_frames": len(timeline), "paused_us": 140.5,
                        "longest_pause_us": 80.0, "timeline": timeline},
            })
    return {"config": {"leaves": 4, "spines": 4}, "runs": runs, "summary": {"runs": len(runs)}}


def write_timeseries(path, rng):
    with open(path, "w") as f:
        f.write("mode,seed,t_us,link,util,queue_bytes,paused\n")
        for mode in MODES:
            for seed in SEEDS:
                for step in range(120):
                    t = step * 10.0
                    for leaf in range(4):
                        for spine in range(4):
                            u = min(1.0, max(0.0, 0.5 + 0.4 * rng.uniform(-1, 1)))
                            f.write(f"{mode},{seed},{t},leaf{leaf}>spine{spine}#0,{u:.3f},"
                                    f"{int(u * 30000)},0\n")
                            f.write(f"{mode},{seed},{t},spine{spine}>leaf{leaf}#0,{u:.3f},0,0\n")
                        f.write(f"{mode},{seed},{t},host{leaf}>leaf{leaf}#0,0.5,0,0\n")


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != PNG_MAGIC or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


class FabricPlotsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="fabric_plots_test_")
        self.dir = self.tmp.name
        rng = random.Random(42)
        self.report = os.path.join(self.dir, "report.json")
        with open(self.report, "w") as f:
            json.dump(make_report(rng), f)
        self.ts = os.path.join(self.dir, "ts.csv")
        write_timeseries(self.ts, rng)

    def tearDown(self):
        self.tmp.cleanup()

    def check_pngs(self, out, names):
        for name in names:
            path = os.path.join(out, name)
            self.assertTrue(os.path.isfile(path), f"{name} not written")
            size = png_size(path)
            self.assertIsNotNone(size, f"{name} is not a PNG")
            self.assertGreater(size[0], 300, name)
            self.assertGreater(size[1], 200, name)
            self.assertGreater(os.path.getsize(path), 10000, f"{name} looks empty")

    def test_all_plots(self):
        out = os.path.join(self.dir, "out")  # does not exist yet: the script makes it
        r = run_script("--json", self.report, "--timeseries", self.ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_pngs(out, ALL_PNGS)
        printed = [line for line in r.stdout.splitlines() if line.strip()]
        self.assertEqual(sorted(os.path.basename(p) for p in printed), sorted(ALL_PNGS))
        for p in printed:
            self.assertTrue(os.path.isfile(p), p)
        self.assertEqual(sorted(os.listdir(out)), sorted(ALL_PNGS))
        self.assertNotIn("Traceback", r.stderr)

    def test_without_timeseries(self):
        out = os.path.join(self.dir, "out")
        r = run_script("--json", self.report, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        rest = [n for n in ALL_PNGS if n != "uplink_util.png"]
        self.check_pngs(out, rest)
        self.assertFalse(os.path.exists(os.path.join(out, "uplink_util.png")))
        self.assertIn("uplink_util.png skipped", r.stderr)
        self.assertEqual(len(r.stdout.split()), len(rest))

    def test_minimal_runs_skip_optional_plots(self):
        runs = [{"mode": m, "workload": "alistorage2019", "seed": 1, "throughput_fraction": 0.5,
                 "fct_us": {"p50": 1, "p99": 2, "max": 3},
                 "reorder": {"max_depth": 0, "p99_depth": 0, "timeouts": 0,
                             "depth_histogram": []},
                 "pfc": {"pause_frames": 0, "paused_us": 0, "longest_pause_us": 0,
                         "timeline": []}} for m in MODES]
        runs.append({"mode": "weird", "fct_samples_us": ["x", None, -1], "slowdown": "nope",
                     "reorder": {"depth_histogram": [[1], "a"]}, "pfc": None})
        path = os.path.join(self.dir, "minimal.json")
        with open(path, "w") as f:
            json.dump({"config": {}, "runs": runs, "summary": {}}, f)
        out = os.path.join(self.dir, "out")
        r = run_script("--json", path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertEqual(r.stdout.strip(), "")
        for name in ALL_PNGS:
            self.assertIn(f"{name} skipped", r.stderr)

    def test_malformed_json_fails_with_message(self):
        path = os.path.join(self.dir, "bad.json")
        with open(path, "w") as f:
            f.write('{"runs": [ {"mode": "ecmp", ')
        r = run_script("--json", path, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bad.json", r.stderr)
        self.assertIn("not valid JSON", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_json_without_runs_fails(self):
        path = os.path.join(self.dir, "noruns.json")
        with open(path, "w") as f:
            json.dump({"config": {}}, f)
        r = run_script("--json", path, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("runs", r.stderr)

    def test_unreadable_inputs_fail_with_message(self):
        missing = os.path.join(self.dir, "missing.json")
        r = run_script("--json", missing, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.json", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

        r = run_script("--json", self.report, "--timeseries", os.path.join(self.dir, "no.csv"),
                       "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no.csv", r.stderr)

        bad_csv = os.path.join(self.dir, "bad.csv")
        with open(bad_csv, "w") as f:
            f.write("time,whatever\n1,2\n")
        r = run_script("--json", self.report, "--timeseries", bad_csv,
                       "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("header lacks", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
