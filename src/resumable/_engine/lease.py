"""Lease owners, noticing an owner that died on this very host, and tenure.

Tenure is how long an owner may act on its lease before it must confirm it with
the store: a paused owner must not start a step another worker may have run.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from dataclasses import dataclass, field


def new_owner() -> str:
    """A unique owner id: `host:pid:random`, so a dead local owner can be recognised."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def is_dead_local_owner(owner: str | None) -> bool:
    """Whether `owner` was a process on this host that no longer exists.

    Its lease need not be waited out: no process can still write with its fence.
    A process merely paused (SIGSTOP) is alive, so its lease is waited out and its
    later writes are fenced off instead.
    """
    host, _, pid_text = (owner or "").rpartition(":")[0].partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid in (0, os.getpid()):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        pass
    return False


@dataclass(slots=True)
class Tenure:
    """How long an execution may act on its lease without asking the store.

    The store keeps a lease until `asked + ttl` by the clock of the request that
    took or renewed it. The owner starts new work on it without a round trip only
    while less than two thirds of the TTL have passed since that request, on both
    its monotonic clock (which a wall-clock step cannot fool) and its wall clock
    (the one lease expiries are written in; it also counts a suspended machine,
    which the monotonic clock does not). The last third is the margin in which a
    step that starts now begins its work while no other worker may take the run.
    The heartbeat renews every third of the TTL, so a healthy owner never asks.
    """

    ttl_s: float
    asked_s: float
    """`time.monotonic()` when the last successful take or renewal was sent."""
    asked_ms: int
    """The wall clock (`Clock.now_ms`) when it was sent."""
    renewing: asyncio.Future[None] | None = None
    """The heartbeat's renewal on its way, which a step waits for rather than send
    another (a store slow for every run must not get a second renewal per step)."""
    fresh_until_s: float = field(init=False)
    """`time.monotonic()` past which new work asks the store first."""
    fresh_until_ms: int = field(init=False)
    """The wall clock past which new work asks the store first."""

    def __post_init__(self) -> None:
        self.renewed(asked_s=self.asked_s, asked_ms=self.asked_ms)

    @classmethod
    def of(cls, *, ttl_s: float, expires_at_ms: int, now_ms: int) -> Tenure:
        """The tenure of a lease just taken, whose store expiry is `expires_at_ms`."""
        asked_ms = expires_at_ms - int(ttl_s * 1000)
        return cls(
            ttl_s=ttl_s,
            asked_s=time.monotonic() - max(now_ms - asked_ms, 0) / 1000,
            asked_ms=asked_ms,
        )

    def renewed(self, *, asked_s: float, asked_ms: int) -> None:
        """A renewal sent at `asked_s` / `asked_ms` succeeded."""
        self.asked_s, self.asked_ms = asked_s, asked_ms
        fresh_s = self.ttl_s * 2 / 3
        self.fresh_until_s = asked_s + fresh_s
        self.fresh_until_ms = asked_ms + int(fresh_s * 1000)

    def is_fresh(self, now_ms: int) -> bool:
        """Whether new work may start without confirming the lease with the store."""
        return (
            time.monotonic() < self.fresh_until_s
            and self.asked_ms <= now_ms < self.fresh_until_ms
        )
