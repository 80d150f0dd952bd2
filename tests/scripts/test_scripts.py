#!/usr/bin/env python3
"""The deployment scripts on real processes: shellcheck over scripts/*.sh, topo.sh's config
errors, scripts/e2e.sh end to end (root: namespaces, veth, real switch_emu and nic_emu on
net_af_packet, dpdk-dumpcap, tshark; flow and rr spraying, then congestion control: CE marks
on a slowed spine port, CNPs and DCQCN rate cuts), e2e.sh killed half-way leaving nothing behind,
perftest.sh's skip where no RDMA device can exist, and scripts/soak.sh (120 s when CI is set,
20 s otherwise).

    test_scripts.py [unittest names, e.g. Shellcheck E2e E2eKilled]
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPTS = os.path.join(ROOT, "scripts")
TOPO = os.path.join(SCRIPTS, "topo.sh")
SOAK = os.path.join(SCRIPTS, "soak.sh")
E2E = os.path.join(SCRIPTS, "e2e.sh")
PERFTEST = os.path.join(SCRIPTS, "perftest.sh")
IS_ROOT = os.geteuid() == 0

sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from waiting import wait_for  # noqa: E402


def env():
    e = dict(os.environ)
    for var in ("SWITCH_EMU", "NIC_EMU"):
        if var in os.environ:
            e[var] = os.environ[var]
    return e


def run(args, timeout=120):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env())


def netns_with(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


def processes_with(prefix):
    """DPDK processes whose command line names one of our file prefixes."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "cmdline"), "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace").startswith(prefix + "-") for a in args) and \
                any(a.endswith((b"switch_emu", b"nic_emu", b"dpdk-dumpcap")) for a in args):
            found.append(int(os.path.basename(d)))
    return found


def nr_hugepages():
    with open("/proc/sys/vm/nr_hugepages") as f:
        return int(f.read())


class LeftBehind:
    """What a run with PREFIX and run directory OUT may leave, for checking that it did not."""

    def __init__(self, prefix, out):
        self.prefix, self.out = prefix, out
        self.hugepages = nr_hugepages()

    def check(self, test):
        test.assertEqual(netns_with(self.prefix), [], "network namespaces left")
        test.assertEqual(processes_with(self.prefix), [], "processes left")
        test.assertEqual(glob.glob(f"/var/run/dpdk/{self.prefix}-*"), [],
                         "DPDK runtime directories left")
        with open("/proc/mounts") as f:
            mounts = [line for line in f if self.out in line]
        test.assertEqual(mounts, [], "hugetlbfs mounts left")
        test.assertEqual(nr_hugepages(), self.hugepages, "hugepages not given back")
        test.assertEqual(glob.glob(f"{self.out}/*/huge/*"), [], "hugepage files left")
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        test.assertNotRegex(links, r"\b(h[01]nic|n[01]u\d|s\dp[01])\b", "veths left in the root ns")
        test.assertFalse(os.path.exists(f"/run/spraynet/{self.prefix}.dir"))


class Shellcheck(unittest.TestCase):
    def test_every_script_is_shellcheck_clean(self):
        scripts = sorted(glob.glob(os.path.join(SCRIPTS, "*.sh")))
        self.assertIn(E2E, scripts)
        r = run(["shellcheck", *scripts])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class TopoConfig(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="topo_cfg_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def conf(self, text):
        path = os.path.join(self.tmp, "t.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_the_shipped_config_is_every_default(self):
        shipped = run([TOPO, "check", "--config", os.path.join(ROOT, "configs", "topo.conf")])
        defaults = run([TOPO, "check"])
        self.assertEqual(shipped.returncode, 0, shipped.stderr)
        self.assertEqual(shipped.stdout, defaults.stdout)
        self.assertIn("uplinks = 4", shipped.stdout)

    def test_errors_name_file_line_key_and_allowed_values(self):
        path = self.conf("prefix = ab\n# a comment\nspray = sideways\n")
        r = run([TOPO, "check", "--config", path])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip(), f"topo.sh: {path}:3: spray: 'sideways' is not allowed: "
                                           "flow, rr, weighted or adaptive")
        r = run([TOPO, "check", "--config", self.conf("uplinks = 9\n")])
        self.assertIn(":1: uplinks: '9' is not allowed: 1..8", r.stderr)
        r = run([TOPO, "check", "--config", self.conf("colour = blue\n")])
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, r":1: unknown key 'colour' \(keys: capture cc congest congest_gbps cores dir ")
        r = run([TOPO, "check", "--config", self.conf("just words\n")])
        self.assertIn(":1: expected KEY = VALUE, got 'just words'", r.stderr)
        r = run([TOPO, "check", "--set", "capture=spine5", "--set", "uplinks=2"])
        self.assertIn("capture: 'spine5' is not allowed: there are spine0..spine1", r.stderr)
        r = run([TOPO, "check", "--config", os.path.join(self.tmp, "missing.conf")])
        self.assertIn("missing.conf: cannot read", r.stderr)
        r = run([TOPO, "sideways"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'sideways'", r.stderr)

    def test_congestion_control_keys(self):
        r = run([TOPO, "check", "--set", "cc=dcqcn", "--set", "congest=spine1"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cc = dcqcn", r.stdout)
        self.assertIn("congest = spine1", r.stdout)
        r = run([TOPO, "check", "--set", "cc=reno"])
        self.assertEqual(r.stderr.strip(),
                         "topo.sh: --set: cc: 'reno' is not allowed: none, dcqcn or dcqcn-paper")
        r = run([TOPO, "check", "--set", "ecn_kmin_bytes=300000"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("ecn_kmin_bytes: '300000' is not allowed: above ecn_kmax_bytes (200000)",
                      r.stderr)
        r = run([TOPO, "check", "--set", "congest=spine3", "--set", "uplinks=2"])
        self.assertIn("congest: 'spine3' is not allowed: there are spine0..spine1", r.stderr)
        r = run([TOPO, "check", "--set", "ecn_pmax=0"])
        self.assertIn("ecn_pmax: '0' is not allowed: (0, 1]", r.stderr)

    @unittest.skipUnless(IS_ROOT, "needs root")
    def test_a_failed_up_leaves_nothing_behind(self):
        # nic1's config is refused by nic_emu (a reorder hold above the RC retransmit timeout),
        # after both spines started, spine0 on hugepages of the hugetlbfs up mounted.
        prefix = f"spf{os.getpid() % 100}"
        left = LeftBehind(prefix, self.tmp)
        r = run([TOPO, "up", "--set", f"prefix={prefix}", "--set", f"dir={self.tmp}/run",
                 "--set", "reorder_hold_us=999999", "--set", "uplinks=2",
                 "--set", "capture=spine0"], timeout=180)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("up failed; taking down what was made", r.stderr)
        self.assertIn("nic1 exited with status 2 while starting", r.stderr)
        left.check(self)


class IdleBackoff(unittest.TestCase):
    """switch_emu's idle back-off from its config, and the flag over the config."""

    def run_switch(self, tmp, *flags):
        import json
        cfg = os.path.join(tmp, "s.yaml")
        with open(cfg, "w") as f:
            f.write('ports:\n  - {name: a, device: "net_null0,no-rx=1"}\n'
                    '  - {name: b, device: "net_null1,no-rx=1"}\n'
                    "routes: [{prefix: 0.0.0.0/0, port: b}]\n"
                    "idle_backoff: {max_sleep_us: 50, idle_polls: 8}\n")
        stats = os.path.join(tmp, "s.json")
        prefix = f"spb{os.getpid()}"
        r = run([os.environ.get("SWITCH_EMU", os.path.join(ROOT, "build/switch_emu/switch_emu")),
                 "--no-huge", "-m", "256", "--no-pci", "--file-prefix", prefix, "--log-level",
                 "lib.eal:error", "--", "--config", cfg, "--stats", stats, "--duration-ms", "300",
                 *flags])
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(stats) as f:
            return json.load(f)["poll_loop"]

    def test_config_sets_it_and_the_flag_overrides(self):
        with tempfile.TemporaryDirectory(prefix="backoff_") as tmp:
            p = self.run_switch(tmp)
            self.assertEqual(p["idle_backoff_max_us"], 50)
            # 300 ms idle, sleeps of at most 50 us: hundreds of sleeps, few loops around them.
            self.assertGreater(p["idle_sleeps"], 100)
            self.assertLess(p["loops"], 20 * p["idle_sleeps"])
            p = self.run_switch(tmp, "--idle-backoff-us", "0")
            self.assertEqual(p["idle_backoff_max_us"], 0)
            self.assertEqual(p["idle_sleeps"], 0)


@unittest.skipUnless(IS_ROOT, "needs root: network namespaces, veth, hugepages")
class E2e(unittest.TestCase):
    def test_e2e_passes_and_leaves_nothing_behind(self):
        with tempfile.TemporaryDirectory(prefix="e2e_") as out:
            prefix = f"spe{os.getpid() % 100}"
            left = LeftBehind(prefix, out)
            r = run([E2E, "--out", out, "--prefix", prefix, "--messages", "25"], timeout=300)
            sys.stderr.write(r.stdout[-3000:])
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIn("e2e: every check held", r.stdout)
            self.assertRegex(r.stdout, r"\nflow\s+100\s+\d")
            self.assertRegex(r.stdout, r"\nrr\s+100\s+\d")
            self.assertRegex(r.stdout, r"\ncc\s+100\s+\d")
            self.assertIn("ok: every packet carries a PPCID naming path 1", r.stdout)
            self.check_congestion_control(os.path.join(out, "cc", "cc.json"), r.stdout)
            # The capture it checked is there, and tshark reads RoCE in it.
            cap = os.path.join(out, "rr", "spine0.pcapng")
            t = run(["tshark", "-r", cap, "-c", "1", "-T", "fields", "-e", "infiniband.bth.opcode"])
            self.assertRegex(t.stdout.strip(), r"^\d+$")
            left.check(self)

    def check_congestion_control(self, path, stdout):
        """The CC run: spine0's slowed port p1 marked CE, nic1 answered with CNPs, nic0's
        DCQCN cut rates; at both ends in the reports, and over telemetry while running."""
        with open(path) as f:
            cc = json.load(f)
        rep, tel = cc["report"], cc["telemetry"]
        self.assertEqual((cc["cc"], cc["congested"], rep["line_rate_gbps"]),
                         ("dcqcn", "spine0/p1", 40), cc)
        self.assertLess(cc["congest_gbps"], 1, cc)
        for k in ("ecn_marked", "ce_received", "cnps_sent", "cnps_received", "rp_cnps",
                  "rate_cuts"):
            self.assertGreater(rep[k], 0, f"{k}: {cc}")
        # Each CE arrival is answered by a CNP or suppressed (min_time_between_cnps); no more
        # arrive marked than the spines marked; no more CNPs are taken than were sent; a cut
        # needs a CNP.
        self.assertLessEqual(rep["cnps_sent"] + rep["cnps_suppressed"], rep["ce_received"], cc)
        self.assertLessEqual(rep["ce_received"], sum(rep["ecn_marked_by_spine"].values()), cc)
        self.assertLessEqual(rep["cnps_received"], rep["cnps_sent"], cc)
        self.assertLessEqual(rep["rp_cnps"], rep["cnps_received"], cc)
        self.assertLessEqual(rep["rate_cuts"], rep["rp_cnps"], cc)
        self.assertEqual(rep["class3_drops"], 0, cc)
        self.assertEqual(rep["nic_egress_drops"], 0, cc)
        self.assertEqual(tel["cc_mode"], "dcqcn", cc)
        for k in ("ecn_marked", "rp_cnps", "rate_cuts", "ce_received", "cnps_sent",
                  "cnps_received"):
            self.assertGreater(tel[k], 0, f"telemetry {k}: {cc}")
            self.assertLessEqual(tel[k], rep[k], f"telemetry {k}: {cc}")
        self.assertIn(f"ok: cc: nic0's DCQCN cut its QPs' rates (rate_cuts {rep['rate_cuts']})",
                      stdout)
        self.assertRegex(stdout, rf"spine0 p1 class 3 ecn_marked\s+{rep['ecn_marked']}\s+"
                                 rf"{tel['ecn_marked']}\n")

    def test_bad_cc_is_named(self):
        r = run([E2E, "--cc", "reno"])
        self.assertEqual((r.returncode, r.stderr.strip()),
                         (2, "e2e.sh: --cc: dcqcn, dcqcn-paper or none"))


@unittest.skipUnless(IS_ROOT, "needs root: network namespaces, veth")
class Soak(unittest.TestCase):
    def test_soak_holds_every_check_and_leaves_nothing_behind(self):
        seconds = 120 if os.environ.get("CI") else 20
        with tempfile.TemporaryDirectory(prefix="soak_") as out:
            prefix = f"spsk{os.getpid() % 100}"
            left = LeftBehind(prefix, out)
            r = run([SOAK, str(seconds), "--out", out, "--prefix", prefix], timeout=seconds + 300)
            sys.stderr.write(r.stdout[-3000:])
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIn("soak: every check held", r.stdout)
            with open(os.path.join(out, "soak.json")) as f:
                report = json.load(f)
            self.assertTrue(report["passed"])
            self.assertEqual(report["failures"], [])
            # A sample a second, every process's accounting read at each.
            self.assertGreaterEqual(report["samples"], seconds - 2)
            self.assertGreaterEqual(report["checks"]["accounting"], 4 * (seconds - 2))
            self.assertGreater(report["checks"]["rss"], 0)
            chaos = report["chaos"]
            for k in ("link_flaps", "ber_bursts", "tcam_adds", "tcam_removes", "pfc_storms"):
                self.assertGreater(chaos[k], 0, k)
            self.assertGreater(chaos["pfc_frames_sent"], 100)
            for name, p in report["processes"].items():
                self.assertEqual(p, {"exit_status": "0", "mempool_in_use_at_exit": 0,
                                     "accounting_balanced": True}, name)
            left.check(self)


@unittest.skipUnless(IS_ROOT, "needs root: network namespaces, veth, hugepages")
class E2eKilled(unittest.TestCase):
    """SIGTERM e2e.sh once the topology is (being) brought up: nothing may be left behind."""

    def kill_when(self, ready, tag):
        with tempfile.TemporaryDirectory(prefix="e2e_kill_") as out:
            prefix = f"spk{tag}{os.getpid() % 10}"
            left = LeftBehind(prefix, out)
            p = subprocess.Popen([E2E, "--out", out, "--prefix", prefix], env=env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                wait_for(lambda: ready(prefix, out), 120, "the topology to come up", proc=p)
                p.send_signal(signal.SIGTERM)
                output, _ = p.communicate(timeout=120)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.assertEqual(p.returncode, 130, output)
            self.assertIn("interrupted: taking the topology down", output)
            left.check(self)

    def test_killed_while_the_namespaces_are_being_made(self):
        self.kill_when(lambda prefix, out: len(netns_with(prefix)) >= 2, "n")

    def test_killed_while_the_processes_run(self):
        # spine0 runs on hugepages in the spray run: kill then, with dumpcap attached or not.
        def nic1_running(prefix, out):
            try:
                with open(f"{out}/rr/nic1.log") as f:
                    return "running" in f.read()
            except OSError:
                return False
        self.kill_when(nic1_running, "p")


class Perftest(unittest.TestCase):
    def rdma_possible(self):
        return (os.path.isdir("/sys/module/rdma_rxe") or
                (os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband")))

    def test_bad_arguments_are_named(self):
        r = run([PERFTEST, "--size", "0"])
        self.assertEqual((r.returncode, r.stderr.strip()), (2, "perftest.sh: --size: 1..8388608 bytes"))
        r = run([PERFTEST, "--modes", "flow,zigzag"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("'zigzag' is not one of flow, rr, weighted, adaptive", r.stderr)
        r = run([PERFTEST, "--bogus"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown argument '--bogus'", r.stderr)

    @unittest.skipUnless(IS_ROOT, "needs root")
    def test_topology_config_errors_come_first(self):
        r = run([PERFTEST, "--set", "uplinks=0"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("uplinks: '0' is not allowed: 1..8", r.stderr)

    @unittest.skipUnless(IS_ROOT, "needs root")
    def test_exits_77_in_one_line_where_no_rdma_device_can_exist(self):
        if self.rdma_possible():
            self.skipTest("an RDMA device can exist here: perftest.sh would run")
        r = run([PERFTEST])
        self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout.count("\n"), 1)
        self.assertRegex(r.stdout, r"^perftest.sh: skipped: no RDMA device can exist here "
                                   r"\(no rdma_rxe kernel module .* no RNIC")
        self.assertEqual(netns_with("spn"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
