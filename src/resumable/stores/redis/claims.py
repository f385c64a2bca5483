"""RedisStore's worker queue: claiming runs, in one script.

`claim_runs.lua` promotes due timers (at most 1000 a call) into the per-workflow
`rdy:<workflow>` zsets, looks at the oldest `claims.candidate_window(limit)`
claimable runs per workflow, applies each queue's concurrency and rate (the
window start is computed here, by `claims.rate_window_start_ms`, as on the SQL
stores) and leases what it takes, all atomically.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from resumable.stores.claims import candidate_window, rate_window_start_ms
from resumable.stores.protocol import Lease, QueuePolicy
from resumable.stores.redis.codec import num
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import RedisClient


async def claim_runs(
    conn: RedisClient,
    *,
    owner: str,
    now_ms: int,
    ttl_ms: int,
    limit: int,
    workflows: Collection[str],
    queues: Mapping[str, QueuePolicy],
    versions: Collection[str] | None = None,
) -> list[Lease]:
    """`Store.claim_runs`: up to `limit` claimable runs of `workflows`, leased."""
    names = sorted(set(workflows))
    if limit <= 0 or not names:
        return []
    expires = now_ms + ttl_ms
    args = [
        conn.keys.base,
        _b(owner),
        num(now_ms),
        num(expires),
        num(limit),
        num(candidate_window(limit, skips_versions_after_reading=versions is not None)),
        num(len(names)),
        *(_b(name) for name in names),
        num(len(queues)),
    ]
    for queue, policy in queues.items():
        since_ms = rate_window_start_ms(policy, now_ms)
        args += [
            _b(queue),
            b"" if policy.concurrency is None else num(policy.concurrency),
            b"" if policy.rate is None else num(policy.rate),
            b"" if since_ms is None else num(since_ms),
        ]
    if versions is None:
        args.append(num(-1))
    else:
        args += [num(len(set(versions))), *(_b(v) for v in sorted(set(versions)))]
    flat = await conn.script("claim_runs", [conn.keys.timers], args)
    await conn.warn_if_unpersisted()
    return [
        Lease(
            run_id=_s(flat[i]),
            owner=owner,
            fence=int(flat[i + 1]),
            expires_at_ms=expires,
            taken_from=None if flat[i + 2] is None else _s(flat[i + 2]),
        )
        for i in range(0, len(flat), 3)
    ]
