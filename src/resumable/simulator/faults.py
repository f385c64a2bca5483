"""Fault plans: which requests the simulated provider fails, and how.

A `FaultPlan` combines three sources, checked in this order for each request:

1. `schedule`: by request number (1-based, counted from when the plan was
   installed), e.g. `{3: Fault(kind="rate_limit"), 7: Fault(kind="disconnect")}`;
2. `rules`: by prompt, e.g. "the first 2 requests whose last user message
   contains 'doc-4'";
3. probabilities (`rate_limit_p`, ...): one draw per request number from a
   generator seeded by `(seed, request number)`, so the same seed fails the
   same request numbers in every run, however threads interleave.

`FaultInjector` applies a plan; it is pure bookkeeping and leaves locking to
its caller.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, get_args

from resumable.simulator.prompts import Api

FaultKind = Literal["rate_limit", "server_error", "overloaded", "timeout", "disconnect"]
_KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One injected failure.

    Statuses by kind: `rate_limit` 429; `server_error` 500; `overloaded` 529 on
    the Anthropic API and 503 on the OpenAI APIs; `timeout` stalls `delay_s`
    before answering; `disconnect` closes the connection without a response.
    """

    kind: FaultKind
    """What goes wrong."""
    retry_after_s: float | None = None
    """Sent as the `retry-after` header (seconds), when set."""
    retry_after_ms: int | None = None
    """Sent as the `retry-after-ms` header, when set."""
    should_retry: bool | None = None
    """Sent as the `x-should-retry` header both SDKs obey, when set."""
    status: int | None = None
    """Overrides the HTTP status of an error kind (e.g. 502 or 503)."""
    delay_s: float = 5.0
    """For `timeout`: how long the server stalls; pick more than the client timeout."""
    message: str | None = None
    """Overrides the error message in the body."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(
                f"unknown fault kind {self.kind!r}; expected one of {_KINDS}"
            )
        if self.delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {self.delay_s}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRule:
    """Fail requests whose prompt matches, e.g. the first N requests for prompt X.

    Each rule counts the requests it matches, whatever else fired for them; it
    fires on matches number `skip + 1` to `skip + times`.
    """

    fault: Fault
    """The failure to inject."""
    prompt_contains: str | None = None
    """Match when the last user message contains this text (None: every prompt)."""
    api: Api | None = None
    """Match only this API: "chat", "responses" or "messages" (None: any)."""
    skip: int = 0
    """Let this many matching requests through before firing."""
    times: int | None = None
    """Fire on this many matching requests, then never again (None: forever)."""

    def __post_init__(self) -> None:
        if self.skip < 0 or (self.times is not None and self.times < 0):
            raise ValueError(
                f"skip and times must be >= 0, got {self.skip} and {self.times}"
            )

    def matches(self, *, api: Api, prompt_text: str) -> bool:
        """Whether a request of `api` whose last user message is `prompt_text` matches."""
        return (self.api is None or self.api == api) and (
            self.prompt_contains is None or self.prompt_contains in prompt_text
        )


def _no_schedule() -> Mapping[int, Fault]:
    return {}


@dataclass(frozen=True, kw_only=True)
class FaultPlan:
    """Which requests fail. The default plan fails nothing."""

    schedule: Mapping[int, Fault] = field(default_factory=_no_schedule)
    """Faults by request number: 1-based, counting well-formed API requests since
    the plan was installed (a 400 for a malformed body takes no number)."""
    rules: Sequence[FaultRule] = ()
    """Faults by prompt; the first rule that fires wins."""
    rate_limit_p: float = 0.0
    """Probability that a request gets a 429."""
    server_error_p: float = 0.0
    """Probability that a request gets a 500."""
    overloaded_p: float = 0.0
    """Probability that a request gets a 529 (Anthropic) or 503 (OpenAI)."""
    timeout_p: float = 0.0
    """Probability that a request stalls for `timeout_delay_s`."""
    disconnect_p: float = 0.0
    """Probability that the connection drops without a response."""
    seed: int = 0
    """Seeds the probability draws; same seed, same failing request numbers."""
    retry_after_s: float | None = 1.0
    """`retry-after` of probabilistic 429 and 529/503 responses."""
    retry_after_ms: int | None = None
    """`retry-after-ms` of probabilistic 429 and 529/503 responses."""
    timeout_delay_s: float = 5.0
    """Stall of probabilistic timeouts."""

    def __post_init__(self) -> None:
        # Copies, so a caller mutating its dict or list cannot change a frozen plan.
        object.__setattr__(self, "schedule", MappingProxyType(dict(self.schedule)))
        object.__setattr__(self, "rules", tuple(self.rules))
        probabilities = self._probabilities()
        if any(not 0.0 <= p <= 1.0 for _, p in probabilities):
            raise ValueError(
                f"fault probabilities must be within [0, 1]: {probabilities}"
            )
        if (
            sum(p for _, p in probabilities) > 1.0 + 1e-9
        ):  # float sums like 0.7 + 0.2 + 0.1
            raise ValueError(
                f"fault probabilities add up to more than 1: {probabilities}"
            )
        if any(number < 1 for number in self.schedule):
            raise ValueError("schedule keys are 1-based request numbers")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        """Build a plan from JSON-like data (for the CLI and subprocess tests).

        `schedule` keys may be strings (`{"3": {"kind": "rate_limit"}}`) and
        faults are dicts of `Fault` fields; `rules` are dicts of `FaultRule`
        fields whose `fault` is such a dict.

        Raises:
            ValueError: an unknown field or fault kind.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(
                f"unknown FaultPlan fields {sorted(unknown)}; expected {sorted(known)}"
            )
        values = dict(data)
        values["schedule"] = {
            int(number): _fault(spec)
            for number, spec in dict(data.get("schedule", {})).items()
        }
        values["rules"] = tuple(
            FaultRule(**{**rule, "fault": _fault(rule["fault"])})
            for rule in data.get("rules", ())
        )
        return cls(**values)

    def _probabilities(self) -> list[tuple[FaultKind, float]]:
        return [
            ("rate_limit", self.rate_limit_p),
            ("server_error", self.server_error_p),
            ("overloaded", self.overloaded_p),
            ("timeout", self.timeout_p),
            ("disconnect", self.disconnect_p),
        ]

    def random_fault(self, number: int) -> Fault | None:
        """The probabilistic fault of request `number`, if its draw lands on one."""
        # A generator per request number (str seeds hash with sha512, the same in
        # every process) keeps the outcome independent of arrival order.
        draw = random.Random(f"{self.seed}:{number}").random()  # noqa: S311 - not crypto
        threshold = 0.0
        for kind, p in self._probabilities():
            threshold += p
            if draw < threshold:
                return Fault(
                    kind=kind,
                    retry_after_s=self.retry_after_s,
                    retry_after_ms=self.retry_after_ms,
                    delay_s=self.timeout_delay_s,
                )
        return None


def _fault(spec: Mapping[str, Any]) -> Fault:
    return Fault(**spec)


class FaultInjector:
    """Applies one `FaultPlan` to a stream of requests; not thread-safe by itself."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self._count = 0
        self._rule_matches = [0] * len(plan.rules)

    def next_fault(self, *, api: Api, prompt_text: str) -> Fault | None:
        """Number the next request and return the fault it gets, if any."""
        self._count += 1
        fault = self.plan.schedule.get(self._count)
        for index, rule in enumerate(self.plan.rules):
            if not rule.matches(api=api, prompt_text=prompt_text):
                continue
            self._rule_matches[index] += 1
            seen = self._rule_matches[index]
            fires = seen > rule.skip and (
                rule.times is None or seen <= rule.skip + rule.times
            )
            if fault is None and fires:
                fault = rule.fault
        if fault is None:
            fault = self.plan.random_fault(self._count)
        return fault
