#!/usr/bin/env bash
# Issue 6 campaign: measure an H200 profile, derive the H100 one, check both, and time the
# reference runtime's verify step against the profile's prediction (hook below).
#
#   bash microbench/campaign.sh                 # on one H200: writes profiles/h200-sxm, profiles/h100-sxm
#   bash microbench/campaign.sh --dry-run DIR   # on CPU with the tiny grid, into DIR (what the tests run)
#
# Budget on the H200: profile (gpu grid) < 5 min, runtime timing < 3 min.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

if [[ "${1:-}" == "--dry-run" ]]; then
  root=${2:?usage: campaign.sh --dry-run DIR}
  bench=(--device cpu --grid tiny --min-time-ms 2 --no-progress --quiet-tries 1 --visits 1)
  measured="$root/profile-measured"; derived="$root/profile-derived"; validation="$root/validation"
  sibling=cpu-local  # a CPU profile is derived for a CPU preset only (speedplan refuses CPU -> GPU)
else
  root=.
  bench=(--device cuda --grid gpu --cupy)
  measured=profiles/h200-sxm; derived=profiles/h100-sxm; validation=reports/validation-h200
  sibling=h100-sxm
  # A datasheet-roofline placeholder in the way is replaced, a measured profile is resumed.
  if [[ -f "$measured/meta.json" ]] && grep -q '"datasheet-roofline"' "$measured/meta.json"; then
    rm -rf "$measured"
  fi
fi
mkdir -p "$root"

echo "== 1/4 profile: speedplan bench ${bench[*]} --out $measured"
$PY -m speedplan.cli bench "${bench[@]}" --out "$measured"

echo "== 2/4 derived profile: $derived"
$PY -m speedplan.cli profile derive "$measured" --hardware "$sibling" --out "$derived"

echo "== 3/4 leave-one-out check"
$PY -m speedplan.cli profile check "$measured" --json > "$root/profile-check.json"
$PY -m speedplan.cli profile check "$measured"

echo "== 4/4 runtime verify-step timing vs prediction"
# The reference runtime's verify step on a random-weight Llama-3.1-8B-shaped model in bf16,
# graph-captured, B in {1,4,16,64,256}, D in {0,1,3,7,15}, context 1k and 8k, against the
# profile just measured (speedplan/validate/gpu_timing.py); the dry run uses its tiny CPU grid.
if [[ "${1:-}" == "--dry-run" ]]; then
  $PY -m speedplan.validate.gpu_timing --dry-run --out "$validation"
else
  $PY -m speedplan.validate.gpu_timing --device cuda --hardware "$measured" --out "$validation"
fi
echo "campaign done: $measured $derived $validation"
