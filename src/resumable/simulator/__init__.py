"""A simulated OpenAI/Anthropic provider: a real HTTP server the real SDKs talk to.

Tests, the demo and the benchmarks run against it instead of a paid API. It
speaks Chat Completions, Responses and Messages well enough for `openai` and
`anthropic`, answers deterministically (same prompt, same text and token
usage, in any process), injects faults by schedule, by prompt or by seeded
probability, and logs every request so a test can prove which calls were made::

    from resumable.simulator import Fault, FaultPlan, FaultRule, SimulatedProvider

    plan = FaultPlan(rules=[FaultRule(fault=Fault(kind="rate_limit", retry_after_s=1),
                                      prompt_contains="doc-3", times=2)])
    with SimulatedProvider(faults=plan) as provider:
        client = openai.OpenAI(base_url=provider.openai_base_url, api_key="sk-test")
        ...
        assert provider.count("doc-3") == 1

Run one in the foreground with `python -m resumable.simulator --port 8089`.
"""

from __future__ import annotations

from resumable.simulator.faults import Fault, FaultKind, FaultPlan, FaultRule
from resumable.simulator.log import RequestLogEntry, count_requests, read_log
from resumable.simulator.prompts import Api
from resumable.simulator.replies import Usage
from resumable.simulator.server import DEFAULT_PORT, SimulatedProvider, serve

__all__ = [
    "DEFAULT_PORT",
    "Api",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FaultRule",
    "RequestLogEntry",
    "SimulatedProvider",
    "Usage",
    "count_requests",
    "read_log",
    "serve",
]
