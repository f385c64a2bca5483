"""Every store passes resumable.testing.StoreContract."""

from __future__ import annotations

from resumable.testing import StoreContract


class TestStoreContract(StoreContract):
    """Runs the conformance suite on the `store` fixture: every backend."""
