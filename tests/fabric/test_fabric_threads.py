#!/usr/bin/env python3
"""fabric_emu --threads (issue 29): one run split into logical processes (a rack or a spine each)
in conservative rounds gives the same JSON byte for byte on 1, 2, 3 and 8 threads, for every
workload (permutation, all-reduce, incast, cdf) in ecmp, dlb, weighted and spray, with a link
going down and up, a rate change, two planes and three tiers (a super-spine each an LP too);
every mbuf comes back.

FABRIC_EMU points at the program."""
import json
import os
import subprocess
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
# Control loops every 50 us so that weighted mode reweights within the run.
BASE = ["--mode", "ecmp,dlb,weighted,spray", "--seeds", "1", "--control-period-us", "50",
        "--nic-control-period-us", "50"]
# Three racks and two spines: five LPs, so 2 and 3 threads really split them.
TWO_TIERS = ["--leaves", "3", "--spines", "2", "--hosts-per-leaf", "3"]
CASES = {
    "permutation, a link down and up": TWO_TIERS + [
        "--workload", "permutation", "--duration", "300us",
        "--event", "link-down:leaf0-spine1@100us", "--event", "link-up:leaf0-spine1@200us"],
    "allreduce": TWO_TIERS + ["--workload", "allreduce", "--bytes", "262144", "--duration", "5ms"],
    "incast": TWO_TIERS + ["--workload", "incast", "--bytes", "262144", "--incast-senders", "4",
                           "--duration", "5ms"],
    "cdf": TWO_TIERS + ["--workload", "cdf", "--duration", "100us", "--load", "0.5"],
    # Issue 44: HPCC, its INT records pushed at every switch and echoed across the LPs.
    "incast under HPCC": TWO_TIERS + ["--workload", "incast", "--bytes", "262144",
                                      "--incast-senders", "4", "--duration", "5ms", "--cc",
                                      "hpcc"],
    # Issue 44: IRN, lossy (PFC off), its NAKs' SACKs and resends crossing the LPs; 64 KB
    # switch queues so that the incast drops.
    "incast under IRN, PFC off": TWO_TIERS + ["--workload", "incast", "--bytes", "262144",
                                             "--incast-senders", "4", "--duration", "5ms",
                                             "--transport", "irn", "--queue-bytes", "65536"],
    "two planes, a rate change": TWO_TIERS + [
        "--workload", "permutation", "--planes", "2", "--spray-policy", "weighted",
        "--duration", "200us", "--event", "rate:leaf1-spine0=50@50us"],
    # Issue 30: a three-tier Clos, each super-spine an LP of its own (4 racks, 4 spines and 4
    # super-spines: 12 LPs), a super-spine link going down and up.
    "three tiers, a super-spine link down and up": [
        "--tiers", "3", "--pods", "2", "--leaves", "2", "--spines", "2", "--super-spines", "2",
        "--hosts-per-leaf", "2", "--workload", "permutation", "--duration", "300us",
        "--event", "link-down:pod0.spine1-super1.0@100us",
        "--event", "link-up:pod0.spine1-super1.0@200us"],
}


def run(threads, args, tmp):
    out = os.path.join(tmp, f"t{threads}.json")
    csv = os.path.join(tmp, f"csv{threads}")
    ts = os.path.join(tmp, f"ts{threads}.csv")
    p = subprocess.run([EMU, "--quiet", "--reproducible", "--jobs", "1", "--threads",
                        str(threads), "--json", out, "--csv", csv, "--timeseries", ts, *args],
                       capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 5):
        raise AssertionError(f"--threads {threads} {' '.join(args)} exited {p.returncode}:\n"
                             f"{p.stdout}\n{p.stderr}")
    files = {}
    for path in [out, ts] + [os.path.join(csv, f) for f in sorted(os.listdir(csv))]:
        with open(path, "rb") as f:
            files[os.path.basename(path)] = f.read()
    return p.stdout, files


class FabricThreads(unittest.TestCase):
    def test_same_json_on_any_number_of_threads(self):
        for name, args in CASES.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                stdout1, files1 = run(1, BASE + args, tmp)
                report = json.loads(files1["t1.json"])
                for r in report["runs"]:
                    self.assertEqual(r["mbufs_in_use_at_end"], 0, (name, r["mode"]))
                    self.assertGreater(r["messages_completed"], 0, (name, r["mode"]))
                for threads in (2, 3, 8):
                    stdout, files = run(threads, BASE + args, tmp)
                    self.assertEqual(stdout, stdout1, (name, threads))
                    for key, data in files1.items():
                        key_n = key.replace("1", str(threads)) if key in ("t1.json", "ts1.csv") \
                            else key
                        self.assertEqual(files[key_n], data, (name, threads, key))

    def test_finite_workloads_finish_the_same(self):
        # The all-reduce's steps cross racks through the mailboxes: it completes on every count.
        with tempfile.TemporaryDirectory() as tmp:
            _, files = run(2, BASE + CASES["allreduce"], tmp)
            for r in json.loads(files["t2.json"])["runs"]:
                self.assertTrue(r["completed"], r["mode"])

    def test_bad_thread_counts_are_refused(self):
        for bad in ("abc", "-1", "2x"):
            p = subprocess.run([EMU, "--threads", bad, "--duration", "10us"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("--threads", p.stderr, bad)


if __name__ == "__main__":
    unittest.main()
