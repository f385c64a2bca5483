"""The Redis store: the Store protocol on Redis, each fenced or multi-key write one Lua script.

    store.py       RedisStore, the protocol facade: each method calls a module below
    connection.py  URL options, the waiting pool, key names (`Keys`), the client,
                   loading and running the scripts, the schema version, wake-ups
    codec.py       how ids, numbers and packed records are encoded (as `lib.lua` reads)
    runs.py        runs, leases, the journal, inputs, deletes; listing and counting runs
    claims.py      the worker queue: claiming runs
    snapshots.py   snapshots, their chunks and threads
    archive.py     archiving and restoring a run's journal and a thread's snapshots
    payloads.py    the payload scan and compare-and-swap of `Engine.rekey`
    scripts/       the Lua scripts, `lib.lua` prepended to those that touch runs

URL: `redis://[[user]:password@]host[:port][/db][?prefix=myapp:&<redis-py options>]`
(or `rediss://`, `unix://`). `prefix` (default `resumable:`) namespaces the keys;
`pool_max` (default 100) and `pool_timeout_s` (default 10) size the connection pool
and bound how long a call waits for a free connection, as on PostgreSQL; `mode`
(`rwc` by default, `rw`, `ro`: `connection.parse_mode`) says whether opening may
create the store, as SQLite's `mode=`. They are removed before the URL reaches
redis-py, which reads every other option.

Every key starts with the hash tag `{prefix}`, so a store's keys share one cluster
slot and a script may touch any of them. Below, `<x>` is an id encoded as UTF-8
(with lone surrogates kept), so any string is stored and found literally:

    run:<id>                  hash  the run's fields (a missing field is None)
    steps:<id>                hash  seq -> packed StepRecord
    inputs:<id>               hash  key -> packed (value, sent_at_ms)
    runs, wf:<name>, parent:<id>, forks:<id>, queue:<name>, st:<status>
                              zsets run ids by created_at_ms, for list_runs
    rdy:<workflow>            zset  claimable now, by created_at_ms
    timers                    zset  running runs by lease expiry, sleeping and
                                    waiting ones by wake_at_ms; due ones become claimable
    qactive:<queue>           zset  the queue's leased runs by lease expiry
    qstarts:<queue>           zset  the queue's starts in the rate window, by time
    chunks, chunkrefs         hashes  hash -> data, hash -> how many snapshots use it
    orphans                   set   chunks that no snapshot referenced (GC worklist)
    cps:<n>:<thread><ns>      zset  checkpoint ids (n = the thread id's byte length)
    cp:<n>:<thread><ns>       hash  checkpoint id -> packed SnapshotRecord
    nss:<thread>              set   the thread's namespaces
    threads                   zset  thread ids by their newest snapshot's
                                    created_at_ms, for list_threads (schema 2)
    counts                    hash  runs per status and queue, for count_runs
                                    (schema 2); field: status, a newline, then
                                    "-" (no queue) or "q" + the queue's name
    archived:<id>, archived, tstub:<thread>, tstubs
                              the archive's stubs (see `archive`)
    schedules                 set   the names of the schedules
    schedule:<name>           hash  a schedule's definition (workflow, cron, tz,
                                    catch_up), paused, last_tick_ms, created_at_ms,
                                    updated_at_ms (no schema change: none is none)
    meta                      hash  schema_version

Lua scripts (`resumable.stores.redis.scripts`) keep the indexes in step with the
runs; the run hash is the truth and the scripts re-check it before acting. A claim
promotes at most 1000 due timers and, like the SQL stores, looks at the oldest
`resumable.stores.claims.candidate_window(limit)` claimable runs per
workflow.

A dropped connection (a killed client, a restarted server) is reopened and the
command sent again by redis-py (3 retries, jittered backoff from 50 ms); past that
the call fails with CheckpointWriteError or StoreError and the engine retries it.
Resending is harmless for fenced writes, which are idempotent. If a reply is lost
after the server ran the command, a resent `send_input` or `reopen_run` reports
False although the first attempt took effect, and a resent `claim_runs` may lease
runs nobody executes until their lease expires.

The server must persist (`appendonly yes`): opening the store logs a warning on the
"resumable" logger when it does not, since a restart would lose every run.

Imports are absolute (ruff bans relative ones), so `import redis` in these
modules, as anywhere, means the redis-py driver: this package is only ever
`resumable.stores.redis` (tests/stores/test_redis.py checks it).
"""

from __future__ import annotations

from resumable.stores.redis.connection import DEFAULT_PREFIX, SCHEMA_VERSION, parse_url
from resumable.stores.redis.store import RedisStore

__all__ = ["DEFAULT_PREFIX", "SCHEMA_VERSION", "RedisStore", "parse_url"]
