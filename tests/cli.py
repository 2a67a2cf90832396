"""A command's usage error as the tests read it: exit status 2 and one line on stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def usage_error(*argv: str) -> str:
    """Run ``python *argv`` from the repository's root; assert it exits 2 with one line on
    stderr (no traceback, no warnings), and return that line."""
    result = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]
