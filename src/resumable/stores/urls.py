"""Store URLs as they may be shown: in messages and logs, without a password.

Below the stores package's `__init__` (which picks a store by URL and imports the
drivers lazily), so a backend module can redact its URL without importing it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["redact"]


def redact(url: str) -> str:
    """The URL with any password replaced, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
