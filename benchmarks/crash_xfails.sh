#!/usr/bin/env bash
# The six built-in configs' pairs whose xfail entry is a crash, run again: each must still be
# xfailed (a crash's signature now carries its crash state). Reports under ${1:-reports/crash-xfails}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/crash-xfails}
for c in linalg tosa stablehlo ltc torchscript eager; do
  names=$(grep -h "crash |" "e2e/configs/xfail/$c.txt" | awk '{print $1}' | sort -u)
  [ -z "$names" ] && continue
  python -m pytest e2e --config "$c" -k "$(echo "$names" | paste -sd' ' | sed 's/ / or /g')" -n 2 -q \
    --no-result-cache --reports-dir "$out/$c" | tail -1 | sed "s/^/$c: /"
done
