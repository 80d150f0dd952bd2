#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the whole suite on the normal build,
# the unit suite again under AddressSanitizer + UndefinedBehaviorSanitizer, the threads suite
# under ThreadSanitizer, then each libFuzzer target for 30 s (scripts/fuzz.sh; one test per
# target).
# Last line: "tests: N passed, M failed" (one per meson test); non-zero exit on any failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
JOBS=${JOBS:-$(nproc)}
# A fresh clone at another path still hits the compiler cache of an earlier one (meson uses
# ccache when it is installed): paths are hashed relative to the tree, and the build
# directory's own path is left out of the hash (the cached objects' debug info may then name
# the other clone's directory; nothing here reads it).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
passed=0
failed=0

finish() {
  echo "tests: ${passed} passed, ${failed} failed"
  [ "$failed" -eq 0 ]
  exit $?
}

step_failed() {  # a step that is not a test (set-up, configure, build) failing counts as one
  echo "test.sh: $1 failed" >&2
  failed=$((failed + 1))
  finish
}

# Counts the results meson wrote for the run just made.
count_results() {
  local log="$1/meson-logs/testlog.json"
  [ -f "$log" ] || return
  local p f
  p=$(grep -c '"result": "OK"' "$log")
  f=$(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log")
  passed=$((passed + p))
  failed=$((failed + f))
}

scripts/setup.sh || step_failed "scripts/setup.sh"

# shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
. scripts/build_dir.sh
configure() {  # dir, options... (a build dir from a copied or moved tree is configured again)
  ensure_build_dir "$@"
}

configure build -Dbenchmarks=enabled || step_failed "meson setup build"
ninja -C build -j "$JOBS" || step_failed "build"
meson test -C build --no-rebuild --print-errorlogs
count_results build

# Sanitizers: the unit suite only (the integration tests run the same code out of process).
# b_lundef=false: the ASan runtime is linked into the executables, not the static libraries.
# -O1 and line tables only (-g1): what ASan's authors recommend, and about 40% less compile
# time than -O2 -g, which keeps the whole suite well under 30 minutes on 2 cores.
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=disabled \
  -Doptimization=1 -Ddebug=false -Dcpp_args=-g1 \
  || step_failed "meson setup build-asan"
# Only the unit test executables: the programs are exercised by the normal build's suite.
asan_targets=$(meson introspect build-asan --tests | /usr/bin/python3 -c '
import json, os, sys
root = os.path.abspath("build-asan")
print(" ".join(sorted({os.path.relpath(t["cmd"][0], root) for t in json.load(sys.stdin)
                       if any(s.endswith(":unit") for s in t["suite"])})))')
[ -n "$asan_targets" ] || step_failed "listing the unit tests"
# shellcheck disable=SC2086  # one word per target
ninja -C build-asan -j "$JOBS" $asan_targets || step_failed "sanitizer build"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  meson test -C build-asan --no-rebuild --print-errorlogs --suite unit
count_results build-asan

# ThreadSanitizer: the tests of code that runs on several threads at once (suite 'threads':
# fabric_emu --threads at 1, 2, 3 and 8 threads, its round pool and due queues, the payload store
# its logical processes share), in a -Db_sanitize=thread build of fabric_emu and those tests.
# A race report exits 66 (TSAN_OPTIONS below) and fails its test. -Wno-tsan: the switch's seqlock
# counter snapshot uses fences TSan does not model; fabric_emu reads no snapshot across threads.
configure build-tsan -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=disabled \
  -Doptimization=1 -Ddebug=false -Dcpp_args="-g1 -Wno-tsan" \
  || step_failed "meson setup build-tsan"
tsan_targets=$(meson introspect build-tsan --tests | /usr/bin/python3 -c '
import json, os, sys
root = os.path.abspath("build-tsan")
print(" ".join(sorted({os.path.relpath(t["cmd"][0], root) for t in json.load(sys.stdin)
                       if any(s.endswith(":threads") for s in t["suite"])
                       and t["cmd"][0].startswith(root + "/")})))')
[ -n "$tsan_targets" ] || step_failed "listing the threads tests"
# shellcheck disable=SC2086  # one word per target
ninja -C build-tsan -j "$JOBS" $tsan_targets fabric/fabric_emu || step_failed "ThreadSanitizer build"
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1} \
  meson test -C build-tsan --no-rebuild --print-errorlogs --suite threads
count_results build-tsan

# libFuzzer: every target in fuzz/ for 30 s on a copy of its seed corpus (clang, build-fuzz/),
# one test per target; a target that finds a crash, leak or timeout fails and leaves its
# reproducer under out/fuzz/<target>/.
mkdir -p out
scripts/fuzz.sh 30 | tee out/fuzz.log
fuzz_status=${PIPESTATUS[0]}
fuzz_passed=$(grep -cE '^fuzz [a-z_]+: .*: ok$' out/fuzz.log)
fuzz_failed=$(grep -cE '^fuzz [a-z_]+: .*FAILED' out/fuzz.log)
passed=$((passed + fuzz_passed))
failed=$((failed + fuzz_failed))
if [ "$fuzz_status" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then
  echo "test.sh: scripts/fuzz.sh failed (set-up or build)" >&2
  failed=$((failed + 1))
fi

finish
