#!/usr/bin/env python3
"""IRN in fabric_emu (issue 44): lossy RoCE, PFC off on the data class, NAKs that carry a SACK,
selective repeat of every hole, a BDP cap and IRN's two timeouts, on the JSON of real runs.

- a 16:1 incast, 100G, PFC off: every message completes, packets are dropped and every one is
  recovered, retransmitted packets at most 1.5x the packets dropped; the same workload under
  go-back-N (rxe's responder and requester) with PFC off shows its multiple beside it, and
  IRN's goodput is the higher;
- the BDP cap in force is the longest path's bandwidth-delay product, computed here from the
  cables and the MTU;
- IRN runs under every congestion control (DCQCN, HPCC, DCTCP, TIMELY, none) and with spraying
  (the reorder engine or out-of-order placement in front of its responder);
- every mbuf back; bad IRN settings refused with the key and its range.

FABRIC_EMU points at the program."""
import json
import math
import os
import subprocess
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
INCAST16 = ["--leaves", "2", "--spines", "8", "--hosts-per-leaf", "16", "--workload", "incast",
            "--incast-senders", "16", "--bytes", "4000000", "--duration", "20ms", "--seeds", "1"]


def run(*args, expect=(0,)):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        p = subprocess.run([EMU, "--quiet", "--reproducible", "--json", out, *args],
                           capture_output=True, text=True, timeout=600)
        if p.returncode not in expect:
            raise AssertionError(f"fabric_emu {' '.join(args)} exited {p.returncode}:\n"
                                 f"{p.stdout}\n{p.stderr}")
        if not os.path.exists(out):
            return p
        with open(out) as f:
            return json.load(f)


def bdp_packets(mtu=4096, gbps=100.0, delay_ns=1000, spread_ns=500, hops=4):
    """One MTU packet (with its RETH) stored and forwarded over `hops` cables, each at its
    delay plus the spread, and its ACK back: the base RTT; times the host's rate, in packets."""
    wire = lambda frame: (frame + 24) * 8  # preamble, IFG and FCS on the wire, bits
    data = wire(14 + 20 + 8 + 12 + 16 + mtu + 4)
    ack = wire(14 + 20 + 8 + 12 + 4 + 4)
    rtt = hops * (data / gbps + 2 * (delay_ns + spread_ns) + ack / gbps)
    return math.ceil(gbps * rtt / 8 / mtu)


class FabricIrn(unittest.TestCase):
    def check_whole(self, report):
        for r in report["runs"]:
            self.assertTrue(r["mempool_whole"], r["mode"])
            self.assertEqual(r["mbufs_in_use_at_end"], 0)

    def test_incast_pfc_off_beside_go_back_n(self):
        irn = run(*INCAST16, "--mode", "ecmp", "--transport", "irn")
        self.check_whole(irn)
        self.assertEqual(irn["config"]["transport"], "irn")
        self.assertFalse(irn["config"]["pfc"])
        r = irn["runs"][0]
        self.assertTrue(r["completed"])
        self.assertEqual(r["messages_completed"], 16)
        self.assertEqual(r["pfc"]["pause_frames"], 0)
        self.assertEqual(r["irn"]["bdp_packets"], bdp_packets())
        self.assertEqual(irn["config"]["irn_bdp_packets"], bdp_packets())
        drops = r["network_drops"]
        self.assertGreater(drops, 100)  # lossy: the incast overflows the receiver's port
        self.assertEqual(drops, r["drops"]["queue_full"])
        self.assertGreaterEqual(r["packets_retransmitted"], drops)  # every loss resent...
        self.assertLessEqual(r["packets_retransmitted"], 1.5 * drops)  # ...and little else
        self.assertAlmostEqual(r["retransmitted_per_drop"], r["packets_retransmitted"] / drops)
        self.assertGreater(r["irn"]["sack_naks"], 0)
        self.assertGreater(r["irn"]["sacked_packets"], 0)
        self.assertEqual(r["placement"]["window_overflows"], 0)  # the cap bounds the window
        self.assertGreaterEqual(r["receiver_goodput_fraction"], 0.9)
        self.assertGreaterEqual(r["flow_fairness"]["jain"], 0.95)

        # Go-back-N with PFC off, with the same timeout as RTO_high and rxe's smallest window
        # (66), the waits of ooo-placement's rc form shortened likewise.
        gbn = run(*INCAST16, "--mode", "ecmp", "--pfc", "off", "--max-in-flight", "66",
                  "--retransmit-timeout-us", "320", "--reorder-hold-us", "100",
                  "--placement-nak-delay-us", "100")
        self.check_whole(gbn)
        g = gbn["runs"][0]
        self.assertTrue(g["completed"])
        self.assertNotIn("irn", g)
        self.assertGreater(g["drops"]["responder_out_of_order"], 0)  # rxe discards past a gap
        self.assertEqual(g["network_drops"], g["drops"]["queue_full"])
        print(f"\n16:1 incast, PFC off: IRN resent {r['packets_retransmitted']} for "
              f"{drops} dropped ({r['retransmitted_per_drop']:.2f}x), goodput "
              f"{r['receiver_goodput_fraction']:.3f}; go-back-N resent "
              f"{g['packets_retransmitted']} for {g['network_drops']} dropped "
              f"({g['retransmitted_per_drop']:.2f}x), goodput "
              f"{g['receiver_goodput_fraction']:.3f}")
        self.assertGreater(g["retransmitted_per_drop"], r["retransmitted_per_drop"])
        self.assertGreater(g["network_drops"], drops)
        self.assertGreater(r["receiver_goodput_fraction"], g["receiver_goodput_fraction"])

    def test_every_cc_and_spraying(self):
        cases = [("ecmp", "--cc", c) for c in ("hpcc", "dctcp", "timely", "none")]
        cases += [("spray", "--receive", "reorder-buffer"), ("spray", "--receive", "ooo-placement")]
        for mode, key, value in cases:
            with self.subTest(mode=mode, setting=value):
                rep = run(*INCAST16, "--mode", mode, key, value, "--transport", "irn")
                self.check_whole(rep)
                r = rep["runs"][0]
                self.assertTrue(r["completed"])
                self.assertEqual(r["pfc"]["pause_frames"], 0)
                drops = r["network_drops"]
                self.assertGreater(drops, 0)
                self.assertGreaterEqual(r["packets_retransmitted"], drops)
                self.assertLessEqual(r["packets_retransmitted"], 1.5 * drops)
                if mode == "spray":
                    self.assertEqual(r["receive"], value)
                    self.assertGreater(r["placement"]["placed_out_of_order"], 0)

    def test_bdp_cap_given(self):
        rep = run(*INCAST16, "--mode", "ecmp", "--transport", "irn", "--irn-bdp-packets", "8")
        self.check_whole(rep)
        self.assertEqual(rep["runs"][0]["irn"]["bdp_packets"], 8)
        self.assertEqual(rep["config"]["irn_bdp_packets"], 8)

    def test_bad_settings_are_refused(self):
        cases = [
            (("--transport", "tcp"), "--transport: rc | irn, got 'tcp'"),
            (("--transport", "irn", "--pfc", "on"),
             "--pfc: on is not allowed with transport irn (IRN is lossy RoCE"),
            (("--transport", "irn", "--irn-rto-low-us", "400"),
             "irn-rto-low-us: 0.001 .. irn-rto-high-us"),
            (("--transport", "irn", "--irn-bdp-packets", "1"),
             "irn-bdp-packets: 0 (auto) or 2..65536"),
            (("--transport", "irn", "--irn-reorder-wait-us", "320"),
             "irn-reorder-wait-us: below irn-rto-high-us"),
            (("--transport", "irn", "--mode", "spray-noreorder"),
             "transport irn: not with mode spray-noreorder"),
            (("--transport", "irn", "--op", "read"), "op read: not with transport irn"),
        ]
        for args, text in cases:
            p = run(*INCAST16, *args, expect=(2,))
            self.assertIn(text, p.stderr, (args, p.stderr))


if __name__ == "__main__":
    unittest.main(verbosity=2)
