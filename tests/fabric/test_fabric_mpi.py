#!/usr/bin/env python3
"""fabric_emu --mpi (issue 29): one run's logical processes shared out among MPI ranks, which trade
the frames crossing between them every round, give the same JSON, timeseries, CSV and table as one
process, for every workload (permutation, all-reduce, incast, cdf) in ecmp, dlb, weighted and
spray, with a link going down and up, a rate change and two planes: `mpirun -np 1`, `-np 2` and
`-np 3` (three ranks for five LPs: an uneven split) against a plain run. Every mbuf comes back on
every rank. Only the memory block's pools differ: each rank has pools of its own.

FABRIC_EMU points at the program; skipped (with the reason) when it was built without MPI or
mpirun is missing. As root (CI) mpirun needs --allow-run-as-root; --oversubscribe lets it start
more ranks than this machine has cores."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fabric_threads import BASE, CASES  # noqa: E402  (the same cases as --threads)

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
MPIRUN = shutil.which("mpirun")


def built_with_mpi():
    p = subprocess.run([EMU, "--help"], capture_output=True, text=True, timeout=60)
    return "this build has no MPI" not in p.stdout


def run(ranks, args, tmp):
    """ranks 0: one plain process; else mpirun -np ranks ... --mpi."""
    tag = f"n{ranks}"
    out = os.path.join(tmp, f"{tag}.json")
    csv = os.path.join(tmp, f"csv-{tag}")
    ts = os.path.join(tmp, f"{tag}.ts.csv")
    cmd = [EMU, "--quiet", "--reproducible", "--json", out, "--csv", csv, "--timeseries", ts,
           *args]
    if ranks > 0:
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), *cmd, "--mpi"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode not in (0, 5):
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    with open(out) as f:
        report = json.load(f)
    files = {"timeseries": read(ts)}
    for name in sorted(os.listdir(csv)):
        files[name] = read(os.path.join(csv, name))
    return p.stdout, report, files


def read(path):
    with open(path, "rb") as f:
        return f.read()


def without_pools(report):
    """The report with each run's memory pools left out (each rank has pools of its own)."""
    for r in report["runs"]:
        r["memory"].pop("pools_mb")
        r["memory"].pop("total_mb")
    return report


@unittest.skipIf(MPIRUN is None, "mpirun is not installed (scripts/setup.sh installs openmpi-bin)")
class FabricMpi(unittest.TestCase):
    def setUp(self):
        if not built_with_mpi():
            self.skipTest("fabric_emu was built without MPI (libopenmpi-dev missing at configure)")

    def test_same_results_on_any_number_of_ranks(self):
        for name, args in CASES.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                stdout0, report0, files0 = run(0, BASE + args, tmp)
                for r in report0["runs"]:
                    self.assertGreater(r["messages_completed"], 0, (name, r["mode"]))
                for ranks in (1, 2, 3):
                    stdout, report, files = run(ranks, BASE + args, tmp)
                    for r in report["runs"]:
                        # Summed over the ranks: every mbuf back in every rank's pools.
                        self.assertEqual(r["mbufs_in_use_at_end"], 0, (name, ranks, r["mode"]))
                    self.assertEqual(stdout, stdout0, (name, ranks))
                    self.assertEqual(without_pools(report), without_pools(json.loads(
                        json.dumps(report0))), (name, ranks))
                    for key, data in files0.items():
                        self.assertEqual(files[key], data, (name, ranks, key))

    def test_a_failing_rank_ends_the_run(self):
        # A bad flag is refused by every rank before any collective call: mpirun reports it.
        p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", EMU,
                            "--mpi", "--duration", "banana"], capture_output=True, text=True,
                           timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--duration", p.stderr)


class FabricMpiFlag(unittest.TestCase):
    def test_help_tells_whether_mpi_is_built(self):
        p = subprocess.run([EMU, "--help"], capture_output=True, text=True, timeout=60)
        self.assertIn("--mpi", p.stdout)

    def test_mpi_without_mpi_build_is_refused(self):
        if built_with_mpi():
            self.skipTest("this fabric_emu has MPI")
        p = subprocess.run([EMU, "--mpi", "--duration", "10us"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("without MPI", p.stderr)


if __name__ == "__main__":
    unittest.main()
