"""Lua scripts of the Redis store: each fenced or multi-key write runs as one script.

`lib.lua` is prepended to every script that touches runs, so the run state machine
(`resumable.stores._rules` in Lua) and the index upkeep live in one place. Those
scripts take the key base `{prefix}` as ARGV[1] and build the keys they derive from
it; every key of a store shares that hash tag, hence one cluster slot. User values
only ever arrive as KEYS or ARGV, never as script source.
"""
