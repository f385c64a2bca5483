"""Memory for one large step result: how many copies of it a write and a read hold.

A workflow with one step returning SIZE bytes of text (`os.urandom(SIZE // 2).hex()`,
which zstd shrinks to about half), of random `bytes` (which it cannot shrink), a
dict holding such a text ("dict"), or one whose text ends in a quote and a
newline, which json escapes ("dict-escaped"), runs on a fresh SQLite file, with every payload in the row ("none"), offloaded to
a local folder ("file"), or to moto's S3 server on 127.0.0.1 ("s3"). Each phase
runs in a fresh process:

- write: the value is built first, then `engine.run` executes the step, which
  encodes, seals, uploads and commits it;
- read: a new engine reads the step back (`engine.history(run_id)[0].output()`),
  which downloads, checks, opens and decodes it.

Figures, beyond the value itself: the peak of memory traced by `tracemalloc`
(Python objects: bytes, str, bytearray) and the peak resident set size (which
also sees what C and Rust libraries allocate: zstd, obstore's buffers, SQLite),
each in MB and as copies (that peak / SIZE). The ratio column compares a run
against the figures of a baseline JSON file passed with `--baseline` (measured by
the same script on an earlier commit). Medians of RUNS runs of each phase.

With `--encrypt`, the engine encrypts (a fixed test key).

    python benchmarks/large_values.py [--sizes 100,500] [--kinds str,bytes,dict]
        [--offloads none,file,s3] [--encrypt] [--json out.json] [--baseline before.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import table
from s3_clients import create_bucket, moto_server

from resumable import Engine, step, workflow
from resumable.stores.blobs import BlobStore, S3Blobs

MB = 1_000_000
RUNS = 3
LIST_ITEM = 110
"""JSON bytes per item of a "list" value."""
VALUE: list[Any] = []


@step(name="bench.large")
async def produce() -> Any:
    return VALUE[0]


@workflow(name="bench.large_values")
async def one_large() -> int:
    return len(await produce())


KEY = "k1:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="  # 32 bytes, base64


def make_value(kind: str, size: int) -> Any:
    if kind == "bytes":
        return os.urandom(size)
    if kind == "list":  # many small dicts: about 110 bytes of JSON each
        return [
            {"id": i, "text": os.urandom(40).hex(), "ok": True}
            for i in range(size // LIST_ITEM)
        ]
    text = os.urandom(size // 2).hex()
    if kind == "dict-escaped":  # a text json escapes (quotes, newlines)
        return {"text": text[:-2] + '"\n', "n": 1}
    return {"text": text, "n": 1} if kind == "dict" else text


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> None:
    # "5" resets the kernel's high-water mark of the resident set (VmHWM)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def blobs_for(offload: str, folder: str, endpoint: str, bucket: str) -> Any:
    if offload == "file":
        return Path(folder, "objects").as_uri()
    if offload == "s3":
        config = {
            "endpoint": endpoint,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        }
        blobs: BlobStore = S3Blobs(f"s3://{bucket}/p", config=config, timeout_s=300)
        return blobs
    return None


async def phase(args: argparse.Namespace) -> dict[str, float]:
    """One phase in this process: peaks beyond the value, in bytes, and seconds."""
    url = f"sqlite:///{args.folder}/state.db"
    blobs = blobs_for(args.offload, args.folder, args.endpoint, args.bucket)
    size = args.size * MB
    async with Engine(
        url,
        blobs=blobs,
        max_payload_bytes=None,
        store_retry_s=600,
        encryption_key=KEY if args.encrypt else None,
    ) as engine:
        if args.phase == "write":
            VALUE.append(make_value(args.kind, size))
        gc.collect()
        before = rss_bytes()
        reset_peak_rss()
        tracemalloc.start()
        start = time.perf_counter()
        if args.phase == "write":
            await engine.run(one_large, run_id="large")
            value_size = 0  # built before tracing began: not in the peak
        else:
            value = (await engine.history("large"))[0].output()
            value_size = size
            expected = {"dict": 2, "dict-escaped": 2, "list": size // LIST_ITEM}
            assert len(value) == expected.get(args.kind, size)
        seconds = time.perf_counter() - start
        _, traced = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = peak_rss_bytes() - before
    return {
        "traced": traced - value_size,
        "rss": rss - value_size,
        "seconds": seconds,
    }


def run_phase(
    phase_name: str,
    *,
    kind: str,
    size: int,
    offload: str,
    folder: str,
    s3: tuple[str, str],
    encrypt: bool,
) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase_name,
        "--kind",
        kind,
        "--size",
        str(size),
        "--offload",
        offload,
        "--folder",
        folder,
        "--endpoint",
        s3[0],
        "--bucket",
        s3[1],
        *(["--encrypt"] if encrypt else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command}: {done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def measure(
    sizes: list[int], kinds: list[str], offloads: list[str], *, encrypt: bool
) -> dict[str, dict[str, float]]:
    """Medians of RUNS write/read pairs per case, keyed "kind size offload phase"."""
    results: dict[str, dict[str, float]] = {}
    with ExitStack() as stack:
        endpoint = stack.enter_context(moto_server()) if "s3" in offloads else ""
        for size in sizes:
            for kind in kinds:
                for offload in offloads:
                    samples: dict[str, list[dict[str, float]]] = {
                        "write": [],
                        "read": [],
                    }
                    for _ in range(RUNS):
                        bucket = create_bucket(endpoint) if offload == "s3" else ""
                        with tempfile.TemporaryDirectory() as folder:
                            for phase_name in ("write", "read"):
                                samples[phase_name].append(
                                    run_phase(
                                        phase_name,
                                        kind=kind,
                                        size=size,
                                        offload=offload,
                                        folder=folder,
                                        s3=(endpoint, bucket),
                                        encrypt=encrypt,
                                    )
                                )
                    for phase_name, runs in samples.items():
                        results[f"{kind} {size} {offload} {phase_name}"] = {
                            key: statistics.median(r[key] for r in runs)
                            for key in runs[0]
                        }
    return results


def report(
    results: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]]
) -> None:
    rows = [
        [
            "value",
            "MB",
            "offload",
            "phase",
            "traced MB",
            "copies",
            "RSS MB",
            "copies",
            "s",
            "traced vs baseline",
        ]
    ]
    for case, figures in results.items():
        kind, size, offload, phase_name = case.split()
        value = int(size) * MB
        before = baseline.get(case)
        ratio = (
            f"{figures['traced'] / before['traced']:.2f}x"
            if before and before["traced"] > 0
            else "-"
        )
        rows.append(
            [
                kind,
                size,
                offload,
                phase_name,
                f"{figures['traced'] / MB:.0f}",
                f"{figures['traced'] / value:.2f}",
                f"{figures['rss'] / MB:.0f}",
                f"{figures['rss'] / value:.2f}",
                f"{figures['seconds']:.2f}",
                ratio,
            ]
        )
    print(
        f"peak memory beyond the value, SQLite, medians of {RUNS} runs "
        f"(copies = peak / value size; traced vs baseline = this traced peak / "
        f"the baseline's)"
    )
    print(table(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500", help="MB, comma-separated")
    parser.add_argument("--offloads", default="none,file,s3")
    parser.add_argument("--kinds", default="str,bytes,dict")
    parser.add_argument("--encrypt", action="store_true", help="encrypt payloads")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--baseline", help="figures of an earlier run to compare with")
    # one phase in this process (what the driver runs in a subprocess)
    parser.add_argument("--phase", choices=("write", "read"))
    parser.add_argument("--kind", default="str")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--offload", default="none")
    parser.add_argument("--folder", default="")
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--bucket", default="")
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(asyncio.run(phase(args))))
        return
    results = measure(
        [int(s) for s in args.sizes.split(",")],
        args.kinds.split(","),
        args.offloads.split(","),
        encrypt=args.encrypt,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    baseline = json.loads(Path(args.baseline).read_text()) if args.baseline else {}
    report(results, baseline)


if __name__ == "__main__":
    main()
