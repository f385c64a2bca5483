"""The tamper suite: damage what a store wrote, one value at a time, and check it fails safe.

Give `TamperSuite` a factory of `TamperSubject`s (a fresh store plus raw access
to its rows, through the store's own driver) and run it: every damaged value
must end in the result a healthy store gives or in a `ResumableError`, within a
time limit and a memory bound, without running a finished step again.

Modules:

- `suite`: `TamperSuite`, what a store provides (`TamperSubject`, `StoredField`)
  and what it reports (`TamperReport`, `TamperFailure`)
- `mutations`: the damage: `mutations_of` a stored value, and hostile payloads
  (`plain_frame`, `decompression_bomb`) for tests of your own
- `scenario`: what the suite writes before damaging it, and the actions it then
  takes (resume, list, show, load, the CLI)
"""

from __future__ import annotations

from resumable.testing.tamper.mutations import (
    Mutation,
    decompression_bomb,
    mutations_of,
    plain_frame,
)
from resumable.testing.tamper.suite import (
    StoredField,
    TamperFailure,
    TamperReport,
    TamperSubject,
    TamperSuite,
)

__all__ = [
    "Mutation",
    "StoredField",
    "TamperFailure",
    "TamperReport",
    "TamperSubject",
    "TamperSuite",
    "decompression_bomb",
    "mutations_of",
    "plain_frame",
]
