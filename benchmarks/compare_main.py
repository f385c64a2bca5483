"""The figures of `make bench`, for this tree and for another git revision, side by side.

    .venv/bin/python benchmarks/compare_main.py f40e238 [--rounds 5] [--runs 1] [--slow]
        [--only step_overhead.py ...]

Checks out REV (default: main) into a temporary `git worktree` and runs each
benchmark script of each tree with this interpreter, the tree's own `src` first
on PYTHONPATH (the dependencies are the same; only the library's code differs).
Each tree runs its own scripts, so a script adapted to a changed API still runs;
a script REV does not have yet runs from this tree, on REV's code.
Rounds interleave the trees script by script (old then new, then new then old),
so that the shared machine's drift hits both alike; each script runs with
RUNS=1 (--runs) and the figure quoted is the median over the rounds.

Every figure is a cost (time, bytes, bytecodes), so it prints new / old and
PASS when that is at most 1.10. PostgreSQL and Redis figures are measured when
their servers answer (RESUMABLE_TEST_POSTGRES_URL, RESUMABLE_BENCH_REDIS_URL or
the local defaults); `--slow` adds recovery_latency and check_speed (minutes).
The step-overhead scripts rewrite src/resumable/data/overhead.json: this tree's
copy is put back afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # this tree
LIMIT = 1.10
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


@dataclass(frozen=True)
class Figure:
    """One number a script prints, found by a regular expression on its output."""

    script: str
    name: str
    pattern: str

    def find(self, output: str) -> float | None:
        match = re.search(self.pattern, output, re.MULTILINE)
        return float(match.group(1)) if match else None


def row(script: str, label: str, unit: str, column: int = 1) -> Figure:
    """The `column`-th number of the table row starting with `label`."""
    cells = r"\s{2,}\S+" * (column - 1)
    pattern = rf"^{re.escape(label)}{cells}\s{{2,}}{NUMBER}"
    return Figure(script, f"{label} ({unit})", pattern)


STEP_OVERHEAD = [
    row("step_overhead.py", label, "us/step")
    for label in (
        "resumable memory",
        "resumable sqlite full",
        "resumable sqlite full, 50 runs at once",
        "resumable sqlite normal",
    )
]
STEP_WORK = [
    row("step_work.py", "executing", "bytecodes/step"),
    row("step_work.py", "replaying", "bytecodes/step"),
    row("step_work.py", "executing", "frames/step", column=2),
    row("step_work.py", "replaying", "frames/step", column=2),
]
RESUME = [
    row("resume_latency.py", label, "ms")
    for label in ("1000", "3000", "1000 (def workflow)")
]
SNAPSHOTS = [
    row("snapshot_storage.py", "resumable (content-addressed)", "KB written"),
    Figure(
        "snapshot_storage.py",
        "load latest, cold engine (ms)",
        rf"load latest \(cold engine\): median {NUMBER}",
    ),
    Figure(
        "snapshot_storage.py",
        "save, warm engine (ms)",
        rf"save \(warm engine\): median {NUMBER}",
    ),
]
COMPRESSION = [
    Figure(
        "compression.py",
        "all payloads, zstd over 1024 B (KB)",
        rf"^all\s+\d+ KB\s+\d+ KB \([^)]*\)\s+{NUMBER} KB",
    )
]
POSTGRES = [
    Figure(
        "pg_step_overhead.py", "postgres engine (us/step)", rf"engine\s*:\s*{NUMBER}"
    ),
    *(
        row("pg_claims.py", label, "us/run", column=2)
        for label in (
            "4 claimers x 10, no queue",
            "4 claimers x 10, queue with a concurrency limit",
            "1 claimer x 1, no queue",
        )
    ),
]
REDIS = [
    Figure(
        "redis_step_overhead.py",
        "redis engine (us/step)",
        rf"Engine\('redis://\.\.\.'\) @step:\s*{NUMBER}",
    )
]
SLOW = [
    Figure("recovery_latency.py", "recovery after SIGKILL (s)", rf"^5 s\s+{NUMBER}"),
    row("check_speed.py", "check", "s"),
]


def answers(url: str, probe: str) -> bool:
    """Whether the server at `url` answers, asked by a child running `probe`."""
    done = subprocess.run(
        [sys.executable, "-c", probe, url],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


def figures(slow: bool) -> list[Figure]:
    """What to measure: the figures of `make bench` this machine can produce."""
    chosen = STEP_OVERHEAD + STEP_WORK + RESUME + SNAPSHOTS + COMPRESSION
    pg = os.environ.get(
        "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    if answers(pg, "import psycopg, sys; psycopg.connect(sys.argv[1]).close()"):
        chosen += POSTGRES
    redis = os.environ.get("RESUMABLE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    if answers(redis, "import redis, sys; redis.Redis.from_url(sys.argv[1]).ping()"):
        chosen += REDIS
    return chosen + SLOW if slow else chosen


def run_script(tree: Path, script: str, runs: int) -> str:
    """The output of one benchmark script of `tree`, run on that tree's code."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "RUNS": str(runs)}
    path = tree / "benchmarks" / script
    if not path.exists():  # newer than the tree: this tree's script, on its code
        path = HERE / "benchmarks" / script
    done = subprocess.run(
        [sys.executable, str(path)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"{script} failed in {tree}:\n{done.stderr[-2000:]}", file=sys.stderr)
    return done.stdout


def measure(
    trees: dict[str, Path], chosen: list[Figure], rounds: int, runs: int
) -> dict[tuple[str, str], list[float]]:
    """Samples per (tree, figure name): each script run once per tree per round."""
    samples: dict[tuple[str, str], list[float]] = {}
    scripts = list(dict.fromkeys(figure.script for figure in chosen))
    for n in range(rounds):
        order = list(trees) if n % 2 == 0 else list(reversed(trees))
        for script in scripts:
            for side in order:
                output = run_script(trees[side], script, runs)
                for figure in chosen:
                    value = figure.find(output) if figure.script == script else None
                    if value is not None:
                        samples.setdefault((side, figure.name), []).append(value)
        print(f"round {n + 1}/{rounds} done", file=sys.stderr)
    return samples


def report(
    rev: str, chosen: list[Figure], samples: dict[tuple[str, str], list[float]]
) -> bool:
    """Prints the table; True if every figure measured on both sides passes."""
    rows: list[tuple[str, ...]] = [
        ("figure", f"old ({rev})", "new", "new/old", f"<= {LIMIT:.2f}")
    ]
    passed = True
    for figure in chosen:
        old = samples.get(("old", figure.name))
        new = samples.get(("new", figure.name))
        cells = [f"{statistics.median(s):g}" if s else "n/a" for s in (old, new)]
        verdict, ratio = "n/a", ""
        if old and new:
            value = statistics.median(new) / statistics.median(old)
            ratio = f"{value:.3f}"
            verdict = "PASS" if value <= LIMIT else "FAIL"
            passed = passed and verdict == "PASS"
        rows.append((figure.name, *cells, ratio, verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description="make bench figures: this tree vs REV")
    parser.add_argument("rev", nargs="?", default="main", help="the baseline revision")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=1, help="RUNS for each script")
    parser.add_argument("--slow", action="store_true", help="add the slow benchmarks")
    parser.add_argument(
        "--only", nargs="*", help="these scripts only (step_work.py ...)"
    )
    args = parser.parse_args()
    chosen = [f for f in figures(args.slow) if not args.only or f.script in args.only]
    data = HERE / "src" / "resumable" / "data" / "overhead.json"
    kept = data.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        git = ["git", "-C", str(HERE), "worktree"]
        subprocess.run([*git, "add", "--detach", str(old), args.rev], check=True)
        try:
            trees = {"old": old, "new": HERE}
            samples = measure(trees, chosen, args.rounds, args.runs)
        finally:
            subprocess.run([*git, "remove", "--force", str(old)], check=True)
            data.write_bytes(kept)
    rounds = f"median of {args.rounds} rounds"
    print(f"make bench figures, {args.rev} (old) vs this tree (new), {rounds}")
    return 0 if report(args.rev, chosen, samples) else 1


if __name__ == "__main__":
    sys.exit(main())
