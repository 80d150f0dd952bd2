#!/usr/bin/env python3
"""fabric_emu --scenario: every scenario in configs/scenarios runs in its --quick form, its
report carries a verdict and its figures, and the effect it measures points the way the
measurement says it should (never a hard-coded figure). Also: --scenario list, the scenario
errors, flags given on the command line applying over a scenario's runs.

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree."""
import glob
import json
import os
import subprocess
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
SRC = os.environ.get("SPRAYNET_SOURCE_DIR", ".")
_cache = {}


def scenario(name, *extra):
    key = (name, extra)
    if key in _cache:
        return _cache[key]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = subprocess.run([EMU, "--quiet", "--reproducible", "--scenario", name, "--quick",
                            "--json", out, *extra], capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise AssertionError(f"--scenario {name} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        with open(out) as f:
            rep = json.load(f)
    rep["_stdout"] = p.stdout
    _cache[key] = rep
    return rep


def m(rep, name):
    v = rep["scenario"]["measures"][name]
    return sum(v) / len(v)


class Scenarios(unittest.TestCase):
    def test_every_scenario_reports_a_verdict(self):
        names = sorted(os.path.basename(f)[:-5] for f in glob.glob(os.path.join(SRC, "configs/scenarios/*.yaml")))
        self.assertGreaterEqual(len(names), 3)
        listed = subprocess.run([EMU, "--scenario", "list"], capture_output=True, text=True, check=True).stdout
        for name in names:
            self.assertIn(name, listed)
            rep = scenario(name)
            s = rep["scenario"]
            self.assertEqual(s["name"], name)
            self.assertTrue(s["verdict"], name)
            self.assertTrue(s["figures"], name)
            self.assertIn("verdict:  " + s["verdict"], rep["_stdout"])
            for run in rep["runs"].values():
                for r in run["runs"]:
                    self.assertTrue(r["mempool_whole"], (name, r["mode"], r["seed"]))

    def test_ecmp_vs_spray_direction(self):
        rep = scenario("ecmp-vs-spray")
        self.assertGreater(m(rep, "spray"), m(rep, "ecmp"))
        self.assertLess(m(rep, "spray_imbalance"), m(rep, "ecmp_imbalance"))

    def test_failover_direction(self):
        rep = scenario("failover")
        # The failed link loses packets in every mode, and every mode comes back within the run.
        self.assertGreater(m(rep, "ecmp_lost") + m(rep, "spray_lost"), 0)
        for mode in ("ecmp", "dlb", "spray"):
            self.assertGreaterEqual(min(rep["scenario"]["measures"][mode + "_recovery"]), 0, mode)
        # With a spine fewer, sprayed goodput falls (it used every path before).
        self.assertLess(m(rep, "spray_min"), m(rep, "spray_before"))

    def test_polarization_direction(self):
        rep = scenario("polarization")
        # On two tiers the spine's choice follows the leaf's: the second tier is as uneven as
        # the first, with the same seed everywhere or not.
        self.assertAlmostEqual(m(rep, "same_down"), m(rep, "same_up"), delta=0.1)
        self.assertAlmostEqual(m(rep, "same_tput"), m(rep, "per_tput"), delta=0.05)

    def test_reweight_direction(self):
        rep = scenario("reweight")
        # The leaf's link state counts the background: the loaded path reads above 85% and
        # holds fewer buckets than an unloaded one, which keeps (close to) all 32.
        self.assertGreater(m(rep, "loaded_umean"), 0.8)
        self.assertLess(m(rep, "idle_umean"), m(rep, "loaded_umean"))
        self.assertLess(m(rep, "loaded"), m(rep, "idle"))
        self.assertLess(m(rep, "slots") / m(rep, "table"), 1 / 8)
        for run in rep["runs"]["base"]["runs"]:
            if run["mode"] == "weighted":
                self.assertEqual(run["buckets"]["leaf0"]["idle_buckets"], 32)
            else:
                self.assertNotIn("buckets", run)

    def test_stale_link_state_direction(self):
        rep = scenario("stale-link-state")
        # A stale period leaves the split further from where the capacity is.
        self.assertGreater(m(rep, "stale_err"), m(rep, "fixed_err"))
        for run in rep["runs"]["fixed"]["runs"]:
            self.assertGreater(run["nic_split"]["intervals"], 0)
            self.assertEqual(run["nic_split"]["hosts_measured"], 4)

    def test_tcam_overflow_direction(self):
        rep = scenario("tcam-overflow")
        # Refused QPs are counted as ECMP fallback; a TCAM that holds the partition refuses none,
        # a larger limit on the same 16K TCAM refuses as many.
        self.assertGreater(m(rep, "fallback"), 0)
        self.assertEqual(m(rep, "fallback_fix32"), 0)
        self.assertEqual(m(rep, "fallback_fix16"), m(rep, "fallback"))

    def test_reorder_retx_direction(self):
        rep = scenario("reorder-retx")
        # Reordering at the receiver removes the retransmissions spraying causes without it, and
        # the rate without it grows with how far the paths' delays differ.
        self.assertGreater(m(rep, "noreorder"), m(rep, "reorder"))
        self.assertGreater(m(rep, "noreorder"), m(rep, "ooo"))
        self.assertLess(m(rep, "noreorder_0"), m(rep, "noreorder_2000"))
        self.assertLess(m(rep, "tput_noreorder"), m(rep, "tput_reorder"))
        # A hold shorter than the delay spread gives gaps up, and retransmits; a longer one not.
        self.assertGreater(m(rep, "hold_1"), m(rep, "hold_5"))
        self.assertGreater(m(rep, "hold_1_timeouts"), m(rep, "hold_5_timeouts"))

    def test_checksum_filter_direction(self):
        rep = scenario("checksum-filter")
        # On the fabric side the filter drops sprayed packets (PPCID in the checksum) and cuts
        # QPs off; ECMP's packets carry checksum 0 and pass.
        self.assertGreater(m(rep, "spray_fabric_drops"), 0)
        self.assertEqual(m(rep, "ecmp_fabric_drops"), 0)
        self.assertGreater(m(rep, "spray_cut"), m(rep, "spray_none_cut"))
        self.assertLess(m(rep, "spray_fabric_tput"), m(rep, "spray_tput"))
        # Between NIC and host it drops nothing while the NIC restores the checksum to 0, and
        # cuts the host off when it does not.
        self.assertEqual(m(rep, "spray_host_drops"), 0)
        self.assertEqual(m(rep, "spray_host_cut"), m(rep, "spray_none_cut"))
        self.assertGreater(m(rep, "spray_norestore_drops"), 0)
        self.assertGreater(m(rep, "spray_norestore_cut"), m(rep, "spray_none_cut"))
        for run in rep["runs"].values():
            for r in run["runs"]:
                self.assertIn("checksum_filter", r["drops"])
                self.assertIn("host_checksum_filter", r["drops"])

    def test_layout_mismatch_direction(self):
        rep = scenario("layout-mismatch")
        # Where the fabric leaves path ids unused, the mismatch is counted and logged; nothing
        # the NICs take in vanishes uncounted, and no QP is cut off.
        self.assertGreater(m(rep, "mismatch"), 0)
        self.assertGreater(m(rep, "log"), 0)
        self.assertEqual(m(rep, "matched_mismatch"), 0)
        self.assertEqual(m(rep, "matched_log"), 0)
        self.assertEqual(m(rep, "unaccounted") + m(rep, "overcounted"), 0)
        self.assertEqual(m(rep, "all_unaccounted"), 0)
        self.assertEqual(m(rep, "cut"), 0)
        self.assertGreater(m(rep, "delivered"), 0)
        for r in rep["runs"]["mismatch-8-ids"]["runs"]:
            # h3's own NIC logs the layout its peers likely use, and one of them h3's.
            self.assertTrue(any(line.startswith("h3: ") and "likely uses ppcid_layout ts-high" in line
                                for line in r["nic_log"]), r["nic_log"])
            self.assertTrue(any("likely uses ppcid_layout path-high" in line for line in r["nic_log"]))
            self.assertEqual(r["nic_log_lines"], len(r["nic_log"]))

    def test_pfc_storm_direction(self):
        rep = scenario("pfc-storm")
        # Fast feedback (with the lower threshold) shortens the pauses, holds the hosts back for
        # less time and keeps more goodput; the storm spreads to the hosts without it.
        self.assertLess(m(rep, "longest_fix"), m(rep, "longest"))
        self.assertLess(m(rep, "mean_fix"), m(rep, "mean"))
        self.assertLess(m(rep, "nic_paused_fix"), m(rep, "nic_paused"))
        self.assertLess(m(rep, "paused_fix"), m(rep, "paused"))
        self.assertGreater(m(rep, "tput_fix"), m(rep, "tput"))
        self.assertGreater(m(rep, "ports"), 1)
        self.assertGreater(m(rep, "storm"), 0)
        # A pure incast pauses spines too: the storm spreads beyond the receiver's leaf.
        self.assertGreater(m(rep, "incast_spines"), 0)
        self.assertGreater(m(rep, "incast_storm"), 0)
        for run in rep["runs"].values():
            for r in run["runs"]:
                p = r["pfc"]
                self.assertLessEqual(p["first_pause_us"], p["last_pause_end_us"])
                self.assertLessEqual(p["nic_paused_us"], p["paused_us"])
                self.assertLessEqual(p["nic_uplinks_paused"], p["ports_paused"])
                self.assertEqual(r["drops"]["headroom_overflow"], 0)

    def test_flags_apply_over_a_scenarios_runs(self):
        rep = scenario("ecmp-vs-spray", "--spines", "4", "--seeds", "5")
        for name, cc in (("dcqcn", "dcqcn"), ("cc-none", "none")):
            cfg = rep["runs"][name]["config"]
            self.assertEqual(cfg["spines"], 4)
            self.assertEqual(cfg["seeds"], "5-5")
            self.assertEqual(cfg["cc"]["mode"], cc)  # the run's own setting survives the flags

    def test_errors(self):
        p = subprocess.run([EMU, "--scenario", "no-such-claim"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no scenario named 'no-such-claim'", p.stderr)
        self.assertIn("ecmp-vs-spray", p.stderr)  # the names it knows
        p = subprocess.run([EMU, "--quick"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--quick: only with --scenario", p.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("scenario:\n  claim: c\n  measure: {x: {mode: dlb, metric: m}}\n"
                    "  figures: [{label: l, value: x}]\n  verdict: [{say: s}]\n")
            f.flush()
            p = subprocess.run([EMU, "--scenario", f.name], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("scenario.measure.x.mode", p.stderr)


if __name__ == "__main__":
    unittest.main()
