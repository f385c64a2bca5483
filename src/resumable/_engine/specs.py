"""Step and workflow specs, and the registries `@step` and `@workflow` fill at import.

Registries are the one piece of process-wide state: decorators run at import, and
`Engine.resume(run_id)` must find a workflow by the name its run recorded. They
only ever map names to code; no run state lives here.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumable._engine.retry import Retry
from resumable.serde import TypeRegistry

TYPES = TypeRegistry()
"""Types the program declared: those named in step and workflow annotations, and
those passed to `resumable.register()`. Each Engine's registry has it as parent.

An annotation is resolved the first time its step or workflow is called, or the
first time a lookup misses (a finished run's result is decoded before any of its
steps is called), whichever comes first."""


@dataclass(eq=False, slots=True, kw_only=True)
class StepSpec:
    """A decorated step: its journal name, code and retry policy."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    retry: Retry
    annotations_registered: bool = False

    @property
    def journal_name(self) -> str:
        """The step name its calls record in the journal."""
        return self.name

    def register_types(self) -> bool:
        """Allow the types in the step's annotations to be decoded.

        Returns whether they are: False while an annotation names something not
        defined yet (it is tried again later).
        """
        if not self.annotations_registered:
            self.annotations_registered = register_annotations(self.fn)
        return self.annotations_registered


@dataclass(eq=False, slots=True, kw_only=True)
class WorkflowSpec:
    """A decorated workflow: its registered name, code and budget."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    budget_usd: float | None = None
    budget_tokens: int | None = None
    version: str | None = None
    """Recorded on each run it starts; workers may claim by it (`Worker(versions=)`)."""
    aliases: tuple[str, ...] = ()
    """Other names its runs may have recorded: its default name as the module
    was called when run as a script (`__main__:qualname`), or before `name=`."""
    annotations_registered: bool = field(default=False)

    def answers_to(self, name: str) -> bool:
        """Whether a run recorded under `name` is a run of this workflow."""
        return name == self.name or name in self.aliases

    @property
    def journal_name(self) -> str:
        """The step name its calls record in a parent run's journal (as child runs)."""
        return f"child:{self.name}"

    @property
    def journal_aliases(self) -> tuple[str, ...]:
        """Older step names a parent may have recorded its calls under (`child:` + alias)."""
        return tuple(f"child:{alias}" for alias in self.aliases)

    def register_types(self) -> bool:
        """Allow the types in the workflow's annotations to be decoded.

        Returns whether they are: False while an annotation names something not
        defined yet (it is tried again later).
        """
        if not self.annotations_registered:
            self.annotations_registered = register_annotations(self.fn)
        return self.annotations_registered


class WorkflowRegistry:
    """Workflows by registered name (the last definition of a name wins).

    A name no workflow has is looked up among their aliases, so runs recorded
    under an older name (`__main__:research`, from a script) still resume; an
    alias two workflows share finds neither.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, WorkflowSpec] = {}

    def add(self, spec: WorkflowSpec) -> None:
        """Register a workflow under its name."""
        self._by_name[spec.name] = spec

    def get(self, name: str) -> WorkflowSpec | None:
        """The workflow registered under `name`, or the one workflow aliased so."""
        spec = self._by_name.get(name)
        if spec is not None:
            return spec
        owners = {id(s): s for s in self._by_name.values() if name in s.aliases}
        return next(iter(owners.values())) if len(owners) == 1 else None

    def names(self) -> list[str]:
        """Every registered workflow name."""
        return sorted(self._by_name)

    def claimable(self) -> list[str]:
        """Every name `get` finds a workflow by: names, and aliases only one has."""
        aliases = [a for s in self._by_name.values() for a in s.aliases]
        unique = {a for a in aliases if aliases.count(a) == 1} - self._by_name.keys()
        return sorted({*self._by_name, *unique})


def default_workflow_name(fn: Callable[..., Any]) -> str:
    """`module:qualname`, with the module named as `--app` would import it.

    A script run as `python agent.py` (or `python -m agent`) is the module
    `__main__`; its workflows take the name they get when `agent` is imported,
    so a worker or `resumable resume --app agent` finds them.
    """
    return f"{module_name(fn)}:{fn.__qualname__}"


def module_name(fn: Callable[..., Any]) -> str:
    """The importable name of the module defining `fn` (see default_workflow_name)."""
    module = str(getattr(fn, "__module__", None) or "__main__")
    if module != "__main__":
        return module
    namespace: dict[str, Any] = getattr(fn, "__globals__", {})
    spec = namespace.get("__spec__")
    if spec is not None and getattr(spec, "name", None):
        return str(spec.name)  # python -m package.module
    file = namespace.get("__file__")
    if isinstance(file, str) and file.endswith(".py"):
        return Path(file).stem  # python path/to/agent.py
    return module  # an interactive session: nothing to import it by


def legacy_names(fn: Callable[..., Any], name: str) -> tuple[str, ...]:
    """The names a run of this workflow may have recorded before (`aliases`)."""
    qualname = fn.__qualname__
    older = [f"__main__:{qualname}", f"{getattr(fn, '__module__', '')}:{qualname}"]
    older.append(f"{module_name(fn)}:{qualname}")
    return tuple(dict.fromkeys(n for n in older if n != name))


WORKFLOWS = WorkflowRegistry()
STEPS: dict[str, StepSpec] = {}
"""Steps by journal name (the last definition of a name wins)."""


def register_known_types() -> None:
    """Register the annotation types of every decorated step and workflow now.

    They register lazily on first use; a process that only reads stored runs
    (the CLI's `show --app`) calls this after importing the app.
    """
    for spec in [*STEPS.values(), *(WORKFLOWS.get(name) for name in WORKFLOWS.names())]:
        if spec is not None:
            spec.register_types()


def register(*types: type) -> None:
    """Allow these types (dataclasses, enums, pydantic models) to be decoded.

    Types named in `@step` and `@workflow` annotations are registered already;
    use this for values whose types no annotation names.
    """
    TYPES.register(*types)


def register_annotations(fn: Callable[..., Any]) -> bool:
    """Register every codec-relevant type named in a function's annotations.

    Returns False if they cannot be resolved yet (a name not defined yet).
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable for now: tried again on a later miss
        return False
    for hint in hints.values():
        TYPES.register_annotation(hint)
    return True


def workflow_spec(fn: object) -> WorkflowSpec:
    """The spec of a decorated workflow, or a TypeError saying how to decorate it."""
    spec = getattr(fn, "__resumable_workflow__", None)
    if not isinstance(spec, WorkflowSpec):
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"{name} is not a workflow; decorate it with @resumable.workflow"
        )
    return spec
