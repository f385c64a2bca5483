"""Workers and queues: who holds leases now, and how deep each queue is."""

from __future__ import annotations

from datetime import UTC, datetime

from resumable._engine.engine import Engine
from resumable._engine.listing import RunFilter, RunView
from resumable.stores.protocol import RUN_STATUSES
from resumable.ui.html import esc, table, url, when

_RUNNING_LIMIT = 500


async def render_workers(engine: Engine) -> str:
    """Running runs grouped by lease owner, and run counts per queue and status."""
    counts = await engine.count_runs()
    running = await engine.runs_page(
        RunFilter(status=["running"]), limit=_RUNNING_LIMIT
    )
    now = datetime.now(UTC)
    owners: dict[str, list[RunView]] = {}
    for run in running.runs:
        owners.setdefault(run.lease_owner or "(none)", []).append(run)
    worker_rows = []
    for owner, runs in sorted(owners.items()):
        live = [
            r
            for r in runs
            if r.lease_expires_at is not None and r.lease_expires_at > now
        ]
        worker_rows.append(
            [
                esc(owner),
                "live" if live else "lease expired (crashed or stopped?)",
                str(len(live)),
                str(len(runs) - len(live)),
                ", ".join(
                    f'<a href="{url("/run", {"id": r.run_id})}">{esc(r.run_id)}</a>'
                    for r in runs[:10]
                ),
            ]
        )
    queue_rows = [
        [
            f'<a href="{url("/", {"queue": queue})}">{esc(queue)}</a>',
            *[str(by_status.get(s, 0)) for s in RUN_STATUSES],
        ]
        for queue, by_status in counts.by_queue().items()
    ]
    return (
        "<h1>Workers and queues</h1><h2>Lease holders</h2>"
        + (
            table(
                [
                    "Worker (lease owner)",
                    "State",
                    "Live leases",
                    "Expired leases",
                    "Runs",
                ],
                worker_rows,
            )
            if worker_rows
            else "<p class=empty>No run is running now.</p>"
        )
        + f"<p><small>Checked at {when(now)} UTC; a worker shows here while it holds a lease.</small></p>"
        + "<h2>Queues</h2>"
        + (
            table(["Queue", *RUN_STATUSES], queue_rows)
            if queue_rows
            else "<p class=empty>No run was enqueued.</p>"
        )
    )
