"""Re-encrypt every stored payload under the current key (key rotation).

Every payload is rewritten on its own, with a compare-and-swap, after its
replacement has been sealed and checked: at any moment each payload is readable
with the key ring (old key or new), so a crash mid-rekey loses nothing and
running rekey again finishes the job. A payload changed by a live run between
the scan and the swap is left alone and picked up by the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from resumable._engine.packs import is_pack_namespace, pack_place, snapshot_place
from resumable._engine.shapes import chunk_place
from resumable.errors import UsageError
from resumable.serde import Serde
from resumable.stores.places import input_place, run_place, step_place
from resumable.stores.protocol import PAYLOAD_KINDS, Maintenance, Payload


@dataclass(frozen=True, slots=True, kw_only=True)
class RekeyReport:
    """What a rekey pass did, per payload kind."""

    rewritten: dict[str, int] = field(default_factory=dict)
    current: int = 0
    """Payloads already under the current key."""
    changed_meanwhile: int = 0
    """Payloads a live run rewrote during the pass (already under the current key)."""

    @property
    def total_rewritten(self) -> int:
        """Every payload this pass re-encrypted."""
        return sum(self.rewritten.values())


def place_of(payload: Payload) -> str:
    """The place a payload was sealed for (encryption's associated data)."""
    key, kind = payload.key, payload.kind
    if kind == "run.input":
        return run_place(str(key[0]), "input")
    if kind == "run.output":
        return run_place(str(key[0]), "output")
    if kind in ("step.output", "step.usage"):
        place = step_place(str(key[0]), int(key[1]), str(key[2]))
        return place if kind == "step.output" else place + " usage"
    if kind == "input.value":
        return input_place(str(key[0]), str(key[1]))
    if kind in ("snapshot.manifest", "snapshot.metadata"):
        return _snapshot_payload_place(payload)
    return chunk_place(str(key[0]))


def _snapshot_payload_place(payload: Payload) -> str:
    thread_id, namespace, checkpoint_id = map(str, payload.key[:3])
    if payload.kind == "snapshot.metadata":
        return snapshot_place(thread_id, checkpoint_id, "metadata")
    if is_pack_namespace(namespace):
        return pack_place(thread_id, checkpoint_id)
    return snapshot_place(thread_id, checkpoint_id)


async def rekey(
    store: Maintenance,
    serde: Serde,
    *,
    encrypted: bool,
    batch: int = 500,
    dry_run: bool = False,
) -> RekeyReport:
    """Rewrite every payload not sealed with the current key.

    Raises:
        UsageError: `serde` has no keys (`encrypted` is False).
    """
    if not encrypted:
        raise UsageError(
            "rekey needs encryption keys: pass encryption_key= or set "
            "RESUMABLE_ENCRYPTION_KEY (new key first, then the old ones)"
        )
    envelope = serde.envelope
    rewritten: dict[str, int] = {}
    current = changed = 0
    for kind in PAYLOAD_KINDS:
        after = None
        while True:
            page = await store.scan_payloads(kind, after=after, limit=batch)
            for payload in page:
                if not envelope.needs_reseal(payload.data):
                    current += 1
                    continue
                if dry_run:
                    rewritten[kind] = rewritten.get(kind, 0) + 1
                    continue
                place = place_of(payload)
                fresh = envelope.reseal(payload.data, place=place)
                envelope.open(
                    fresh, place=place
                )  # never swap in what cannot be read back
                if await store.replace_payload(payload, data=fresh):
                    rewritten[kind] = rewritten.get(kind, 0) + 1
                else:
                    changed += 1
            if len(page) < batch:
                break
            after = page[-1].key
    return RekeyReport(rewritten=rewritten, current=current, changed_meanwhile=changed)
