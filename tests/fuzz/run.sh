#!/usr/bin/env bash
# Fuzz devbridge's DLPack import (managed_tensor_to_py_object_no_sync) for a
# bounded time with atheris (libFuzzer for Python).
#
#   tests/fuzz/run.sh                       # 60 s on devbridge's table
#   FUZZ_SECONDS=600 tests/fuzz/run.sh      # longer
#   FUZZ_TABLE=pytorch tests/fuzz/run.sh    # PyTorch's own importer, for comparison
#   tests/fuzz/run.sh -runs=10000           # extra arguments go to libFuzzer
#
# Needs: devbridge and torch_simdev installed, `pip install atheris`.
# The corpus lives in $FUZZ_CORPUS (default build/fuzz/dlpack_import_corpus), seeded
# with the hand-written cases and a few hundred well-formed random inputs;
# crashing inputs are written to $FUZZ_ARTIFACTS (default build/fuzz/artifacts/).
# Replay one with: python tests/fuzz/fuzz_dlpack_import.py <artifact file>
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
SECONDS_BUDGET=${FUZZ_SECONDS:-60}
CORPUS=${FUZZ_CORPUS:-build/fuzz/dlpack_import_corpus}
ARTIFACTS=${FUZZ_ARTIFACTS:-build/fuzz/artifacts}
TABLE=${FUZZ_TABLE:-devbridge}

if ! "$PY" -c "import atheris" 2>/dev/null; then
  echo "atheris is not installed: pip install atheris" >&2
  exit 2
fi
mkdir -p "$CORPUS" "$ARTIFACTS"
"$PY" tests/fuzz/write_seed_corpus.py "$CORPUS"

table_flag=()
[[ "$TABLE" == pytorch ]] && table_flag=(--table=pytorch)
exec "$PY" tests/fuzz/fuzz_dlpack_import.py "${table_flag[@]}" \
  -max_total_time="$SECONDS_BUDGET" -artifact_prefix="$ARTIFACTS/" -print_final_stats=1 \
  "$@" "$CORPUS"
