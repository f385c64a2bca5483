"""Tagged JSON (stdlib) vs msgpack for the serde codec: encode + decode time.

Both candidates keep the same guarantees: exact types back (tuple, set, datetime,
UUID, Decimal, dataclass), lone surrogates round-trip, non-str dict keys. The
msgpack candidate uses ExtType for tagged values and strict_types so tuples and
subclasses reach its hook, as the real codec would need to.

Run: .venv/bin/python benchmarks/codec_choice.py
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgpack  # type: ignore[import-untyped, import-not-found, unused-ignore]  # an optional benchmark dependency, untyped

from resumable.serde import Codec, Serde, TypeRegistry

# ---------------------------------------------------------------- sample values

_WORDS = [
    "the", "model", "returned", "a", "summary", "of", "the", "document", "with",
    "several", "key", "findings", "about", "revenue", "growth", "customer", "churn",
    "and", "the", "outlook", "for", "next", "quarter", "including", "risks",
]  # fmt: skip


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(_WORDS))
    return " ".join(words)[:size]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass
class Message:
    role: str
    content: str
    usage: Usage | None = None


@dataclass
class Conversation:
    id: UUID
    created: datetime
    messages: list[Message] = field(default_factory=list)
    tags: tuple[str, ...] = ()


def samples() -> dict[str, object]:
    rng = random.Random(7)
    mixed: dict[str, object] = {
        "id": "chatcmpl-9a8b7c6d5e",
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "top_p": 1.0,
        "max_tokens": 1024,
        "stream": False,
        "stop": None,
        "n": 1,
        "seed": 42,
        "user": "user-42",
        "created_at": datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        "request_id": UUID(int=rng.getrandbits(128)),
        "cost": Decimal("0.000215"),
        "latency_s": 1.734,
        "finish_reason": "stop",
        "tools": ["search", "calculator"],
        "logit_bias": {"50256": -100},
        "metadata": {"tenant": "acme", "priority": 3},
        "retries": 0,
        "cached": True,
    }
    chat = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": _text(rng, rng.randint(80, 600)),
        }
        for i in range(50)
    ]
    conversation = Conversation(
        id=UUID(int=rng.getrandbits(128)),
        created=datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        messages=[
            Message("user", _text(rng, 200)),
            *(
                Message("assistant", _text(rng, 300), Usage(120 + i, 300 + i))
                for i in range(9)
            ),
        ],
        tags=("support", "billing"),
    )
    return {
        "1 KB str": _text(rng, 1024),
        "dict of 20 mixed fields": mixed,
        "50 chat messages": chat,
        "64 KB bytes": rng.randbytes(64 * 1024),
        "nested dataclass": conversation,
    }


# ---------------------------------------------------------------- msgpack candidate

_EXT_TUPLE, _EXT_SET, _EXT_FROZENSET, _EXT_DATETIME = 1, 2, 3, 4
_EXT_DATE, _EXT_TIME, _EXT_TIMEDELTA, _EXT_UUID, _EXT_DECIMAL = 5, 6, 7, 8, 9
_EXT_OBJECT = 10


_SIMPLE_EXT: dict[type, tuple[int, Callable[[Any], bytes]]] = {
    datetime: (_EXT_DATETIME, lambda v: v.isoformat().encode()),
    date: (_EXT_DATE, lambda v: v.isoformat().encode()),
    time: (_EXT_TIME, lambda v: v.isoformat().encode()),
    UUID: (_EXT_UUID, lambda v: v.bytes),
    Decimal: (_EXT_DECIMAL, lambda v: str(v).encode()),
}
_FROM_BYTES: dict[int, Callable[[bytes], object]] = {
    _EXT_DATETIME: lambda b: datetime.fromisoformat(b.decode()),
    _EXT_DATE: lambda b: date.fromisoformat(b.decode()),
    _EXT_TIME: lambda b: time.fromisoformat(b.decode()),
    _EXT_UUID: lambda b: UUID(bytes=b),
    _EXT_DECIMAL: lambda b: Decimal(b.decode()),
}
_CONTAINER_EXT: dict[type, int] = {
    tuple: _EXT_TUPLE,
    set: _EXT_SET,
    frozenset: _EXT_FROZENSET,
}
_FROM_LIST: dict[int, Callable[[list[Any]], object]] = {
    _EXT_TUPLE: tuple,
    _EXT_SET: set,
    _EXT_FROZENSET: frozenset,
}


class MsgpackCodec:
    """What a msgpack codec with the same guarantees would look like."""

    def __init__(self, types: dict[str, type]) -> None:
        self._types = types
        self._tags = {tp: name for name, tp in types.items()}

    def _pack(self, value: object) -> bytes:
        packed: bytes = msgpack.packb(
            value,
            default=self._default,
            strict_types=True,
            use_bin_type=True,
            unicode_errors="surrogatepass",
        )
        return packed

    def _default(self, value: Any) -> msgpack.ExtType:
        kind = type(value)
        simple = _SIMPLE_EXT.get(kind)
        if simple is not None:
            code, to_bytes = simple
            return msgpack.ExtType(code, to_bytes(value))
        if kind in _CONTAINER_EXT:
            return msgpack.ExtType(_CONTAINER_EXT[kind], self._pack(list(value)))
        if kind is timedelta:
            parts = [value.days, value.seconds, value.microseconds]
            return msgpack.ExtType(_EXT_TIMEDELTA, self._pack(parts))
        tag = self._tags.get(kind)
        if tag is None or not dataclasses.is_dataclass(value):
            raise TypeError(f"{kind.__qualname__} is not serializable")
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return msgpack.ExtType(_EXT_OBJECT, self._pack([tag, fields]))

    def _ext_hook(self, code: int, data: bytes) -> object:
        from_bytes = _FROM_BYTES.get(code)
        if from_bytes is not None:
            return from_bytes(data)
        inner = self.decode(data)
        if code == _EXT_TIMEDELTA:
            return timedelta(*inner)
        if code == _EXT_OBJECT:
            tag, fields = inner
            return self._types[tag](**fields)
        return _FROM_LIST[code](inner)

    def encode(self, value: object) -> bytes:
        return self._pack(value)

    def decode(self, data: bytes) -> Any:
        return msgpack.unpackb(
            data,
            ext_hook=self._ext_hook,
            strict_map_key=False,
            unicode_errors="surrogatepass",
        )


# ---------------------------------------------------------------- measurement


def median_us(fn: Callable[[], object], *, repeat: int = 7) -> float:
    """Median over `repeat` runs of the mean time per call, in microseconds."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, 200)
    runs = timer.repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e6


def main() -> None:
    values = samples()
    registry = TypeRegistry()
    registry.register(Conversation)
    json_codec = Codec(registry)
    msgpack_codec = MsgpackCodec(
        {f"{t.__module__}:{t.__qualname__}": t for t in (Conversation, Message, Usage)}
    )
    serde = Serde(registry)

    header = f"{'value':<26}{'json µs':>10}{'msgpack µs':>12}{'ratio':>8}"
    header += f"{'json B':>9}{'msgpack B':>11}{'Serde µs':>10}"
    print(header)
    for name, value in values.items():
        assert json_codec.decode(json_codec.encode(value)) == value, name
        assert msgpack_codec.decode(msgpack_codec.encode(value)) == value, name

        def json_trip(value: object = value) -> object:
            return json_codec.decode(json_codec.encode(value))

        def msgpack_trip(value: object = value) -> object:
            return msgpack_codec.decode(msgpack_codec.encode(value))

        def serde_trip(value: object = value) -> object:
            return serde.loads(serde.dumps(value, place="bench"), place="bench")

        j, m, s = median_us(json_trip), median_us(msgpack_trip), median_us(serde_trip)
        print(
            f"{name:<26}{j:>10.2f}{m:>12.2f}{j / m:>8.2f}"
            f"{len(json_codec.encode(value)):>9}{len(msgpack_codec.encode(value)):>11}"
            f"{s:>10.2f}"
        )
    print("ratio = json / msgpack (above 1: msgpack faster); Serde = json + envelope")


if __name__ == "__main__":
    main()
