"""A run whose owner pauses after step 4: `python pause_app.py URL stop|block`.

`stop` freezes the process (SIGSTOP, sent to itself right after step 4 committed);
`block` blocks its event loop until the file $PAUSE_MARK exists. Each step appends
`effect <i> <pid>` to $PAUSE_LOG: the side effect that must happen once. The mode
is read from argv only here, so the test process (which imports this module and
takes the run over) never pauses.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from resumable import Engine, step, workflow

PAUSE: dict[str, str] = {}  # set in the paused process only


def note(line: str) -> None:
    fd = os.open(os.environ["PAUSE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def effect(i: int) -> int:
    note(f"effect {i} {os.getpid()}")
    return i


def pause() -> None:
    note(f"paused {os.getpid()}")
    if PAUSE.get("mode") == "stop":
        # sent to this very thread, which stops before it returns: sent to the
        # process, another thread may take it and this one runs on meanwhile
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
    elif PAUSE.get("mode") == "block":
        while not os.path.exists(os.environ["PAUSE_MARK"]):
            time.sleep(0.005)  # blocks the event loop: no heartbeat either


@workflow(name="crash.pause")
async def paused_flow() -> int:
    total = 0
    for i in range(1, 9):
        total += await effect(i)
        if i == 4 and PAUSE:
            pause()
    return total


if __name__ == "__main__":
    PAUSE["mode"] = sys.argv[2]
    engine = Engine(sys.argv[1], lease_ttl_s=float(os.environ["PAUSE_TTL_S"]))
    try:
        engine.run_sync(paused_flow, run_id="paused")
    except Exception as exc:  # noqa: BLE001 - the test reads how the owner stopped
        note(f"stopped {type(exc).__name__} {os.getpid()}")
        raise SystemExit(3) from None
    note(f"finished {os.getpid()}")
