"""Observability: OpenTelemetry traces, Prometheus metrics, structured logs.

```python
from resumable import Engine
from resumable.observability import Metrics, Tracing

metrics = Metrics()
engine = Engine("sqlite:///app.db", observers=[Tracing(), metrics])
registry.register(metrics)  # your prometheus_client registry
```

`Tracing` needs `pip install 'resumable[otel]'` and `Metrics` needs
`pip install 'resumable[prometheus]'`; each is imported only when used, and an
Engine given no observers does no observability work at all. `Observer` is the
seam both are built on: subclass it to feed something else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from resumable._engine.context import Observer
from resumable.observability.logs import JsonFormatter
from resumable.observability.logs import configure as configure_logging

if TYPE_CHECKING:
    from resumable.observability.endpoint import MetricsEndpoint
    from resumable.observability.metrics import Metrics
    from resumable.observability.tracing import Tracing

__all__ = [
    "JsonFormatter",
    "Metrics",
    "MetricsEndpoint",
    "Observer",
    "Tracing",
    "configure_logging",
]

_LAZY = {
    "Tracing": ("resumable.observability.tracing", "otel", "opentelemetry-api"),
    "Metrics": ("resumable.observability.metrics", "prometheus", "prometheus-client"),
    "MetricsEndpoint": (
        "resumable.observability.endpoint",
        "prometheus",
        "prometheus-client",
    ),
}


def __getattr__(name: str) -> Any:
    """Import `Tracing`, `Metrics` and `MetricsEndpoint` when first asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, extra, package = _LAZY[name]
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith(package.split("-")[0]):
            raise
        raise ImportError(
            f"resumable.observability.{name} needs {package}: "
            f"pip install 'resumable[{extra}]'"
        ) from exc
