"""`StoreContract`'s run half: runs, leases, claims, versions, journal, inputs."""

from __future__ import annotations

from resumable.errors import LeaseLost, RunNotFound
from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.protocol import (
    InputRecord,
    QueuePolicy,
    RunListing,
    RunQuery,
    RunUpdate,
    SnapshotStore,
    StepRecord,
    Store,
)
from resumable.testing.contract.records import (
    T0,
    WEIRD_IDS,
    must_raise,
    needs,
    run_record,
    snapshot_record,
    step_record,
)


class RunStoreContract:
    """Behaviour of a store's runs, leases, journal and inputs (see `StoreContract`)."""

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
        needs(store, RunListing)
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
        needs(store, RunListing)
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
        needs(store, RunListing)
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
        with must_raise(RunNotFound):
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
        with must_raise(LeaseLost):
            await store.commit_step(step_record("r", 1), fence=old.fence)
        with must_raise(LeaseLost):
            await store.renew_lease("r", fence=old.fence, now_ms=T0, ttl_ms=1000)
        with must_raise(LeaseLost):
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
        with must_raise(LeaseLost):
            await store.commit_step(step_record("r", 1), fence=lease.fence)
        await store.create_run(run_record("done", status="succeeded"))
        assert (await store.cancel_run("done", now_ms=T0)).status == "succeeded"
        with must_raise(RunNotFound):
            await store.cancel_run("missing", now_ms=T0)

    async def test_reopen_makes_only_failed_runs_queued(self, store: Store) -> None:
        await store.create_run(run_record("f", status="failed", output=b"err"))
        await store.create_run(run_record("s", status="succeeded"))
        assert await store.reopen_run("f", now_ms=T0 + 1) is True
        assert (await store.get_run("f")).status == "queued"  # type: ignore[union-attr]
        assert await store.reopen_run("s", now_ms=T0 + 1) is False
        with must_raise(RunNotFound):
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
        needs(store, RunListing)
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
        """Every kind of journal record, as `stores.kinds` encodes it, round-trips.

        Ledger entries are stored at seqs at most 0, map_steps items at seqs from
        2**62 to 2**63 - 1: a seq column must hold a signed 64-bit integer.
        """
        await store.create_run(run_record("r"))
        lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        seqs = [
            seq_of(JournalKind.LEDGER, 3),
            seq_of(JournalKind.STEP, 1),
            seq_of(JournalKind.STEP, 2),
            seq_of(JournalKind.BATCH_ITEM, 12345),
            seq_of(JournalKind.BATCH_ITEM, (1 << 62) - 1),
        ]
        for seq in reversed(seqs):
            await store.commit_step(step_record("r", seq), fence=lease.fence)
        assert [s.seq for s in await store.load_journal("r")] == seqs
        journal = await store.load_journal("r")
        assert [s.kind for s in journal] == [
            JournalKind.LEDGER,
            *[JournalKind.STEP] * 2,
            *[JournalKind.BATCH_ITEM] * 2,
        ]
        assert [s.seq for s in await store.load_journal("r", up_to_seq=2)] == seqs[:3]

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
        with must_raise(RunNotFound):
            await store.send_input(
                InputRecord(run_id="nope", key="k", value=b"", sent_at_ms=T0)
            )

    async def test_inputs_are_listed_with_when_they_were_sent_oldest_first(
        self, store: Store
    ) -> None:
        needs(store, RunListing)
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

    # --- hostile identifiers -------------------------------------------------------
    async def test_identifiers_are_stored_and_found_literally(
        self, store: Store
    ) -> None:
        needs(store, RunListing, SnapshotStore)
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
