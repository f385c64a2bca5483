"""`make test` prints skips as one line per reason, and failures in full."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_skips_are_counted_by_reason_and_failures_are_shown_in_full() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/newcomer/skip_sample.py",
            "-p",
            "no:cacheprovider",
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = result.stdout
    assert result.returncode == 1, out
    assert "skipped, by reason" in out
    assert "    3  no server to test against" in out
    assert "    1  another thing is missing" in out
    assert "SKIPPED [" not in out  # no line per skipped test
    # the failure keeps its traceback, its assertion and its short summary line
    assert "assert 'forty-two' == 'forty-three'" in out
    assert "FAILED tests/newcomer/skip_sample.py::test_that_fails" in out
