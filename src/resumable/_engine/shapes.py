"""Shapes: a state as the snapshot store sees it, and the pure operations on shapes.

A value is split into a *shape*: dicts by key, lists element by element, and every
other value (a list element, a string, a dataclass) as a leaf, inline when tiny
(`{"j": its encoding}`) or a reference to a content-addressed chunk
(`{"c": hash}`). Manifests store shapes; a delta manifest stores the ops that
`diff` found between two shapes, which `apply_ops` replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from resumable.serde.codec import Codec
from resumable.serde.view import escape_key

# {"j": encoded value} | {"c": hash} | {"d": {key: Shape}} | {"l": [Shape]}; manifests
# written before inline values were kept encoded hold {"v": value} instead of "j"
Shape = dict[str, Any]
Path = tuple[str, ...]


def chunk_place(digest: str) -> str:
    """How messages (and encryption's associated data) name a chunk."""
    return f"chunk {digest}"


def diff(path: Path, old: Shape, new: Shape, ops: list[list[Any]]) -> None:
    """Append to `ops` what turns `old` into `new` at `path` (append, set, del)."""
    if old == new:
        return
    if "d" in old and "d" in new:
        for key in old["d"].keys() - new["d"].keys():
            ops.append(["del", [*path, key]])
        for key, value in new["d"].items():
            if key in old["d"]:
                diff((*path, key), old["d"][key], value, ops)
            else:
                ops.append(["set", [*path, key], value])
        return
    if "l" in old and "l" in new:
        before, after = old["l"], new["l"]
        if len(after) >= len(before) and after[: len(before)] == before:
            ops.append(["append", list(path), after[len(before) :]])
            return
    ops.append(["set", list(path), new])


def apply_ops(shape: Shape, ops: Sequence[Sequence[Any]]) -> Shape:
    """`shape` changed by one delta manifest's ops, in place: the caller's own copy."""
    result = shape
    for op in ops:
        kind, path = op[0], tuple(op[1])
        if kind == "append":
            _at(result, path)["l"].extend(op[2])
        elif kind == "set":
            result = _set(result, path, op[2])
        elif kind == "del":
            del _at(result, path[:-1])["d"][path[-1]]
        else:
            raise ValueError(f"unknown snapshot op {kind!r}")
    return result


def _at(shape: Shape, path: Path) -> Shape:
    for key in path:
        shape = shape["d"][key]
    return shape


def _set(shape: Shape, path: Path, value: Shape) -> Shape:
    if not path:
        return value
    _at(shape, path[:-1])["d"][path[-1]] = value
    return shape


def leaf_hashes(shape: Shape) -> Iterator[str]:
    """The chunks of a shape's leaves (with repeats)."""
    if "c" in shape:
        yield shape["c"]
    elif "d" in shape:
        for value in shape["d"].values():
            yield from leaf_hashes(value)
    elif "l" in shape:
        for item in shape["l"]:
            yield from leaf_hashes(item)


def refs(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The chunks a manifest names directly (what GC must keep while it exists)."""
    found: list[str] = []

    def walk(shape: Shape) -> None:
        if "c" in shape:
            found.append(shape["c"])
        elif "d" in shape:
            for value in shape["d"].values():
                walk(value)
        elif "l" in shape:
            found.extend(shape.get("s", ()))
            for item in shape["l"]:
                walk(item)

    if "full" in manifest:
        walk(manifest["full"])
    for op in manifest.get("ops", ()):
        if op[0] == "append":
            for item in op[2]:
                walk(item)
        elif op[0] == "set":
            walk(op[2])
    return tuple(dict.fromkeys(found))


def segments(shape: Shape) -> Iterator[str]:
    """The list segment chunks a folded shape names."""
    if "d" in shape:
        for value in shape["d"].values():
            yield from segments(value)
    elif "l" in shape:
        yield from shape.get("s", ())
        for item in shape["l"]:
            yield from segments(item)


def expand(shape: Shape, by_digest: dict[str, list[Shape]]) -> Shape:
    """A folded shape with its segment references replaced by their items."""
    if "d" in shape:
        return {"d": {k: expand(v, by_digest) for k, v in shape["d"].items()}}
    if "l" in shape:
        items = [item for digest in shape.get("s", ()) for item in by_digest[digest]]
        return {"l": [expand(item, by_digest) for item in [*items, *shape["l"]]]}
    return shape


def build(shape: Shape, leaves: dict[str, Any], codec: Codec) -> Any:
    """The value a shape describes, its chunk leaves decoded already in `leaves`."""
    if "j" in shape:
        return codec.decode(shape["j"].encode("utf-8", "surrogatepass"))
    if "v" in shape:
        return shape["v"]
    if "c" in shape:
        return leaves[shape["c"]]
    if "d" in shape:
        return {k: build(v, leaves, codec) for k, v in shape["d"].items()}
    return [build(item, leaves, codec) for item in shape["l"]]


def build_view(
    shape: Shape, leaves: dict[str, Any], view: Callable[[bytes], Any]
) -> Any:
    """`build` for generic views: leaves already viewed, inline ones viewed here."""
    if "j" in shape:
        return view(shape["j"].encode("utf-8", "surrogatepass"))
    if "v" in shape:
        return shape["v"]
    if "c" in shape:
        return leaves[shape["c"]]
    if "d" in shape:
        return {
            escape_key(k): build_view(v, leaves, view) for k, v in shape["d"].items()
        }
    return [build_view(item, leaves, view) for item in shape["l"]]
