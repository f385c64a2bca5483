"""Test helpers: `FakeClock`, `crash_test`, and `StoreContract`, the suite every store must pass.

`crash_test` (from `resumable.crashtest`) kills your workflow at every step
boundary in turn and checks each resume; see that module.

A third-party store runs the same suite as ours::

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def store(self) -> AsyncIterator[Store]:
            store = MyStore(...)
            yield store
            await store.close()
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from resumable._tamper import (
    Mutation,
    StoredField,
    TamperFailure,
    TamperReport,
    TamperSubject,
    TamperSuite,
    decompression_bomb,
    mutations_of,
    plain_frame,
)
from resumable.crashtest import CrashReport, Trial, crash_test, record_effect
from resumable.errors import ChunksMissing, LeaseLost, RunNotFound
from resumable.stores.protocol import (
    InputRecord,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
    Store,
)

__all__ = [
    "T0",
    "CrashReport",
    "FakeClock",
    "Mutation",
    "StoreContract",
    "StoredField",
    "TamperFailure",
    "TamperReport",
    "TamperSubject",
    "TamperSuite",
    "Trial",
    "crash_test",
    "decompression_bomb",
    "mutations_of",
    "plain_frame",
    "record_effect",
    "run_record",
    "snapshot_record",
    "step_record",
]

T0 = 1_800_000_000_000
"""A fixed "now" (ms) for records built in tests: far from 0, so subtraction bugs show."""


class FakeClock:
    """A clock that moves only when told (or when a sleeper asks it to).

    `sleep()` advances the clock by the requested time and yields once, so code
    that waits for an hour finishes at once with the clock an hour later.
    """

    def __init__(self, start_ms: int = T0) -> None:
        self._now_ms = start_ms
        self.sleeps: list[float] = []
        """Every duration passed to sleep(), in order."""

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self._now_ms += int(seconds * 1000)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)


@contextmanager
def _raises(kind: type[BaseException]) -> Iterator[None]:
    try:
        yield
    except kind:
        return
    raise AssertionError(f"expected {kind.__name__}")


def run_record(run_id: str, **fields: Any) -> RunRecord:
    """A queued run of workflow "wf" created at T0, with `fields` replaced."""
    base = RunRecord(
        run_id=run_id,
        workflow="wf",
        status="queued",
        input=b"in",
        created_at_ms=T0,
        updated_at_ms=T0,
    )
    return dataclasses.replace(base, **fields)


def step_record(run_id: str, seq: int, **fields: Any) -> StepRecord:
    """A succeeded first attempt of step "step<seq>" at T0, with `fields` replaced."""
    base = StepRecord(
        run_id=run_id,
        seq=seq,
        name=f"step{seq}",
        fingerprint="f" * 16,
        status="ok",
        output=b"out",
        attempts=1,
        started_at_ms=T0,
        finished_at_ms=T0 + 5,
    )
    return dataclasses.replace(base, **fields)


def snapshot_record(
    thread: str, checkpoint: str, refs: tuple[str, ...], **fields: Any
) -> SnapshotRecord:
    """Snapshot `checkpoint` of `thread` at T0 naming chunks `refs`, `fields` replaced."""
    base = SnapshotRecord(
        thread_id=thread,
        checkpoint_id=checkpoint,
        parent_id=None,
        manifest=b"m-" + checkpoint.encode(),
        chunk_refs=refs,
        created_at_ms=T0,
    )
    return dataclasses.replace(base, **fields)


WEIRD_IDS = (
    "plain",
    'it\'s "quoted"',
    "'; DROP TABLE resumable_runs; --",
    "]]..redis.call('FLUSHALL')..[[",
    "@tag:{x} | -y *",  # RediSearch syntax
    "glob*?[x]",
    "100% done %25 %u00e9",
    "nul\x00byte",
    "lone \ud800 surrogate \udfff",
    "üñíçødé 🚀",
    "",
)
"""Identifiers every store must keep literally: quotes, SQL, Lua, RediSearch, glob
characters, percent signs, NUL bytes, lone surrogates, non-ASCII, empty."""


class StoreContract:
    """Behaviour every Store must show. Subclass it and provide a `store` fixture."""

    # --- runs -------------------------------------------------------------------
    async def test_create_run_keeps_the_first_record(self, store: Store) -> None:
        first = await store.create_run(run_record("r1", input=b"first"))
        again = await store.create_run(
            run_record("r1", input=b"second", workflow="other")
        )
        assert first.input == b"first"
        assert again.input == b"first"
        assert again.workflow == "wf"
        assert await store.get_run("missing") is None

    async def test_run_fields_round_trip(self, store: Store) -> None:
        run = run_record(
            "r-full",
            output=b"\x00\xffbinary",
            parent_id="p",
            forked_from="f",
            fork_seq=3,
            queue="q",
            wake_at_ms=T0 + 9,
            expires_at_ms=T0 + 99,
        )
        await store.create_run(run)
        assert await store.get_run("r-full") == run

    async def test_list_runs_filters_and_orders_newest_first(
        self, store: Store
    ) -> None:
        for i in range(5):
            await store.create_run(
                run_record(
                    f"r{i}",
                    created_at_ms=T0 + i,
                    workflow="even" if i % 2 == 0 else "odd",
                    parent_id="p" if i < 2 else None,
                    queue="q" if i == 4 else None,
                )
            )
        assert [r.run_id for r in await store.list_runs(RunQuery())] == [
            "r4",
            "r3",
            "r2",
            "r1",
            "r0",
        ]
        assert [r.run_id for r in await store.list_runs(RunQuery(workflow="odd"))] == [
            "r3",
            "r1",
        ]
        assert [r.run_id for r in await store.list_runs(RunQuery(parent_id="p"))] == [
            "r1",
            "r0",
        ]
        assert [r.run_id for r in await store.list_runs(RunQuery(queue="q"))] == ["r4"]
        assert len(await store.list_runs(RunQuery(limit=2))) == 2
        assert await store.list_runs(RunQuery(status=["failed"])) == []

    async def test_list_runs_pages_by_key_and_filters_by_prefix_and_time(
        self, store: Store
    ) -> None:
        for i in range(7):  # pairs share a creation time: the run_id breaks the tie
            await store.create_run(
                run_record(f"{'a' if i < 4 else 'b'}{i}", created_at_ms=T0 + i // 2)
            )
        pages: list[list[str]] = []
        after: tuple[int, str] | None = None
        while True:
            page = await store.list_runs(RunQuery(limit=3, after=after))
            if not page:
                break
            pages.append([run.run_id for run in page])
            after = (page[-1].created_at_ms, page[-1].run_id)
        assert pages == [["b6", "b5", "b4"], ["a3", "a2", "a1"], ["a0"]]
        prefixed = await store.list_runs(RunQuery(run_id_prefix="a"))
        assert [run.run_id for run in prefixed] == ["a3", "a2", "a1", "a0"]
        timed = await store.list_runs(
            RunQuery(created_since_ms=T0 + 1, created_before_ms=T0 + 3)
        )
        assert [run.run_id for run in timed] == ["b5", "b4", "a3", "a2"]
        assert await store.list_runs(RunQuery(run_id_prefix="a%")) == []

    async def test_count_runs_by_status_and_queue(self, store: Store) -> None:
        for i in range(6):
            await store.create_run(
                run_record(
                    f"c{i}",
                    workflow="w" if i < 5 else "other",
                    queue="q" if i % 2 else None,
                )
            )
        await store.cancel_run("c0", now_ms=T0)
        assert await store.count_runs(RunQuery()) == {
            ("cancelled", None): 1,
            ("queued", None): 2,
            ("queued", "q"): 3,
        }
        assert await store.count_runs(RunQuery(workflow="w", run_id_prefix="c")) == {
            ("cancelled", None): 1,
            ("queued", None): 2,
            ("queued", "q"): 2,
        }
        assert await store.count_runs(RunQuery(status=["cancelled"], limit=0)) == {
            ("cancelled", None): 1
        }
        assert await store.count_runs(RunQuery(run_id_prefix="zz")) == {}

    # --- leases -------------------------------------------------------------------
    async def test_lease_is_exclusive_until_it_expires(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        first = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert first is not None
        assert first.fence == 1
        assert (await store.get_run("r")).status == "running"  # type: ignore[union-attr]
        assert (
            await store.acquire_lease("r", owner="b", now_ms=T0 + 999, ttl_ms=1000)
            is None
        )
        taken = await store.acquire_lease("r", owner="b", now_ms=T0 + 1000, ttl_ms=1000)
        assert taken is not None
        assert taken.fence == 2
        assert taken.owner == "b"
        assert first.taken_from is None  # nobody held the new run
        assert taken.taken_from == "a"  # a's lease had expired
        again = await store.acquire_lease("r", owner="b", now_ms=T0 + 1500, ttl_ms=1000)
        assert again is not None
        assert again.taken_from is None  # b already held it

    async def test_lease_can_be_taken_from_a_named_dead_owner(
        self, store: Store
    ) -> None:
        await store.create_run(run_record("r"))
        await store.acquire_lease("r", owner="dead", now_ms=T0, ttl_ms=60_000)
        assert await store.acquire_lease("r", owner="b", now_ms=T0, ttl_ms=1000) is None
        lease = await store.acquire_lease(
            "r", owner="b", now_ms=T0, ttl_ms=1000, take_over="dead"
        )
        assert lease is not None
        assert lease.fence == 2
        assert lease.taken_from == "dead"

    async def test_lease_on_missing_or_finished_run(self, store: Store) -> None:
        with _raises(RunNotFound):
            await store.acquire_lease("missing", owner="a", now_ms=T0, ttl_ms=1000)
        await store.create_run(run_record("done", status="succeeded"))
        assert (
            await store.acquire_lease("done", owner="a", now_ms=T0, ttl_ms=1000) is None
        )

    async def test_stale_fence_cannot_write_anything(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        old = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        new = await store.acquire_lease("r", owner="b", now_ms=T0 + 5000, ttl_ms=1000)
        assert old is not None
        assert new is not None
        with _raises(LeaseLost):
            await store.commit_step(step_record("r", 1), fence=old.fence)
        with _raises(LeaseLost):
            await store.renew_lease("r", fence=old.fence, now_ms=T0, ttl_ms=1000)
        with _raises(LeaseLost):
            await store.update_run(
                "r", fence=old.fence, update=RunUpdate(status="succeeded", now_ms=T0)
            )
        assert await store.load_journal("r") == []
        assert (await store.get_run("r")).status == "running"  # type: ignore[union-attr]
        await store.commit_step(step_record("r", 1), fence=new.fence)
        assert len(await store.load_journal("r")) == 1

    async def test_renew_extends_the_lease(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.renew_lease("r", fence=lease.fence, now_ms=T0 + 900, ttl_ms=1000)
        assert (
            await store.acquire_lease("r", owner="b", now_ms=T0 + 1500, ttl_ms=1000)
            is None
        )
        assert (await store.get_run("r")).lease_expires_at_ms == T0 + 1900  # type: ignore[union-attr]

    async def test_update_run_to_an_end_releases_the_lease(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.update_run(
            "r",
            fence=lease.fence,
            update=RunUpdate(status="succeeded", now_ms=T0 + 7, output=b"result"),
        )
        run = await store.get_run("r")
        assert run is not None
        assert (run.status, run.output, run.lease_owner, run.updated_at_ms) == (
            "succeeded",
            b"result",
            None,
            T0 + 7,
        )

    async def test_finishing_a_run_keeps_its_ttl(self, store: Store) -> None:
        await store.create_run(run_record("r", expires_at_ms=T0 + 60_000))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.update_run(
            "r", fence=lease.fence, update=RunUpdate(status="succeeded", now_ms=T0 + 1)
        )
        assert (await store.get_run("r")).expires_at_ms == T0 + 60_000  # type: ignore[union-attr]

    async def test_cancel_fences_out_the_executor(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        cancelled = await store.cancel_run("r", now_ms=T0 + 1)
        assert cancelled.status == "cancelled"
        with _raises(LeaseLost):
            await store.commit_step(step_record("r", 1), fence=lease.fence)
        await store.create_run(run_record("done", status="succeeded"))
        assert (await store.cancel_run("done", now_ms=T0)).status == "succeeded"
        with _raises(RunNotFound):
            await store.cancel_run("missing", now_ms=T0)

    async def test_reopen_makes_only_failed_runs_queued(self, store: Store) -> None:
        await store.create_run(run_record("f", status="failed", output=b"err"))
        await store.create_run(run_record("s", status="succeeded"))
        assert await store.reopen_run("f", now_ms=T0 + 1) is True
        assert (await store.get_run("f")).status == "queued"  # type: ignore[union-attr]
        assert await store.reopen_run("s", now_ms=T0 + 1) is False
        with _raises(RunNotFound):
            await store.reopen_run("missing", now_ms=T0)

    # --- claims -------------------------------------------------------------------
    async def test_claim_picks_queued_expired_and_woken_runs(
        self, store: Store
    ) -> None:
        await store.create_run(run_record("queued", created_at_ms=T0))
        await store.create_run(run_record("expired", created_at_ms=T0 + 1))
        await store.acquire_lease("expired", owner="dead", now_ms=T0, ttl_ms=10)
        await store.create_run(run_record("live", created_at_ms=T0 + 2))
        await store.acquire_lease("live", owner="alive", now_ms=T0, ttl_ms=60_000)
        await store.create_run(
            run_record("woken", status="sleeping", wake_at_ms=T0 + 50)
        )
        await store.create_run(
            run_record("asleep", status="sleeping", wake_at_ms=T0 + 10_000)
        )
        await store.create_run(run_record("other", workflow="not-mine"))
        await store.create_run(run_record("done", status="succeeded"))
        leases = await store.claim_runs(
            owner="w",
            now_ms=T0 + 100,
            ttl_ms=1000,
            limit=10,
            workflows=["wf"],
            queues={},
        )
        assert sorted(lease.run_id for lease in leases) == [
            "expired",
            "queued",
            "woken",
        ]
        # only the expired lease was taken from an owner
        assert {lease.run_id: lease.taken_from for lease in leases} == {
            "expired": "dead",
            "queued": None,
            "woken": None,
        }
        again = await store.claim_runs(
            owner="w2",
            now_ms=T0 + 100,
            ttl_ms=1000,
            limit=10,
            workflows=["wf"],
            queues={},
        )
        assert again == []

    async def test_claim_respects_limit_and_queue_concurrency(
        self, store: Store
    ) -> None:
        for i in range(6):
            await store.create_run(
                run_record(f"q{i}", queue="docs", created_at_ms=T0 + i)
            )
        policy = {"docs": QueuePolicy(concurrency=2)}
        first = await store.claim_runs(
            owner="w", now_ms=T0, ttl_ms=1000, limit=5, workflows=["wf"], queues=policy
        )
        assert [lease.run_id for lease in first] == ["q0", "q1"]
        assert (
            await store.claim_runs(
                owner="w",
                now_ms=T0,
                ttl_ms=1000,
                limit=5,
                workflows=["wf"],
                queues=policy,
            )
            == []
        )
        await store.update_run(
            "q0", fence=first[0].fence, update=RunUpdate(status="succeeded", now_ms=T0)
        )
        third = await store.claim_runs(
            owner="w", now_ms=T0, ttl_ms=1000, limit=5, workflows=["wf"], queues=policy
        )
        assert [lease.run_id for lease in third] == ["q2"]

    async def test_claim_respects_queue_rate(self, store: Store) -> None:
        for i in range(5):
            await store.create_run(
                run_record(f"q{i}", queue="llm", created_at_ms=T0 + i)
            )
        policy = {"llm": QueuePolicy(rate=2, period_ms=1000)}
        claimed = await store.claim_runs(
            owner="w",
            now_ms=T0,
            ttl_ms=60_000,
            limit=5,
            workflows=["wf"],
            queues=policy,
        )
        assert len(claimed) == 2
        later = await store.claim_runs(
            owner="w",
            now_ms=T0 + 500,
            ttl_ms=60_000,
            limit=5,
            workflows=["wf"],
            queues=policy,
        )
        assert later == []
        next_period = await store.claim_runs(
            owner="w",
            now_ms=T0 + 1001,
            ttl_ms=60_000,
            limit=5,
            workflows=["wf"],
            queues=policy,
        )
        assert len(next_period) == 2

    # --- versions -----------------------------------------------------------------
    async def test_a_run_keeps_its_version_and_lists_by_it(self, store: Store) -> None:
        await store.create_run(run_record("v1-run", version="1"))
        await store.create_run(run_record("v2-run", version="2", created_at_ms=T0 + 1))
        await store.create_run(run_record("plain", created_at_ms=T0 + 2))

        got = await store.get_run("v1-run")
        assert got is not None
        assert got.version == "1"
        plain = await store.get_run("plain")
        assert plain is not None
        assert plain.version is None
        listed = await store.list_runs(RunQuery(version="2"))
        assert [r.run_id for r in listed] == ["v2-run"]
        assert len(await store.list_runs(RunQuery())) == 3

    async def test_a_worker_limited_to_versions_claims_only_their_runs(
        self, store: Store
    ) -> None:
        for n, version in enumerate(["1", "2", None, "1", "2", "3"]):
            await store.create_run(
                run_record(f"r{n}", version=version, created_at_ms=T0 + n)
            )

        async def claim(versions: list[str] | None) -> set[str]:
            leases = await store.claim_runs(
                owner=f"w{versions}",
                now_ms=T0 + 100,
                ttl_ms=60_000,
                limit=10,
                workflows=["wf"],
                queues={},
                versions=versions,
            )
            return {lease.run_id for lease in leases}

        assert await claim(["2"]) == {"r1", "r4"}
        assert await claim(["1", "3"]) == {"r0", "r3", "r5"}
        assert await claim(["2"]) == set()  # leased already
        assert await claim(["9"]) == set()
        assert await claim(None) == {"r2"}  # no filter: the run without a version too

    # --- journal ------------------------------------------------------------------
    async def test_journal_is_in_seq_order_and_replaces_by_seq(
        self, store: Store
    ) -> None:
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        for seq in (3, 1, 2):
            await store.commit_step(step_record("r", seq), fence=lease.fence)
        await store.commit_step(
            step_record("r", 2, output=b"retried", status="retrying"), fence=lease.fence
        )
        journal = await store.load_journal("r")
        assert [s.seq for s in journal] == [1, 2, 3]
        assert journal[1] == step_record("r", 2, output=b"retried", status="retrying")
        assert [s.seq for s in await store.load_journal("r", up_to_seq=2)] == [1, 2]
        assert await store.load_journal("nobody") == []

    async def test_journal_holds_negative_and_64_bit_seqs(self, store: Store) -> None:
        """Ledger entries live at negative seqs, map_steps items at seqs >= 2**62."""
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        seqs = [-3, 1, 2, (1 << 62) + 12345, (1 << 63) - 1]
        for seq in reversed(seqs):
            await store.commit_step(step_record("r", seq), fence=lease.fence)
        assert [s.seq for s in await store.load_journal("r")] == seqs
        assert [s.seq for s in await store.load_journal("r", up_to_seq=2)] == [-3, 1, 2]

    async def test_step_payloads_are_stored_byte_exact(self, store: Store) -> None:
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        payload = bytes(range(256)) * 40
        step = StepRecord(
            run_id="r",
            seq=1,
            name="s",
            fingerprint="0123456789abcdef",
            status="ok",
            output=payload,
            attempts=3,
            started_at_ms=T0,
            finished_at_ms=T0 + 1,
            usage=b'{"tokens": 1}',
        )
        await store.commit_step(step, fence=lease.fence)
        assert await store.load_journal("r") == [step]

    async def test_delete_runs_removes_only_finished_runs_with_their_data(
        self, store: Store
    ) -> None:
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

    # --- inputs -------------------------------------------------------------------
    async def test_first_input_per_key_wins_and_wakes_a_waiting_run(
        self, store: Store
    ) -> None:
        await store.create_run(
            run_record("r", status="waiting", wake_at_ms=T0 + 10_000)
        )
        assert await store.send_input(
            InputRecord(run_id="r", key="k", value=b"1", sent_at_ms=T0)
        )
        assert not await store.send_input(
            InputRecord(run_id="r", key="k", value=b"2", sent_at_ms=T0)
        )
        assert await store.get_inputs("r") == {"k": b"1"}
        assert (await store.get_run("r")).status == "queued"  # type: ignore[union-attr]
        with _raises(RunNotFound):
            await store.send_input(
                InputRecord(run_id="nope", key="k", value=b"", sent_at_ms=T0)
            )

    async def test_inputs_are_listed_with_when_they_were_sent_oldest_first(
        self, store: Store
    ) -> None:
        await store.create_run(run_record("r", status="waiting"))
        assert await store.list_inputs("r") == []
        for key, ms in (("late", 9), ("early", 1), ("also-late", 9)):
            assert await store.send_input(
                InputRecord(run_id="r", key=key, value=key.encode(), sent_at_ms=T0 + ms)
            )
        assert await store.list_inputs("r") == [
            InputRecord(run_id="r", key=key, value=key.encode(), sent_at_ms=T0 + ms)
            for key, ms in (("early", 1), ("also-late", 9), ("late", 9))
        ]
        assert await store.list_inputs("other") == []

    # --- maintenance ----------------------------------------------------------------
    async def test_payloads_are_scanned_in_pages_and_swapped_only_if_unchanged(
        self, store: Store
    ) -> None:
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

    # --- hostile identifiers -------------------------------------------------------
    async def test_identifiers_are_stored_and_found_literally(
        self, store: Store
    ) -> None:
        for n, odd in enumerate(WEIRD_IDS):
            run_id = f"{odd}#{n}"
            await store.create_run(
                run_record(
                    run_id,
                    workflow=odd,
                    queue=odd,
                    parent_id=odd,
                    created_at_ms=T0 + n,
                )
            )
            lease = await store.acquire_lease(run_id, owner=odd, now_ms=T0, ttl_ms=1000)
            assert lease is not None
            assert lease.run_id == run_id
            step = step_record(run_id, 1, name=odd)
            await store.commit_step(step, fence=lease.fence)
            assert await store.load_journal(run_id) == [step]
            assert await store.send_input(
                InputRecord(run_id=run_id, key=odd, value=b"v", sent_at_ms=T0)
            )
            assert await store.get_inputs(run_id) == {odd: b"v"}
            found = await store.get_run(run_id)
            assert found is not None
            assert (found.run_id, found.workflow, found.queue, found.lease_owner) == (
                run_id,
                odd,
                odd,
                odd,
            )
            assert [
                r.run_id for r in await store.list_runs(RunQuery(workflow=odd))
            ] == [run_id]
            assert [r.run_id for r in await store.list_runs(RunQuery(queue=odd))] == [
                run_id
            ]
            snapshot = snapshot_record(odd, f"{n:04d}", (), namespace=odd, label=odd)
            await store.save_snapshot(snapshot)
            assert await store.load_snapshot(odd, namespace=odd) == snapshot
        assert len(await store.list_runs(RunQuery(limit=1000))) == len(WEIRD_IDS)

    # --- snapshots ----------------------------------------------------------------
    async def test_chunks_are_content_addressed_and_idempotent(
        self, store: Store
    ) -> None:
        await store.put_chunks({"h1": b"one", "h2": b"two"})
        await store.put_chunks({"h1": b"one"})
        assert await store.get_chunks(["h1", "h2", "h3"]) == {
            "h1": b"one",
            "h2": b"two",
        }
        assert await store.get_chunks([]) == {}

    async def test_a_snapshot_saves_its_new_chunks_with_it(self, store: Store) -> None:
        await store.put_chunks({"old": b"kept"})
        snapshot = snapshot_record("t", "0001", ("old", "new"))
        await store.save_snapshot(snapshot, chunks={"new": b"N", "old": b"other"})
        assert await store.get_chunks(["old", "new"]) == {"old": b"kept", "new": b"N"}
        loaded = await store.load_snapshot("t")
        assert loaded is not None
        assert dataclasses.replace(loaded, chunk_refs=()) == dataclasses.replace(
            snapshot, chunk_refs=()
        )
        assert sorted(loaded.chunk_refs) == ["new", "old"]
        # referenced at once: a collection never sees them as garbage
        assert await store.delete_unreferenced_chunks(100) == 0
        await store.delete_thread("t")
        assert await store.delete_unreferenced_chunks(100) == 2

    async def test_a_snapshot_naming_a_missing_chunk_is_refused_whole(
        self, store: Store
    ) -> None:
        await store.put_chunks({"kept": b"K"})
        snapshot = snapshot_record("t", "0001", ("kept", "given", "gone"))
        refused: ChunksMissing | None = None
        try:
            await store.save_snapshot(snapshot, chunks={"given": b"G"})
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "expected ChunksMissing"
        assert (refused.thread_id, refused.hashes) == ("t", ("gone",))
        assert await store.load_snapshot("t") is None
        assert await store.get_chunks(["given"]) == {}  # nothing of it was stored

    async def test_a_chunk_collected_after_a_save_named_it_is_missing_for_the_next(
        self, store: Store
    ) -> None:
        await store.save_snapshot(
            snapshot_record("t", "0001", ("x",)), chunks={"x": b"X"}
        )
        await store.save_snapshot(
            snapshot_record("t", "0002", ("x",))
        )  # x stored: fine
        await store.delete_thread("t")
        assert await store.delete_unreferenced_chunks(100) == 1
        refused: ChunksMissing | None = None
        try:
            await store.save_snapshot(snapshot_record("t", "0003", ("x",)))
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "a save named a chunk collected after it was seen"
        assert refused.hashes == ("x",)
        assert await store.load_snapshot("t") is None

    async def test_saves_racing_a_collection_never_keep_a_missing_chunk(
        self, store: Store
    ) -> None:
        for n in range(30):
            chunk = f"loose-{n}"
            await store.put_chunks({chunk: b"L"})  # unreferenced: garbage until saved
            snapshot = snapshot_record(f"race-{n}", "0001", (chunk,))
            saved, _ = await asyncio.gather(
                store.save_snapshot(snapshot),
                store.delete_unreferenced_chunks(1000),
                return_exceptions=True,
            )
            if isinstance(saved, BaseException):
                assert isinstance(saved, ChunksMissing), saved
                assert await store.load_snapshot(f"race-{n}") is None
            else:
                assert await store.get_chunks([chunk]) == {chunk: b"L"}

    async def test_snapshots_are_swapped_for_a_pack_in_one_step(
        self, store: Store
    ) -> None:
        await store.put_chunks({"a": b"A", "b": b"B", "c": b"C"})
        for n, refs in enumerate((("a",), ("a", "b"), ("c",)), start=1):
            await store.save_snapshot(snapshot_record("t", f"000{n}", refs))
        pack = snapshot_record(
            "t", "0001", ("a", "b"), namespace=":pack:", label="0002"
        )
        assert await store.replace_snapshots("t", "", ["0001", "0002"], by=pack)
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == ["0003"]
        loaded = await store.load_snapshot("t", namespace=":pack:")
        assert loaded is not None
        assert dataclasses.replace(loaded, chunk_refs=()) == dataclasses.replace(
            pack, chunk_refs=()
        )
        assert sorted(loaded.chunk_refs) == ["a", "b"]
        # the pack holds every chunk the swapped snapshots used
        assert await store.delete_unreferenced_chunks(100) == 0
        # one of them is gone: nothing changes
        again = snapshot_record("t", "0003", ("c",), namespace=":pack:")
        assert not await store.replace_snapshots("t", "", ["0003", "0002"], by=again)
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == ["0003"]
        assert len(await store.list_snapshots("t", namespace=":pack:")) == 1
        assert await store.delete_thread("t") == 2
        assert await store.delete_unreferenced_chunks(100) == 3

    async def test_a_pack_of_another_thread_is_refused_before_anything_changes(
        self, store: Store
    ) -> None:
        for n in (1, 2):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ()))
        pack = snapshot_record("other", "0001", (), namespace=":pack:", label="0002")
        with _raises(ValueError):
            await store.replace_snapshots("t", "", ["0001", "0002"], by=pack)
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == [
            "0002",
            "0001",
        ]
        assert await store.list_snapshots("other", namespace=":pack:") == []

    async def test_two_swaps_of_the_same_snapshots_cannot_both_happen(
        self, store: Store
    ) -> None:
        await store.put_chunks({"a": b"A"})
        for n in range(1, 5):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ("a",)))
        ids = ["0001", "0002", "0003"]
        packs = [
            snapshot_record("t", "0001", ("a",), namespace=":pack:", label=who)
            for who in ("one", "two")
        ]
        done = await asyncio.gather(
            *(store.replace_snapshots("t", "", ids, by=pack) for pack in packs)
        )
        assert sorted(done) == [False, True]
        loaded = await store.load_snapshot("t", namespace=":pack:")
        assert loaded is not None
        assert loaded.label == ("one" if done[0] else "two")
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == ["0004"]

    async def test_threads_are_listed_newest_first_by_page_and_prefix(
        self, store: Store
    ) -> None:
        def saved(
            thread: str, checkpoint: str, ms: int, **fields: Any
        ) -> SnapshotRecord:
            return snapshot_record(
                thread, checkpoint, (), created_at_ms=T0 + ms, **fields
            )

        await store.save_snapshot(saved("a/1", "0001", 5))
        await store.save_snapshot(saved("a/1", "0002", 1, namespace="sub"))
        await store.save_snapshot(saved("a/2", "0001", 7))
        await store.save_snapshot(saved("b", "0001", 7))
        await store.save_snapshot(saved("c", "0001", 2))
        await store.save_snapshot(saved("c", "0002", 3))
        listed = await store.list_threads()
        # updated_at is the newest snapshot of any namespace; ties go by id, descending
        assert [(t.thread_id, t.updated_at_ms - T0) for t in listed] == [
            ("b", 7),
            ("a/2", 7),
            ("a/1", 5),
            ("c", 3),
        ]
        first = await store.list_threads(limit=2)
        assert [t.thread_id for t in first] == ["b", "a/2"]
        last = (first[-1].updated_at_ms, first[-1].thread_id)
        assert [t.thread_id for t in await store.list_threads(after=last)] == [
            "a/1",
            "c",
        ]
        assert [t.thread_id for t in await store.list_threads(prefix="a/")] == [
            "a/2",
            "a/1",
        ]
        assert await store.list_threads(limit=0) == []
        # a pack's swap keeps the thread listed; a deleted thread is gone
        pack = saved("c", "0001", 9, namespace=":pack:", label="0001")
        assert await store.replace_snapshots("c", "", ["0001"], by=pack)
        assert (await store.list_threads(limit=1))[0].thread_id == "c"
        assert await store.delete_thread("b") == 1
        assert [t.thread_id for t in await store.list_threads()] == [
            "c",
            "a/2",
            "a/1",
        ]

    async def test_snapshots_load_latest_list_and_delete(self, store: Store) -> None:
        await store.put_chunks({"a": b"A", "b": b"B", "c": b"C"})
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)))
        await store.save_snapshot(
            snapshot_record("t", "0002", ("a", "b"), parent_id="0001", label="x")
        )
        await store.save_snapshot(
            snapshot_record("t", "0003", ("b", "c"), namespace="sub")
        )
        latest = await store.load_snapshot("t")
        assert latest is not None
        assert (latest.checkpoint_id, latest.parent_id, latest.label) == (
            "0002",
            "0001",
            "x",
        )
        assert set(latest.chunk_refs) == {"a", "b"}
        first = await store.load_snapshot("t", checkpoint_id="0001")
        assert first is not None
        assert first.manifest == b"m-0001"
        assert await store.load_snapshot("t", checkpoint_id="nope") is None
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == [
            "0002",
            "0001",
        ]
        assert [
            s.checkpoint_id for s in await store.list_snapshots("t", before="0002")
        ] == ["0001"]
        assert [s.checkpoint_id for s in await store.list_snapshots("t", limit=1)] == [
            "0002"
        ]
        assert len(await store.list_snapshots("t", namespace=None)) == 3
        assert await store.delete_unreferenced_chunks(100) == 0
        assert await store.delete_thread("t") == 3
        assert await store.load_snapshot("t") is None
        assert await store.delete_unreferenced_chunks(100) == 3
        assert await store.get_chunks(["a", "b", "c"]) == {}
