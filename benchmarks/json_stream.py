"""Write time of a large dict: its JSON a piece at a time against the whole text.

Seals a dict (as `Serde.dumps_stream` does for an upload, zstd on, no encryption)
and reads every chunk of the frame, in this process, without I/O:

- streamed: today's `Serde.dumps_stream` (`serde.json_stream` where the dict's
  bulk is long strings; the whole text otherwise);
- whole (the baseline, measured in the same run): the JSON text made whole by
  json's C encoder, then its UTF-8 a slice at a time (the path before).

Values of SIZE MB: "small" (a dict of many small items), "list" (a list of
small dicts), "text" (one long text field json writes as it is), "escaped" (one long
text field with quotes and newlines, which json escapes). Also the encode time
of a 10-key dict (the hot path every step result takes) and of a list of 100
ints. Medians of RUNS runs.

    python benchmarks/json_stream.py [--sizes 5,100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable.serde import Serde
from resumable.serde.chunked import seal_chunks
from resumable.serde.streams import Encoded, text_stream

MB = 1_000_000
RUNS = 5
PLACE = "run 'bench' step #1 'big'"


def make_value(kind: str, size: int) -> Any:
    if kind == "small":
        return {
            f"key{i}": {"a": i, "b": "x" * 20, "c": [1.5, None]}
            for i in range(size // 55)
        }
    if kind == "list":
        return [
            {"id": i, "text": os.urandom(40).hex(), "ok": True}
            for i in range(size // 110)
        ]
    text = os.urandom(size // 2).hex()
    if kind == "escaped":
        text = text.replace("a", '"').replace("b", "\n")
    return {"text": text, "n": 1, "tags": ["a", "b"]}


def streamed(serde: Serde, value: object) -> int:
    sealed = serde.dumps_stream(value, place=PLACE)
    assert not isinstance(sealed, bytes)
    return sum(len(chunk) for chunk in sealed.chunks())


def whole(serde: Serde, value: object) -> int:
    text = serde.codec._json_text(value, "result")
    encoded: Encoded = text_stream(text, prefix=b"")
    sealed = seal_chunks(serde.envelope, encoded.size, encoded.pieces, place=PLACE)
    return sum(len(chunk) for chunk in sealed.chunks())


def median_s(fn: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5,100", help="MB, comma-separated")
    args = parser.parse_args()
    serde = Serde()
    rows = [["dict", "MB", "whole s", "streamed s", "ratio"]]
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in ("small", "list", "text", "escaped"):
            value = make_value(kind, size * MB)
            assert streamed(serde, value) == whole(serde, value)
            before = median_s(lambda: whole(serde, value))  # noqa: B023 - called at once
            after = median_s(lambda: streamed(serde, value))  # noqa: B023 - called at once
            rows.append(
                [
                    kind,
                    str(size),
                    f"{before:.3f}",
                    f"{after:.3f}",
                    f"{after / before:.2f}x",
                ]
            )
    small = {f"field{i}": i for i in range(10)}
    per = 10_000
    before = median_s(
        lambda: [serde.codec._json_text(small, "r").encode() for _ in range(per)]
    )
    after = median_s(lambda: [serde.codec.encode_stream(small) for _ in range(per)])
    rows.append(
        [
            "10 keys",
            "-",
            f"{before / per * 1e6:.2f} us",
            f"{after / per * 1e6:.2f} us",
            f"{after / before:.2f}x",
        ]
    )
    items = list(range(100))
    before = median_s(
        lambda: [serde.codec._json_text(items, "r").encode() for _ in range(per)]
    )
    after = median_s(lambda: [serde.codec.encode_stream(items) for _ in range(per)])
    rows.append(
        [
            "100 ints",
            "-",
            f"{before / per * 1e6:.2f} us",
            f"{after / per * 1e6:.2f} us",
            f"{after / before:.2f}x",
        ]
    )
    print(
        f"seal and read every chunk, zstd on, medians of {RUNS} runs (ratio = streamed / whole)"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
