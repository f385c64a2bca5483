"""The v1 store every versioning test starts from (seeded once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from versioning._support import seed_v1_store


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A v1 store with runs in every state; the seeding process killed itself."""
    return seed_v1_store(tmp_path_factory.mktemp("v1"))
