"""An approval flow: a run stops to wait for a person, and no process waits with it.

The workflow checks an expense claim, then waits for a decision sent from anywhere
(another process, a web handler, the `resumable` command). While it waits the run is
only a row in the store: this program exits, and running it again later continues
the run after the wait, with the earlier steps replayed, not executed again.

    python examples/approval.py                      # checks the claim, stops at the wait
    resumable send expense-42 approval true          # later, from any shell (or --approve)
    python examples/approval.py                      # continues: the claim is paid

The store is $RESUMABLE_STORE (default: the SQLite file ./.resumable/state.db);
the `resumable` command reads the same variable.
"""

from __future__ import annotations

import asyncio
import os
import sys

from resumable import Engine, RunNotFound, WaitTimeout, step, wait_for, workflow

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
RUN_ID = "expense-42"
CLAIM = {"employee": "Dana", "amount_eur": 1250, "what": "flight to the Lisbon offsite"}


@step
async def check_policy(claim: dict[str, object]) -> str:
    """An automatic check; it runs once, however often the run is continued."""
    print(f"  executed  policy check of {claim['employee']}'s claim: needs a manager")
    return "over 1000 EUR: a manager must approve"


@step
async def pay(claim: dict[str, object]) -> str:
    print(f"  executed  payment of {claim['amount_eur']} EUR to {claim['employee']}")
    return f"paid {claim['amount_eur']} EUR to {claim['employee']}"


@step
async def notify_rejected(claim: dict[str, object]) -> str:
    print(f"  executed  rejection mail to {claim['employee']}")
    return f"rejected: {claim['employee']} was told"


@workflow(name="examples.expense")
async def expense_claim(claim: dict[str, object]) -> str:
    """Check the claim, wait for a manager (at most a week), then pay or reject."""
    await check_policy(claim)
    try:
        approved = await wait_for("approval", timeout=7 * 24 * 3600)
    except WaitTimeout:
        approved = False  # nobody answered within a week
    if approved:
        return await pay(claim)
    return await notify_rejected(claim)


async def main() -> None:
    async with Engine(STORE) as engine:  # closed on the way out, whichever return
        await decide_or_continue(engine)


async def decide_or_continue(engine: Engine) -> None:
    if "--approve" in sys.argv or "--reject" in sys.argv:
        # what `resumable send` does, from Python (a web handler would do this)
        await engine.send(RUN_ID, "approval", "--approve" in sys.argv)
        print(f"sent the decision to run {RUN_ID}; run this program again to continue")
        return
    print(f"run {RUN_ID}: {CLAIM['employee']}'s claim of {CLAIM['amount_eur']} EUR")
    if await status_of(engine, RUN_ID) != "waiting":  # new, or its decision was sent
        # start() creates the run, or continues the existing one, in the background
        await engine.start(expense_claim, CLAIM, run_id=RUN_ID)
        # the status lives in the store, where another process may change it too
        while await status_of(engine, RUN_ID) in ("queued", "running"):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    if await status_of(engine, RUN_ID) == "waiting":
        print(f"run {RUN_ID} waits for a manager's decision; this process exits now.")
        print(f"approve it from any shell:  resumable send {RUN_ID} approval true")
        print(f"or reject it:               resumable send {RUN_ID} approval false")
        print("then run this program again to continue the run.")
        # A waiting run holds no lease and needs no process: closing the engine
        # stops this process watching it, and the run keeps waiting in the store.
        return
    print(f"result: {await engine.resume(RUN_ID)}")  # the run has ended: its result


async def status_of(engine: Engine, run_id: str) -> str | None:
    try:
        return (await engine.get(run_id)).status
    except RunNotFound:
        return None


if __name__ == "__main__":
    asyncio.run(main())
