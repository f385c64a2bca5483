"""How a step is cached across runs: `CachePolicy`, and the step's code version.

`@step(cache=True)` or `@step(cache=CachePolicy(...))` declare it; the lookup
and the serving of hits are `step_cache`'s.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePolicy:
    """How a step's results are shared across runs (`@step(cache=CachePolicy(...))`).

    Cache only steps whose result depends on their arguments alone: pure or
    idempotent steps, temperature-0 model calls, retrieval. Never a step with
    side effects (it would not run) or one that reads the time.
    """

    ttl: timedelta | float | None = None
    """How long an entry serves hits (a timedelta or seconds); None: until cleared
    or the step's code changes."""
    key: Callable[..., str] | None = None
    """Called with the step's arguments, returns the part of the key that stands
    for them (default: the arguments' fingerprint)."""
    scope: Literal["workflow", "store"] = "workflow"
    """"workflow": only runs of the same workflow share entries; "store": every
    run in the store does."""

    @property
    def ttl_ms(self) -> int | None:
        """The TTL in milliseconds, or None."""
        if self.ttl is None:
            return None
        seconds = (
            self.ttl.total_seconds() if isinstance(self.ttl, timedelta) else self.ttl
        )
        return int(seconds * 1000)


def policy_of(cache: bool | CachePolicy | None) -> CachePolicy | None:
    """`@step(cache=...)` as a policy: None when the step is not cached."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return CachePolicy()
    if isinstance(cache, CachePolicy):
        if cache.scope not in ("workflow", "store"):
            raise ValueError(
                f"CachePolicy.scope must be 'workflow' or 'store', not {cache.scope!r}"
            )
        return cache
    raise TypeError(f"cache= takes True, False or a CachePolicy, not {cache!r}")


def code_version(fn: Callable[..., Any], version: str | None) -> str:
    """The step's code version: `version` if given, else a hash of its source.

    Without the source (a built-in, a lambda typed in a shell) the bytecode
    and constants stand in for it.
    """
    if version is not None:
        return f"v:{version}"
    try:
        source = inspect.getsource(inspect.unwrap(fn)).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        source = repr((code.co_code, code.co_consts)).encode() if code else b""
    return "src:" + hashlib.blake2b(source, digest_size=12).hexdigest()
