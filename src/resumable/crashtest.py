"""Moved to `resumable.testing.crash`; this name stays importable.

`from resumable.testing import crash_test` (or `resumable.testing.crash`) is the
documented path; this module re-exports the same objects for code written
against the old one.
"""

from __future__ import annotations

from resumable.testing.crash import CrashReport, Trial, crash_test, record_effect

__all__ = ["CrashReport", "Trial", "crash_test", "record_effect"]
