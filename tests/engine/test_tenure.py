"""Tenure: when an owner must confirm its lease with the store before a step starts."""

from __future__ import annotations

import time

from resumable._engine.lease import Tenure

T0 = 1_700_000_000_000


def test_a_lease_just_taken_is_fresh() -> None:
    tenure = Tenure.of(ttl_s=3.0, expires_at_ms=T0 + 3000, now_ms=T0)
    assert tenure.is_fresh(T0)
    assert tenure.is_fresh(T0 + 1999)


def test_two_thirds_of_the_ttl_on_the_wall_clock_make_it_stale() -> None:
    tenure = Tenure.of(ttl_s=3.0, expires_at_ms=T0 + 3000, now_ms=T0)
    assert not tenure.is_fresh(T0 + 2000)  # a suspended machine: the wall clock ran


def test_a_wall_clock_set_back_makes_it_stale() -> None:
    tenure = Tenure.of(ttl_s=3.0, expires_at_ms=T0 + 3000, now_ms=T0)
    assert not tenure.is_fresh(T0 - 1)


def test_two_thirds_of_the_ttl_on_the_monotonic_clock_make_it_stale() -> None:
    tenure = Tenure(ttl_s=3.0, asked_s=time.monotonic() - 2.0, asked_ms=T0)
    assert not tenure.is_fresh(T0)  # a paused process: the wall clock may say less


def test_a_lease_taken_long_before_the_execution_began_is_stale() -> None:
    tenure = Tenure.of(ttl_s=3.0, expires_at_ms=T0 + 3000, now_ms=T0 + 2500)
    assert not tenure.is_fresh(T0 + 2500)


def test_a_renewal_makes_it_fresh_again() -> None:
    tenure = Tenure(ttl_s=3.0, asked_s=time.monotonic() - 5.0, asked_ms=T0)
    tenure.renewed(asked_s=time.monotonic(), asked_ms=T0 + 5000)
    assert tenure.is_fresh(T0 + 5000)
