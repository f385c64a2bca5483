"""Checks the built-in stores make on what they read back (see also `stores.checks`).

A store's rows are data anyone with write access can change. A value of the wrong
type or out of range is reported as damage (StoreError or CorruptCheckpointError,
naming where), never left to fail later as a TypeError deep in the engine.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any, TypeVar, cast

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.checks import is_stored_ms
from resumable.stores.protocol import ThreadRecord


def schema_version_of(value: object, *, store: str) -> int:
    """The schema version a store's meta row holds (0 when there is none).

    Raises:
        StoreError: The stored version is not a non-negative whole number.
    """
    if value is None:
        return 0
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    text = str(value).strip()
    if not text.isdigit() or len(text) > 9:
        raise StoreError(
            store=store,
            detail=f"its schema_version is {text[:40]!r}, not a version number: "
            f"the store's meta data was altered; restore it from a backup, or set "
            f"it to the version this store was created with",
        )
    return int(text)


def checked_thread(
    thread_id: object, updated_at_ms: object, unescape: Callable[[str], str] = str
) -> ThreadRecord:
    """A listed thread, if its stored id and newest time are what this library writes.

    `unescape` turns the stored id back into the thread's (`_sql.from_text`).

    Raises:
        CorruptCheckpointError: They are not (a snapshot row or index was altered).
    """
    if type(thread_id) is str and is_stored_ms(updated_at_ms):
        return ThreadRecord(
            thread_id=unescape(thread_id), updated_at_ms=cast("int", updated_at_ms)
        )
    raise CorruptCheckpointError(
        place=f"thread {thread_id!r:.80}",
        detail=f"its stored snapshots are damaged (thread id of type "
        f"{type(thread_id).__name__}, newest created_at_ms {updated_at_ms!r:.40}); "
        f"restore its snapshot rows from a backup or delete them, and the threads "
        f"list again",
    )


F = TypeVar("F", bound=Callable[..., Any])


def converter(what: str, where: Callable[..., str] | None = None) -> Callable[[F], F]:
    """Report a stored row or packed record that does not convert as damage.

    For the functions that turn what a driver returned into a record: a value of
    the wrong type or shape raises CorruptCheckpointError, not a TypeError.
    `where(*args)` names the place from the converter's arguments (a row's ids).
    """

    def decorate(convert: F) -> F:
        @functools.wraps(convert)
        def checked(*args: Any) -> Any:
            try:
                return convert(*args)
            except (
                TypeError,
                ValueError,
                AttributeError,
                KeyError,
                IndexError,
                struct.error,
                RecursionError,  # JSON nested past the interpreter's limit
            ) as exc:
                raise CorruptCheckpointError(
                    place=_place(what, where, args),
                    detail=f"it does not read as a {what} ({type(exc).__name__}: "
                    f"{str(exc)[:120]})",
                ) from exc

        return cast("F", checked)

    return decorate


def _place(what: str, where: Callable[..., str] | None, args: tuple[Any, ...]) -> str:
    if where is not None:
        try:
            return where(*args)
        except Exception:  # noqa: BLE001, S110 - the ids themselves may be the damage
            pass
    return f"a stored {what}"
