"""A large value's JSON text a piece at a time: never joined whole.

json's C encoder writes a document in one go: the whole text, and the list of
its pieces while it joins them (two copies of it for a moment). `json_stream`
writes the same text in pieces instead:

- a dict or list whose bulk is a few long strings (a document's text, a tagged
  `bytes` value's base64): the containers on the way to those strings are
  written an item at a time (each item by the C encoder), and a long string
  that needs no escaping is written straight from the value, a slice at a
  time (one that does is escaped once, by the C encoder, and held);
- a container of many items (more than `MANY`): a slice of its items at a
  time, each slice by the C encoder (`dumps` of a list or dict of those items,
  its brackets cut off, the slices joined by commas), about `SLICE_TEXT`
  characters each. The pieces are held (the size of the whole is needed before
  the first byte is compressed), but never joined: one copy of the text, not two.

Only a bounded part of the tree is gone through item by item (containers of
at most `FANOUT` items, `BUDGET` items in all); containers of more than
`FANOUT` and at most `MANY` items are written whole. A value with neither (a
dict of a few short fields, most step results) gets None, and the caller
writes its text whole. The pieces join to exactly `dumps(tree)`, which
tests/serde/test_json_stream.py checks on a corpus.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from resumable.serde.streams import SLICE, STREAM_OVER, Encoded

__all__ = ["BUDGET", "DEPTH", "FANOUT", "LONG", "MANY", "SLICE_TEXT", "json_stream"]

FANOUT: Final = 64
"""Containers with more items than this are written whole by the C encoder..."""
MANY: Final = 1024
"""...unless they have more than this: then a slice of items at a time (fewer
cost more in calls than the text they could save)."""
BUDGET: Final = 1024
"""Items gone through one at a time, at most, per value."""
DEPTH: Final = 16
"""Containers nested deeper than this are written whole by the C encoder."""
LONG: Final = STREAM_OVER
"""Strings longer than this are written a slice at a time."""
SLICE_TEXT: Final = 1 << 20
"""Characters of JSON aimed at per slice of a large container's items."""
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
    if type(tree) not in _CONTAINERS or not (
        len(tree) > MANY or _holds_long_text(tree, [BUDGET], 0)
    ):
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
        elif (kind is dict or kind is list or kind is tuple) and (
            len(item) > MANY or _holds_long_text(item, budget, depth + 1)
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
        _flush(parts, fragments)
        # written as it is (no copy made), or escaped once by the C encoder
        parts.append(node if is_raw else dumps(node))
        if is_raw:
            fragments.append('"')
        return
    kind = type(node)
    if kind in _CONTAINERS and len(node) > MANY:
        _sliced(node, out)
        return
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


def _flush(parts: list[bytes | str], fragments: list[str]) -> None:
    """Move the fragments written so far into a part of their own."""
    parts.append("".join(fragments).encode("utf-8", "surrogatepass"))
    fragments.clear()


def _sliced(node: Any, out: _Out) -> None:
    """Append `dumps(node)`, for a container of many items, a slice at a time.

    `dumps` of a list (a tuple) or dict of some of its items is `[` or `{`, the
    items' text joined by commas, then `]` or `}`: cut off, the slices join
    by commas to the items' text of the whole. How many items a slice takes
    follows the text the last one made, aiming at `SLICE_TEXT` characters.
    """
    dumps, parts, fragments = out
    is_dict = type(node) is dict
    fragments.append("{" if is_dict else "[")
    _flush(parts, fragments)
    items = iter(node.items() if is_dict else node)
    count, done, take = len(node), 0, FANOUT
    while done < count:
        batch = itertools.islice(items, take)
        text = dumps(dict(batch) if is_dict else list(batch))
        if done:
            parts.append(b",")
        parts.append(text[1:-1].encode("utf-8", "surrogatepass"))
        done += take
        take = max(1, min(take * 4, take * SLICE_TEXT // max(len(text), 1)))
    fragments.append("}" if is_dict else "]")


def _utf8_size(part: bytes | str) -> int:
    if isinstance(part, bytes) or part.isascii():
        return len(part)
    # counted a slice at a time, never encoded whole
    return sum(
        len(part[at : at + SLICE].encode("utf-8", "surrogatepass"))
        for at in range(0, len(part), SLICE)
    )
