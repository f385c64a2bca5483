"""Codec.fingerprint: stable, order-independent, total."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from resumable.serde import Codec, TypeRegistry


@dataclass
class Query:
    text: str
    top_k: int = 5


class Client:
    def __init__(self, key: str) -> None:
        self.key = key


def fingerprint(value: object) -> str:
    return Codec(TypeRegistry()).fingerprint(value)


def test_a_fingerprint_is_16_hex_digits() -> None:
    digest = fingerprint({"a": 1})
    assert len(digest) == 16
    assert int(digest, 16) >= 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((5,), "3017ef75d4587432"),
        (("abc", 1.5, None, True, False, -7), "e225e7fa014b1de0"),
        (("\ud800 lone",), "db3a1f11225b079a"),
        ((), "6fe65140f71d712a"),
        ((1 << 70,), "f51df8c82ff05579"),
        ((1, [2]), "26e1f1a52a250d6a"),
        ("text", "10fc285cc1e9bcef"),
        ({"b": 1, "a": (2, 3)}, "b1367327d2d2ce1a"),
    ],
    ids=repr,
)
def test_fingerprints_never_change_between_releases(
    value: object, expected: str
) -> None:
    # journals store them: a new digest for the same call would refuse every
    # recorded run as changed code (NonDeterminismError) after an upgrade
    assert fingerprint(value) == expected


def test_equal_values_have_equal_fingerprints() -> None:
    def make() -> dict[object, object]:
        return {
            "q": Query("hi"),
            "when": date(2026, 1, 1),
            "ids": {3, 1, 2},
            "cost": Decimal("1.10"),
            (1, 2): [b"x", None],
        }

    assert make() is not make()
    assert fingerprint(make()) == fingerprint(make())


def test_different_values_have_different_fingerprints() -> None:
    values: list[object] = [
        1,
        1.0,
        True,
        "1",
        [1],
        (1,),
        {1},
        {"a": 1},
        {"a": 2},
        {1: "a"},
        {"1": "a"},
        Query("hi"),
        Query("hi", top_k=6),
        Decimal("1.1"),
        Decimal("1.10"),
        b"1",
        None,
        {"~": "tuple", "v": [1]},
    ]
    digests = [fingerprint(v) for v in values]
    assert len(set(digests)) == len(digests)


def test_dict_and_set_order_do_not_matter() -> None:
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint({1: "x", (2, 3): "y"}) == fingerprint({(2, 3): "y", 1: "x"})
    assert fingerprint({"x", "y", "z"}) == fingerprint({"z", "x", "y"})
    assert fingerprint(frozenset({(1, "a"), (2, "b")})) == fingerprint(
        frozenset({(2, "b"), (1, "a")})
    )


def test_unencodable_values_count_as_their_type() -> None:
    assert fingerprint({"client": Client("k1")}) == fingerprint(
        {"client": Client("k2")}
    )
    assert fingerprint({"client": Client("k1")}) != fingerprint({"client": None})
    assert fingerprint(threading.Lock()) == fingerprint(threading.Lock())


def test_fingerprint_never_raises() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]

    class Hostile:
        def __getattribute__(self, name: str) -> object:
            raise RuntimeError("no")

    @dataclass
    class Broken:
        x: int

    broken = Broken(1)
    del broken.x
    for value in [cycle, deep, Hostile(), broken, lambda: 1, {Hostile(): [cycle]}]:
        assert len(fingerprint(value)) == 16


def test_fingerprint_does_not_depend_on_the_process(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from resumable.serde import Codec, TypeRegistry
        value = {"b": {"x", "y", "z", "w"}, "a": frozenset({"p", "q"}), 3: ("t",)}
        print(Codec(TypeRegistry()).fingerprint(value))
        """
    )
    path = tmp_path / "fp.py"
    path.write_text(script)
    digests = {
        subprocess.run(
            [sys.executable, str(path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ["1", "2", "3"]
    }
    value = {"b": {"x", "y", "z", "w"}, "a": frozenset({"p", "q"}), 3: ("t",)}
    assert digests == {fingerprint(value)}


def test_fingerprinting_registers_nothing() -> None:
    registry = TypeRegistry()
    Codec(registry).fingerprint(Query("x"))
    assert registry.lookup(registry.tag_for(Query)) is None
