"""The request log: what the simulated provider was asked and what it answered.

Tests use it to prove which LLM calls a workflow made (and which a resume did
not repeat). With a `log_path`, each entry is also appended to a JSONL file
with a single `os.write` on an `O_APPEND` descriptor, so a provider or client
killed with SIGKILL never leaves a torn line in the middle of the file, and
several processes may share one file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from resumable.simulator.faults import FaultKind
from resumable.simulator.prompts import Api
from resumable.simulator.replies import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestLogEntry:
    """One request the simulated provider received on a known API path."""

    seq: int
    """1-based, in arrival order since the provider started."""
    api: Api
    """"chat", "responses" or "messages"."""
    model: str
    """The requested model ("" for a malformed request)."""
    prompt_digest: str
    """A stable digest of the conversation: same prompt, same digest, in any process."""
    last_user_text: str
    """The last user message's text, which `count` and fault rules match on."""
    status: int | None
    """HTTP status sent; None when no response was meant to arrive (timeout, disconnect)."""
    fault: FaultKind | None
    """The injected fault, if any."""
    usage: Usage | None
    """Token usage reported; None unless the status is 200."""
    is_stream: bool
    """Whether the client asked for a server-sent event stream."""
    request_id: str
    """The value of the response's request-id header."""
    at: float
    """Unix time (seconds) the request arrived."""

    def to_json(self) -> str:
        """One JSON line (without the newline)."""
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> RequestLogEntry:
        """Parse a line written by `to_json`."""
        data: dict[str, Any] = json.loads(line)
        usage = data.pop("usage")
        return cls(**data, usage=None if usage is None else Usage(**usage))


def count_requests(
    entries: Iterable[RequestLogEntry],
    prompt_contains: str | None = None,
    *,
    status: int | None = 200,
    api: Api | None = None,
) -> int:
    """How many entries match.

    Args:
        entries: log entries, e.g. `SimulatedProvider.requests()` or `read_log(path)`.
        prompt_contains: count only entries whose last user message contains this.
        status: count only this HTTP status; None counts every entry.
        api: count only this API.
    """
    return sum(
        1
        for entry in entries
        if (prompt_contains is None or prompt_contains in entry.last_user_text)
        and (status is None or entry.status == status)
        and (api is None or entry.api == api)
    )


def read_log(path: str | os.PathLike[str]) -> list[RequestLogEntry]:
    """Read a JSONL request log, skipping a torn last line if a writer died mid-write."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entries.append(RequestLogEntry.from_json(line))
        except (ValueError, TypeError, KeyError):
            continue
    return entries


class RequestLog:
    """Thread-safe in-memory log, optionally mirrored to a JSONL file."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: list[RequestLogEntry] = []
        self._path = None if path is None else Path(path)
        self._fd: int | None = None

    def open(self) -> None:
        """Open the JSONL file for appending, if there is one."""
        if self._path is not None and self._fd is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(
                self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )

    def close(self) -> None:
        """Close the JSONL file; the in-memory entries stay readable."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def append(self, entry: RequestLogEntry) -> None:
        """Record an entry, and write it to the file as one line in one write()."""
        line = (entry.to_json() + "\n").encode()
        with self._lock:
            self._entries.append(entry)
            if self._fd is not None:
                # A regular file takes the whole line in one write(); the loop
                # only guards against a short write (disk full, signal).
                while line:
                    line = line[os.write(self._fd, line) :]

    def entries(self) -> list[RequestLogEntry]:
        """A copy of the entries, in arrival order."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        """Forget the in-memory entries (the file is left alone)."""
        with self._lock:
            self._entries.clear()
