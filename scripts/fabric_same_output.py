#!/usr/bin/env python3
"""fabric_emu gives the same output as at another commit: for a refactoring that must not change
behaviour (issue 41). Builds REF's fabric_emu in a git worktree (out/same-output/ref), runs each
case below with both it and this tree's build/fabric/fabric_emu (`--reproducible`: no wall-clock
figures), and compares the JSON, the CSV files and the timeseries byte for byte.

  scripts/fabric_same_output.py [--ref REV] [--build DIR] [--quick] [--only NAME]

--ref: the commit to compare against (HEAD: the last commit, so uncommitted changes are what is
checked). --quick: a fabric of 3 racks instead of run.sh's and one seed per case, and the claim
scenarios left out (about a minute). Exit status 0 when every case is the same, 1 when one
differs (its first differing line printed), 2 on a usage or build error.

The cases: the run.sh fabric (every mode, 4 seeds), a ring all-reduce, a 2-plane incast, a
three-tier spray with a super-spine link down, a cdf run, each on 1 and 3 threads, and every
claim scenario's --quick.
"""
import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN_SH = ["--leaves", "2", "--spines", "8", "--hosts-per-leaf", "8", "--link-gbps", "100",
          "--mtu", "4096"]
SMALL = ["--leaves", "3", "--spines", "2", "--hosts-per-leaf", "3"]


def cases(quick):
    fabric = SMALL if quick else RUN_SH
    seeds = ["--seeds", "1"] if quick else ["--seeds", "1-4"]
    c = {
        "run.sh permutation": fabric + seeds + [
            "--workload", "permutation", "--qps-per-host", "1", "--duration", "1ms",
            "--mode", "ecmp,ecmp-qp,dlb,weighted,drill,spray,spray-noreorder"],
        "all-reduce": fabric + seeds + [
            "--workload", "allreduce", "--bytes", "1048576", "--duration", "20ms",
            "--mode", "ecmp,dlb,spray"],
        "2-plane incast": fabric + seeds + [
            "--planes", "2", "--workload", "incast", "--bytes", "262144",
            "--incast-senders", "4", "--duration", "5ms", "--mode", "ecmp,spray"],
        "three tiers, spray, a super-spine link down": seeds + [
            "--tiers", "3", "--pods", "2", "--leaves", "2", "--spines", "2",
            "--super-spines", "2", "--hosts-per-leaf", "4", "--workload", "permutation",
            "--duration", "400us", "--mode", "ecmp,spray",
            "--event", "link-down:pod0.spine1-super1.0@100us"],
        "cdf": fabric + seeds + [
            "--workload", "cdf", "--cdf", "alistorage2019", "--load", "0.3",
            "--duration", "200us", "--mode", "ecmp,dlb,spray"],
    }
    out = {}
    for name, args in c.items():
        for threads in ("1", "3"):
            out["%s, %s thread(s)" % (name, threads)] = args + ["--threads", threads]
    return out


def scenarios(emu):
    p = subprocess.run([emu, "--scenario", "list"], capture_output=True, text=True, check=False)
    names = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if parts and "[preset]" not in line and "[research]" not in line:
            names.append(parts[0])
    return names


def build_ref(ref, work):
    tree = os.path.join(work, "ref")
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", ref + "^{commit}"],
                         capture_output=True, text=True, check=False)
    if sha.returncode != 0:
        sys.exit("fabric_same_output: --ref %s: not a commit" % ref)
    sha = sha.stdout.strip()
    if os.path.isdir(tree):
        subprocess.run(["git", "-C", tree, "checkout", "-q", "--detach", sha], check=True)
    else:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tree, sha],
                       check=True)
    build = os.path.join(tree, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, tree, "-Dbenchmarks=disabled", "-Dtests=false"],
                       check=True, stdout=subprocess.DEVNULL)
    print("fabric_same_output: building %s's fabric_emu in %s" % (sha[:10], tree), file=sys.stderr)
    subprocess.run(["ninja", "-C", build, "fabric/fabric_emu"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(build, "fabric", "fabric_emu"), sha


def run(emu, args, tmp):
    os.makedirs(tmp, exist_ok=True)
    out = {"json": os.path.join(tmp, "r.json"), "ts": os.path.join(tmp, "ts.csv"),
           "csv": os.path.join(tmp, "csv")}
    p = subprocess.run([emu, "--quiet", "--reproducible", "--jobs", "1", "--json", out["json"],
                        "--timeseries", out["ts"], "--csv", out["csv"]] + args,
                       capture_output=True, text=True, check=False)
    files = {"stdout": p.stdout.encode(), "exit status": str(p.returncode).encode()}
    for key in ("json", "ts"):
        if os.path.exists(out[key]):
            with open(out[key], "rb") as f:
                files[os.path.basename(out[key])] = f.read()
    if os.path.isdir(out["csv"]):
        for name in sorted(os.listdir(out["csv"])):
            with open(os.path.join(out["csv"], name), "rb") as f:
                files["csv/" + name] = f.read()
    shutil.rmtree(tmp)
    return files


def first_difference(a, b):
    al = a.decode(errors="replace").splitlines()
    bl = b.decode(errors="replace").splitlines()
    diff = list(difflib.unified_diff(al, bl, "ref", "this tree", n=0, lineterm=""))
    return "\n".join(line[:300] for line in diff[:8])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    a = ap.parse_args()
    emu = os.path.join(a.build, "fabric", "fabric_emu")
    if not os.path.exists(emu):
        sys.exit("fabric_same_output: no %s (build it: ninja -C %s fabric/fabric_emu)" %
                 (emu, a.build))
    work = os.path.join(ROOT, "out", "same-output")
    os.makedirs(work, exist_ok=True)
    ref_emu, sha = build_ref(a.ref, work)
    todo = cases(a.quick)
    if not a.quick:
        for s in scenarios(emu):
            todo["scenario %s --quick" % s] = ["--scenario", s, "--quick"]
    if a.only:
        todo = {k: v for k, v in todo.items() if a.only in k}
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        tty = sys.stderr.isatty()
        for i, (name, args) in enumerate(todo.items()):
            if tty:  # one updating line: the case running
                sys.stderr.write("\r\033[K[%d/%d] %s" % (i + 1, len(todo), name))
                sys.stderr.flush()
            ref = run(ref_emu, args, os.path.join(tmp, "ref"))
            mine = run(emu, args, os.path.join(tmp, "mine"))
            keys = sorted(set(ref) | set(mine))
            bad = [k for k in keys if ref.get(k) != mine.get(k)]
            if tty:
                sys.stderr.write("\r\033[K")
            if bad:
                differ += 1
                print("%s: DIFFERS in %s" % (name, ", ".join(bad)))
                print(first_difference(ref.get(bad[0], b""), mine.get(bad[0], b"")))
            else:
                print("%s: same (%s)" % (name, ", ".join(keys)))
            sys.stdout.flush()
    print("fabric_same_output: %d of %d cases differ from %s" % (differ, len(todo), sha[:10]))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
