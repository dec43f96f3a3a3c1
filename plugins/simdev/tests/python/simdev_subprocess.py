"""Run Python code in a fresh interpreter, for tests whose subject is process-wide
(autoload, the claim on PrivateUse1, a device capacity fixed at start-up)."""

import os
import subprocess
import sys
import textwrap


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run the (dedented) `code` with `env` added to this process's environment."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
