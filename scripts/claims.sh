#!/usr/bin/env bash
# Every claim of the background articles as a fabric_emu scenario (configs/scenarios/*.yaml):
# runs each one, then writes OUT/claims/CLAIMS.md (claim, article's figure, measured figure
# with its spread over seeds, verdict, the command that re-runs it), OUT/claims/claims.json and
# one plot per scenario (OUT/claims/NAME.png). The runs are deterministic: the same seeds give
# the same figures, so a committed CLAIMS.md can be checked against a fresh run.
#   scripts/claims.sh [--out DIR] [--quick] [NAME ...]     (--quick: each scenario's quick form)
# The scenarios run one after another; fabric_emu runs each one's runs N at a time, one per
# online core by default (FABRIC_JOBS=N: --jobs N). The results are the same whatever N.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out
QUICK=()
NAMES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "claims.sh: unknown argument '$1' (--out DIR, --quick, scenario names)" >&2; exit 2 ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
DIR="$OUT/claims"
mkdir -p "$DIR"

if [ "${CLAIMS_NO_BUILD:-0}" != 1 ]; then
  scripts/setup.sh >/dev/null
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . scripts/build_dir.sh && ensure_build_dir build
  ninja -C build fabric/fabric_emu >/dev/null
fi
EMU=${FABRIC_EMU:-build/fabric/fabric_emu}
JOBS=()
if [ -n "${FABRIC_JOBS:-}" ]; then JOBS=(--jobs "$FABRIC_JOBS"); fi
if [ ${#NAMES[@]} -eq 0 ]; then
  # Claims only: presets ([preset] in the list) are studies a user runs, not claims.
  mapfile -t NAMES < <("$EMU" --scenario list | awk '$2 != "[preset]" {print $1}')
fi

i=0
for name in "${NAMES[@]}"; do
  i=$((i + 1))
  printf '\r[%d/%d] %-20s' "$i" "${#NAMES[@]}" "$name" >&2
  "$EMU" --quiet --reproducible ${JOBS[@]+"${JOBS[@]}"} --scenario "$name" "${QUICK[@]}" --json "$DIR/$name.json" >"$DIR/$name.txt"
done
printf '\r%-40s\r' '' >&2
PY=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)}
"$PY" scripts/claims_report.py --dir "$DIR" ${QUICK[@]+--quick} "${NAMES[@]}"
echo "claims: $DIR/CLAIMS.md, $DIR/claims.json, plots $DIR/*.png"
