"""`make demo` installs what the demo needs; `make test` after it installs the rest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def make_n(target: str, cwd: Path) -> list[str]:
    """The commands `make TARGET` would run there (make -n: nothing runs).

    Under `make test` this is a sub-make: the outer make's variables would make
    it print "Entering directory" lines, so they are left out.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")
    }
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_the_openai_extra_alone_and_make_test_then_the_rest(
    tmp_path: Path,
) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    demo = make_n("demo", tmp_path)
    installs = [line for line in demo if "pip install" in line and "-e" in line]
    assert installs == ['.venv/bin/python -m pip install --quiet -e ".[openai]"']
    assert demo[-1] == ".venv/bin/resumable demo"

    # as after `make demo`: a venv whose demo install is newer than pyproject.toml
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    (tmp_path / ".venv" / ".installed-demo").touch()
    os.utime(tmp_path / "pyproject.toml", (0, 0))
    assert make_n("demo", tmp_path) == [".venv/bin/resumable demo"]
    full = [line for line in make_n("test", tmp_path) if "pip install" in line]
    assert len(full) == 1
    assert "--group dev" in full[0]
    for extra in ("openai", "postgres", "redis", "langgraph", "ui"):
        assert extra in full[0]


def test_the_openai_extra_brings_the_sdk_the_demo_and_examples_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = project["project"]["optional-dependencies"]["openai"]
    assert [requirement.split(">")[0] for requirement in extra] == ["openai"]


def test_the_demo_without_the_openai_sdk_names_the_extra_to_install() -> None:
    script = (
        "import sys; sys.modules['openai'] = None  # as if it were not installed\n"
        "from resumable.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "demo", "--store", "memory://"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'resumable[openai]'" in done.stderr
    assert "Traceback" not in done.stderr
