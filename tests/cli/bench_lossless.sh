#!/usr/bin/env bash
# Greedy exactness on a real model at the precision decoding chooses on this CPU:
# `tlt bench rollout --model SmolLM2-135M-Instruct --greedy-check` decodes arithmetic-cot's held-out
# prompts plainly and with a chain, a tree and the n-gram arm alone, greedily, at batch 1, 4 and 16
# (24 new tokens each), and every response must be plain decoding's token for token, with
# bfloat16 products where the CPU has them natively. `tlt version` and the bench name the CPU.
# The mutation: bfloat16 products made row-dependent (TLT_TEST_BF16_ROW_DEPENDENT=1, as on a CPU
# whose small-block kernels sum in another order) with the padding forced to none
# (TLT_TEST_BF16_DECODE_ROWS=1) must fail the check; left to the probe, it pads and passes.
# Usage: bench_lossless.sh TLT_BINARY
set -u
tlt=$1
model=${TLT_SMOLLM2_HF:-$HOME/.cache/tlt/models/SmolLM2-135M-Instruct-hf}
[ -f "$model/config.json" ] || { echo "FAIL: $model is missing; scripts/setup.sh fetches it"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
check() { "$tlt" bench rollout --model "$model" --greedy-check --dtype bfloat16 "$@" 2>&1; }

version=$("$tlt" version) || fail "tlt version exited non-zero"
echo "$version"
cpu=$(echo "$version" | grep -E '^cpu .+ \(.+ family [0-9]+ model [0-9]+; avx512_bf16 (yes|no), amx_bf16 (yes|no), amx_tile (yes|no)\)$') ||
  fail "tlt version has no cpu line with vendor, family, model and the bfloat16/AMX flags"
native=no
echo "$cpu" | grep -q 'avx512_bf16 yes' && native=yes

out=$(check); rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "the greedy check exited $rc: speculative decoding is not lossless here"
echo "$out" | grep -q "^cpu: .*family" || fail "the bench does not name the CPU"
for b in 1 4 16; do
  for arm in 4_1_5 4_2_8 ngram; do
    echo "$out" | grep -Eq "^greedy b=$b arm=$arm +identical: [1-9][0-9]* tokens, [1-9][0-9]* speculative steps" ||
      fail "no identical, speculative run of $arm at batch $b"
  done
done
# Where bfloat16 is native the probe must have chosen it, unless no padding was row-invariant
# (then decoding is float32, lossless too, and the probe says so).
if [ $native = yes ] && ! echo "$out" | grep -q '^bfloat16 probe: no row-invariant padding'; then
  [ "$(echo "$out" | grep -c 'products in bfloat16')" = 9 ] || fail "not every run decoded with bfloat16 products"
fi
accepted=$(echo "$out" | awk '/^greedy / { for (i = 1; i + 2 <= NF; ++i)
  if ($(i + 1) == "drafts" && $(i + 2) == "accepted,") s += $i } END { print s + 0 }')
[ "${accepted:-0}" -gt 0 ] || fail "no draft was accepted: the check compared first tokens only"
echo "ok: greedy outputs equal plain decoding's at batch 1, 4 and 16 ($accepted drafts accepted)"

# The mutation: unpadded products that are not row-invariant. Batches 1 and 4: their one-token
# steps have fewer rows than a tile, their verify forwards more.
out=$(TLT_TEST_BF16_ROW_DEPENDENT=1 TLT_TEST_BF16_DECODE_ROWS=1 check --batches 1,4); rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "the greedy check passed products that are not row-invariant"
echo "$out" | grep -q "DIFFERENT at request" || fail "the failing check does not say where outputs part"
echo "ok: forced unpadded, row-dependent products fail the greedy check"
out=$(TLT_TEST_BF16_ROW_DEPENDENT=1 check --batches 1,4); rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "with the probe choosing, row-dependent products still differ"
echo "$out" | grep -Eq "^bfloat16 probe: (products padded to [0-9]+ rows|no row-invariant padding)" ||
  fail "the probe did not pad row-dependent products"
echo "ok: the probe pads row-dependent products (or keeps float32) and decoding stays lossless"
