#!/usr/bin/env bash
# Every claim of the background articles as a fabric_emu scenario (configs/scenarios/*.yaml):
# runs each one, then writes OUT/claims/CLAIMS.md (claim, article's figure, measured figure
# with its spread over seeds, verdict, the command that re-runs it), OUT/claims/claims.json and
# one plot per scenario (OUT/claims/NAME.png). The runs are deterministic: the same seeds give
# the same figures, so a committed CLAIMS.md can be checked against a fresh run.
#   scripts/claims.sh [--out DIR] [--quick] [--research] [NAME ...]
#     --quick: each scenario's quick form
#     --research: the papers' headline claims (configs/research/*.yaml, on their presets) instead:
#       OUT/research/RESEARCH.md, research.json and plots, each row with its wall time; their
#       full forms take minutes to an hour each (docs/RESEARCH.md has the committed run)
# The scenarios run one after another; fabric_emu runs each one's runs N at a time, one per
# online core by default (FABRIC_JOBS=N: --jobs N). The results are the same whatever N.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out
QUICK=()
NAMES=()
RESEARCH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    --research) RESEARCH=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "claims.sh: unknown argument '$1' (--out DIR, --quick, --research, scenario names)" >&2; exit 2 ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
if [ "$RESEARCH" = 1 ]; then DIR="$OUT/research"; else DIR="$OUT/claims"; fi
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
  # Claims only: presets ([preset] in the list) are studies a user runs, not claims; research
  # claims ([research]) run with --research.
  if [ "$RESEARCH" = 1 ]; then
    mapfile -t NAMES < <("$EMU" --scenario list | awk '$2 == "[research]" {print $1}')
  else
    mapfile -t NAMES < <("$EMU" --scenario list | awk '$2 != "[preset]" && $2 != "[research]" {print $1}')
  fi
fi

i=0
for name in "${NAMES[@]}"; do
  i=$((i + 1))
  printf '\r[%d/%d] %-20s' "$i" "${#NAMES[@]}" "$name" >&2
  start=$(date +%s)
  "$EMU" --quiet --reproducible ${JOBS[@]+"${JOBS[@]}"} --scenario "$name" "${QUICK[@]}" --json "$DIR/$name.json" >"$DIR/$name.txt"
  echo $(($(date +%s) - start)) >"$DIR/$name.seconds"
done
printf '\r%-40s\r' '' >&2
PY=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)}
if [ "$RESEARCH" = 1 ]; then
  "$PY" scripts/claims_report.py --dir "$DIR" --research ${QUICK[@]+--quick} "${NAMES[@]}"
  echo "research claims: $DIR/RESEARCH.md, $DIR/research.json, plots $DIR/*.png"
else
  "$PY" scripts/claims_report.py --dir "$DIR" ${QUICK[@]+--quick} "${NAMES[@]}"
  echo "claims: $DIR/CLAIMS.md, $DIR/claims.json, plots $DIR/*.png"
fi
