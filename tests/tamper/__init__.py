"""Tamper subjects of this repository's stores, for `resumable.testing.TamperSuite`.

`subjects`: raw access to the rows of memory, SQLite, PostgreSQL and Redis.
`offload`: a subject whose payloads are offloaded to an object store.
"""
