#!/usr/bin/env python3
"""FCT slowdown done the papers' way (issue 39), end to end on small fabric_emu runs: the ideal
FCT (never beaten, met on an idle fabric), the warm-up left out and counted, unfinished messages
censored and never dropped, ventiles/bdp/edge bins and the pooling over seeds, each checked
against what this test recomputes from flows.csv (start_ns, end_ns, size_bytes, ideal_fct_ns,
in_window) with the documented percentile (nearest rank; a percentile is a lower bound when an
entry at or below its rank is censored); the same JSON at any --threads/--jobs; bad
--slowdown-bins refused.

FABRIC_EMU points at the program."""
import csv
import json
import math
import os
import subprocess
import tempfile
import unittest

EMU = os.path.abspath(os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu"))
IDLE = ["--leaves", "4", "--spines", "4", "--hosts-per-leaf", "4", "--workload", "cdf",
        "--cdf", "alistorage2019", "--load", "0.02", "--duration", "2ms"]
SMALL_CDF = ["--leaves", "2", "--spines", "2", "--hosts-per-leaf", "4", "--workload", "cdf",
             "--cdf", "alistorage2019", "--load", "0.3", "--duration", "300us"]
WALL = ("wall_s", "hops_per_s", "peak_rss_mb")


def run(*args):
    """Runs fabric_emu with --json and --csv; returns (process, report, flows rows, slowdown rows)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = subprocess.run([EMU, "--quiet", "--json", out, "--csv", d, *args],
                           capture_output=True, text=True, timeout=600)
        if p.returncode not in (0, 5):
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
        with open(out) as f:
            rep = json.load(f)
        with open(os.path.join(d, "flows.csv")) as f:
            flows = list(csv.DictReader(f))
        with open(os.path.join(d, "slowdown.csv")) as f:
            sd = list(csv.DictReader(f))
        return p, rep, flows, sd


def samples_of(flows, run_end_ns):
    """(size, slowdown, censored) of every message in the window, from flows.csv."""
    out = []
    for f in flows:
        if f["in_window"] != "1":
            continue
        start, ideal = int(f["start_ns"]), float(f["ideal_fct_ns"])
        if f["end_ns"]:
            out.append((int(f["size_bytes"]), (int(f["end_ns"]) - start) / ideal, 0))
        else:
            out.append((int(f["size_bytes"]), (run_end_ns - start) / ideal, 1))
    return out


def stats(samples):
    """count, unfinished, mean and the nearest-rank percentiles with their censored flags."""
    s = sorted(samples, key=lambda x: (x[1], x[2], x[0]))
    n = len(s)
    out = {"count": n, "unfinished": sum(x[2] for x in s)}
    if n == 0:
        return out
    out["mean"] = sum(x[1] for x in s) / n
    out["mean_censored"] = out["unfinished"] > 0
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        i = min(n - 1, max(math.ceil(q * n), 1) - 1)
        out[name] = s[i][1]
        out[name + "_censored"] = any(x[2] for x in s[:i + 1])
    return out


def edge_bins(samples, edges):
    bins = [[] for _ in edges]
    for x in samples:
        i = next((k for k, e in enumerate(edges) if x[0] <= e), len(edges) - 1)
        bins[i].append(x)
    return bins


def ventile_bins(samples):
    s = sorted(samples, key=lambda x: (x[0], x[1], x[2]))
    n = len(s)
    return [s[k * n // 20:(k + 1) * n // 20] for k in range(20)]


class SlowdownTest(unittest.TestCase):
    def assert_bin(self, got, want, what):
        self.assertEqual(got["count"], want["count"], what)
        self.assertEqual(got["unfinished"], want["unfinished"], what)
        for k in ("mean", "p50", "p95", "p99"):
            if want["count"]:
                self.assertAlmostEqual(got[k], want[k], delta=1e-9 * max(1.0, want[k]), msg=(what, k))
                self.assertEqual(got[k + "_censored"], want[k + "_censored"], (what, k))

    def runs_flows(self, rep, flows):
        for r in rep["runs"]:
            mine = [f for f in flows if f["mode"] == r["mode"] and f["seed"] == str(r["seed"])]
            yield r, mine

    def test_idle_fabric_meets_the_ideal(self):
        # No message beats its ideal FCT (over its own path: cables differ by up to the spread)
        # and the idle fabric meets it: p50 in [1.00, 1.05] in every bin.
        for spread, p50_max in (("0", 1.05), ("500", 1.05)):
            _, rep, flows, _ = run(*IDLE, "--cable-spread-ns", spread,
                                   "--mode", "ecmp,dlb,spray", "--seeds", "1")
            for r, mine in self.runs_flows(rep, flows):
                what = (spread, r["mode"])
                self.assertGreater(len(mine), 100, what)
                for f in mine:
                    self.assertTrue(f["end_ns"], (what, f))
                    fct = int(f["end_ns"]) - int(f["start_ns"])
                    self.assertGreaterEqual(fct / float(f["ideal_fct_ns"]), 1.0 - 1e-9, (what, f))
                for b in r["slowdown"]["bins"]:
                    if b["count"]:
                        self.assertGreaterEqual(b["p50"], 1.0, what)
                        self.assertLessEqual(b["p50"], p50_max, (what, b))

    def test_warmup_excluded_and_counted(self):
        _, rep, flows, _ = run(*SMALL_CDF, "--warmup", "100us", "--mode", "ecmp")
        r, mine = next(self.runs_flows(rep, flows))
        sd = r["slowdown"]
        self.assertEqual(sd["warmup_ns"], 100000)
        before = [f for f in mine if int(f["start_ns"]) < 100000]
        self.assertGreater(len(before), 0)
        for f in mine:
            self.assertEqual(f["in_window"], "1" if int(f["start_ns"]) >= 100000 else "0", f)
        self.assertEqual(sd["excluded_warmup"], len(before))
        self.assertEqual(sd["messages"], len(mine) - len(before))
        self.assertEqual(sum(b["count"] for b in sd["bins"]), len(mine) - len(before))
        want = edge_bins(samples_of(mine, sd["end_ns"]), [b["hi_bytes"] for b in sd["bins"]])
        for got, w in zip(sd["bins"], want):
            self.assert_bin(got, stats(w), "warmup")
        # cdf has no warm-up unless given.
        _, rep, _, _ = run(*SMALL_CDF, "--mode", "ecmp")
        self.assertEqual(rep["runs"][0]["slowdown"]["excluded_warmup"], 0)
        self.assertEqual(rep["config"]["warmup_us"], 0)

    def test_unfinished_messages_are_censored_not_dropped(self):
        # A time limit that stops every pair mid-way: some messages done, the rest censored.
        p, rep, flows, sd_csv = run("--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
                                    "--workload", "alltoall", "--bytes", "100000",
                                    "--duration", "33us", "--mode", "ecmp",
                                    "--slowdown-bins", "50000,1000000")
        r, mine = next(self.runs_flows(rep, flows))
        sd = r["slowdown"]
        unfinished = [f for f in mine if not f["end_ns"]]
        self.assertGreater(len(unfinished), 0)
        self.assertLess(len(unfinished), len(mine))
        self.assertEqual(sd["unfinished"], len(unfinished))
        self.assertEqual(sum(b["count"] for b in sd["bins"]), len(mine))
        samples = samples_of(mine, sd["end_ns"])
        for got, w in zip(sd["bins"], edge_bins(samples, [b["hi_bytes"] for b in sd["bins"]])):
            self.assert_bin(got, stats(w), "censored")
        self.assertTrue(any(b["p99_censored"] for b in sd["bins"]))
        # slowdown.csv says ">=" where the JSON says censored.
        pooled = [row for row in sd_csv if row["seed"] == "pooled"]
        for row, b in zip(pooled, sd["bins"]):
            if b["count"]:
                self.assertEqual(row["p99"].startswith(">="), b["p99_censored"], row)

    def test_ventiles_bdp_and_pooling(self):
        _, rep, flows, sd_csv = run(*SMALL_CDF, "--mode", "ecmp", "--seeds", "1-3",
                                    "--slowdown-bins", "ventiles")
        pooled = []
        per_run_means = [[] for _ in range(20)]
        for r, mine in self.runs_flows(rep, flows):
            sd = r["slowdown"]
            self.assertEqual(sd["binning"], "ventiles")
            samples = samples_of(mine, sd["end_ns"])
            pooled += samples
            want = ventile_bins(samples)
            self.assertEqual(len(sd["bins"]), 20)
            for k, (got, w) in enumerate(zip(sd["bins"], want)):
                self.assert_bin(got, stats(w), ("ventile", r["seed"], k))
                if w:
                    self.assertEqual((got["lo_bytes"], got["hi_bytes"]), (w[0][0], w[-1][0]))
                    per_run_means[k].append(stats(w)["mean"])
        summary = rep["summary"]["ecmp"]["slowdown"]
        self.assertEqual(summary["runs"], 3)
        self.assertEqual(summary["messages"], len(pooled))
        for k, (got, w) in enumerate(zip(summary["bins"], ventile_bins(pooled))):
            self.assert_bin(got, stats(w), ("pooled ventile", k))
            # Three seeds: Student's t over the runs' own bin means.
            self.assertEqual(got["ci_method"], "across-seeds-t")
            m = per_run_means[k]
            mu = sum(m) / len(m)
            sdev = math.sqrt(sum((x - mu) ** 2 for x in m) / (len(m) - 1))
            half = 4.303 * sdev / math.sqrt(len(m))
            self.assertAlmostEqual(got["mean_ci95"][0], mu - half, delta=1e-9)
            self.assertAlmostEqual(got["mean_ci95"][1], mu + half, delta=1e-9)
        self.assertEqual(len([row for row in sd_csv if row["seed"] == "pooled"]), 20)
        self.assertEqual(len([row for row in sd_csv if row["seed"] != "pooled"]), 60)

        # bdp: two bins split at one BDP of the longest path; one seed: a bootstrap interval.
        p, rep, flows, _ = run(*SMALL_CDF, "--mode", "spray", "--slowdown-bins", "bdp")
        r, mine = next(self.runs_flows(rep, flows))
        sd = r["slowdown"]
        self.assertEqual(len(sd["bins"]), 2)
        bdp = sd["bins"][0]["hi_bytes"]
        # 100G x (4 cables of 1.5 us each way, plus a packet's serialisation): 167120 bytes.
        self.assertEqual(bdp, 167120)
        want = edge_bins(samples_of(mine, sd["end_ns"]), [bdp, 2 ** 31])
        for got, w in zip(sd["bins"], want):
            self.assert_bin(got, stats(w), "bdp")
        for b in rep["summary"]["spray"]["slowdown"]["bins"]:
            if b["count"]:
                self.assertEqual(b["ci_method"], "bootstrap-flows")
                self.assertLessEqual(b["mean_ci95"][0], b["mean"])
                self.assertGreaterEqual(b["mean_ci95"][1], b["mean"])
        # A bin with fewer than 100 messages is said on stderr and in the JSON.
        warned = rep["summary"]["spray"]["slowdown"]["warnings"]
        small = [b for b in rep["summary"]["spray"]["slowdown"]["bins"] if b["count"] < 100]
        self.assertEqual(len(warned), len(small))
        for w in warned:
            self.assertIn(w, p.stderr)

    def test_same_json_at_any_threads_and_jobs(self):
        base = [*SMALL_CDF, "--mode", "ecmp,spray", "--seeds", "1-2", "--warmup", "50us"]
        reports = []
        for extra in (["--threads", "1", "--jobs", "1"], ["--threads", "2", "--jobs", "1"],
                      ["--threads", "1", "--jobs", "2"]):
            _, rep, _, _ = run(*base, *extra)
            for r in rep["runs"]:
                for k in WALL:
                    r.pop(k, None)
            for m in rep["summary"].values():
                for k in WALL:
                    m.pop(k, None)
            reports.append(rep)
        self.assertEqual(reports[0], reports[1])
        self.assertEqual(reports[0], reports[2])

    def test_bad_slowdown_bins_refused(self):
        for bad in ("nope", "100,50", "0,100", "10,,20", "99999999999"):
            p = subprocess.run([EMU, *SMALL_CDF, "--slowdown-bins", bad], capture_output=True,
                               text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn("slowdown-bins", p.stderr, bad)
            self.assertIn("ventiles", p.stderr, bad)
        p = subprocess.run([EMU, "--workload", "permutation", "--slowdown-bins", "deciles"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("slowdown-bins", p.stderr)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f.yaml")
            with open(path, "w") as f:
                f.write("fabric:\n  workload: cdf\n  slowdown_bins: fifths\n")
            p = subprocess.run([EMU, "--config", path], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            for word in (path, "slowdown_bins", "ventiles"):
                self.assertIn(word, p.stderr)


if __name__ == "__main__":
    unittest.main()
