"""`StoreContract`'s maintenance part: deleting runs, scanning and swapping payloads."""

from __future__ import annotations

from resumable.stores.protocol import (
    InputRecord,
    Maintenance,
    RunUpdate,
    SnapshotStore,
    Store,
)
from resumable.testing.contract.records import (
    T0,
    needs,
    run_record,
    step_record,
)


class MaintenanceContract:
    """Behaviour of a store's `Maintenance` (see `StoreContract`)."""

    async def test_delete_runs_removes_only_finished_runs_with_their_data(
        self, store: Store
    ) -> None:
        needs(store, Maintenance)
        await store.create_run(run_record("done"))
        lease = await store.acquire_lease("done", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.commit_step(step_record("done", 1), fence=lease.fence)
        await store.commit_step(
            step_record("done", 2, output=None, usage=b"usage!!"), fence=lease.fence
        )
        await store.send_input(
            InputRecord(run_id="done", key="k", value=b"12345", sent_at_ms=T0)
        )
        await store.update_run(
            "done",
            fence=lease.fence,
            update=RunUpdate(status="succeeded", now_ms=T0, output=b"result"),
        )
        await store.create_run(run_record("live"))
        result = await store.delete_runs(["done", "live", "missing"])
        assert (result.runs, result.steps, result.run_ids) == (1, 2, ("done",))
        assert result.inputs == 1
        # payload bytes: input "in", output "result", "out", "usage!!", "12345"
        assert result.bytes == 2 + 6 + 3 + 7 + 5
        assert await store.get_run("done") is None
        assert await store.load_journal("done") == []
        assert await store.get_run("live") is not None

    async def test_payloads_are_scanned_in_pages_and_swapped_only_if_unchanged(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, Maintenance)
        for n in range(5):
            await store.create_run(run_record(f"r{n}", input=f"in-{n}".encode()))
            lease = await store.acquire_lease(
                f"r{n}", owner="a", now_ms=T0, ttl_ms=1000
            )
            assert lease is not None
            await store.commit_step(
                step_record(f"r{n}", 1, output=f"out-{n}".encode()), fence=lease.fence
            )
        first = await store.scan_payloads("run.input", after=None, limit=3)
        rest = await store.scan_payloads("run.input", after=first[-1].key, limit=3)
        assert [p.data for p in first + rest] == [f"in-{n}".encode() for n in range(5)]
        steps = await store.scan_payloads("step.output", after=None, limit=10)
        assert steps[0].key == ("r0", 1, "step1")
        assert await store.replace_payload(steps[0], data=b"new") is True
        assert (
            await store.replace_payload(steps[0], data=b"newer") is False
        )  # it changed
        assert (await store.load_journal("r0"))[0].output == b"new"
        assert await store.scan_payloads("run.output", after=None, limit=10) == []
        await store.put_chunks({"h": b"chunk"})
        (chunk,) = await store.scan_payloads("chunk.data", after=None, limit=10)
        assert await store.replace_payload(chunk, data=b"resealed")
        assert await store.get_chunks(["h"]) == {"h": b"resealed"}
