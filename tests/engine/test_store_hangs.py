"""A store that hangs or refuses ends `engine.run()` soon after `store_retry_s`.

Every store call on the way out of an execution (the lease release, the cancelled
check) is bounded too. The hung servers are this test's own: a private
redis-server it SIGSTOPs, or a TCP proxy in front of the shared server that
blackholes or refuses; the shared servers are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from conftest import service_url
from resumable import Engine, step, workflow
from resumable.errors import CheckpointWriteError
from resumable.stores import create_store

STORE_RETRY_S = 1.5
LEASE_TTL_S = 1.5
# what the way out may add: a third of the TTL (drive._way_out), and scheduling
SLACK_S = LEASE_TTL_S / 3 + 1.0


class Proxy:
    """A TCP proxy on 127.0.0.1 that forwards, then blackholes or refuses."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.forwarding = True
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    def blackhole(self) -> None:
        """Connections stay open, new ones are accepted; nothing is answered."""
        self.forwarding = False

    def refuse(self) -> None:
        """New connections are refused, open ones reset."""
        self.forwarding = False
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.transport.abort()

    async def close(self) -> None:
        self.refuse()
        for pump in self.pumps:
            pump.cancel()
        await asyncio.gather(*self.pumps, return_exceptions=True)

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.writers.append(writer)
        if not self.forwarding:
            return  # held open, never read
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.writers.append(up_writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.ensure_future(self._pump(source, sink))
            self.pumps.add(pump)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                if self.forwarding:  # blackholed: read and dropped
                    sink.write(data)
                    await sink.drain()


def through(url: str, port: int) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def private_redis(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    server = subprocess.Popen(
        [
            *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(tmp_path)),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=1),
            ):
                break
            assert time.monotonic() < deadline, "the private redis-server did not start"
            time.sleep(0.01)
        yield server, port
    finally:
        server.send_signal(signal.SIGCONT)
        server.terminate()
        server.wait(timeout=10)


async def run_until_the_store_fails(url: str, fail: Callable[[], None]) -> float:
    """Run a workflow whose second step makes the store fail; seconds to the end."""
    failed_at: list[float] = []

    @step
    async def first() -> int:
        return 1

    @step
    async def breaks() -> int:
        fail()
        failed_at.append(time.monotonic())
        return 2

    @workflow(name=f"hangs.{uuid.uuid4().hex[:8]}")
    async def flow() -> int:
        return await first() + await breaks()

    engine = Engine(url, store_retry_s=STORE_RETRY_S, lease_ttl_s=LEASE_TTL_S)
    try:
        with pytest.raises(CheckpointWriteError):
            async with asyncio.timeout(30):  # main without the bound: hangs here
                await engine.run(flow, run_id="hung")
        return time.monotonic() - failed_at[0]
    finally:
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(1):
                await engine.close()


@pytest.mark.redis
async def test_a_sigstopped_redis_ends_the_run_soon_after_store_retry_s(
    tmp_path: Path,
) -> None:
    with private_redis(tmp_path) as (server, port):
        took_s = await run_until_the_store_fails(
            f"redis://127.0.0.1:{port}/0",
            lambda: server.send_signal(signal.SIGSTOP),
        )
    assert took_s < STORE_RETRY_S + SLACK_S


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
@pytest.mark.parametrize("fault", ["blackhole", "refuse"])
async def test_a_store_that_never_answers_or_refuses_ends_the_run_on_time(
    backend: str, fault: str
) -> None:
    base = service_url(backend)
    parts = urlsplit(base)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 0)
    isolate = f"t{uuid.uuid4().hex[:12]}"
    option = "schema" if backend == "postgres" else "prefix"
    url = f"{base}{'&' if '?' in base else '?'}{option}={isolate}"
    try:
        proxied = through(url, await proxy.start())
        took_s = await run_until_the_store_fails(proxied, getattr(proxy, fault))
    finally:
        await proxy.close()
        direct = create_store(url)
        drop = getattr(direct, "drop", None)
        if drop is not None:
            await drop()
        await direct.close()
    assert took_s < STORE_RETRY_S + SLACK_S
