from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from resumable.cli import main


def test_demo_kills_resumes_and_reports_what_replay_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--store", f"sqlite:///{tmp_path / 'demo.db'}"]) == 0
    out = capsys.readouterr().out

    def number(label: str) -> int:
        match = re.search(rf"{label}\s+([\d,]+)", out)
        assert match, f"{label!r} missing from:\n{out}"
        return int(match.group(1).replace(",", ""))

    killed = int(re.search(r"after (\d+) of 101 LLM calls", out).group(1))  # type: ignore[union-attr]  # asserted by the run
    replayed, executed = (
        number("steps replayed from the store"),
        number("steps executed after resume"),
    )
    assert 50 <= killed <= 70
    assert (
        replayed + executed == 101
    )  # every step ran or replayed once in the resumed process
    assert killed - 8 <= replayed <= killed  # at most the 8 in-flight calls ran again
    assert number("LLM calls avoided") == replayed
    assert number("tokens reused") > 0
    assert "a restart without checkpointing would have paid again" in out

    run_id = re.search(r"resumable show (demo-\d+)", out).group(1)  # type: ignore[union-attr]  # printed by the demo
    store = ["--store", f"sqlite:///{tmp_path / 'demo.db'}"]
    assert main(["runs", *store]) == 0
    listing = capsys.readouterr().out
    assert "INCURRED" in listing
    assert f"replay reused {number_in(listing, 'replay reused')} calls" in listing
    # without --app, in a process that never imports the demo's code or openai:
    # every step's value is readable through the generic view
    script = (
        "import sys; from resumable.cli import main; code = main(sys.argv[1:]); "
        "assert 'openai' not in sys.modules and 'resumable.cli._demo_flow' "
        "not in sys.modules, 'imported app code'; sys.exit(code)"
    )
    for extra in ([], ["--full"]):
        plain = subprocess.run(
            [sys.executable, "-c", script, "show", run_id, *extra, *store],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "unreadable" not in plain
        if extra:
            assert (
                plain.count(
                    '"$type": "openai.types.chat.chat_completion:ChatCompletion"'
                )
                == 101
            )
            assert plain.count('"content": "') == 101
        else:
            assert plain.count('ChatCompletion: "') == 101  # each step's answer
    assert main(["show", run_id, "--app", "resumable.cli._demo_flow", *store]) == 0
    shown = capsys.readouterr().out
    assert f"replayed {replayed} steps" in shown
    assert "ChatCompletion(" in shown  # decoded, once --app registered the types
    # map_steps items are shown under their call by key, not by a 19-digit seq
    assert re.search(r"^\s*\d+ \[\S+\] ", shown, re.MULTILINE), shown
    assert "item:" not in shown


def number_in(text: str, label: str) -> int:
    match = re.search(rf"{label} (\d+)", text)
    assert match, text
    return int(match.group(1))
