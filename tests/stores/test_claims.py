"""The claim decisions as pure functions: no store needed."""

from __future__ import annotations

import dataclasses

from resumable.stores import claims
from resumable.stores.protocol import QueuePolicy, RunRecord

NOW = 1_000_000


def run(status: str = "queued", **changes: object) -> RunRecord:
    base = RunRecord(
        run_id="r",
        workflow="w",
        status="queued",
        input=b"",
        created_at_ms=0,
        updated_at_ms=0,
    )
    return dataclasses.replace(base, status=status, **changes)  # type: ignore[arg-type]  # test helper: fields by name


def test_candidate_window_reads_four_times_the_limit_plus_slack() -> None:
    assert claims.candidate_window(1) == 20
    assert claims.candidate_window(10) == 56


def test_candidate_window_looks_four_times_further_when_versions_are_skipped_after_reading() -> (
    None
):
    assert claims.candidate_window(1, skips_versions_after_reading=True) == 80
    assert claims.candidate_window(10, skips_versions_after_reading=True) == 224


def test_a_queued_run_is_claimable_and_a_finished_one_is_not() -> None:
    assert claims.is_claimable(run("queued"), now_ms=NOW, versions=None)
    assert not claims.is_claimable(run("succeeded"), now_ms=NOW, versions=None)


def test_a_running_run_is_claimable_only_once_its_lease_expired() -> None:
    live = run("running", lease_owner="a", lease_expires_at_ms=NOW + 1)
    expired = run("running", lease_owner="a", lease_expires_at_ms=NOW)
    assert not claims.is_claimable(live, now_ms=NOW, versions=None)
    assert claims.is_claimable(expired, now_ms=NOW, versions=None)


def test_a_sleeping_run_is_claimable_once_its_wake_time_came() -> None:
    assert not claims.is_claimable(
        run("sleeping", wake_at_ms=NOW + 1), now_ms=NOW, versions=None
    )
    assert claims.is_claimable(
        run("sleeping", wake_at_ms=NOW), now_ms=NOW, versions=None
    )


def test_a_worker_limited_to_versions_claims_only_runs_of_those_versions() -> None:
    assert claims.is_claimable(run(version="v1"), now_ms=NOW, versions={"v1"})
    assert not claims.is_claimable(run(version="v2"), now_ms=NOW, versions={"v1"})
    assert not claims.is_claimable(run(version=None), now_ms=NOW, versions={"v1"})


def test_the_rate_window_starts_one_period_ago_and_only_under_a_rate() -> None:
    assert claims.rate_window_start_ms(QueuePolicy(rate=2, period_ms=500), NOW) == (
        NOW - 500
    )
    assert claims.rate_window_start_ms(QueuePolicy(concurrency=2), NOW) is None


def test_refusal_names_a_full_queue_and_a_spent_rate() -> None:
    policy = QueuePolicy(concurrency=2, rate=1)
    assert claims.refusal(policy, claims.QueueLoad(2, 0), is_start=False) == "full"
    assert claims.refusal(policy, claims.QueueLoad(1, 1), is_start=True) == "rate"
    assert claims.refusal(policy, claims.QueueLoad(1, 1), is_start=False) is None
    assert claims.refusal(policy, claims.QueueLoad(1, 0), is_start=True) is None


def test_admission_admits_runs_without_a_queue_or_policy() -> None:
    admission = claims.Admission({})
    assert admission.needs_load([None, "free"]) == []
    assert admission.admit(None, is_start=True)
    assert admission.admit("free", is_start=True)
    assert admission.starts == []


def test_admission_counts_each_admitted_run_against_the_concurrency_limit() -> None:
    admission = claims.Admission({"q": QueuePolicy(concurrency=3)})
    assert admission.needs_load(["q", None, "q"]) == ["q"]
    admission.set_load("q", claims.QueueLoad(active=1, started=0))
    assert admission.needs_load(["q"]) == []
    assert [admission.admit("q", is_start=True) for _ in range(4)] == [
        True,
        True,
        False,
        False,
    ]
    assert admission.closed == {"q"}
    assert admission.starts == []  # no rate: no start to record


def test_admission_refuses_starts_past_the_rate_but_still_resumes_runs() -> None:
    admission = claims.Admission({"q": QueuePolicy(rate=2, period_ms=1000)})
    admission.set_load("q", claims.QueueLoad(active=0, started=1))
    assert admission.admit("q", is_start=True)
    assert not admission.admit("q", is_start=True)
    assert admission.unstartable == {"q"}
    assert admission.admit("q", is_start=False)  # a resumed run is not a start
    assert admission.starts == ["q"]


def test_a_closed_queue_admits_nothing_and_needs_no_load() -> None:
    admission = claims.Admission({"q": QueuePolicy(concurrency=5)})
    admission.close("q")
    assert admission.needs_load(["q"]) == []
    assert not admission.admit("q", is_start=False)


def test_the_redis_claim_script_takes_the_window_instead_of_computing_it() -> None:
    from importlib import resources

    script = (
        resources.files("resumable.stores.redis.scripts") / "claim_runs.lua"
    ).read_text("utf-8")
    assert "limit * 4" not in script
    assert "limit * 16" not in script
    assert "ZRANGE', ready, 0, window - 1" in script
