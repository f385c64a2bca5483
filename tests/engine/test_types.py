"""Which types an engine decodes: those the program declared, per engine, checked on write."""

from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from resumable import Engine, SerializationError, step, workflow


class Shade(enum.Enum):
    DARK = "dark"
    LIGHT = "light"


@dataclasses.dataclass(frozen=True)
class Swatch:
    name: str
    shade: Shade


@dataclasses.dataclass(frozen=True)
class Unnamed:
    """No annotation of any step or workflow names it, and nobody registers it."""

    x: int


APP = textwrap.dedent(
    """
    import asyncio, dataclasses, enum, sys
    from resumable import Engine, step, workflow

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass(frozen=True)
    class Paint:
        color: Color
        litres: float

    @step
    async def pick() -> Color:
        print("STEP pick", flush=True)
        return Color.RED

    @step
    async def mix(color: Color) -> Paint:
        print("STEP mix", flush=True)
        return Paint(color, 2.5)

    @workflow
    async def paint() -> dict:
        color = await pick()
        return {"color": color, "paint": await mix(color)}

    async def main() -> None:
        async with Engine(sys.argv[1]) as engine:
            result = await engine.run(paint, run_id="paint-1")
            print("RESULT", result["color"] is Color.RED, type(result["paint"]).__name__)

    asyncio.run(main())
    """
)


def test_types_named_only_by_step_annotations_decode_a_finished_run_in_a_new_process(
    tmp_path: Path,
) -> None:
    app = tmp_path / "paint_app.py"
    app.write_text(APP)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    outputs = [
        subprocess.run(
            [sys.executable, str(app), url],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0].count("STEP") == 2
    # the second process only decodes the recorded result: no step is called, so
    # nothing registered the types on the way; the annotations did
    assert "STEP" not in outputs[1]
    assert "RESULT True Paint" in outputs[1]


async def test_a_value_that_could_not_be_decoded_is_refused_when_written() -> None:
    @step
    async def make() -> dict[str, object]:
        return {"items": [1, Unnamed(3)]}

    @workflow
    async def flow() -> object:
        return await make()

    with pytest.raises(SerializationError) as caught:
        await Engine("memory://").run(flow, run_id="unnamed")
    assert caught.value.path == 'result["items"][1]'
    assert "Unnamed" in str(caught.value)
    assert "resumable.register(Unnamed)" in str(caught.value)


async def test_one_engines_types_do_not_widen_anothers() -> None:
    @step
    async def make() -> object:
        return Swatch("night", Shade.DARK)

    @workflow
    async def flow() -> object:
        return await make()

    store_url = "memory://"
    allowed = Engine(store_url, types=[Swatch])
    assert await allowed.run(flow, run_id="s1") == Swatch("night", Shade.DARK)
    other = Engine(allowed.store)
    with pytest.raises(SerializationError, match="is not registered"):
        await other.run(flow, run_id="s1")  # decoding the recorded result
    with pytest.raises(SerializationError, match="is not registered"):
        await other.run(flow, run_id="s2")  # encoding a new one
    # and the first engine still decodes what it wrote
    assert await Engine(allowed.store, types=[Swatch]).run(flow, run_id="s1") == Swatch(
        "night", Shade.DARK
    )
