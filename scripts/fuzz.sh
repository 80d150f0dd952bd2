#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ for SECONDS each (default 60), on a copy of its seed corpus
# (fuzz/corpus/<target>/ is never grown). Configures and builds build-fuzz/ first when needed
# (clang, -Dfuzz=enabled: ASan + UBSan + coverage; only the fuzz targets and what they link).
# Prints one line per target:
#   fuzz <target>: <runs> runs, <exec/s> exec/s, cov <edges>, ft <features>, corpus <n>: ok
#   fuzz <target>: ... FAILED (crash: out/fuzz/<target>/crash-...)
# and exits non-zero when any target found a crash, a leak, a timeout or ran out of memory; the
# reproducer stays under out/fuzz/<target>/ (re-run it: build-fuzz/fuzz/fuzz_<target> FILE).
# FUZZ_TARGETS="a b" runs only those; FUZZ_JOBS targets run at once (default: nproc).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

SECONDS_EACH=${1:-60}
case "$SECONDS_EACH" in
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [SECONDS]" >&2
    exit 2
    ;;
esac
JOBS=${FUZZ_JOBS:-$(nproc)}
BUILD=build-fuzz
OUT=out/fuzz

if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  targets=()
  for f in fuzz/fuzz_*.cc; do
    t=${f#fuzz/fuzz_}
    targets+=("${t%.cc}")
  done
fi

if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang and clang++ are needed (Debian: clang libclang-rt-14-dev)" >&2
  exit 2
fi
mkdir -p "$OUT"
if [ ! -f "$BUILD/build.ninja" ]; then
  if ! CC=clang CXX=clang++ meson setup "$BUILD" -Dfuzz=enabled -Dtests=false \
    -Dbenchmarks=disabled -Dibverbs=disabled >"$OUT/setup.log" 2>&1; then
    cat "$OUT/setup.log" >&2
    echo "fuzz.sh: meson setup $BUILD failed" >&2
    exit 2
  fi
fi
ninja_targets=()
for t in "${targets[@]}"; do ninja_targets+=("fuzz/fuzz_$t"); done
if ! ninja -C "$BUILD" "${ninja_targets[@]}" >"$OUT/build.log" 2>&1; then
  grep -E 'error|FAILED' "$OUT/build.log" | head -40 >&2
  echo "fuzz.sh: building the fuzz targets failed (log: $OUT/build.log)" >&2
  exit 2
fi

# EAL's runtime directory of a process that died before its atexit handler ran.
runtime_root() {
  if [ "$(id -u)" -eq 0 ]; then echo /var/run/dpdk; else echo "${XDG_RUNTIME_DIR:-/tmp}/dpdk"; fi
}

runtime_root=$(runtime_root)
run_one() {  # target: writes $OUT/<target>/result
  local t=$1 dir="$OUT/$1" rc pid
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  if [ -d "fuzz/corpus/$t" ]; then cp -r "fuzz/corpus/$t/." "$dir/corpus/"; fi
  local dict=()
  if [ -f "fuzz/$t.dict" ]; then dict=("-dict=fuzz/$t.dict"); fi
  # -timeout: one input taking 10 s is a finding; the outer timeout only guards a hang at start.
  local prefix="spraynet-fuzz-$$-$t"
  SPRAYNET_FUZZ_FILE_PREFIX=$prefix timeout --kill-after=10 $((SECONDS_EACH + 120)) \
    "$BUILD/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" \
    >"$dir/log" 2>&1 &
  pid=$!
  wait "$pid"
  rc=$?
  rm -rf "${runtime_root:?}/$prefix"
  local runs eps cov ft units artifact
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$(grep -oE '^#[0-9]+.*cov: [0-9]+' "$dir/log" | tail -1 | sed 's/.*cov: //')
  ft=$(grep -oE '^#[0-9]+.*ft: [0-9]+' "$dir/log" | tail -1 | sed 's/.*ft: //')
  units=$(find "$dir/corpus" -type f | wc -l)
  artifact=$(find "$dir" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | head -1)
  local line="fuzz $t: ${runs:-0} runs, ${eps:-0} exec/s, cov ${cov:-0}, ft ${ft:-0}, corpus $units"
  if [ "$rc" -eq 0 ] && [ -z "$artifact" ]; then
    echo "$line: ok" >"$dir/result"
  elif [ -n "$artifact" ]; then
    local kind
    kind=$(basename "$artifact")
    echo "$line: FAILED (${kind%%-*}: $artifact; log: $dir/log)" >"$dir/result"
  else
    echo "$line: FAILED (exit $rc; log: $dir/log)" >"$dir/result"
  fi
}

for t in "${targets[@]}"; do
  if [ ! -x "$BUILD/fuzz/fuzz_$t" ]; then
    echo "fuzz.sh: no target $t" >&2
    exit 2
  fi
  run_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done
wait

failed=0
for t in "${targets[@]}"; do
  if [ -f "$OUT/$t/result" ]; then
    cat "$OUT/$t/result"
    grep -q ': ok$' "$OUT/$t/result" || failed=$((failed + 1))
  else
    echo "fuzz $t: FAILED (no result)"
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ]
