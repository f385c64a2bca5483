"""The Redis store: `RedisStore` and its URL options (see `resumable.stores.redis.store`)."""

from __future__ import annotations

from resumable.stores.redis.connection import DEFAULT_PREFIX, SCHEMA_VERSION, parse_url
from resumable.stores.redis.store import RedisStore

__all__ = ["DEFAULT_PREFIX", "SCHEMA_VERSION", "RedisStore", "parse_url"]
