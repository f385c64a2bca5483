"""Crafted frames against decoding: seconds and peak RSS, each case in its own process.

The cases of issue #41 (items 3 and 4), read back through `Serde.loads` (replay)
and `Serde.view` (show, export, the dashboard) with the default 64 MiB limit:

- dicts: 60 MiB of `[{},{},...]` (a 5.8 KB frame once compressed);
- dicts-at-limit: the most empty dicts a body may hold (2 Mi of them);
- set40k / map40k: 40,000 ints 7 + k*(2**61-1), which all hash alike, as a set
  and as a map's keys (a 1 MB row).

Run it against another checkout's sources to compare (`PYTHONPATH=.../src`):

    python benchmarks/decode_bounds.py [--cases dicts,set40k] [--reads loads,view]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CASES = ("dicts", "dicts-at-limit", "set40k", "map40k")
MODULUS = 2**61 - 1


def body_of(case: str) -> bytes:
    """The body a hostile store writer puts in a frame with a valid checksum."""
    if case == "dicts":
        count = 60 * 1024 * 1024 // 3
        return b"[" + b"{}," * (count - 1) + b"{}]"
    if case == "dicts-at-limit":
        count = 4 * 1024 * 1024 // 2
        return b"[" + b"{}," * (count - 1) + b"{}]"
    items = [7 + k * MODULUS for k in range(40_000)]
    if case == "set40k":
        return json.dumps({"~": "set", "v": items}).encode()
    return json.dumps({"~": "map", "v": [[k, 0] for k in items]}).encode()


def measure(case: str, read: str) -> dict[str, object]:
    """One read of one case, in this process."""
    from resumable.errors import ResumableError
    from resumable.serde import Serde

    serde = Serde(max_bytes=64 * 1024 * 1024)
    frame = serde.envelope.seal(body_of(case), place="p")
    started = time.perf_counter()
    try:
        getattr(serde, read)(frame, place="p")
        outcome = "decoded"
    except (ResumableError, MemoryError) as exc:
        outcome = type(exc).__name__
    return {
        "case": case,
        "read": read,
        "seconds": round(time.perf_counter() - started, 2),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "frame_bytes": len(frame),
        "outcome": outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--reads", default="loads,view")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one)))
        return
    for case in args.cases.split(","):
        for read in args.reads.split(","):
            done = subprocess.run(
                [sys.executable, __file__, "--one", case, read],
                capture_output=True,
                text=True,
                check=True,
            )
            print(done.stdout.strip())


if __name__ == "__main__":
    main()
