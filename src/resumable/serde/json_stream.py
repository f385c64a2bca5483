"""A large value's JSON text a piece at a time, when its size is in long strings.

json's C encoder writes a document in one go: the whole text, and the list of
its pieces while it joins them. For a dict or list whose bulk is a few long
strings (a document's text, a tagged `bytes` value's base64), `json_stream`
writes the same text without holding it whole: the containers on the way to
those strings are written an item at a time (each item by the C encoder), and
a long string that needs no escaping is written straight from the value, a
slice at a time (one that does is escaped once, by the C encoder, and held).

Only a bounded part of the tree is gone through item by item (containers of
at most `FANOUT` items, `BUDGET` items in all), so a value of many small items
costs what it did: `json_stream` returns None for it, and the caller writes its
text whole. The pieces join to exactly `dumps(tree)`, which
tests/serde/test_json_stream.py checks on a corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from resumable.serde.streams import SLICE, STREAM_OVER, Encoded

__all__ = ["BUDGET", "DEPTH", "FANOUT", "LONG", "json_stream"]

FANOUT: Final = 64
"""Containers with more items than this are written whole by the C encoder."""
BUDGET: Final = 1024
"""Items gone through one at a time, at most, per value."""
DEPTH: Final = 16
"""Containers nested deeper than this are written whole by the C encoder."""
LONG: Final = STREAM_OVER
"""Strings longer than this are written a slice at a time."""
_CONTAINERS: Final = frozenset({dict, list, tuple})
_ESCAPED: Final = re.compile(r'[\x00-\x1f"\\]')
"""What json escapes with ensure_ascii=False; anything else is written as is."""


def json_stream(tree: Any, dumps: Callable[[Any], str]) -> Encoded | None:
    """`dumps(tree)` UTF-8 encoded ("surrogatepass"), as pieces; None if it does not pay.

    Args:
        tree: What the codec's walk made: dicts with str keys, lists, tuples and
            JSON scalars.
        dumps: The codec's `json.JSONEncoder(...).encode` (compact separators,
            ensure_ascii off).

    Raises:
        ValueError: As `dumps` (an int past the digit limit).
    """
    if type(tree) not in _CONTAINERS or not _holds_long_text(tree, [BUDGET], 0):
        return None
    parts: list[bytes | str] = []
    fragments: list[str] = []
    _plan(tree, (dumps, parts, fragments), [BUDGET], 0)
    parts.append("".join(fragments).encode("utf-8", "surrogatepass"))
    size = sum(_utf8_size(part) for part in parts)

    def pieces() -> Iterator[bytes]:
        for part in parts:
            if isinstance(part, bytes):
                yield part
                continue
            for at in range(0, len(part), SLICE):
                # surrogatepass encodes each code point on its own, so slices join
                yield part[at : at + SLICE].encode("utf-8", "surrogatepass")

    return Encoded(size, pieces)


def _splits(node: Any, budget: list[int], depth: int) -> bool:
    """Whether the container `node` is gone through item by item (and spend on it)."""
    if depth >= DEPTH or not node or len(node) > FANOUT or len(node) > budget[0]:
        return False
    budget[0] -= len(node)
    return True


def _holds_long_text(node: Any, budget: list[int], depth: int) -> bool:
    # a plain loop: every dict result passes here, most of them small
    if not _splits(node, budget, depth):
        return False
    for item in node.values() if type(node) is dict else node:
        kind = type(item)
        if kind is str:
            if len(item) > LONG:
                return True
        elif (kind is dict or kind is list or kind is tuple) and _holds_long_text(
            item, budget, depth + 1
        ):
            return True
    return False


_Out = tuple[Callable[[Any], str], list[bytes | str], list[str]]
"""(dumps, the parts made so far, the fragments of text not yet in a part)."""


def _plan(node: Any, out: _Out, budget: list[int], depth: int) -> None:
    """Append `dumps(node)` to `fragments`, long strings to `parts` between them.

    Containers are gone through item by item under the same rule and budget as
    in `_holds_long_text`; any other node is written by the C encoder.
    """
    dumps, parts, fragments = out
    if type(node) is str and len(node) > LONG:
        is_raw = _ESCAPED.search(node) is None
        if is_raw:
            fragments.append('"')
        parts.append("".join(fragments).encode("utf-8", "surrogatepass"))
        fragments.clear()
        # written as it is (no copy made), or escaped once by the C encoder
        parts.append(node if is_raw else dumps(node))
        if is_raw:
            fragments.append('"')
        return
    kind = type(node)
    if (
        kind not in _CONTAINERS
        or (kind is dict and not all(type(key) is str for key in node))
        or not _splits(node, budget, depth)
    ):
        fragments.append(dumps(node))
        return
    if isinstance(node, dict):  # exactly a dict: kind is in _CONTAINERS
        fragments.append("{")
        for at, (key, item) in enumerate(node.items()):
            fragments.append(("," if at else "") + dumps(key) + ":")
            _plan(item, out, budget, depth + 1)
        fragments.append("}")
        return
    fragments.append("[")
    for at, item in enumerate(node):
        if at:
            fragments.append(",")
        _plan(item, out, budget, depth + 1)
    fragments.append("]")


def _utf8_size(part: bytes | str) -> int:
    if isinstance(part, bytes) or part.isascii():
        return len(part)
    # counted a slice at a time, never encoded whole
    return sum(
        len(part[at : at + SLICE].encode("utf-8", "surrogatepass"))
        for at in range(0, len(part), SLICE)
    )
