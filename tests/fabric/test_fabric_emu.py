#!/usr/bin/env python3
"""fabric_emu end to end, at small sizes: the issue's "done when" points, checked on the JSON
report of real runs (real SwitchNode/NicNode pipelines in virtual time).

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree (for configs)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")


def run(*args, expect=0):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = subprocess.run([EMU, "--quiet", "--reproducible", "--json", out, *args],
                           capture_output=True, text=True, timeout=600)
        codes = expect if isinstance(expect, tuple) else (expect,)
        if p.returncode not in codes:
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        # 5: the runs are in the report, and at least one is unfinished or lossy (warnings)
        if p.returncode not in (0, 5):
            return p
        with open(out) as f:
            report = json.load(f)
        with open(out, "rb") as f:
            report["_bytes"] = f.read()
        report["_stdout"] = p.stdout
        return report


def mean(runs, mode, key):
    v = [r[key] for r in runs if r["mode"] == mode]
    return sum(v) / len(v)


class FabricEmu(unittest.TestCase):
    def check_whole(self, report):
        for r in report["runs"]:
            self.assertTrue(r["mempool_whole"], r)
            self.assertEqual(r["mbufs_in_use_at_end"], 0)

    def test_ecmp_balls_into_bins(self):
        # 8 single-QP flows over 8 spines: 1-(1-1/8)^8 = 0.656 of the line rate on average,
        # times the payload share of a 4096-byte frame on the wire (0.98). The theory counts
        # collisions only: it holds while queues stay short, here by PFC on a small static
        # threshold (what congestion control would do). With the default deep dynamic threshold
        # and no congestion control, each sender's 2 MiB window queues at the collided uplinks,
        # the ACKs of the other direction wait behind it, and the mean falls to about 0.56.
        rep = run("--duration", "1ms", "--mode", "ecmp", "--seeds", "1-50",
                  "--pfc-static-threshold-bytes", "209715")
        self.check_whole(rep)
        tf = mean(rep["runs"], "ecmp", "throughput_fraction")
        self.assertLess(abs(tf - 0.656), 0.04, tf)
        self.assertEqual(len(rep["runs"]), 50)
        # seeds differ: not every seed gives the same result
        self.assertGreater(len({round(r["throughput_fraction"], 4) for r in rep["runs"]}), 5)

    def test_spray_reorder_and_without(self):
        rep = run("--duration", "2ms", "--mode", "spray,spray-noreorder", "--seeds", "1-3")
        self.check_whole(rep)
        for r in rep["runs"]:
            if r["mode"] == "spray":
                self.assertGreaterEqual(r["throughput_fraction"], 0.95, r["seed"])
                self.assertLess(r["retx_rate"], 0.001)
                self.assertGreater(r["reorder"]["held"], 0)  # there was reordering to undo
                self.assertEqual(r["tcam_fallback_qps"], 0)
        # Without the reorder engine every reordering is a NAK and a go-back-N (cables differ by
        # up to 500 ns by default, so sprayed packets overtake one another).
        self.assertGreater(mean(rep["runs"], "spray-noreorder", "naks"), 10)
        for r in rep["runs"]:
            if r["mode"] == "spray-noreorder":
                self.assertGreater(r["retx_rate"], 0.05, r["seed"])
        self.assertLess(mean(rep["runs"], "spray-noreorder", "throughput_fraction"),
                        mean(rep["runs"], "spray", "throughput_fraction"))

    def test_ooo_placement_lossless_spray(self):
        # Placement instead of reordering: a lossless sprayed permutation reorders (cables differ
        # by up to 500 ns) but nothing is retransmitted or NAKed, and no reorder engine runs.
        rep = run("--duration", "1ms", "--mode", "spray", "--receive", "ooo-placement",
                  "--seeds", "1-2")
        self.check_whole(rep)
        self.assertEqual(rep["config"]["receive"], "ooo-placement")
        for r in rep["runs"]:
            self.assertEqual(r["receive"], "ooo-placement")
            self.assertEqual(r["packets_retransmitted"], 0, r["seed"])
            self.assertEqual(r["naks"], 0, r["seed"])
            self.assertEqual(r["retransmit_timeouts"], 0, r["seed"])
            self.assertGreater(r["placement"]["placed_out_of_order"], 0, r["seed"])
            self.assertEqual(r["placement"]["window_overflows"], 0, r["seed"])
            self.assertEqual(r["reorder"]["held"], 0)
            self.assertGreaterEqual(r["throughput_fraction"], 0.95, r["seed"])
        p = run("--mode", "spray-noreorder", "--receive", "ooo-placement", expect=2)
        self.assertIn("spray-noreorder is spray with receive none", p.stderr)

    def test_spray_reads_reordered_at_the_requester(self):
        # --op read: every host RDMA-READs from its target, so the sprayed data is READ responses,
        # which the requester's NIC puts back in order (it noted each READ's PSN range on TX).
        rep = run("--duration", "1ms", "--mode", "spray,spray-noreorder", "--seeds", "1", "--op", "read")
        self.check_whole(rep)
        self.assertEqual(rep["config"]["op"], "read")
        for r in rep["runs"]:
            if r["mode"] == "spray":
                self.assertGreaterEqual(r["throughput_fraction"], 0.9, r)
                self.assertEqual(r["retx_rate"], 0, r)
            else:
                # rxe's completer drops every READ response after a PSN gap and retries.
                self.assertLess(r["throughput_fraction"], 0.5, r)
                self.assertGreater(r["retx_rate"], 0.05, r)

    def test_equal_cables_reorder_little(self):
        # With every cable the same length spraying reorders only through queueing: far fewer
        # NAKs, which is why the default spreads cable lengths.
        rep = run("--duration", "1ms", "--mode", "spray-noreorder", "--seeds", "1-2",
                  "--cable-spread-ns", "0")
        spread = run("--duration", "1ms", "--mode", "spray-noreorder", "--seeds", "1-2")
        self.assertLess(mean(rep["runs"], "spray-noreorder", "retx_rate"),
                        mean(spread["runs"], "spray-noreorder", "retx_rate"))
        self.assertEqual(rep["config"]["cable_spread_ns"], 0)

    def test_dlb_above_ecmp(self):
        rep = run("--duration", "1ms", "--mode", "ecmp,dlb", "--seeds", "1-12")
        self.assertGreater(mean(rep["runs"], "dlb", "throughput_fraction"),
                           mean(rep["runs"], "ecmp", "throughput_fraction"))
        self.assertGreater(mean(rep["runs"], "dlb", "flowlets_started"), 0)
        self.assertEqual(mean(rep["runs"], "ecmp", "flowlets_started"), 0)

    def test_fixed_udp_sport_collapses_ecmp_not_ecmp_qp(self):
        # One host pair, 4 QPs: the links its leaf used are the paths of that pair.
        rep = run("--leaves", "2", "--hosts-per-leaf", "1", "--spines", "8", "--qps-per-host", "4",
                  "--udp-sport", "fixed", "--mode", "ecmp,ecmp-qp", "--duration", "500us",
                  "--seeds", "1-4")
        for r in rep["runs"]:
            used = [n for n, u in r["uplink_util_by_link"].items() if n.startswith("leaf0>") and u > 0.01]
            if r["mode"] == "ecmp":
                self.assertEqual(len(used), 1, (r["seed"], used))
            else:
                self.assertGreater(len(used), 1, (r["seed"], used))
        per_qp = run("--leaves", "2", "--hosts-per-leaf", "1", "--qps-per-host", "4",
                     "--mode", "ecmp", "--duration", "500us", "--seeds", "1-4")
        spread = [len([1 for n, u in r["uplink_util_by_link"].items() if n.startswith("leaf0>") and u > 0.01])
                  for r in per_qp["runs"]]
        self.assertGreater(max(spread), 1, spread)  # rxe's per-QP ports spread them again

    def test_link_down(self):
        # A spine link fails at 500 us during an all-to-all: every message still completes and
        # nothing crosses the dead link afterwards.
        for mode in ("ecmp", "spray"):
            rep = run("--workload", "alltoall", "--bytes", "262144", "--leaves", "2",
                      "--hosts-per-leaf", "4", "--spines", "4", "--mode", mode,
                      "--event", "link-down:leaf0-spine3@100us", "--duration", "50ms",
                      "--retransmit-timeout-us", "1000")
            r = rep["runs"][0]
            self.assertTrue(r["completed"], r)
            self.assertEqual(r["messages_completed"], 8 * 7)
            self.assertEqual(r["dead_link_frames"], 0)
            self.assertEqual(r["dead_link_frames_after_1ms"], 0)
            self.assertEqual(r["uplink_util_by_link"]["leaf0>spine3#0"] < 0.5, True)
            self.check_whole(rep)

    def test_weighted_control_loop_and_drill(self):
        # Weighted mode runs each switch's control loop in virtual time (every 100 us here: 10
        # ticks in 1 ms, on each of the 10 switches); a slow link (25 of 100 Gbit/s) then
        # carries far less than the others.
        # --cc none: the window and PFC alone, so that the slow link's share is the bucket
        # table's doing (DCQCN would also slow the QPs hashed onto it).
        rep = run("--duration", "1ms", "--mode", "weighted,drill", "--seeds", "1",
                  "--control-period-us", "100", "--event", "rate:leaf0-spine2=25@0us",
                  "--event", "background:spine5=0.5", "--cc", "none")
        self.check_whole(rep)
        w = [r for r in rep["runs"] if r["mode"] == "weighted"][0]
        util = w["uplink_util_by_link"]
        others = [u for n, u in util.items() if n.startswith("leaf0>") and "spine2#" not in n and "spine5#" not in n]
        self.assertLess(util["leaf0>spine2#0"], 0.5 * sum(others) / len(others))
        self.assertGreaterEqual(w["control_publications"], 10 * 10)
        d = [r for r in rep["runs"] if r["mode"] == "drill"][0]
        self.assertEqual(d["control_publications"], 0)
        d = [r for r in rep["runs"] if r["mode"] == "drill"][0]
        self.assertGreater(d["packets_sent"], 0)

    def test_determinism(self):
        a = run("--duration", "300us", "--mode", "ecmp,spray", "--seeds", "3")
        b = run("--duration", "300us", "--mode", "ecmp,spray", "--seeds", "3")
        self.assertEqual(a["_bytes"], b["_bytes"])
        c = run("--duration", "300us", "--mode", "ecmp", "--seeds", "4")
        self.assertNotEqual(a["runs"][0]["uplink_util_by_link"], c["runs"][0]["uplink_util_by_link"])

    def test_shared_payload_changes_nothing(self):
        # Payloads attached from the read-only store (the default) or copied into every packet:
        # the same packets cross the fabric, so every figure is the same. READ (payloads sent
        # by responders), a cdf workload (odd message sizes, small last packets copied) and a
        # BER event (frames dropped) are in it too.
        for args in (["--duration", "300us", "--mode", "ecmp,spray", "--seeds", "2"],
                     ["--duration", "300us", "--mode", "spray", "--op", "read"],
                     ["--workload", "cdf", "--duration", "200us", "--mode", "spray",
                      "--event", "ber:leaf0-spine1=1e-6@50us"]):
            # The BER run loses a last packet or its ACK and waits for rxe's 67 ms timer: it
            # is unfinished at the limit (exit 5), in both forms alike.
            shared = run(*args, expect=(0, 5))
            copied = run("--payload", "copy", *args, expect=(0, 5))
            self.check_whole(shared)
            self.assertEqual(shared["config"].pop("payload"), "shared")
            self.assertEqual(copied["config"].pop("payload"), "copy")
            for k in ("_bytes", "_stdout"):
                shared.pop(k)
                copied.pop(k)
            # Where the memory goes is what differs (copied payloads: bigger mbufs, a pattern
            # per QP); the figures are the same.
            for rep in (shared, copied):
                for r in rep["runs"]:
                    self.assertGreater(r.pop("memory")["total_mb"], 0)
            self.assertEqual(shared, copied, args)

    def test_allreduce_incast_cdf(self):
        rep = run("--workload", "allreduce", "--bytes", "4194304", "--hosts-per-leaf", "4",
                  "--mode", "ecmp,spray", "--channels", "2", "--duration", "20ms")
        for r in rep["runs"]:
            self.assertTrue(r["completed"])
            self.assertGreater(r["collective_bw_fraction"], 0.2)
            self.assertLessEqual(r["collective_bw_fraction"], 1.0)
            self.assertAlmostEqual(r["busbw_gbps"], r["algbw_gbps"] * 2 * 7 / 8, places=6)
        self.check_whole(rep)
        # 8 senders into one host, PFC on: lossless (no drop), paused, and the receiver's link
        # kept at least 0.9 busy, by ECMP and by spraying (whose reorder engine must ride out
        # the paths PFC pauses at different times).
        # With --cc none PFC alone holds the senders back (paused); with DCQCN (the default) the
        # senders' rates do it too, with fewer pauses or none.
        paused = {}
        for cc in ("none", "dcqcn"):
            rep = run("--workload", "incast", "--incast-senders", "8", "--bytes", "2097152",
                      "--mode", "ecmp,spray", "--duration", "20ms", "--cc", cc)
            for r in rep["runs"]:
                self.assertTrue(r["completed"], r["mode"])
                if cc == "none":
                    self.assertGreater(r["pfc"]["pause_frames"], 0)
                    self.assertEqual(r["cc"]["ecn_marked"], 0)
                else:
                    self.assertGreater(r["cc"]["cnps_received"], 0)
                    self.assertGreater(r["cc"]["rate_cuts"], 0)
                paused[(cc, r["mode"])] = r["pfc"]["paused_us"]
                self.assertEqual(sum(r["drops"].values()), 0, r["drops"])
                self.assertGreaterEqual(r["receiver_goodput_fraction"], 0.9, (cc, r["mode"]))
                self.assertEqual(r["retransmit_timeouts"], 0)
        for mode in ("ecmp", "spray"):
            self.assertLess(paused[("dcqcn", mode)], paused[("none", mode)], mode)
        rep = run("--workload", "cdf", "--cdf", "alistorage2019", "--load", "0.3",
                  "--mode", "ecmp", "--duration", "300us")
        r = rep["runs"][0]
        self.assertTrue(r["completed"])
        self.assertGreater(len(r["slowdown"]["bins"]), 3)
        for b in r["slowdown"]["bins"]:
            if b["count"]:
                self.assertGreaterEqual(b["p50"], 1.0)  # never faster than alone on the fabric
        self.check_whole(rep)

    def test_planes_and_links_per_spine(self):
        rep = run("--planes", "2", "--links-per-spine", "2", "--spines", "4", "--hosts-per-leaf", "4",
                  "--mode", "spray", "--duration", "500us")
        r = rep["runs"][0]
        self.assertGreater(r["throughput_fraction"], 0.8)
        self.assertIn("p1.leaf0>p1.spine3#1", r["uplink_util_by_link"])
        self.check_whole(rep)

    def test_errors(self):
        p = run("--mode", "ecmp,bogus", expect=2)
        self.assertIn("bogus", p.stderr)
        self.assertIn("spray-noreorder", p.stderr)
        p = run("--event", "link-down:leaf9-spine0@1us", expect=2)
        self.assertIn("no link named", p.stderr)
        p = run("--mtu", "1500", expect=2)
        self.assertIn("mtu", p.stderr)
        # Values a cast would wrap or no range check could catch are refused by name.
        p = run("--nic-control-period-us", "-5", expect=2)
        self.assertIn("--nic-control-period-us: must be microseconds in [1, 1e+07], got '-5'", p.stderr)
        p = run("--link-gbps", "nan", expect=2)
        self.assertIn("--link-gbps: must be a number in [1, 1600], got 'nan'", p.stderr)
        p = run("--leaves", "4294967298", expect=2)
        self.assertIn("--leaves: must be a whole number in [1, 255], got '4294967298'", p.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("fabric:\n  spines: 4\n  spinez: 3\n")
        try:
            p = run("--config", f.name, expect=2)
            self.assertIn(f.name, p.stderr)
            self.assertIn("spinez", p.stderr)
        finally:
            os.unlink(f.name)

    def test_filters_layouts_and_one_way_events(self):
        # A filter on h8's cable drops its sprayed packets (named cause), every mbuf comes back,
        # and the one-way rate event, the odd layout and the restore flag are taken and echoed.
        rep = run("--mode", "spray", "--duration", "300us", "--event",
                  "filter:h8-leaf1=udp4791-nonzero-csum", "--event", "rate:spine3>leaf1=50@100us",
                  "--ppcid-layout-host", "h3=path-high", "--fabric-paths", "8",
                  "--nic-restore-checksum", "on")
        self.check_whole(rep)
        r = rep["runs"][0]
        self.assertGreater(r["drops"]["checksum_filter"], 0)
        self.assertGreater(r["qps_never_acked"], 0)
        self.assertEqual(r["nic_rx"]["unaccounted"], 0)
        self.assertGreater(r["ppcid"]["layout_mismatch"], 0)
        self.assertEqual(r["nic_log_lines"], len(r["nic_log"]))
        cfg = rep["config"]
        self.assertEqual(cfg["ppcid_layout_host"], ["h3=path-high"])
        self.assertEqual(cfg["fabric_paths"], 8)
        self.assertTrue(cfg["nic_restore_checksum"])
        for args, text in ((("--ppcid-layout-host", "h3=sideways"), "ts-high | path-high"),
                           (("--ppcid-layout-host", "h99=ts-high"), "h0..h15"),
                           (("--fabric-paths", "0"), "auto or 1..256"),
                           (("--nic-restore-checksum", "maybe"), "on|off"),
                           (("--event", "filter:h3=tcp"), "udp4791-nonzero-csum"),
                           (("--event", "filter:h99=off"), "a filter may also name a host"),
                           (("--event", "link-up:spine3>leaf1@1us"), "only ber and rate")):
            p = run("--duration", "50us", *args, expect=2)
            self.assertIn(text, p.stderr, args)

    def test_yaml_config(self):
        src = os.environ.get("SPRAYNET_SOURCE_DIR", ".")
        rep = run("--config", os.path.join(src, "configs/fabric-small.yaml"), "--duration", "300us")
        self.assertEqual(rep["config"]["spines"], 4)
        self.assertEqual({r["mode"] for r in rep["runs"]}, {"ecmp", "spray"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
