"""Write the fuzzer's seed corpus: every named case plus well-formed random
inputs, one file each (existing files are kept, so a grown corpus survives).

    python tests/fuzz/write_seed_corpus.py CORPUS_DIR [--random N]
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fuzz_inputs import NAMED_SEEDS, encode, random_candidate  # noqa: E402

RANDOM_SEED = 20261129


def seed_inputs(random_count: int) -> list[bytes]:
    rng = random.Random(RANDOM_SEED)
    inputs = [encode(c) for c in NAMED_SEEDS.values()]
    inputs += [encode(random_candidate(rng)) for _ in range(random_count)]
    return inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=pathlib.Path)
    parser.add_argument("--random", type=int, default=300)
    args = parser.parse_args()
    args.corpus.mkdir(parents=True, exist_ok=True)
    written = 0
    for data in seed_inputs(args.random):
        path = args.corpus / f"seed-{hashlib.sha1(data).hexdigest()}"
        if not path.exists():
            path.write_bytes(data)
            written += 1
    print(f"seed corpus {args.corpus}: {written} new file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
