"""The engine layer: runs, replay, retries, leases and recovery (private)."""
