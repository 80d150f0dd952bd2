#!/usr/bin/env python3
"""fabric_emu --tiers 3 (issue 30): a three-tier folded Clos, 2 pods x 2 leaves x 8 hosts, 4
spines per pod, 4 super-spines per super-spine plane, 2 parallel links between a leaf and a spine
so that no tier is oversubscribed (8 hosts and 8 uplinks at a leaf; 4 links down and 4 up at a
spine), every cable 100 Gbit/s. ECMP hashes a flow twice on its way up (at the leaf among its 8
uplinks, at the spine among 4 super-spines when it leaves the pod; on the way down the spine
hashes it once more onto one of the 2 parallel links to the leaf); its
permutation throughput must match the expectation of those choices, which this test computes
itself by drawing them (each switch's CRC32C % N over distinct 5-tuples behaves as an
independent uniform draw) and sharing each link max-min among the flows on it. Spraying reaches
the payload ceiling with no retransmission, and a super-spine link going down is routed around
within 1 ms with every message completed. The spine sprays by the path id's next digit (id / the
leaf's uplinks): one QP's packets take every spine-super link evenly, and with only the leaf's
digit in use each spine sends the QP up one link. A leaf-spine link down in one pod is withdrawn
from the other pods' routes to that leaf. --oversubscription sets the tiers' rates.

FABRIC_EMU points at the program."""
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
PODS, LEAVES, SPINES, SUPERS, HOSTS, PARALLEL = 2, 2, 4, 4, 8, 2
CLOS = ["--tiers", "3", "--pods", str(PODS), "--leaves", str(LEAVES), "--spines", str(SPINES),
        "--super-spines", str(SUPERS), "--hosts-per-leaf", str(HOSTS),
        "--links-per-spine", str(PARALLEL)]
# The payload share of a 4096-byte RoCE WRITE frame on the wire (fabric_report's payload_share).
PAYLOAD_SHARE = 4096 / (14 + 20 + 8 + 12 + 4096 + 4 + 8 + 12)


# One QP each way between two pods of one leaf and one host: every data packet's path id names
# one (leaf uplink, spine link up) pair, so each link's share is known exactly.
ONE_QP = ["--tiers", "3", "--pods", "2", "--leaves", "1", "--spines", str(SPINES),
          "--super-spines", str(SUPERS), "--hosts-per-leaf", "1",
          "--links-per-spine", str(PARALLEL)]


def run(*args, csv_dir=None, clos=CLOS):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        extra = ["--csv", csv_dir] if csv_dir else []
        p = subprocess.run([EMU, "--quiet", "--reproducible", "--json", out, *extra, *clos, *args],
                           capture_output=True, text=True, timeout=900)
        if p.returncode not in (0, 5):
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n"
                                 f"{p.stdout}\n{p.stderr}")
        with open(out) as f:
            return json.load(f)


def max_min_total(paths):
    """Water-filling: every flow's max-min fair rate (in host links, over links of their
    capacity), summed."""
    flows = set(range(len(paths)))
    on = {}
    for i, path in enumerate(paths):
        for link in path:
            on.setdefault(link, set()).add(i)
    capacity = {link: 1.0 for link in on}
    total = 0.0
    while flows:
        # The tightest link fixes the rate of every flow still on it.
        link = min((l for l in on if on[l]), key=lambda l: capacity[l] / len(on[l]))
        share = capacity[link] / len(on[link])
        for i in list(on[link]):
            total += share
            flows.discard(i)
            for other in paths[i]:
                capacity[other] -= share
                on[other].discard(i)
    return total


def expectation(pairs, draws, rng):
    """Mean over `draws` drawings of the hash choices: the throughput fraction of the flows.

    Every switch computes CRC-32C over the same 13 key bytes with its own seed as the initial
    register and no final inversion (dataplane/forwarding/flow_hasher.h), and CRC is affine in
    that register: switch X's hash of a flow is h ^ c_X, with h the flow's own (seed 0) hash and
    c_X a constant of X's seed. So the draws are h per flow and c per switch, and each switch
    picks member (h ^ c) % N of its group, as ECMP does. The choices at different tiers are not
    independent: with power-of-two groups, the spine's low bits are the leaf's, relabelled."""
    rack = lambda h: h // HOSTS  # global leaf
    pod = lambda h: rack(h) // LEAVES
    total = 0.0
    for _ in range(draws):
        c = {}
        seed_of = lambda switch: c.setdefault(switch, rng.getrandbits(32))
        paths = []
        for src, dst in pairs:
            h = rng.getrandbits(32)
            s, k = divmod((h ^ seed_of(("leaf", rack(src)))) % (SPINES * PARALLEL), PARALLEL)
            down = (h ^ seed_of(("spine", pod(dst), s))) % PARALLEL
            path = [("up1", rack(src), s, k), ("down1", pod(dst), s, rack(dst), down)]
            if pod(src) != pod(dst):
                m = (h ^ seed_of(("spine", pod(src), s))) % SUPERS
                path += [("up2", pod(src), s, m), ("down2", s, m, pod(dst))]
            paths.append(path)
        total += max_min_total(paths) / len(pairs)
    return total / draws


class FabricClos(unittest.TestCase):
    def check_whole(self, report):
        for r in report["runs"]:
            self.assertTrue(r["mempool_whole"], r["seed"])
            self.assertEqual(r["mbufs_in_use_at_end"], 0)

    def test_ecmp_matches_the_hash_choices_at_both_levels(self):
        # The queues kept short as in the two-tier balls-into-bins test (a small static PFC
        # threshold): the theory counts collisions, not the queues behind them.
        with tempfile.TemporaryDirectory() as d:
            rep = run("--duration", "1ms", "--mode", "ecmp", "--seeds", "1-50",
                      "--pfc-static-threshold-bytes", "209715", csv_dir=d)
            with open(os.path.join(d, "flows.csv")) as f:
                rows = list(csv.DictReader(f))
        self.check_whole(rep)
        self.assertEqual(len(rep["runs"]), 50)
        rng = random.Random(30)
        expected, measured = [], []
        for r in rep["runs"]:
            pairs = [(int(x["src"][1:]), int(x["dst"][1:])) for x in rows
                     if x["mode"] == "ecmp" and int(x["seed"]) == r["seed"]]
            self.assertEqual(len(pairs), PODS * LEAVES * HOSTS, r["seed"])
            expected.append(expectation(pairs, 200, rng) * PAYLOAD_SHARE)
            measured.append(r["throughput_fraction"])
            # Both tiers are reported, and the spine-super-spine links carried traffic when a
            # flow left its pod.
            tiers = r["tiers"]
            self.assertEqual(set(tiers), {"leaf-spine", "spine-super"})
            self.assertEqual(tiers["spine-super"]["links"], 2 * PODS * SPINES * SUPERS)
        e = sum(expected) / len(expected)
        m = sum(measured) / len(measured)
        print(f"ecmp over 50 seeds: measured {m:.3f}, expected {e:.3f}", file=sys.stderr)
        self.assertLess(abs(m - e), 0.04, (m, e))
        self.assertLess(e, 0.9)  # collisions at either level cost something

    def test_spray_reaches_the_ceiling_without_retransmission(self):
        rep = run("--duration", "1ms", "--mode", "spray", "--seeds", "1-2")
        self.check_whole(rep)
        for r in rep["runs"]:
            self.assertGreaterEqual(r["throughput_fraction"], 0.95, r["seed"])
            self.assertEqual(r["packets_retransmitted"], 0, r["seed"])
            self.assertEqual(r["tcam_fallback_qps"], 0)
            tiers = r["tiers"]
            # Every super-spine link carried its share: nothing idle at the top.
            if tiers["spine-super"]["uplink_util"]["mean"] > 0.2:
                self.assertEqual(tiers["spine-super"]["idle_links"], 0, r["seed"])

    def test_super_spine_link_down_is_routed_around(self):
        # pod0.spine1 loses super-spine 1.2: pod0.spine1 leaves it out at once (link state), and
        # routing withdraws super1.2 from pod1.spine1's routes to pod0 (it has no way down
        # there any more). Only the frames already on their way when it failed are lost.
        event = ["--event", "link-down:pod0.spine1-super1.2@100us"]
        for mode in ("ecmp", "spray"):
            with self.subTest(mode):
                # Every host sends 256 KiB to every other (an all-to-all: finite, half of it
                # across pods), about 700 us, the link going down early in it.
                rep = run("--workload", "alltoall", "--bytes", "262144", "--duration", "20ms",
                          "--mode", mode, "--seeds", "1", *event)
                self.check_whole(rep)
                r = rep["runs"][0]
                self.assertTrue(r["completed"], r["warnings"])
                self.assertEqual(r["messages_completed"], r["messages_expected"])
                self.assertEqual(r["dead_link_frames"], 0)
                self.assertEqual(r["drops"]["no_route"], 0)
                # In flight at 100 us towards the dead end: a few frames, not a stream.
                self.assertLess(r["drops"]["no_eligible_port"] + r["drops"]["link_down"], 40)
                self.assertLess(r["virtual_us"], 2000)
        # A permutation through the failure: the goodput is back within 1 ms of virtual time.
        rep = run("--duration", "2ms", "--mode", "ecmp,spray", "--seeds", "1-2",
                  "--event", "link-down:pod0.spine1-super1.2@500us")
        self.check_whole(rep)
        for r in rep["runs"]:
            f = r["failover"]
            self.assertGreaterEqual(f["recovery_us"], 0, (r["mode"], r["seed"], f))
            self.assertLessEqual(f["recovery_us"], 1000, (r["mode"], r["seed"], f))
            self.assertEqual(r["drops"]["no_route"], 0)
            self.assertLess(r["drops"]["no_eligible_port"] + r["drops"]["link_down"], 40)
            self.assertEqual(r["dead_link_frames_after_1ms"], 0)

    def test_spine_sprays_by_the_next_digit_of_the_path_id(self):
        # 8 leaf uplinks x 4 spine links up: the NICs rotate through 32 path ids, the leaf takes
        # id % 8 and the spine id / 8, so each of pod 0's 16 spine-super links carries 2 of
        # every 32 packets of h0's QP. Reading the whole id at the spine instead would give the
        # ids of one leaf uplink one link up (half the links idle); DRILL's choice is not even
        # link by link.
        rep = run("--duration", "1ms", "--mode", "spray", clos=ONE_QP)
        self.check_whole(rep)
        self.assertEqual(rep["config"]["spray_split"],
                         {"paths": 32, "leaf_choices": 8, "spine_choices": 4, "spine_digits": 4,
                          "fits": True})
        r = rep["runs"][0]
        self.assertEqual(r["packets_retransmitted"], 0)
        for tier, prefix, count in (("leaf-spine", "pod0.leaf0>", SPINES * PARALLEL),
                                    ("spine-super", "pod0.spine", SPINES * SUPERS)):
            up = {k: u for k, u in r["tiers"][tier]["uplink_util_by_link"].items()
                  if k.startswith(prefix)}
            self.assertEqual(len(up), count, sorted(up))
            mean = sum(up.values()) / len(up)
            self.assertGreater(mean, 0.04, tier)
            for link, u in up.items():
                self.assertLess(abs(u - mean), 0.03 * mean, (tier, link, u, mean))
        # Path ids 0..7 only: the spine's digit is always 0, so each spine sends h0's QP up one
        # link of its four (which one: its flow hash), and the leaf still uses all 8 uplinks.
        rep = run("--duration", "1ms", "--mode", "spray", "--fabric-paths", "8", clos=ONE_QP)
        self.check_whole(rep)
        self.assertEqual(rep["config"]["spray_split"]["spine_digits"], 1)
        self.assertFalse(rep["config"]["spray_split"]["fits"])
        by_link = rep["runs"][0]["tiers"]["spine-super"]["uplink_util_by_link"]
        for s in range(SPINES):
            used = [k for k, u in by_link.items() if k.startswith(f"pod0.spine{s}>") and u > 0.01]
            self.assertEqual(len(used), 1, (s, by_link))
        leaf = rep["runs"][0]["tiers"]["leaf-spine"]["uplink_util_by_link"]
        self.assertEqual(len([k for k, u in leaf.items()
                              if k.startswith("pod0.leaf0>") and u > 0.01]), SPINES * PARALLEL)

    def test_leaf_spine_link_down_in_another_pod_is_withdrawn_across_pods(self):
        # pod1.leaf1 loses spine2 (both parallel links): super-spine plane 2 then has no way down
        # to that leaf, so pod 0's leaves must stop sending its traffic to their spine2 (a /24
        # per remote leaf, withdrawn), else it dies at pod1.spine2 (no_eligible_port) and an
        # ECMP QP hashed there never completes.
        for mode in ("ecmp", "spray"):
            with self.subTest(mode):
                rep = run("--workload", "alltoall", "--bytes", "262144", "--duration", "20ms",
                          "--mode", mode, "--seeds", "1",
                          "--event", "link-down:pod1.leaf1-spine2@100us")
                self.check_whole(rep)
                r = rep["runs"][0]
                self.assertTrue(r["completed"], r["warnings"])
                self.assertEqual(r["messages_completed"], r["messages_expected"])
                self.assertEqual(r["drops"]["no_route"], 0)
                # Only what was queued on the two dead links at 100 us (link_down) and on its
                # way down to pod1.leaf1 through pod1.spine2 then (no_eligible_port); without
                # the withdrawal no_eligible_port is a stream (2260 in ecmp, 3532 in spray)
                # and messages stay unfinished at 20 ms.
                self.assertLess(r["drops"]["no_eligible_port"], 40, r["drops"])
                self.assertLess(r["drops"]["link_down"], 80, r["drops"])
                self.assertLess(r["virtual_us"], 2000)

    def test_oversubscription_per_tier_sets_the_rates(self):
        # 1:1 at the leaf (8 hosts, 8 uplinks of 100), 4:1 at the spine (4 x 100 down, 4 links
        # up of 25): the same fabric as giving --spine-super-gbps 25, run for run.
        common = ("--duration", "500us", "--mode", "ecmp,spray", "--seeds", "1")
        over = run(*common, "--oversubscription", "1:1,4:1")
        given = run(*common, "--spine-super-gbps", "25")
        self.assertEqual(over["config"]["oversubscription"], "1:1,4:1")
        self.assertEqual(over["config"]["spine_super_gbps"], 25)
        self.assertEqual(over["config"]["leaf_spine_gbps"], 100)
        self.assertEqual(over["runs"], given["runs"])
        # About half the traffic leaves its pod, through a quarter of the bandwidth it needs.
        self.assertLess(over["runs"][1]["throughput_fraction"], 0.8)
        # Refused, naming the flag and what it allows.
        for bad, says in (("1:1,2:1,1:1", "a 3-tier fabric has 2 (leaf, spine)"),
                          ("2", "A:B per tier"),
                          ("1:100", "allowed 1..1600")):
            p = subprocess.run([EMU, *CLOS, "--duration", "100us", "--oversubscription", bad],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn("oversubscription", p.stderr, bad)
            self.assertIn(says, p.stderr, bad)
        p = subprocess.run([EMU, *CLOS, "--duration", "100us", "--oversubscription", "1:1",
                            "--leaf-spine-gbps", "200"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not both", p.stderr)


if __name__ == "__main__":
    unittest.main()
