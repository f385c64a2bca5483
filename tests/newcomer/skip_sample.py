"""Not collected by the suite (no test_ prefix): tests/newcomer/test_test_output.py runs it.

Three skips for one reason, one for another, one failure whose details must show.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", [1, 2, 3])
def test_needs_a_server(n: int) -> None:
    pytest.skip("no server to test against")


def test_needs_another_thing() -> None:
    pytest.skip("another thing is missing")


def test_that_fails() -> None:
    expected = "forty-two"
    assert expected == "forty-three"
