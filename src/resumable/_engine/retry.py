"""Retry policy and its delay schedule: pure functions, no store, no clock.

Which errors are worth another attempt is decided by `Retry.on`: exception types,
or a predicate. The two predicates here read what the openai and anthropic SDKs
(and any HTTP client shaped like them) put on their exceptions, the HTTP status
(`error.status_code`, or `error.response.status_code`) and the response headers,
and check the SDKs' connection-error classes only when the SDK is already
imported, so resumable never imports an SDK itself.
"""

from __future__ import annotations

import email.utils
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

RetryOn = tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""What `Retry.on` accepts: exception types, or a predicate over the error."""

# A request timeout, a lock conflict, a rate limit: the same request can succeed
# later. So can every 5xx, Anthropic's 529 "overloaded" included.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
# The SDKs raise these (APITimeoutError is a subclass) when no response came back.
_SDK_CONNECTION_ERRORS = (
    ("openai", "APIConnectionError"),
    ("anthropic", "APIConnectionError"),
)


def is_transient(error: BaseException) -> bool:
    """Whether a provider may well accept the same call later.

    True for timeouts and dropped connections (`TimeoutError`, `ConnectionError`,
    the SDKs' `APITimeoutError` and `APIConnectionError`) and for HTTP 408, 409,
    429 and 5xx (529 overloaded included), unless the response's `x-should-retry`
    header, which both SDKs obey, says otherwise.
    """
    verdict = _should_retry_header(error)
    if verdict is not None:
        return verdict
    status = status_code(error)
    if status is not None:
        return status in _TRANSIENT_STATUSES or status >= 500
    return isinstance(error, TimeoutError | ConnectionError) or _sdk_connection_error(
        error
    )


def is_permanent(error: BaseException) -> bool:
    """Whether the provider said the same call will fail again.

    True for an HTTP 4xx other than 408, 409 and 429 (400 bad request, 401, 403,
    404, 422, ...) or an `x-should-retry: false` header.
    """
    verdict = _should_retry_header(error)
    if verdict is not None:
        return not verdict
    status = status_code(error)
    return (
        status is not None and 400 <= status < 500 and status not in _TRANSIENT_STATUSES
    )


def unless_permanent(error: BaseException) -> bool:
    """`Retry`'s default `on=`: any `Exception` except a permanent provider error."""
    return isinstance(error, Exception) and not is_permanent(error)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """How a step retries when it raises.

    A step without `retry=` runs once. Attempts are journaled, so a crash between
    attempts resumes the count rather than resetting it. For a step that calls an
    LLM, `Retry.llm()` retries only what a provider calls transient.
    """

    attempts: int = 3
    """Total attempts, the first included (1 means never retry)."""
    initial_delay: float = 1.0
    """Seconds before the second attempt."""
    max_delay: float = 60.0
    """Cap on every delay, a server's `retry-after` included."""
    multiplier: float = 2.0
    """Each delay is the previous one times this."""
    jitter: float = 0.1
    """Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    on: RetryOn = unless_permanent
    """Which errors are retried (others fail the step at once): exception types,
    or a predicate. The default retries any `Exception` except an HTTP error the
    provider calls permanent (`is_permanent`: 400, 401, 403, 404, 422, ...)."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("Retry.attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("Retry delays must be >= 0 and multiplier >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("Retry.jitter must be between 0 and 1")
        on: object = self.on  # checked at runtime too: a str or a list is a common slip
        if not callable(on) and not (
            isinstance(on, tuple)
            and all(isinstance(t, type) and issubclass(t, BaseException) for t in on)
        ):
            raise ValueError(
                f"Retry.on takes exception types or a predicate, got {self.on!r}; "
                "write on=(TimeoutError,) for one type"
            )

    @classmethod
    def llm(
        cls,
        *,
        attempts: int = 5,
        initial_delay: float = 1.0,
        max_delay: float = 60.0,
        multiplier: float = 2.0,
        jitter: float = 0.1,
    ) -> Self:
        """Retry what an LLM provider calls transient, and nothing else.

        Retries rate limits (429, after the server's `retry-after-ms` or
        `retry-after`, capped by `max_delay`), 408, 409, 5xx and 529 overloaded,
        timeouts and dropped connections of the openai and anthropic SDKs (see
        `is_transient`); fails at once on 400, 401, 403, 404, 422 and on errors
        of the step's own code. Turn the SDK's own retries off
        (`max_retries=0` on the client), or each attempt here makes up to
        `max_retries + 1` calls.
        """
        return cls(
            attempts=attempts,
            initial_delay=initial_delay,
            max_delay=max_delay,
            multiplier=multiplier,
            jitter=jitter,
            on=is_transient,
        )


NO_RETRY = Retry(attempts=1)


def retries(policy: Retry, error: BaseException) -> bool:
    """Whether `policy.on` covers `error` (whatever attempts are left)."""
    on = policy.on
    if isinstance(on, tuple | type):  # a single class works as it always did
        return isinstance(error, on)
    return bool(on(error))


def next_delay(
    policy: Retry, attempt: int, error: BaseException, rand: Callable[[], float]
) -> float | None:
    """Seconds to wait before the attempt after `attempt` (1-based), or None to stop.

    A retry hint carried by the error (an HTTP `retry-after-ms` or `retry-after`
    header, as the openai and anthropic SDKs expose on `error.response`) replaces
    the computed backoff, because the server knows when it will take the call;
    `max_delay` caps it, as it caps the backoff.
    """
    if attempt >= policy.attempts or not retries(policy, error):
        return None
    hint = retry_hint(error)
    if hint is not None:
        return min(hint, policy.max_delay)
    backoff = min(
        policy.max_delay, policy.initial_delay * policy.multiplier ** (attempt - 1)
    )
    return max(0.0, backoff * (1 + policy.jitter * (2 * rand() - 1)))


def status_code(error: BaseException) -> int | None:
    """The HTTP status an error carries (the SDKs' `status_code`, httpx's response)."""
    for status in (
        getattr(error, "status_code", None),
        getattr(getattr(error, "response", None), "status_code", None),
    ):
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def _header(error: BaseException, name: str) -> str | None:
    headers = getattr(getattr(error, "response", None), "headers", None)
    get = getattr(headers, "get", None)
    if get is None:
        return None
    value = get(name)
    return value if isinstance(value, str) else None


def _should_retry_header(error: BaseException) -> bool | None:
    """The server's own verdict, `x-should-retry: true|false`, if it sent one."""
    value = (_header(error, "x-should-retry") or "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _sdk_connection_error(error: BaseException) -> bool:
    # Only an imported SDK can have raised its own error: look it up, never import it.
    for module_name, class_name in _SDK_CONNECTION_ERRORS:
        module = sys.modules.get(module_name)
        cls = getattr(module, class_name, None)
        if isinstance(cls, type) and isinstance(error, cls):
            return True
    return False


def retry_hint(error: BaseException) -> float | None:
    """The delay in seconds a server asked for, if the error carries one."""
    direct = getattr(error, "retry_after", None)
    if isinstance(direct, int | float) and not isinstance(direct, bool):
        return _sane(float(direct))
    millis = _number(_header(error, "retry-after-ms"))
    if millis is not None:
        return _sane(millis / 1000)
    return _seconds_header(_header(error, "retry-after"))


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
