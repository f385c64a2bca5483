"""Lease owners, and noticing an owner that died on this very host."""

from __future__ import annotations

import os
import secrets
import socket


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
