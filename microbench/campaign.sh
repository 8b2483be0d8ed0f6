#!/usr/bin/env bash
# Issue 6 campaign: time the reference runtime's verify step on one GPU, measure that GPU's
# profile with speedplan's own microbench, derive the H100 one, check, and price the verify
# step from the profile just measured and from the shipped (AIConfigurator) profile.
#
#   bash microbench/campaign.sh                 # on one H200: writes reports/validation-h200/
#   bash microbench/campaign.sh --dry-run DIR   # on CPU with the tiny grid, into DIR (what the tests run)
#   GPU_ONLY=1 bash microbench/campaign.sh      # stages 1-2 only (the GPU's), then on any machine:
#   bash microbench/campaign.sh --after-gpu [DIR]   # stages 3-5 (derive, check, reprice)
#
# Layout of DIR: verify_timing.csv + summary.json (the verify step, measured and predicted),
# profile-measured/ (this GPU, torch kernels), profile-derived/ (the sibling GPU),
# profile-check.json (leave-one-out), campaign.log. Each GPU stage has a time limit
# (seconds, from the environment: VERIFY_S, BENCH_MODEL_S, BENCH_GRID_S, CUPY_S); a stage cut short
# keeps what it measured (the bench resumes on a rerun) and the campaign goes on.
# Budget on an H200: verify timing ~1-2 min, profile ~4-5 min.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
export PYTHONUNBUFFERED=1

after_gpu=
if [[ "${1:-}" == "--after-gpu" ]]; then  # stages 3-5 only, on what a GPU run left in DIR
  after_gpu=1; shift
fi
if [[ "${1:-}" == "--dry-run" ]]; then
  root=${2:?usage: campaign.sh --dry-run DIR}
  sibling=cpu-local  # a CPU profile is derived for a CPU preset only (speedplan refuses CPU -> GPU)
  shipped=cpu-local
else
  root=${1:-reports/validation-h200}
  sibling=h100-sxm
  shipped=h200-sxm  # the planner's H200 profile (AIConfigurator's tables, vLLM kernels)
fi
measured="$root/profile-measured"; derived="$root/profile-derived"
mkdir -p "$root"
status=0
stage() {  # stage LIMIT_S NAME CMD...: run with a time limit; a failure is reported, not fatal
  local limit=$1 name=$2; shift 2
  echo "== $name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=20 "$limit" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  [[ $rc -eq 0 ]] || status=1
  return 0
}

if [[ -n "$after_gpu" ]]; then
  :
elif [[ "${1:-}" == "--dry-run" ]]; then
  bench=(--device cpu --grid tiny --min-time-ms 2 --no-progress --quiet-tries 1 --visits 1)
  stage 600 "1/5 verify timing" $PY -m speedplan.validate.gpu_timing --dry-run --out "$root"
  stage 600 "2/5 profile" $PY -m speedplan.cli bench "${bench[@]}" --out "$measured"
else
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
  # The verify step first: it needs no profile (it is priced from the shipped one now and
  # repriced from the measured one at the end).
  if [[ "${VERIFY_S:-240}" != 0 ]]; then  # VERIFY_S=0: keep the verify timing there (a rerun to finish the bench)
    stage "${VERIFY_S:-240}" "1/5 verify timing" \
      $PY -m speedplan.validate.gpu_timing --device cuda --hardware "$shipped" --out "$root"
  fi
  # The shapes the verify step runs first (Llama-3.1-8B, bf16), then the rest of the gpu grid
  # (Llama-3.1-70B/TP8, generic; fp16 and fp8 GEMMs), then cupy's cross-check of fp16 GEMMs.
  gpu=(--device cuda --min-time-ms 10 --no-progress --out "$measured")
  stage "${BENCH_MODEL_S:-150}" "2/5 profile: Llama-3.1-8B shapes" \
    $PY -m speedplan.cli bench "${gpu[@]}" --grid model:llama-3.1-8b --dtype bf16
  stage "${BENCH_GRID_S:-200}" "2/5 profile: the gpu grid" $PY -m speedplan.cli bench "${gpu[@]}" --grid gpu
  stage "${CUPY_S:-60}" "2/5 profile: cupy cross-check" $PY -m speedplan.cli bench "${gpu[@]}" --grid gpu --cupy
  if [[ -n "${GPU_ONLY:-}" ]]; then  # the rest needs no GPU: run it where the results land
    echo "GPU stages done (GPU_ONLY): run 'bash microbench/campaign.sh --after-gpu $root' on any machine"
    exit $status
  fi
fi

stage 120 "3/5 derived profile: $derived" \
  $PY -m speedplan.cli profile derive "$measured" --hardware "$sibling" --out "$derived"
echo "== 4/5 leave-one-out check"
$PY -m speedplan.cli profile check "$measured" --json-out "$root/profile-check.json" || status=1
stage 120 "5/5 verify step priced from the measured and the shipped profile" \
  $PY -m speedplan.validate.gpu_timing --reprice "$root" --hardware "$measured" --hardware "$shipped"
if [[ $status -eq 0 ]]; then
  echo "campaign done: $root"
else
  echo "campaign finished with a stage cut short or failed (see above): $root"
fi
exit $status
