#!/usr/bin/env python3
"""fabric_emu --jobs N and --threads N: the runs of a sweep N at a time give the same output
byte for byte as one at a time (the table, --json with --reproducible, --csv, --timeseries, a
scenario's verdict), and bad values are refused by name with exit 2.

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree (for the scenarios)."""
import os
import subprocess
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")

SMALL = ["--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2", "--duration", "200us",
         "--mode", "ecmp,spray", "--seeds", "1-2"]


def run(args, timeout=600):
    return subprocess.run([EMU, *args], capture_output=True, text=True, timeout=timeout)


def outputs(jobs, args, extra=()):
    """(stdout, json bytes, {csv name: bytes}, timeseries bytes) of one invocation."""
    with tempfile.TemporaryDirectory() as d:
        js, ts, csv = os.path.join(d, "r.json"), os.path.join(d, "ts.csv"), os.path.join(d, "csv")
        p = run(["--quiet", "--reproducible", "--jobs", str(jobs), *extra, *args,
                 "--json", js, "--timeseries", ts, "--csv", csv])
        if p.returncode not in (0, 5):
            raise AssertionError(f"--jobs {jobs} {' '.join(args)} exited {p.returncode}:\n"
                                 f"{p.stdout}\n{p.stderr}")
        files = {}
        for name in sorted(os.listdir(csv)):
            with open(os.path.join(csv, name), "rb") as f:
                files[name] = f.read()
        with open(js, "rb") as f:
            j = f.read()
        with open(ts, "rb") as f:
            t = f.read()
        return p.stdout, j, files, t, p.returncode, p.stderr


class Jobs(unittest.TestCase):
    def assert_same(self, a, b, what):
        self.assertEqual(a[0], b[0], f"{what}: the table differs")
        self.assertEqual(a[1], b[1], f"{what}: the JSON differs")
        self.assertEqual(sorted(a[2]), sorted(b[2]), f"{what}: other CSV files")
        for name in a[2]:
            self.assertEqual(a[2][name], b[2][name], f"{what}: {name} differs")
        self.assertEqual(a[3], b[3], f"{what}: the timeseries differs")
        self.assertEqual(a[4], b[4], f"{what}: the exit status differs")

    def test_jobs_give_the_same_output(self):
        one = outputs(1, SMALL)
        self.assertIn(b'"seed": 2', one[1])
        self.assertGreater(len(one[3].splitlines()), 10)  # timeseries rows, not just the header
        self.assertEqual(set(one[2]), {"summary.csv", "runs.csv", "flows.csv", "slowdown.csv"})
        for jobs in (2, 3):
            self.assert_same(one, outputs(jobs, SMALL), f"--jobs {jobs}")
        # --threads is passed to each run's fabric; the results do not depend on it.
        self.assert_same(one, outputs(2, SMALL, ["--threads", "2"]), "--jobs 2 --threads 2")
        # 0: one job per online core (the default), never more than the runs.
        self.assert_same(one, outputs(0, SMALL), "--jobs 0")
        self.assert_same(one, outputs(64, SMALL), "--jobs 64 (more jobs than runs)")

    def test_jobs_with_shared_and_copied_payloads_and_events(self):
        args = SMALL + ["--payload", "copy", "--workload", "alltoall", "--bytes", "65536",
                        "--event", "link-down:leaf0-spine1@50us"]
        self.assert_same(outputs(1, args), outputs(2, args), "alltoall, copied payloads")

    def test_scenario_with_jobs(self):
        env_list = run(["--scenario", "list"])
        self.assertEqual(env_list.returncode, 0, env_list.stderr)
        names = [line.split()[0] for line in env_list.stdout.splitlines() if line.strip()]
        # The quick form of a small scenario: its runs interleave across the jobs, its verdict
        # and its report do not change.
        name = "polarization" if "polarization" in names else names[0]
        with tempfile.TemporaryDirectory() as d:
            got = []
            for jobs in (1, 2):
                js = os.path.join(d, f"{jobs}.json")
                ts = os.path.join(d, f"{jobs}.csv")
                p = run(["--quiet", "--reproducible", "--jobs", str(jobs), "--scenario", name,
                         "--quick", "--json", js, "--timeseries", ts], timeout=900)
                self.assertIn(p.returncode, (0, 5), p.stderr)
                with open(js, "rb") as f, open(ts, "rb") as g:
                    got.append((p.stdout, f.read(), g.read(), p.returncode))
            self.assertEqual(got[0][0], got[1][0], "the scenario's table and verdict")
            self.assertEqual(got[0][1], got[1][1], "the scenario's JSON")
            self.assertEqual(got[0][2], got[1][2], "the scenario's timeseries")
            self.assertEqual(got[0][3], got[1][3])
            self.assertIn(b'"scenario"', got[0][1])

    def test_bad_values_are_refused_by_name(self):
        for flag in ("--jobs", "--threads"):
            for bad in ("0x", "-1", "abc", "1.5", "", "0x10", "99999999999"):
                p = run([flag, bad, *SMALL])
                self.assertEqual(p.returncode, 2, f"{flag} {bad!r}: {p.stderr}")
                self.assertIn(flag, p.stderr, f"{flag} {bad!r}")
                self.assertEqual(p.stdout, "", f"{flag} {bad!r}: nothing ran")
            p = run([flag, "2000", *SMALL])
            self.assertEqual(p.returncode, 2)
            self.assertIn(f"{flag}: at most 1024", p.stderr)
        p = run(["--jobs", "abc", *SMALL])
        self.assertIn("--jobs: 'abc' is not a whole number", p.stderr)

    def test_help_and_not_in_the_json(self):
        p = run(["--help"])
        self.assertEqual(p.returncode, 0)
        self.assertIn("--jobs", p.stdout)
        self.assertIn("--threads", p.stdout)
        with tempfile.TemporaryDirectory() as d:
            js = os.path.join(d, "r.json")
            p = run(["--quiet", "--jobs", "2", "--threads", "1", *SMALL, "--json", js])
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(js) as f:
                text = f.read()
            self.assertNotIn('"jobs"', text)
            self.assertNotIn('"threads"', text)
            # A config file does not take them: they are command-line only.
            cfg = os.path.join(d, "c.yaml")
            with open(cfg, "w") as f:
                f.write("fabric:\n  leaves: 2\n  jobs: 2\n")
            p = run(["--quiet", "--config", cfg, "--duration", "100us"])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("jobs", p.stderr)

    def test_a_failing_run_stops_the_sweep_as_with_one_job(self):
        # An event on a link the fabric does not have: every run fails at set-up; the message
        # and exit status are those of --jobs 1 (the first run's), with no hang.
        args = ["--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2", "--duration", "100us",
                "--mode", "ecmp,spray", "--seeds", "1-3", "--event", "link-down:leaf0-spine7@50us"]
        one = run(["--quiet", "--jobs", "1", *args])
        two = run(["--quiet", "--jobs", "2", *args])
        self.assertEqual(one.returncode, two.returncode)
        self.assertEqual(one.stderr, two.stderr)
        self.assertEqual(one.stdout, two.stdout)

    def test_progress_is_one_line_per_10s_in_a_file_and_silent_when_quiet(self):
        # Short runs show nothing (under a second); --quiet nothing at all.
        p = run(["--jobs", "2", *SMALL])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\r", p.stderr)
        p = run(["--quiet", "--jobs", "2", *SMALL])
        self.assertEqual(p.stderr, "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
