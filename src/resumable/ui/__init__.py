"""`resumable ui`: a local web dashboard over any store (`pip install 'resumable[ui]'`).

Server-rendered HTML from Starlette, served by uvicorn, with one small script for
live updates and JSON checks; every asset ships in the package (no CDN). It reads
and acts only through `Engine`. See `create_app` and `serve`.
"""

from __future__ import annotations

import ipaddress

from resumable.errors import UsageError

__all__ = ["check_bind", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or name (only this machine can reach it)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token.

    Raises:
        UsageError: `host` is not loopback and no token was given.
    """
    if token is None and not is_loopback(host):
        raise UsageError(
            f"refusing to serve the dashboard on {host!r} without --token: anyone who "
            f"can reach that address could cancel, fork or feed your runs; pass "
            f"--token (or RESUMABLE_UI_TOKEN), or keep the default --host 127.0.0.1"
        )
