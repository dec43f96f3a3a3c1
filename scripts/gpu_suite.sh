#!/usr/bin/env bash
# The GPU suite, in one call on the GPU machine (see docs/gpu.md):
#   install devbridge, the simdev and cudadev plugins (built here), then
#   `devbridge check` on cudadev, the DLPack benchmark on cudadev, the cudadev
#   tests and the GPU-marked tests.
#
#   OUT=/dir/for/logs [GPU_SUITE_PART=tests|bench] scripts/gpu_suite.sh
#
# GPU_SUITE_PART splits the run in calls when it no longer fits one (each
# builds first): a comma list of "tests" (checks and test suites), "bench"
# (the benchmarks), "compile" (only the torch.compile tests, simdev's and
# cudadev's, the torch.compile benchmark and the cudadev DLPack rows), "profile" (where the host time of
# torch.compile steps goes, bench/compile_profile.py; only when named),
# "simdev" and "cudadev" (the two halves of "tests": simdev's suite and check;
# cudadev's check, suite and the GPU-marked tests), "compile_bench" (the
# torch.compile benchmark alone), "train_profile" (where the time of a
# compiled train step goes, bench/train_profile.py and
# bench/multi_tensor_host.py; only when named), "attention" (cudadev's fused
# attention tests and bench/attention.py), "attention_bench" (the latter
# alone), "distributed" (cudadev's collective backend tests and
# bench/distributed.py, a compiled DDP step); unset, tests and bench.
#
# Every step writes its own log under $OUT and records its exit status in
# $OUT/summary.txt; a failing step does not stop the later ones. The script
# exits non-zero at the end if any step failed. The whole run stays inside
# GPU_SUITE_BUDGET_S seconds (default 570, under the 10-minute call limit):
# each step gets at most its own limit and what is left of the budget.
set -euo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
ROOT=$(pwd)
: "${OUT:?set OUT to the directory that receives the logs}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
BUDGET_S=${GPU_SUITE_BUDGET_S:-570}
START=$(date +%s)

export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16}
# Default: sm_90 (H100/H200); set TORCH_CUDA_ARCH_LIST and CUDAARCHS for
# another GPU. Fixing the architecture also spares torch's CMake
# package its GPU-probing step, should a build use it.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export CUDAARCHS=${CUDAARCHS:-90}
# Pick a C++ compiler that links libstdc++ dynamically. Some toolchains'
# g++ (a wrapper such as /opt/gcc/bin/g++ seen on one CUDA image) puts a static copy of libstdc++ into every
# shared object, beside the libstdc++.so.6 torch uses; the two copies' locale
# facets disagree and the first `ostream << long` (any TORCH_CHECK message
# with a number) segfaults. Probe each candidate with a one-line library.
links_libstdcxx_dynamically() {
  local probe=/tmp/devbridge_cxx_probe.so
  printf '#include <sstream>\nint probe(long x){std::ostringstream s; s << x; return (int)s.str().size();}\n' |
    "$1" -x c++ -shared -fPIC -o "$probe" - 2>/dev/null && ldd "$probe" | grep -q 'libstdc++'
}
for candidate in "${CXX:-}" /usr/bin/g++ g++ c++; do
  [[ -n $candidate ]] && command -v "$candidate" >/dev/null || continue
  if links_libstdcxx_dynamically "$candidate"; then
    candidate=$(command -v "$candidate")
    export CXX=$candidate CUDAHOSTCXX=$candidate
    [[ -x ${candidate%g++}gcc ]] && export CC=${candidate%g++}gcc
    break
  fi
  echo "skipping C++ compiler $candidate: it links libstdc++ statically into shared objects"
done
if [[ -z "${CUDACXX:-}" && -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
  export PATH=/usr/local/cuda/bin:$PATH
fi
# GIT_COMMIT=<sha> in the caller's environment names the commit the
# benchmarks record (bench/machine_info.py): the machine's copy of .git may lag
# behind the working tree it was sent.
# simdev and cudadev are both installed and both claim PrivateUse1; only one
# can own it per process. No autoload: each process imports its plugin itself.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0

# The machine name in the benchmarks' result files (compile_<machine>.md, ...):
# GPU_SUITE_MACHINE, else the GPU's model as nvidia-smi names it ("NVIDIA H200"
# -> h200, "NVIDIA H100 80GB HBM3" -> h100), so results from two kinds of GPU
# never land in one file.
if [[ -z ${GPU_SUITE_MACHINE:-} ]]; then
  GPU_SUITE_MACHINE=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 |
    sed -E 's/^NVIDIA //; s/ .*//' | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9_-')
fi
: "${GPU_SUITE_MACHINE:?no GPU found by nvidia-smi: set GPU_SUITE_MACHINE to name this machine in the result files}"
export GPU_SUITE_MACHINE

PART=${GPU_SUITE_PART:-all}
want() { [[ $PART == all || ,$PART, == *,$1,* ]]; }

SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
FAILED=()

record() { printf '%-20s %s\n' "$1" "$2" | tee -a "$SUMMARY"; }
seconds_left() { echo $((BUDGET_S - ($(date +%s) - START))); }

# step NAME LIMIT_S [--no-tests-ok] CMD...
# Runs CMD with stdout+stderr in $OUT/NAME.log. --no-tests-ok: pytest's exit
# status 5 (nothing collected) is recorded but is not a failure.
step() {
  local name=$1 limit=$2
  shift 2
  local no_tests_ok=0
  if [[ ${1:-} == --no-tests-ok ]]; then
    no_tests_ok=1
    shift
  fi
  local left
  left=$(seconds_left)
  if ((limit > left - 5)); then limit=$((left - 5)); fi
  if ((limit < 10)); then
    record "$name" "NOT RUN (time budget spent)"
    FAILED+=("$name")
    return
  fi
  local log=$OUT/$name.log began rc=0
  began=$(date +%s)
  echo "==> $name (at most ${limit}s): $*"
  timeout -s INT -k 15 "$limit" "$@" >"$log" 2>&1 || rc=$?
  local took=$(($(date +%s) - began))
  if ((rc == 0)); then
    record "$name" "ok (${took}s)"
  elif ((rc == 5 && no_tests_ok)); then
    record "$name" "no tests collected (${took}s)"
  else
    if ((rc == 124 || rc == 130 || rc == 137)); then
      record "$name" "FAILED: timed out after ${took}s (rc=$rc), see $name.log"
    else
      record "$name" "FAILED rc=$rc (${took}s), see $name.log"
    fi
    FAILED+=("$name")
    tail -n 40 "$log" | sed "s/^/    $name| /"
  fi
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>&1 || true
  "${CUDACXX:-nvcc}" --version 2>&1 | tail -n 1 || true
  cmake --version 2>&1 | head -n 1 || true
  echo "CXX=${CXX:-<default>}: $(${CXX:-g++} --version | head -n 1)"
  echo "compilers on PATH: $(which -a g++ c++ 2>/dev/null | tr '\n' ' ')"
  echo "libstdc++ the compiler links: $(${CXX:-g++} -print-file-name=libstdc++.so)"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Wheels carried along in .whl/ (packages the GPU machine lacks, e.g.
# apache-tvm-ffi): installed into a side directory, never over the system.
if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
  step carried_wheels 120 "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --target /tmp/site "$ROOT"/.whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# A machine kept warm between calls keeps earlier installs and CMake caches
# (which pin the compiler): start from a clean slate so every run is the same.
"$PY" -m pip uninstall -y -q torch-cudadev torch-simdev torch-hostplug devbridge >/dev/null 2>&1 || true
CUDADEV_SITE=${TMPDIR:-/tmp}/devbridge-gpu-suite-cudadev
rm -rf "$ROOT/build" "$ROOT/plugins/simdev/build" "$ROOT/plugins/cudadev/build" "$ROOT/tests/plugins/hostplug/build" \
  "$CUDADEV_SITE"

PIP_INSTALL=("$PY" -m pip install -v --no-build-isolation --no-deps --no-index)
PYTEST=("$PY" -m pytest -ra -v -p no:cacheprovider)
step build_devbridge 240 "${PIP_INSTALL[@]}" "$ROOT"
step build_simdev 180 "${PIP_INSTALL[@]}" "$ROOT/plugins/simdev"
# hostplug, the minimal third-party-style plugin of the tests (tests/plugins/hostplug):
# its tests in the CPU suite below, on this machine's torch.
{ want tests || want simdev; } && step build_hostplug 180 "${PIP_INSTALL[@]}" "$ROOT/tests/plugins/hostplug"

# The CPU suite on this machine's torch (2.11 here, 2.13 in CI), with simdev
# autoloaded: proves devbridge and simdev on the oldest supported torch, and
# the DLPack numbers on it. Runs before cudadev is installed (one PrivateUse1
# plugin per process; autoload would load both).
# GPU_SUITE_SIMDEV_TESTS (paths relative to the repository, space-separated)
# runs part of it instead, e.g. a file changed since the last whole run.
# GPU_SUITE_SIMDEV_WORKERS: pytest-xdist workers (default: the cores less 4,
# which keeps room for the compile workers Inductor starts, 12 on 16 cores;
# less 6 beside cudadev's suite, below).
#
# When cudadev's half runs too and no benchmark step is wanted (GPU_SUITE_PART
# tests, or simdev,cudadev), the simdev suite runs in the background, side by
# side with cudadev's build, check and suite: one needs the CPU, the other
# mostly the GPU, and the two no longer take a call each. cudadev is installed
# into a directory of its own ($CUDADEV_SITE) that is put on PYTHONPATH only
# after the simdev suite has started, so the suite's autoload never sees it.
# Every benchmark step waits for the background suite first (bench_step).
# GPU_SUITE_SIDE_BY_SIDE=0 runs the two halves one after the other.
SIDE_BY_SIDE=0
if { want tests || want simdev; } && { want tests || want cudadev; } && ! want bench && ! want compile &&
   [[ ${GPU_SUITE_SIDE_BY_SIDE:-1} != 0 ]]; then
  SIDE_BY_SIDE=1
fi
read -r -a SIMDEV_TESTS <<<"${GPU_SUITE_SIMDEV_TESTS:-tests/python plugins/simdev/tests/python}"
SIMDEV_WORKERS=${GPU_SUITE_SIMDEV_WORKERS:-$(($(nproc) > 6 ? $(nproc) - 4 - 2 * SIDE_BY_SIDE : 2))}
simdev_suite() {
  step pytest_simdev 420 env TORCH_DEVICE_BACKEND_AUTOLOAD=1 "${PYTEST[@]}" -q -n "$SIMDEV_WORKERS" --dist loadfile \
    "${SIMDEV_TESTS[@]/#/$ROOT/}" --junitxml="$OUT/junit_simdev.xml"
  step check_simdev 60 bash -c 'TORCH_DEVICE_BACKEND_AUTOLOAD=1 "$0" -m devbridge check --json >"$1"' \
    "$PY" "$OUT/check_simdev.json"
}
SIMDEV_SUITE_PID=""
if want tests || want simdev; then
  if ((SIDE_BY_SIDE)); then
    echo "==> simdev suite in the background (its output: simdev_suite.out, shown when it ends)"
    (
      FAILED=()
      simdev_suite
      if ((${#FAILED[@]})); then printf '%s\n' "${FAILED[@]}" >"$OUT/simdev_suite.failed"; exit 1; fi
    ) >"$OUT/simdev_suite.out" 2>&1 &
    SIMDEV_SUITE_PID=$!
  else
    simdev_suite
  fi
fi
# Waits for the background simdev suite, shows its output and takes over its
# failures.
finish_simdev_suite() {
  [[ -n $SIMDEV_SUITE_PID ]] || return 0
  local rc=0
  wait "$SIMDEV_SUITE_PID" || rc=$?
  SIMDEV_SUITE_PID=""
  cat "$OUT/simdev_suite.out"
  if [[ -s $OUT/simdev_suite.failed ]]; then
    mapfile -t -O "${#FAILED[@]}" FAILED <"$OUT/simdev_suite.failed"
  elif ((rc != 0)); then
    record simdev_suite "FAILED rc=$rc, see simdev_suite.out"
    FAILED+=(simdev_suite)
  fi
}
# A benchmark step: none runs beside the simdev suite.
bench_step() {
  finish_simdev_suite
  step "$@"
}
# The compile part alone: simdev's torch.compile tests on this torch and Triton.
{ want compile && ! want tests; } && step pytest_simdev_inductor 240 env TORCH_DEVICE_BACKEND_AUTOLOAD=1 \
  "${PYTEST[@]}" -q -n 4 "$ROOT/tests/python/test_inductor_simdev.py" --junitxml="$OUT/junit_simdev_inductor.xml"
want bench && bench_step bench_dlpack 120 env TORCH_DEVICE_BACKEND_AUTOLOAD=1 "$PY" "$ROOT/bench/dlpack_exchange.py" \
  --machine "${GPU_SUITE_MACHINE}" --repeats 11 --results-dir "$OUT"

step build_cudadev 180 "${PIP_INSTALL[@]}" --target "$CUDADEV_SITE" "$ROOT/plugins/cudadev"
export PYTHONPATH=$CUDADEV_SITE${PYTHONPATH:+:$PYTHONPATH}
# Which libstdc++ each extension uses (a static copy inside one crashes).
"$PY" - >>"$OUT/env.txt" 2>&1 <<'PYEOF' || true
import glob, importlib.util, os, subprocess
for name in ("devbridge", "torch_simdev", "torch_cudadev"):
    spec = importlib.util.find_spec(name)
    if spec is None:
        continue
    for so in glob.glob(os.path.join(os.path.dirname(spec.origin), "*.so")):
        ldd = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
        linked = [l.split()[0] for l in ldd.splitlines() if "stdc++" in l]
        syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
        print(f"{os.path.basename(so)}: links {linked or 'no libstdc++.so'}; "
              f"defines {syms.count('_ZNSo')} std::ostream symbols")
PYEOF

# devbridge's conformance report on cudadev: JSON on stdout, the rest in the log.
{ want tests || want cudadev; } && step check_cudadev 120 bash -c '"$0" -m devbridge check --device cudadev --plugin torch_cudadev --json >"$1"' \
  "$PY" "$OUT/check_cudadev.json"

# The DLPack benchmark on cudadev: devbridge's current_work_stream(kDLExtDev)
# through cudadev's current-stream query and through the generic c10 path,
# against PyTorch's table answering kDLCUDA for a torch.cuda stream, one
# process (issue #12's targets: <= 1.0x and <= 1.5x).
{ want bench || want compile; } && bench_step bench_dlpack_cudadev 120 "$PY" "$ROOT/bench/dlpack_exchange.py" --plugin torch_cudadev \
  --device cudadev:0 --machine "${GPU_SUITE_MACHINE}_cudadev" --repeats 11 --results-dir "$OUT"

# One xdist worker: a crash in one test is reported as that test's failure
# (the worker is restarted) instead of ending the whole run.
{ want tests || want cudadev; } && step pytest_cudadev 420 "${PYTEST[@]}" -n 1 --max-worker-restart=20 "$ROOT/plugins/cudadev/tests/python" \
  --junitxml="$OUT/junit_cudadev.xml"
# The launcher benchmark: devbridge's launcher and kernel[grid] on cudadev vs
# upstream Triton, PyTorch's static launcher and a bare cuLaunchKernel, same
# process, same cubin (bench/README.md).
want bench && bench_step bench_triton_launch 240 "$PY" "$ROOT/bench/triton_launch.py" \
  --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT"
# torch.distributed on cudadev: its NCCL backend's tests, and a compiled DDP
# step on cudadev vs cuda, world size 1 (bench/distributed.py;
# BENCH_DISTRIBUTED_MODELS: ddp, ddp_gpt2, default both).
want distributed && step pytest_cudadev_distributed 180 "${PYTEST[@]}" \
  "$ROOT/plugins/cudadev/tests/python/test_cudadev_distributed.py" --junitxml="$OUT/junit_cudadev_distributed.xml"
{ want bench || want distributed; } && bench_step bench_distributed 420 env TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" \
  "$ROOT/bench/distributed.py" --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT" \
  --models "${BENCH_DISTRIBUTED_MODELS:-ddp,ddp_gpt2}"
# GPU-marked devbridge tests (Triton, torch.compile, ...) run on cudadev.
{ want tests || want cudadev; } && step pytest_gpu 240 --no-tests-ok env DEVBRIDGE_TEST_PLUGIN=torch_cudadev \
  "${PYTEST[@]}" "$ROOT/tests/python" -m gpu --junitxml="$OUT/junit_gpu.xml"

# torch.compile on cudadev vs on cuda, same process (bench/compile.py).
{ want compile && ! want tests; } && step pytest_cudadev_inductor 200 "${PYTEST[@]}" \
  "$ROOT/plugins/cudadev/tests/python/test_cudadev_inductor.py" --junitxml="$OUT/junit_cudadev_inductor.xml"
# Where the host time of compiled steps goes, cuda and cudadev side by side
# (bench/compile_profile.py); only when named, never in the default run.
[[ ,$PART, == *,profile,* ]] && bench_step bench_compile_profile 300 "$PY" "$ROOT/bench/compile_profile.py" \
  --plugin torch_cudadev --devices cuda,cudadev --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT"
# Where the time of a compiled train step goes, per phase, cuda beside
# cudadev (bench/train_profile.py); only when named. TRAIN_PROFILE_MODELS: a
# space-separated list of block, conv, mlp, gpt2, llama (default: block conv).
[[ ,$PART, == *,train_profile,* ]] && for model in ${TRAIN_PROFILE_MODELS:-block conv}; do
  bench_step "train_profile_$model" 280 "$PY" "$ROOT/bench/train_profile.py" --model "$model" \
    --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT"
done
# ... and the optimizer's multi-tensor operators alone (bench/multi_tensor_host.py).
[[ ,$PART, == *,train_profile,* ]] && bench_step multi_tensor_host 120 "$PY" "$ROOT/bench/multi_tensor_host.py" \
  --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT"
# BENCH_COMPILE_PARTS (a comma list of compile, steady, train, graphs; default
# all four, saved as compile_<machine>.*) runs part of it when the whole no longer fits one call;
# graphs is reduce-overhead (graph capture) against cuda and against default
# mode. BENCH_COMPILE_TRAIN_MODELS (block, conv, mlp, mlp_step; default block,conv) picks the train steps.
{ want bench || want compile || want compile_bench; } && bench_step bench_compile 560 "$PY" "$ROOT/bench/compile.py" \
  --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT" --parts "${BENCH_COMPILE_PARTS:-compile,steady,train,graphs}" \
  --train-models "${BENCH_COMPILE_TRAIN_MODELS:-block,conv}"

# Fused attention alone: cudadev's and simdev's attention tests, then SDPA
# models compiled on cudadev vs cuda (bench/attention.py, saved as
# attention_<machine>.*; BENCH_ATTENTION_PARTS: a comma list of forward,
# train, fallback; default forward,train; BENCH_ATTENTION_TRAIN_MODELS: a
# comma list of gpt2, llama, llama_reduce_overhead, and gpt2_step, llama_step,
# llama_reduce_overhead_step (AdamW's step compiled too), default the first three).
{ want attention && ! want tests; } && step pytest_attention 240 "${PYTEST[@]}" \
  "$ROOT/plugins/cudadev/tests/python/test_cudadev_attention.py" --junitxml="$OUT/junit_attention.xml"
{ want bench || want attention || want attention_bench; } && bench_step bench_attention 500 "$PY" "$ROOT/bench/attention.py" \
  --machine "${GPU_SUITE_MACHINE}" --results-dir "$OUT" --parts "${BENCH_ATTENTION_PARTS:-forward,train}" \
  --train-models "${BENCH_ATTENTION_TRAIN_MODELS:-gpt2,llama,llama_reduce_overhead}"

finish_simdev_suite
echo "==> summary ($(($(date +%s) - START))s, logs in $OUT)"
cat "$SUMMARY"
if ((${#FAILED[@]})); then
  echo "failed: ${FAILED[*]}"
  exit 1
fi
