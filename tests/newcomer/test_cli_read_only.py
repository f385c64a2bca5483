"""Commands that only read never create a store, and read one on a read-only disk.

Issue 36 (a missing SQLite file is an error naming the absolute path looked at) and
issue 41 item 7 (a store on a read-only filesystem could not even be listed).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from newcomer.cli_flows import quick
from newcomer.cli_user import APP, finish, one_line_error, start, together
from resumable import Engine
from resumable.cli import main

READERS = [
    ["runs"],
    ["show", "some-run"],
    ["threads"],
    ["show-thread", "some-thread"],
    ["export"],
    ["check", "--app", APP],
    ["ui", "--port", "0"],
]


def test_reading_commands_never_create_a_store_or_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # as a user types them: the default store, ./.resumable/state.db, and a relative
    # URL (two commands; each command's start costs a second of CPU)
    default, named = together(
        tmp_path, [["runs"], ["show", "some-run", "--store", "sqlite:///data/x.db"]]
    )
    assert f"no database at {tmp_path / '.resumable' / 'state.db'}" in one_line_error(
        default
    )
    line = one_line_error(named)
    assert f"no database at {tmp_path / 'data' / 'x.db'}" in line
    assert "sqlite:////absolute/path.db" in line  # relative vs absolute, said
    # and every reading command, through the same entry point
    monkeypatch.chdir(tmp_path)
    for args in READERS:
        assert main(args) == 1, args
        error = capsys.readouterr().err
        assert f"no database at {tmp_path / '.resumable' / 'state.db'}" in error, args
    assert list(tmp_path.iterdir()) == []


async def _runs(url: str) -> None:
    async with Engine(url) as engine:
        await engine.run(quick, 1, run_id="kept")


def _state(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()
    }


def test_reading_leaves_the_folder_and_the_file_as_they_were(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    asyncio.run(_runs(f"sqlite:///{folder / 'state.db'}"))
    before = _state(folder)
    store = ["--store", "sqlite:///data/state.db"]
    listed, exported = together(tmp_path, [["runs", *store], ["export", *store]])
    for done in (listed, exported):
        assert done.returncode == 0, done.stderr
    assert f"store: {folder / 'state.db'}" in listed.stdout  # the path it resolved
    assert '"run_id":"kept"' in exported.stdout
    assert _state(folder) == before  # no -wal or -shm left, not a byte changed


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[list[str]]:
    """A prefix that runs a command with `folder` on a read-only filesystem.

    Root ignores file modes, so the folder is bind-mounted read-only in a mount
    namespace of the command's own (gone with it); where that is not allowed,
    the folder and its files are made immutable (`chattr +i`, which binds root
    too) for the test's length.
    """
    probe = ["unshare", "--mount", "sh", "-c", f"mount --bind -o ro {folder} {folder}"]
    if (
        shutil.which("unshare")
        and subprocess.run(probe, capture_output=True, check=False).returncode == 0
    ):
        script = f'mount --bind -o ro "{folder}" "{folder}" && exec "$0" "$@"'
        yield ["unshare", "--mount", "sh", "-c", script]
        return
    if os.geteuid() != 0:
        folder.chmod(0o555)
        for file in folder.iterdir():
            file.chmod(0o444)
        yield []
        folder.chmod(0o755)
        return
    files = [str(folder), *(str(file) for file in folder.iterdir())]
    if (
        not shutil.which("chattr")
        or subprocess.run(
            ["chattr", "+i", *files], capture_output=True, check=False
        ).returncode
    ):
        pytest.skip("neither a mount namespace nor chattr +i: no read-only folder")
    try:
        yield []
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)


def test_a_store_on_a_read_only_filesystem_is_listed_shown_and_exported(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    asyncio.run(_runs(f"sqlite:///{folder / 'state.db'}"))
    before = _state(folder)
    store = ["--store", f"sqlite:///{folder / 'state.db'}"]
    with _read_only(folder) as prefix:
        writing = subprocess.run(
            [*prefix, "touch", str(folder / "probe")], capture_output=True, check=False
        )
        assert writing.returncode != 0  # the folder really is read-only
        started = [
            start(tmp_path, *args, *store, prefix=prefix)
            for args in (["runs"], ["show", "kept"], ["export"])
        ]
        listed, shown, exported = [finish(process) for process in started]
    for done in (listed, shown, exported):
        assert done.returncode == 0, done.stderr
    assert "kept" in listed.stdout
    assert "draft" in shown.stdout
    assert '"run_id":"kept"' in exported.stdout
    assert _state(folder) == before
