#!/usr/bin/env bash
# One device session's checks, as run on a one-GPU machine (README: "Checked on a GPU").
# Needs the project's pure-Python dependencies importable (the device image lacks
# duckdb, msgspec, isal, platformdirs: carried as wheels in .whl/). Writes to $OUT.
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
OUT=${OUT:-/tmp/out}; W=/tmp/runs; mkdir -p "$W" "$OUT"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch, duckdb; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.get_device_name(), 'nccl', torch.cuda.nccl.version(), 'duckdb', duckdb.__version__)"
} 2>&1 | tee "$OUT/env.txt"
t0=$SECONDS
step() {  # name, timeout, command...
  local name=$1 lim=$2; shift 2
  echo "=== $name ($((SECONDS - t0)) s)"
  timeout "$lim" "$@" >"$W/$name.log" 2>&1; echo "exit $? after $((SECONDS - t0)) s" >>"$W/$name.log"
  grep -E "^(PASS|FAIL|SKIP)|checks passed|exit |Error|error" "$W/$name.log" | tail -20
}
GC="python3 benchmarks/gpu_check.py --device cuda"
LARGE="--layers 8 --hidden 2048 --heads 16 --kv-heads 8 --ffn 5632 --vocab 32000 --seq 1024 --batch 8"
RUN="python3 -m tracekit run"
ONE="--world-size 1 --device cuda --steps 2 --no-calibrate"
parts=${1:-checks}  # checks: the first session's; memory: the second's; tf32: the third's; regions: the fourth's
if [ "$parts" = checks ]; then
  step check_small 150 $GC --world 1 --jobs ddp,fsdp --out "$W/small" --json "$W/check_small.json"
  step check_large 200 $GC --world 1 --jobs ddp,fsdp --size large --out "$W/large" --json "$W/check_large.json"
  step ddp2_gloo 120 $RUN ddp --world-size 2 --device cuda --backend gloo --dtype bfloat16 --steps 3 --no-calibrate $LARGE --out "$W/share/ddp2_large"
  step pp2_gloo 120 $RUN pp --world-size 2 --device cuda --backend gloo --dtype bfloat16 --steps 3 --no-calibrate --out "$W/share/pp2_small"
elif [ "$parts" = regions ]; then  # layers as regions on the GPU; one layer slowed on one rank
  SHARE="--world-size 2 --device cuda --backend gloo --dtype bfloat16 --steps 4 --no-calibrate"
  step ddp2_normal 120 $RUN ddp $SHARE --out "$W/regions/ddp2_normal"
  step ddp2_slow 120 $RUN ddp $SHARE --slow-layer 2 --slow-rank 1 --out "$W/regions/ddp2_slow_layer2_rank1"
  step ddp_large_modules 120 $RUN ddp $ONE --dtype bfloat16 --profile-modules $LARGE --out "$W/regions/ddp_large_modules"
elif [ "$parts" = tf32 ]; then  # TK-C206's remedy, measured: the fp32 job with TF32 on
  step ddp_fp32_tf32 120 $RUN ddp $ONE --dtype float32 --tf32 $LARGE --out "$W/mem/ddp_fp32_tf32"
else  # the large model again (job.json with master_weights and causal), and the memory
  # equation out of sample: fp32, and a longer sequence
  step check_large 200 $GC --world 1 --jobs ddp,fsdp --size large --out "$W/large" --json "$W/check_large.json"
  step ddp_fp32 120 $RUN ddp $ONE --dtype float32 $LARGE --out "$W/mem/ddp_fp32"
  step ddp_seq2048 120 $RUN ddp $ONE --dtype bfloat16 $LARGE --seq 2048 --batch 4 --out "$W/mem/ddp_seq2048"
  step fsdp_seq2048 120 $RUN fsdp $ONE --dtype bfloat16 $LARGE --seq 2048 --batch 4 --out "$W/mem/fsdp_seq2048"
fi
for r in "$W"/small/* "$W"/large/* "$W"/share/* "$W"/mem/* "$W"/regions/*; do
  [ -f "$r/job.json" ] || continue
  n=$(basename "$(dirname "$r")")_$(basename "$r")
  timeout 60 python3 -m tracekit analyze "$r" >"$W/report_$n.txt" 2>&1
  timeout 60 python3 -m tracekit analyze "$r" --format json >"$W/report_$n.json" 2>"$W/report_$n.err"
done
echo "total $((SECONDS - t0)) s"
cd /tmp && tar czf "$OUT/runs.tgz" runs && ls -la "$OUT"
