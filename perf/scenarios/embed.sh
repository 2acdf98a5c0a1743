# shellcheck shell=bash
# perf/scenarios/embed.sh: coring's embed app, POST /embed {"text": ...} ->
# {"embedding": [384 floats]}, a BERT encoder of all-MiniLM-L6-v2's shapes.
# Sourced by perf/run; format described in perf/scenarios/hello.sh.
#
# The published workload (perf/README.md, "embed"):
#   perf/run embed --duration 20          # 32 connections, 20 s, 2 runs
#   perf/run --quick embed                # 1 s, "does it still work"
#
# The model: apps/embed/make_model.py's random weights of all-MiniLM-L6-v2's
# shapes (fixed seed), written once into perf/results/models/minilm-random
# (git-ignored; a stamp skips the work next time), with tokenizer.json from
# tests/data/minilm for the node peer, which exports model.onnx there in
# its setup. Every server serves those same weights.
# The requests: 200 real-looking English sentences of 20-40 tokens
# (perf/lib/embed.py pool, deterministic), rotated by perf/wrk/embed.lua.
#
# coring: --apps embed --embed-model DIR, with perf/run's --threads N (ring
# threads = cores) and --embed-threads left at its default, the CPUs in the
# affinity mask that taskset gives: 1 inference thread on 1 core, 2 on 2
# cores. Inference is the work (~10 ms of sgemm a sentence against µs of
# HTTP), so one inference thread per core keeps every core on forward
# passes; more would only time-slice them, fewer would leave a core idle.
# The ring thread(s) sleep in io_uring between requests and share the cores;
# with no CPU spare (--threads = cores) --embed-placement auto runs the
# inference threads SCHED_BATCH at nice 10, below the rings.
# The peers get the same cores: torch.set_num_threads(N) and onnxruntime's
# intraOpNumThreads = N.

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=embed
# shellcheck disable=SC2034
SCENARIO_PROBE=/embed

EMBED_PEERS=coring-int8,fastapi-torch,fastify-onnx,fastapi-torch-int8,fastify-onnx-int8
# coring-int8 (perf/peers/coring-int8) runs the binary perf/run built.
# Two groups (perf/lib/report.py): float32 (coring, fastapi-torch,
# fastify-onnx) and int8 (coring-int8, fastapi-torch-int8: PyTorch's
# quantize_dynamic; fastify-onnx-int8: onnxruntime-node on an int8 ONNX
# export), each compared within its group.
export CORING_BIN

# OpenBLAS's kernels: coring and torch (through libblas) both run OpenBLAS,
# which picks kernels for the CPU when it loads unless OPENBLAS_CORETYPE
# names some. Every server here gets OpenBLAS's own choice, or the kernels
# PERF_OPENBLAS_CORETYPE names; an OPENBLAS_CORETYPE inherited from the
# caller's environment is dropped (a shell profile setting "Haswell" would
# give an AVX-512 CPU AVX2 kernels, in every server alike). The report's
# notes say which kernels ran.
if [[ -n ${PERF_OPENBLAS_CORETYPE:-} ]]; then
  export OPENBLAS_CORETYPE=$PERF_OPENBLAS_CORETYPE
else
  unset OPENBLAS_CORETYPE
fi
EMBED_BLAS=$("$PERF_PY" -c 'import ctypes; b = ctypes.CDLL("libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p; print(b.openblas_get_corename().decode())' 2>/dev/null || echo unknown)

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "embed-c32  32  POST  /embed  embed.lua:@DIR@/pool.txt  $EMBED_PEERS  quick   POST /embed over 200 sentences of 20-40 tokens, 32 keep-alive connections"
  "embed-c1   1   POST  /embed  embed.lua:@DIR@/pool.txt  $EMBED_PEERS  quick1  POST /embed over the same sentences, 1 connection: single-request latency"
)

# The model folder, made now (before the peers' setup, which exports the
# ONNX model into it), and what the servers read: coring's options for this
# app, the folder for the peers, the cold-start probe's body (POST /embed).
EMBED_MODEL=$PERF_DIR/results/models/minilm-random
export PERF_EMBED_MODEL=$EMBED_MODEL
export PERF_PROBE_BODY_embed='{"text":"hello world"}'
"$PERF_PY" "$PERF_DIR/lib/embed.py" model "$EMBED_MODEL" >&2 ||
  die "embed: could not write the model folder (apps/embed/make_model.py needs python3-numpy)"
"$PERF_PY" "$PERF_DIR/lib/embed.py" pool "$EMBED_MODEL" "$EMBED_MODEL/pool.txt" >/dev/null ||
  die "embed: could not write the sentence pool"
# shellcheck disable=SC2034,SC2154 # read by perf/lib/server.sh (declared there)
CORING_ARGS_FOR[embed]="--apps embed --embed-model $EMBED_MODEL"

# scenario_prepare CASE URL DIR: the pool for wrk, then POST /embed checks:
# 384 floats of unit length; a peer's vectors must agree with coring's (run
# first, in the same case) within 1e-4; an int8 server's (name ending
# -int8, or -int8@base for perf/run --baseline's twin) within 5e-3 of float32 coring's, the int8 tolerance of
# tests/embed/test_embed.py (measured: coring-int8 ~1e-3, fastapi-torch-int8
# 1.9e-3 on the check texts and 30 pool sentences, fastify-onnx-int8 1.4e-3
# on one sentence against its float32 export).
scenario_prepare() {
  local case=$1 url=$2 dir=$3 ref="" tol=1e-4
  cp "$EMBED_MODEL/pool.txt" "$dir/pool.txt" || return 1
  [[ ${dir##*/} == coring ]] || ref=$(dirname "$dir")/coring/vectors.json
  [[ ${dir##*/} == *-int8 || ${dir##*/} == *-int8@base ]] && tol=5e-3
  "$PERF_PY" "$PERF_DIR/lib/embed.py" check "$url/embed" --out "$dir/vectors.json" ${ref:+--ref "$ref"} --tol "$tol" || return 1
}

scenario_notes() {
  case $1 in
    embed-c32) echo "coring: --embed-threads left at its default, one inference thread per core given. Same random MiniLM-shaped weights (6 layers, hidden 384) in every server; 200 sentences rotated; vectors checked against coring's (<= 1e-4) first. Compute-bound: req/s is sentences/s. Memory: coring maps the 90 MB weights file read-only, and a cgroup is not charged for page cache another process read first, so its peak MiB can leave the weights out; VmHWM (results.json peak_rss_kb) counts them in every server. OpenBLAS kernels (coring, torch): $EMBED_BLAS${PERF_OPENBLAS_CORETYPE:+ (PERF_OPENBLAS_CORETYPE)}. coring-int8: the same binary with --embed-int8; fastapi-torch-int8: fastapi-torch with torch.ao.quantization.quantize_dynamic (nn.Linear, qint8); fastify-onnx-int8: fastify-onnx on an int8 export (MatMulInteger, int8 weights per tensor, perf/peers/fastify-onnx/export_onnx_int8.py); int8 servers' vectors within 5e-3 of float32 coring's, and their ratios are against coring-int8 (float32 with float32, int8 with int8)." ;;
    embed-c1) echo "One connection: each request waits for the previous one, so p50 is the single-request latency (tokenize + one forward pass + JSON)." ;;
  esac
}
