#!/usr/bin/env bash
# bench/tst: Token Superposition Training against the plain next-token baseline, side by side.
#
# Every run is a real `tlt run` of a TSTPretrainJob on the State of the Union corpus with the
# same model, positions per step, batch, optimizer and peak learning rate; only the data
# layout of the first phase differs (SEEDS.md section 2). Held-out loss is always next-token
# loss. Per seed it runs:
#   TST        s = --bag, r = --ratio, N = --steps steps
#   baselines  round(m * N) steps for each m in --multiples, each with its own full
#              warmup-stable-decay schedule (m = 1 is equal FLOPs), plus the equal-data
#              baseline (m = r*s + 1 - r: it reads as many tokens as TST)
# and, at the first seed, the sweep s x r (--sweep-bags x --sweep-ratios). With several
# --lrs the peak LR is first tuned on the 1x baseline (first seed) and then used by every run.
# Prints: held-out loss at equal FLOPs per seed, the iso-loss speedup (the compute multiple at
# which the baselines' final losses reach TST's, interpolated in log compute), the equal-data
# comparison and the sweep. Writes report.md, runs.tsv and loss-vs-flops.svg (gnuplot).
#
# Runs are cached under $TLT_BENCH_CACHE (default ~/.cache/tlt/bench/tst), keyed by the job
# manifest and the runtime's sources, so an interrupted benchmark resumes where it stopped.
# Each run is one process on one thread; -j runs several at once (at most one per core).
#
# Usage: bench/tst.sh [--quick] [--preset small] [--steps 3000] [--seeds 3] [--bag 4]
#                     [--ratio 0.3] [--lrs 1e-3] [--multiples 1,1.4,1.8,2.5]
#                     [--sweep-bags 2,4,6,8] [--sweep-ratios 0.2,0.3,0.5] [--no-sweep]
#                     [--batch 16] [--seq 128] [-j 2] [--out DIR] [--report-only]
# Defaults are the issue's setting (the ~28M-parameter small preset); --quick is the micro
# preset (about 1.4M parameters) for 300 steps, which fits in about an hour on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

preset=small steps=3000 seeds=3 bag=4 ratio=0.3 lrs=1e-3 multiples=1,1.4,1.8,2.5
sweep_bags=2,4,6,8 sweep_ratios=0.2,0.3,0.5 sweep=1 batch=16 seq=128 jobs=$(nproc) out=""
report_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) preset=micro steps=300 ;;
    --preset) preset=$2; shift ;;
    --steps) steps=$2; shift ;;
    --seeds) seeds=$2; shift ;;
    --bag) bag=$2; shift ;;
    --ratio) ratio=$2; shift ;;
    --lrs) lrs=$2; shift ;;
    --multiples) multiples=$2; shift ;;
    --sweep-bags) sweep_bags=$2; shift ;;
    --sweep-ratios) sweep_ratios=$2; shift ;;
    --no-sweep) sweep=0 ;;
    --report-only) report_only=1 ;;
    --batch) batch=$2; shift ;;
    --seq) seq=$2; shift ;;
    -j) jobs=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "bench/tst.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift
done
tlt=${TLT_BIN:-$repo/build/bin}/tlt
[ -x "$tlt" ] || { echo "bench/tst.sh: $tlt missing: run scripts/build.sh first" >&2; exit 1; }
cache=${TLT_BENCH_CACHE:-${TLT_CACHE:-$HOME/.cache/tlt}/bench/tst}
out=${out:-$cache/report-$preset-$steps}
mkdir -p "$cache/runs" "$out"
if [ "$report_only" = 1 ]; then  # the tables again, from the runs of the last invocation
  exec python3 "$repo/bench/tst_report.py" "$out" "$bag" "$ratio" \
    "$(python3 -c "print(round($ratio * $bag + 1 - $ratio, 4))")" "$multiples" "$preset" "$steps"
fi
# Numbers change when the code that makes them changes: the runs' cache key includes it.
src="runtime/tst runtime/model runtime/data runtime/cli/tst_command.cc api"
code=$(cd "$repo" && { git ls-files -s $src 2>/dev/null || true; git diff HEAD -- $src 2>/dev/null || true; } | sha1sum | cut -c1-12)

# manifest NAME SEED STEPS LR SUPERPOSITION BAG RATIO -> prints the run's directory
manifest() {
  local name=$1 seed=$2 n=$3 lr=$4 sp=$5 s=$6 r=$7
  local warmup=$(( n / 20 > 0 ? n / 20 : 1 )) every=$(( n / 10 > 0 ? n / 10 : 1 ))
  local body
  body=$(cat <<EOF
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata:
  name: bench-tst
spec:
  model: {preset: $preset}
  data:
    corpus: sotu
    tokenizer: {type: bpe, vocabSize: 4096}
    heldOutFraction: 0.05
  training:
    steps: $n
    seqLen: $seq
    batchSize: $batch
    learningRate: $lr
    weightDecay: 0.1
    seed: $seed
    schedule: {warmupSteps: $warmup, decayFraction: 0.2}
    evalEverySteps: $every
    evalBatches: 8
  superposition: {enabled: $sp, bagSize: $s, ratio: $r, weighting: uniform}
  workers: {replicas: 1}
EOF
)
  local key
  key=$(printf '%s\n%s\n' "$code" "$body" | sha1sum | cut -c1-16)
  local dir=$cache/runs/$key
  mkdir -p "$dir"
  printf '%s\n  checkpoint: {path: %s, everySteps: 0}\n' "$body" "$dir/ckpt" > "$dir/job.yaml"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$seed" "$n" "$lr" "$sp" "$s" "$r" "$dir" \
    >> "$out/plan.tsv"
  echo "$dir"
}

# Runs every planned run that has no result yet, -j at a time, longest first.
run_pending() {
  local pending
  pending=$(awk -F'\t' '{print $3 "\t" $8 "\t" $5}' "$out/plan.tsv" | sort -u -k2,2 | sort -rn |
    while IFS=$'\t' read -r n dir sp; do
      [ -f "$dir/result.json" ] || printf '%s\t%s\n' "$dir" "$sp"
    done)
  [ -n "$pending" ] || return 0
  echo "bench/tst: $(echo "$pending" | wc -l) runs to do, $jobs at a time (cache: $cache/runs)" >&2
  export tlt
  echo "$pending" | xargs -P "$jobs" -L 1 bash -c '
    dir=$0 sp=$1
    flag=""; [ "$sp" = false ] && flag=--baseline
    if BLIS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$tlt" --threads 1 run "$dir/job.yaml" $flag \
         > "$dir/log" 2>&1; then
      cp "$dir/ckpt/report/report.json" "$dir/result.json"
      echo "bench/tst: done $dir ($(tail -2 "$dir/log" | head -1))" >&2
    else
      echo "bench/tst: FAILED $dir: see $dir/log" >&2; exit 255
    fi'
}

# The tokenized corpus every run shares, made once before the parallel runs start (the name
# is the cache key `tlt run` uses for corpus sotu, BPE 4096, held-out fraction 0.05).
corpus=${TLT_CACHE:-$HOME/.cache/tlt}/corpora/sotu-bpe4096-h0.05.tokens
if [ ! -f "$corpus" ]; then
  mkdir -p "$(dirname "$corpus")" "${TLT_CACHE:-$HOME/.cache/tlt}/tokenizers"
  "$(dirname "$tlt")/tlt-data" tokenize --corpus sotu --vocab 4096 --held-out 0.05 \
    --tokenizer "${TLT_CACHE:-$HOME/.cache/tlt}/tokenizers/sotu-bpe4096-h0.05.model" --out "$corpus"
fi
: > "$out/plan.tsv"
IFS=, read -r -a lr_list <<< "$lrs"
lr=${lr_list[0]}
if [ ${#lr_list[@]} -gt 1 ]; then
  for x in "${lr_list[@]}"; do manifest "tune-lr" 1 "$steps" "$x" false 1 "$ratio" > /dev/null; done
  run_pending
  lr=$(python3 - "$out/plan.tsv" <<'PY'
import json, sys
best = None
for line in open(sys.argv[1]):
    name, seed, n, lr, sp, s, r, d = line.rstrip("\n").split("\t")
    loss = json.load(open(d + "/result.json"))["baseline"][-1]["heldOutLoss"]
    print("bench/tst: tuning: baseline lr %s -> held-out %.4f" % (lr, loss), file=sys.stderr)
    if best is None or loss < best[0]: best = (loss, lr)
print(best[1])
PY
)
  echo "bench/tst: peak learning rate $lr (best 1x baseline)" >&2
fi
equal_data=$(python3 -c "print(round($ratio * $bag + 1 - $ratio, 4))")
for seed in $(seq 1 "$seeds"); do
  manifest tst "$seed" "$steps" "$lr" true "$bag" "$ratio" > /dev/null
  for m in ${multiples//,/ } $equal_data; do
    n=$(python3 -c "print(round($m * $steps))")
    manifest "baseline-x$m" "$seed" "$n" "$lr" false 1 "$ratio" > /dev/null
  done
done
if [ "$sweep" = 1 ]; then
  for s in ${sweep_bags//,/ }; do
    for r in ${sweep_ratios//,/ }; do manifest "sweep-s$s-r$r" 1 "$steps" "$lr" true "$s" "$r" > /dev/null; done
  done
fi
run_pending
python3 "$repo/bench/tst_report.py" "$out" "$bag" "$ratio" "$equal_data" "$multiples" "$preset" "$steps"
