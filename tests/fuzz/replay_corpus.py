"""Replay the smoke corpus through the import fuzz target in this process,
reporting one JSON line per input on stdout, so that a parent process can
tell which input crashed it (the last "start" without a "result").

    python tests/fuzz/replay_corpus.py [--table devbridge|pytorch] [--start N]

Lines: {"start": i} before input i, then {"result": i, "label": ...,
"outcome": "imported" | "rejected" | "violated", "detail": ...}.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import torch  # noqa: E402,F401  (imports the PrivateUse1 plugin through autoload)

from fuzz_dlpack_import import ImportFuzzer  # noqa: E402
from fuzz_inputs import decode, smoke_corpus  # noqa: E402


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()  # the parent must see "start" before a crash


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=["devbridge", "pytorch"], default="devbridge")
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args()
    import devbridge

    capsule = devbridge.exchange_api() if args.table == "devbridge" else devbridge.torch_exchange_api()
    fuzzer = ImportFuzzer(capsule)
    corpus = smoke_corpus()
    for index in range(args.start, len(corpus)):
        label, data = corpus[index]
        emit({"start": index})
        before = dict(fuzzer.outcomes)
        try:
            fuzzer.one_input(data)
            outcome = "imported" if fuzzer.outcomes["imported"] > before["imported"] else "rejected"
            detail = ""
        except AssertionError as error:
            outcome, detail = "violated", str(error)
        emit({"result": index, "label": label, "outcome": outcome, "detail": detail,
              "candidate": repr(decode(data))})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
