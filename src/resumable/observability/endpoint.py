"""`/metrics` and `/healthz` over HTTP, served on the worker's own event loop.

A small asyncio server rather than prometheus-client's thread: `/metrics`
refreshes the run counts from the store first, and `/healthz` reads the store,
both on the loop that owns the store's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from resumable.errors import ResumableError
from resumable.observability.metrics import Metrics
from resumable.stores.capabilities import Capabilities
from resumable.stores.protocol import RunStore

__all__ = ["HEALTH_WINDOW_S", "MetricsEndpoint"]

HEALTH_WINDOW_S = 60.0
"""`/healthz` fails while a lease renewal was late within this many seconds."""
_PROBE_TIMEOUT_S = 5.0
_PROBE_RUN = "resumable-healthz-probe"

log = logging.getLogger("resumable.worker")


class MetricsEndpoint:
    """Serves `metrics` (and the store's health) until closed.

    Args:
        metrics: The collector the engine feeds.
        store: The engine's store: probed for health, and counted for
            `resumable_runs` if it implements `RunListing`.
    """

    def __init__(self, metrics: Metrics, store: RunStore) -> None:
        self.metrics, self.store = metrics, store
        self._capabilities = Capabilities.of(store)
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(metrics)
        self._server: asyncio.Server | None = None

    async def start(self, port: int, host: str = "127.0.0.1") -> int:
        """Listen; returns the port (useful with port 0: any free one)."""
        self._server = await asyncio.start_server(self._handle, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def health(self) -> tuple[bool, dict[str, object]]:
        """Whether the store answers and lease renewals are on time, with details."""
        report: dict[str, object] = {}
        try:
            await asyncio.wait_for(self.store.get_run(_PROBE_RUN), _PROBE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - whatever stops the store answering
            report["store"] = f"unreachable: {type(exc).__name__}"
        else:
            report["store"] = "ok"
        late = self.metrics.late_renewals_within(HEALTH_WINDOW_S)
        report["late_lease_renewals"] = late
        report["lease_renewals"] = "ok" if late == 0 else "late"
        return report["store"] == "ok" and late == 0, report

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, path = [*request.split(b" ", 2), b"", b""][:2]
            path = path.split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, kind, body = "405 Method Not Allowed", "text/plain", b""
            elif path == b"/metrics":
                with contextlib.suppress(ResumableError, TimeoutError):
                    listing = self._capabilities.listing_part(
                        self.store, call="the /metrics run counts"
                    )
                    await asyncio.wait_for(
                        self.metrics.refresh_runs(listing), _PROBE_TIMEOUT_S
                    )
                status, kind = "200 OK", CONTENT_TYPE_LATEST
                body = generate_latest(self.registry)
            elif path == b"/healthz":
                healthy, report = await self.health()
                status = "200 OK" if healthy else "503 Service Unavailable"
                kind, body = "application/json", json.dumps(report).encode()
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not found\n"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (body if method == b"GET" else b""))
            await writer.drain()
        except TimeoutError:
            log.debug("metrics endpoint: a client sent no request in time")
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
