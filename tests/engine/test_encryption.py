from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import pytest

from resumable import (
    CorruptCheckpointError,
    Engine,
    ResumableError,
    SerializationError,
    step,
    wait_for,
    workflow,
)
from resumable.serde import KeyRing
from resumable.stores.protocol import Store

OLD, NEW = bytes(range(32)), bytes(range(1, 33))


def ring(*ids: str) -> KeyRing:
    keys = {"old": OLD, "new": NEW}
    return KeyRing({i: keys[i] for i in ids}, current=ids[0])


@step
async def secret(n: int) -> str:
    return f"customer data {n}"


@workflow(name="tests.crypto.flow")
async def flow(n: int) -> str:
    text = await secret(n)
    extra = await wait_for("extra")
    return f"{text} {extra}"


async def fill(engine: Engine) -> None:
    handle = await engine.start(flow, 1, run_id="enc")
    await engine.send("enc", "extra", "and more")
    await handle.result()
    await engine.save_state(
        "thread", {"messages": ["private " * 20, "notes " * 30]}, metadata={"m": 1}
    )


async def test_rekey_rotates_every_payload_to_the_new_key(store: Store) -> None:
    await fill(Engine(store, encryption_key=ring("old")))
    rotated = Engine(store, encryption_key=ring("new", "old"))
    report = await rotated.rekey()
    assert set(report.rewritten) >= {
        "run.input",
        "run.output",
        "step.output",
        "input.value",
        "snapshot.manifest",
        "chunk.data",
    }
    assert (
        await rotated.rekey()
    ).total_rewritten == 0  # nothing left under the old key
    only_new = Engine(store, encryption_key=ring("new"))
    assert await only_new.run(flow, 1, run_id="enc") == "customer data 1 and more"
    assert await only_new.load_state("thread") == {
        "messages": ["private " * 20, "notes " * 30]
    }
    assert (await only_new.history("enc"))[0].output() == "customer data 1"


async def test_a_plaintext_store_is_encrypted_in_place_and_then_plaintext_is_refused(
    store: Store,
) -> None:
    await fill(Engine(store))
    with pytest.raises(CorruptCheckpointError, match="not encrypted"):
        await Engine(store, encryption_key=ring("new")).load_state("thread")
    report = await Engine(store, encryption_key=ring("new")).rekey()
    assert report.total_rewritten > 0
    assert await Engine(store, encryption_key=ring("new")).run(flow, 1, run_id="enc")
    with pytest.raises(CorruptCheckpointError):
        await Engine(store).run(flow, 1, run_id="enc")  # no key: refused, not misread


async def test_a_crash_mid_rekey_loses_nothing(store: Store) -> None:
    await fill(Engine(store, encryption_key=ring("old")))
    real = store.replace_payload
    calls = {"n": 0}

    async def dying(payload: object, *, data: bytes) -> bool:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the process dies between two swaps
        return await real(payload, data=data)  # type: ignore[arg-type]  # passes through

    store.replace_payload = dying  # type: ignore[method-assign]  # a spy on a real store
    with pytest.raises(KeyboardInterrupt):
        await Engine(store, encryption_key=ring("new", "old")).rekey()
    store.replace_payload = real  # type: ignore[method-assign]  # restored
    both = Engine(store, encryption_key=ring("new", "old"))
    assert (
        await both.run(flow, 1, run_id="enc") == "customer data 1 and more"
    )  # mixed keys
    await both.rekey()
    assert await Engine(store, encryption_key=ring("new")).run(flow, 1, run_id="enc")


async def test_rekey_without_keys_is_refused(store: Store) -> None:
    with pytest.raises(ResumableError, match="needs encryption keys"):
        await Engine(store).rekey()


async def test_a_row_copied_into_another_run_does_not_decrypt(tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    engine = Engine(f"sqlite:///{db}", encryption_key=ring("new"))
    await engine.run(secret_flow, 1, run_id="a")
    await engine.run(secret_flow, 2, run_id="b")
    await engine.close()
    with sqlite3.connect(db) as conn:
        (blob,) = conn.execute(
            "SELECT output FROM resumable_steps WHERE run_id = 'a'"
        ).fetchone()
        conn.execute(
            "UPDATE resumable_steps SET output = ? WHERE run_id = 'b'", (blob,)
        )
        conn.execute(
            "UPDATE resumable_runs SET status = 'running', output = NULL WHERE run_id = 'b'"
        )
    with pytest.raises(CorruptCheckpointError, match="run 'b'"):
        await Engine(f"sqlite:///{db}", encryption_key=ring("new")).resume("b")


@workflow(name="tests.crypto.secret-flow")
async def secret_flow(n: int) -> str:
    return await secret(n)


def test_the_key_can_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "RESUMABLE_ENCRYPTION_KEY", "k1:" + base64.b64encode(NEW).decode()
    )
    engine = Engine(f"sqlite:///{tmp_path / 'env.db'}")
    assert engine.run_sync(secret_flow, 3, run_id="e") == "customer data 3"
    with sqlite3.connect(tmp_path / "env.db") as conn:
        (blob,) = conn.execute("SELECT output FROM resumable_steps").fetchone()
    assert b"customer data" not in blob


async def test_an_oversized_result_is_refused_naming_the_step_and_size(
    store: Store,
) -> None:
    @step
    async def huge() -> str:
        return "x" * 5000

    @workflow(name="tests.crypto.huge")
    async def wf() -> str:
        return await huge()

    engine = Engine(store, max_payload_bytes=4096)
    with pytest.raises(SerializationError) as caught:
        await engine.run(wf, run_id="big")
    message = str(caught.value)
    assert caught.value.step is not None
    assert caught.value.step.endswith("huge")
    assert "5,001 bytes" in message  # the text and its marker byte
    assert "4,096-byte limit" in message
    assert [
        r for r in await store.load_journal("big") if r.seq > 0
    ] == []  # nothing half-stored
