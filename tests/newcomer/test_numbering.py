"""Steps are numbered as the workflow called them, map items by the user's key.

`show`, `history()`, `export` and the dashboard agree: 1, 2, 3, `3 [mail-0]`,
`3 [mail-1]`, 4; no 19-digit seq and no hash reaches the user.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from newcomer.as_a_user import dashboard, fetch, ok, python, resumable

MAILER = """
import asyncio, json, sys
from resumable import Engine, map_steps, step, workflow

@step
async def fetch(x: str) -> str:
    return x.upper()

@step
async def mail(to: str) -> str:
    return "mailed " + to

@step
async def count(sent: list[str]) -> int:
    return len(sent)

@workflow
async def campaign(topic: str) -> int:
    first = await fetch(topic)
    await fetch(first + "!")
    sent = await map_steps(mail, ["mail-0", "mail-1"])
    return await count(sent)

async def main() -> None:
    async with Engine() as engine:
        await engine.run(campaign, "news", run_id="c-1")
        steps = await engine.history("c-1")
    print(json.dumps([[s.seq, s.item_key, s.name] for s in steps]))

if __name__ == "__main__":
    asyncio.run(main())
"""

CALL_ORDER = [
    [1, None, "fetch"],
    [2, None, "fetch"],
    [3, None, "map:mail"],
    [3, "mail-0", "mail"],
    [3, "mail-1", "mail"],
    [4, None, "count"],
]


def test_history_show_export_and_the_dashboard_number_steps_in_call_order(
    tmp_path: Path,
) -> None:
    (tmp_path / "mailer.py").write_text(MAILER)
    assert json.loads(ok(python(tmp_path, "mailer.py"))) == CALL_ORDER

    shown = ok(resumable(tmp_path, "show", "c-1"))
    journal = shown[shown.index("SEQ") :].splitlines()[2:]
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in journal]
    assert labels == ["1", "2", "3", "3 [mail-0]", "3 [mail-1]", "4"]

    exported = [
        json.loads(line)
        for line in ok(resumable(tmp_path, "export", "c-1")).splitlines()
    ]
    assert [[r["seq"], r["item_key"], r["step"]] for r in exported] == CALL_ORDER

    with dashboard(tmp_path) as base:
        page = fetch(base + "/run?id=c-1")
    assert "3 [mail-0]" in page
    assert "3 [mail-1]" in page
    assert not re.search(r"#\d{6,}|item:", page)


def test_fork_takes_the_numbers_show_prints_and_refuses_one_past_the_end(
    tmp_path: Path,
) -> None:
    (tmp_path / "mailer.py").write_text(MAILER)
    ok(python(tmp_path, "mailer.py"))
    for past in ("5", str(len(CALL_ORDER))):  # one past the end; len(history())
        refused = resumable(tmp_path, "fork", "c-1", "--at-step", past)
        assert refused.returncode != 0
        assert "has 4 steps" in refused.stderr
        assert f"between 0 and 4; got {past}" in refused.stderr
        assert "Traceback" not in refused.stderr
    out = ok(resumable(tmp_path, "fork", "c-1", "--at-step", "4", "--new-id", "c-2"))
    assert "forked from c-1 at step 4" in out
    assert "succeeded: 2" in ok(resumable(tmp_path, "resume", "c-2", "--app", "mailer"))
