"""SQLiteStore: the embedded default, one file shared safely by several processes.

SQL runs on one dedicated thread per store, so the event loop never blocks on
disk. That thread drains every job queued while it was busy and commits the writes
among them in one transaction (group commit): concurrent runs share an fsync, and a
lone sequential step still costs exactly one INSERT and one COMMIT.

A lone write does not need the thread: handing it over costs as much as a
`durability=normal` commit itself. So a write first tries an inline path, a
second connection with no busy wait that commits on the calling thread if the
file's write lock is free at once. With
`durability=normal` (no fsync per commit) every write tries it; with `full`, only
a write whose run also made the write before it, with none queued: a single
workflow skips the hop, while the writes of concurrent runs interleave and share
fsyncs on the store thread (the 50-runs-at-once row of benchmarks/step_overhead.py).
Otherwise (another process is writing, another caller holds the inline
connection) the write queues as usual. With `full` an inline commit checkpoints a
WAL of 100 pages itself (the store thread's at SQLite's default, 1000); with
`normal`, whose commits do not fsync, the inline connection leaves checkpoints
(an fsync) to the store thread.

Every connection commits with SQLite's `synchronous=NORMAL`. With `full`, a
durable write then has the WAL fsynced before its call returns, once SQLite's
write lock is free, so the next write commits while the disk works. Commits are
numbered, and a write waits for an fsync that began after its commit: one under
way when it committed, it waits out, then starts the next, which covers every
commit made meanwhile (group commit, `wal.WalSyncs`, with no timer).
In WAL mode that is what `synchronous=FULL` does (it syncs the WAL at each commit;
checkpoints sync the same at either setting), without statements to switch the
setting off around each write that need not sync (two statements more a
write). One difference: another connection may read a commit a moment before
its fsync ends. A power cut in that moment loses it, and with it every commit
after it (see below: the WAL is replayed in order), among them whatever was
written from it.

A durable write made inside a `syncs.DeferredSyncs` block returns once it has
committed, and the block's `wait()` makes its fsync: `ResumableSaver` commits in
its turn and waits for the disk after it, so the next call's turn runs meanwhile.

Lease writes (acquire, renew, release) commit without an fsync, whatever the
durability. A lease only keeps live processes apart, and a WAL file is shared
only by processes of one machine (its index is shared memory), which a power cut
ends together. The next durable commit fsyncs the WAL, and with it every lease
write before it. A resume takes its lease an fsync sooner (much time on a disk
with slow fsyncs), and a heartbeat costs no fsync. So does a pack swap
(`swap_snapshots(durable=False)`): it only saves space, and a power cut before the next
durable commit undoes it whole (a WAL is replayed in order up to its last intact
commit), leaving the rows loose and readable. A LangGraph thread packs every 16
steps; each swap paid an fsync.

Reads of one run or one thread (its journal, record, inputs, snapshots and
chunks) take the inline connection too when it is free and no write of this store
is queued (which they would have to see). No other thread has to wake, which on a
busy machine takes longer than the read (two wake-ups a read), and a LangGraph
`get_tuple` makes several reads. A journal load, most of a resume,
then makes its records on the thread that replays them, still in its CPU's cache
(benchmarks/resume_latency.py). The loop is busy meanwhile, making each record;
on the store thread the load would hold the GIL for most of
that time anyway, making the records. Scans of every run (`list_runs`, the
payload scan of key rotation) stay on the store thread.

URL: `sqlite:///relative/path.db` or `sqlite:////absolute/path.db`, with optional
`?durability=full` (fsync on every commit but a lease's, the default) or `?durability=normal`
(WAL without fsync per commit: survives a process crash, not a power cut),
`busy_timeout_ms=` (how long to wait for another process's write lock), and
`mmap_mb=` (how much of the file SQLite reads through a memory map, 256 by
default; 0 reads it with read() calls). Mapped reads make a cold resume's journal
load ~35% faster; the price is that a read error on the disk (or the file cut
short by something other than SQLite) ends the process with SIGBUS instead of
raising an error. The journal is safe either way: the run resumes from it.

`mode=` says what opening may do, as SQLite's own URI option does: `rwc` (the
default) creates the file and its folder and migrates the schema; `rw` opens an
existing file only (and migrates it); `ro` opens an existing file read-only, for
commands that only look (`resumable runs`, `show`, `export`...): it creates and
migrates nothing, refuses every write, works on a read-only filesystem, and a
missing file is a StoreError naming the absolute path looked at (how: see
`connection`). `sqlite:///state.db` is relative to the current folder;
`sqlite:////srv/state.db` (four slashes) is absolute.

The modules of this package:

- `store`: `SQLiteStore`, the protocol's methods, each one transaction below.
- `connection`: the URL's options, opening the file by `mode`, the store thread
  and the inline connection (`SQLiteThread`).
- `wal`: numbered commits and the WAL fsyncs that cover them (`WalSyncs`).
- `runs`: runs, their journals and inputs, leases renewed, runs deleted.
- `claims`: acquiring a lease, and the worker queue's claims.
- `snapshots`: snapshots, their chunks and threads.
- `archive`: runs and threads swapped for archive stubs and back.
- `migrations`: the schema, its numbered `.sql` files, and applying them.
"""

from __future__ import annotations

from resumable.stores.sqlite.connection import (
    DEFAULT_PATH,
    MODES,
    Conn,
    SQLiteOptions,
    SQLiteThread,
    fdatasync,
    parse_url,
)
from resumable.stores.sqlite.store import SQLiteStore

__all__ = [
    "DEFAULT_PATH",
    "MODES",
    "Conn",
    "SQLiteOptions",
    "SQLiteStore",
    "SQLiteThread",
    "fdatasync",
    "parse_url",
]
