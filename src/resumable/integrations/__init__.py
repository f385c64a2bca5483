"""Integrations with LLM SDKs and agent frameworks.

Nothing here imports `openai`, `anthropic` or `langgraph` at module level:
users bring their own SDK, and resumable reads the objects it returns by duck
typing, or imports a framework lazily, where
first needed, with an error naming the extra to install.
"""
