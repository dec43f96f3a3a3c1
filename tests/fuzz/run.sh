#!/usr/bin/env bash
# Fuzz devbridge for a bounded time with atheris (libFuzzer for Python), two targets:
#   dlpack    the DLPack import (managed_tensor_to_py_object_no_sync), fuzz_dlpack_import.py
#   launcher  the generic Triton launcher on simdev, fuzz_launcher.py
#
#   tests/fuzz/run.sh                       # 60 s: both targets, 30 s each
#   FUZZ_SECONDS=600 tests/fuzz/run.sh      # longer (split the same way)
#   FUZZ_TARGET=launcher tests/fuzz/run.sh  # one target only (dlpack | launcher | all)
#   FUZZ_TABLE=pytorch tests/fuzz/run.sh    # dlpack: PyTorch's own importer, for comparison
#   FUZZ_LAUNCHER_HOSTILE=0 tests/fuzz/run.sh  # launcher: without the container-mutating inputs
#   tests/fuzz/run.sh -runs=10000           # extra arguments go to libFuzzer (each target)
#
# Needs: devbridge and torch_simdev installed, `pip install atheris` (the
# launcher target also uses Triton and g++ when present).
# Corpora: $FUZZ_CORPUS (default build/fuzz/dlpack_import_corpus) for dlpack and
# $FUZZ_LAUNCHER_CORPUS (default: launcher_corpus next to it) for the launcher,
# seeded with hand-written and well-formed random inputs; crashing inputs go to
# $FUZZ_ARTIFACTS (default build/fuzz/artifacts/), the launcher's named launcher-*.
# Replay one with: python tests/fuzz/fuzz_dlpack_import.py <artifact file>
#              or: python tests/fuzz/fuzz_launcher.py --replay <artifact file>
# The exit status is the first failing target's (libFuzzer: non-zero on a crash).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
SECONDS_BUDGET=${FUZZ_SECONDS:-60}
CORPUS=${FUZZ_CORPUS:-build/fuzz/dlpack_import_corpus}
LAUNCHER_CORPUS=${FUZZ_LAUNCHER_CORPUS:-$(dirname "$CORPUS")/launcher_corpus}
ARTIFACTS=${FUZZ_ARTIFACTS:-build/fuzz/artifacts}
TABLE=${FUZZ_TABLE:-devbridge}
TARGET=${FUZZ_TARGET:-all}

case "$TARGET" in
  dlpack) dlpack_seconds=$SECONDS_BUDGET; launcher_seconds=0 ;;
  launcher) dlpack_seconds=0; launcher_seconds=$SECONDS_BUDGET ;;
  all)
    dlpack_seconds=$((SECONDS_BUDGET / 2))
    (( dlpack_seconds >= 1 )) || dlpack_seconds=1
    launcher_seconds=$((SECONDS_BUDGET - dlpack_seconds))
    (( launcher_seconds >= 1 )) || launcher_seconds=1
    ;;
  *) echo "FUZZ_TARGET must be dlpack, launcher or all, got '$TARGET'" >&2; exit 2 ;;
esac

if ! "$PY" -c "import atheris" 2>/dev/null; then
  echo "atheris is not installed: pip install atheris" >&2
  exit 2
fi
mkdir -p "$ARTIFACTS"
status=0

if (( dlpack_seconds > 0 )); then
  mkdir -p "$CORPUS"
  "$PY" tests/fuzz/write_seed_corpus.py "$CORPUS"
  table_flag=()
  [[ "$TABLE" == pytorch ]] && table_flag=(--table=pytorch)
  echo "== fuzzing the DLPack import for ${dlpack_seconds}s" >&2
  "$PY" tests/fuzz/fuzz_dlpack_import.py ${table_flag[@]+"${table_flag[@]}"} \
    -max_total_time="$dlpack_seconds" -artifact_prefix="$ARTIFACTS/" -print_final_stats=1 \
    "$@" "$CORPUS" || status=$?
fi

if (( launcher_seconds > 0 )); then
  hostile_flag=()
  [[ "${FUZZ_LAUNCHER_HOSTILE:-1}" == 1 ]] && hostile_flag=(--hostile)
  mkdir -p "$LAUNCHER_CORPUS"
  "$PY" tests/fuzz/fuzz_launcher.py --write-seeds "$LAUNCHER_CORPUS"
  echo "== fuzzing the launcher for ${launcher_seconds}s" >&2
  launcher_status=0
  "$PY" tests/fuzz/fuzz_launcher.py ${hostile_flag[@]+"${hostile_flag[@]}"} \
    -max_total_time="$launcher_seconds" -artifact_prefix="$ARTIFACTS/launcher-" -print_final_stats=1 \
    "$@" "$LAUNCHER_CORPUS" || launcher_status=$?
  (( status != 0 )) || status=$launcher_status
fi
exit "$status"
