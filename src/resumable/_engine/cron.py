"""Cron expressions read by croniter (the `resumable[schedule]` extra), in a time zone.

Only this module imports croniter, and only when a schedule is declared, so the
package imports without it. Times cross this module as epoch milliseconds; the
time zone decides what "02:00 every day" means across daylight-saving changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

EXTRA_HINT = "pip install 'resumable[schedule]'"


def _croniter() -> Any:
    try:
        from croniter import croniter  # type: ignore[import-untyped]  # croniter ships no types
    except ImportError as exc:
        raise ImportError(
            f"schedules read cron expressions with croniter: {EXTRA_HINT}"
        ) from exc
    return croniter


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron expression in a time zone: five fields, or six with seconds last."""

    expression: str
    tz: str

    def __post_init__(self) -> None:
        """Check both now, so a bad one fails where it is declared.

        Raises:
            ValueError: the expression or the time zone cannot be read (the
                caller names the schedule and workflow).
            ImportError: croniter is not installed (names the extra).
        """
        croniter = _croniter()
        if not croniter.is_valid(self.expression):
            raise ValueError(f"cron expression {self.expression!r} cannot be read")
        self.zone()

    def zone(self) -> tzinfo:
        """The time zone (`UTC` or an IANA name)."""
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"time zone {self.tz!r} is unknown") from exc

    def _iter(self, start_ms: int) -> Any:
        start = datetime.fromtimestamp(start_ms / 1000, tz=UTC).astimezone(self.zone())
        return _croniter()(self.expression, start, ret_type=datetime)

    def next_after(self, ms: int) -> int:
        """The first tick strictly after `ms`."""
        return _ms(self._iter(ms).get_next(datetime))

    def upcoming(self, ms: int, count: int) -> list[int]:
        """The `count` ticks after `ms`, in order."""
        ticks = self._iter(ms)
        return [_ms(ticks.get_next(datetime)) for _ in range(count)]

    def latest(
        self, at_ms: int, *, after_ms: int, limit: int
    ) -> tuple[list[int], bool]:
        """The ticks in `(after_ms, at_ms]`, newest first, at most `limit` of them.

        Returns:
            The ticks, and whether there are more (older ones) than `limit`.
        """
        # croniter's get_prev is strictly before its start: start 1 ms later so a
        # tick falling exactly at `at_ms` is due
        ticks = self._iter(at_ms + 1)
        found: list[int] = []
        while True:
            tick = _ms(ticks.get_prev(datetime))
            if tick <= after_ms:
                return found, False
            if len(found) == limit:
                return found, True
            found.append(tick)


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
