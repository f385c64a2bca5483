"""Compression on LLM-like payloads: stored bytes with and without zstd.

The corpus is real English prose (the standard library's own documentation) cut
into the shapes LLM workflows store: single answers of a few KB, chat histories,
and OpenAI-style completion objects. Prints the ratio per shape and overall, for
the default threshold (payloads over 4 KiB) and for snapshot chunks (over 256 B).
"""

from __future__ import annotations

import argparse
import asyncio
import email
import json
import pydoc
import random
import sqlite3
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable.serde import Serde
from resumable.serde.integrity import _ZSTD_LEVEL

MODULES = (asyncio, json, random, sqlite3, statistics, argparse, email, pydoc)


def prose() -> str:
    text = []
    for module in MODULES:
        for name in dir(module):
            doc = getattr(getattr(module, name, None), "__doc__", None)
            if isinstance(doc, str):
                text.append(" ".join(doc.split()))
    return " ".join(text)


def corpus(rng: random.Random, text: str) -> dict[str, Sequence[object]]:
    def cut(size: int) -> str:
        start = rng.randrange(0, len(text) - size)
        return text[start : start + size]

    answers = [cut(rng.randint(1500, 6000)) for _ in range(200)]
    chats = [
        [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": cut(rng.randint(200, 900)),
            }
            for i in range(rng.randint(4, 30))
        ]
        for _ in range(50)
    ]
    completions = [
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "model": "gpt-5-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": cut(rng.randint(800, 4000)),
                    },
                }
            ],
            "usage": {
                "prompt_tokens": rng.randint(100, 3000),
                "completion_tokens": rng.randint(50, 900),
            },
        }
        for n in range(200)
    ]
    messages = [
        {"role": "assistant", "content": cut(rng.randint(300, 700))} for _ in range(500)
    ]
    return {
        "answers (1.5-6 KB)": answers,
        "chat histories": chats,
        "completion objects": completions,
        "chat messages (300-700 B)": messages,
    }


THRESHOLDS = (4096, 1024, 256)


def _cells(sizes: list[int]) -> list[str]:
    plain = sizes[0]
    return [f"{plain / 1024:.0f} KB"] + [
        f"{size / 1024:.0f} KB ({plain / size:.2f}x)" for size in sizes[1:]
    ]


def main() -> None:
    shapes = corpus(random.Random(11), prose())
    serdes = [Serde(compress_over=None)] + [Serde(compress_over=n) for n in THRESHOLDS]
    rows = [("payloads", "count", "plain", *(f"zstd over {n} B" for n in THRESHOLDS))]
    totals = [0] * len(serdes)
    for name, values in shapes.items():
        sizes = [
            sum(len(serde.dumps(v, place="p")) for v in values) for serde in serdes
        ]
        totals = [t + size for t, size in zip(totals, sizes, strict=True)]
        rows.append((name, str(len(values)), *_cells(sizes)))
    rows.append(("all", "", *_cells(totals)))
    print(
        f"zstd (level {_ZSTD_LEVEL}) on LLM-like text. resumable compresses step "
        "outputs, inputs and\nrun results over 1024 B (its default), and snapshot "
        "chunks over 256 B"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
