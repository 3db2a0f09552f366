#!/usr/bin/env bash
# Builds the manifest-parser fuzz target with clang/libFuzzer (ASan + UBSan) into build-fuzz/ and
# runs it for a bounded time from the examples and the malformed-manifest corpus. Fails on a
# crash, a leak, a hang (one input > 10 s) or a broken round trip. Then the same for the GGUF and
# safetensors parsers (model_files_fuzz), from the tiny checkpoints in tests/models/fixtures and
# the model-file regression corpus. Each regression corpus (tests/fuzz/regressions for manifests,
# tests/fuzz/model-regressions for model files: first byte odd for safetensors, even for GGUF,
# then the file) keeps inputs that broke a parser or probe a refusal; an input that breaks one
# goes there (model_files_test replays the model-file corpus without the fuzzer). Then the
# operator's reading of a job author's podTemplate (pod_template_fuzz: type check, pod policy,
# desired pod), from the templates in tests/fuzz/pod-templates, where an input that breaks it goes.
# Then the driver <-> worker messages (worker_messages_fuzz: every decoder of runtime/rl/messages.h
# and the promises of what they accept), from tests/fuzz/worker-messages, where an input that
# breaks them goes.
# Usage: scripts/fuzz.sh [SECONDS [MODEL_SECONDS [POD_SECONDS [MESSAGE_SECONDS]]]]
#        (defaults 60, 30, 30 and 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/tlt/ccache}
cmake -S . -B build-fuzz -G Ninja -DTLT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/tmp/tlt-cmake-fuzz.log 2>&1 || { cat /tmp/tlt-cmake-fuzz.log; exit 1; }
ninja -C build-fuzz manifest_fuzz model_files_fuzz pod_template_fuzz worker_messages_fuzz >/tmp/tlt-ninja-fuzz.log 2>&1 || { cat /tmp/tlt-ninja-fuzz.log; exit 1; }
mkdir -p build-fuzz/corpus build-fuzz/artifacts
echo "fuzz: manifest parser for ${seconds}s"
if ! build-fuzz/bin/manifest_fuzz build-fuzz/corpus examples tests/manifests/bad tests/fuzz/regressions \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -dict=tests/fuzz/manifest.dict -artifact_prefix=build-fuzz/artifacts/ \
    >/tmp/tlt-fuzz.log 2>&1; then
  tail -40 /tmp/tlt-fuzz.log
  echo "fuzz: FAILED; the input that broke it is in build-fuzz/artifacts/"
  exit 1
fi
grep -E '^#[0-9]+.*(DONE|pulse)' /tmp/tlt-fuzz.log | tail -1 | sed 's/^/fuzz: /'
echo "fuzz: no crash, leak or hang"

# The model-file parsers: the first byte of an input picks GGUF (even) or safetensors (odd).
model_seconds=${2:-30}
seeds=build-fuzz/model-seeds
mkdir -p "$seeds" build-fuzz/model-corpus
for f in tests/models/fixtures/*.gguf; do { printf '\0'; cat "$f"; } >"$seeds/$(basename "$f")"; done
for f in tests/models/fixtures/*/*.safetensors; do
  { printf '\1'; cat "$f"; } >"$seeds/$(basename "$(dirname "$f")")-$(basename "$f")"
done
echo "fuzz: GGUF and safetensors parsers for ${model_seconds}s"
if ! build-fuzz/bin/model_files_fuzz build-fuzz/model-corpus "$seeds" tests/fuzz/model-regressions \
    -max_total_time="$model_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=100000 \
    -artifact_prefix=build-fuzz/artifacts/ >/tmp/tlt-fuzz-model.log 2>&1; then
  tail -40 /tmp/tlt-fuzz-model.log
  echo "fuzz: FAILED; the input that broke it is in build-fuzz/artifacts/"
  exit 1
fi
grep -E '^#[0-9]+.*(DONE|pulse)' /tmp/tlt-fuzz-model.log | tail -1 | sed 's/^/fuzz: /'
echo "fuzz: no crash, leak or hang in the model-file parsers"

# The operator's reading of podTemplates: any JSON, through the type check, policy and desired pod.
pod_seconds=${3:-30}
mkdir -p build-fuzz/pod-corpus
echo "fuzz: podTemplate reading (type check, pod policy, desired pod) for ${pod_seconds}s"
if ! build-fuzz/bin/pod_template_fuzz build-fuzz/pod-corpus tests/fuzz/pod-templates \
    -max_total_time="$pod_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -dict=tests/fuzz/pod_template.dict -artifact_prefix=build-fuzz/artifacts/ \
    >/tmp/tlt-fuzz-pod.log 2>&1; then
  tail -40 /tmp/tlt-fuzz-pod.log
  echo "fuzz: FAILED; the input that broke it is in build-fuzz/artifacts/"
  exit 1
fi
grep -E '^#[0-9]+.*(DONE|pulse)' /tmp/tlt-fuzz-pod.log | tail -1 | sed 's/^/fuzz: /'
echo "fuzz: no crash, leak, throw or hang in the operator's podTemplate reading"

# The driver <-> worker messages: any JSON, through every decoder.
message_seconds=${4:-30}
mkdir -p build-fuzz/message-corpus
echo "fuzz: driver <-> worker messages for ${message_seconds}s"
if ! build-fuzz/bin/worker_messages_fuzz build-fuzz/message-corpus tests/fuzz/worker-messages \
    -max_total_time="$message_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -dict=tests/fuzz/worker_messages.dict -artifact_prefix=build-fuzz/artifacts/ \
    >/tmp/tlt-fuzz-messages.log 2>&1; then
  tail -40 /tmp/tlt-fuzz-messages.log
  echo "fuzz: FAILED; the input that broke it is in build-fuzz/artifacts/"
  exit 1
fi
grep -E '^#[0-9]+.*(DONE|pulse)' /tmp/tlt-fuzz-messages.log | tail -1 | sed 's/^/fuzz: /'
echo "fuzz: no crash, leak, throw or broken promise in the driver <-> worker messages"
