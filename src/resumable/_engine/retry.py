"""Retry policy and its delay schedule: pure functions, no store, no clock."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """How a step retries when it raises.

    A step without `retry=` runs once. Attempts are journaled, so a crash between
    attempts resumes the count rather than resetting it.
    """

    attempts: int = 3
    """Total attempts, the first included (1 means never retry)."""
    initial_delay: float = 1.0
    """Seconds before the second attempt."""
    max_delay: float = 60.0
    """Cap on the computed backoff (a server's retry hint may ask for longer)."""
    multiplier: float = 2.0
    """Each delay is the previous one times this."""
    jitter: float = 0.1
    """Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    on: tuple[type[BaseException], ...] = (Exception,)
    """Only these exception types are retried; others fail the step at once."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("Retry.attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("Retry delays must be >= 0 and multiplier >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("Retry.jitter must be between 0 and 1")


NO_RETRY = Retry(attempts=1)


def next_delay(
    policy: Retry, attempt: int, error: BaseException, rand: Callable[[], float]
) -> float | None:
    """Seconds to wait before the attempt after `attempt` (1-based), or None to stop.

    A retry hint carried by the error (an HTTP `retry-after-ms` or `retry-after`
    header, as the openai and anthropic SDKs expose on `error.response`) replaces
    the computed backoff, because the server knows when it will take the call.
    """
    if attempt >= policy.attempts or not isinstance(error, policy.on):
        return None
    hint = retry_hint(error)
    if hint is not None:
        return hint
    backoff = min(
        policy.max_delay, policy.initial_delay * policy.multiplier ** (attempt - 1)
    )
    return max(0.0, backoff * (1 + policy.jitter * (2 * rand() - 1)))


def retry_hint(error: BaseException) -> float | None:
    """The delay in seconds a server asked for, if the error carries one."""
    direct = getattr(error, "retry_after", None)
    if isinstance(direct, int | float) and not isinstance(direct, bool):
        return _sane(float(direct))
    headers = getattr(getattr(error, "response", None), "headers", None)
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = _number(get("retry-after-ms"))
    if millis is not None:
        return _sane(millis / 1000)
    return _seconds_header(get("retry-after"))


def _seconds_header(value: str | None) -> float | None:
    """A `retry-after` value: seconds, or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT")."""
    if value is None:
        return None
    number = _number(value)
    if number is not None:
        return _sane(number)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return _sane(when.timestamp() - time.time())


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _sane(seconds: float) -> float | None:
    # a hint that is negative, NaN or over a day is a broken header, not advice
    if math.isnan(seconds) or seconds < 0 or seconds > 86_400:
        return None
    return seconds
