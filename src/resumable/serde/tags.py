"""The tagged-JSON format's vocabulary: what codec, decoding, fingerprint and view share.

See `resumable.serde.codec` for the format itself.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final
from uuid import UUID

# A JSON-ready tree: what the walk hands to json, and what json hands back.
Json = Any

TAG = "~"
TAG_KEY: Final = json.dumps(TAG) + ":"  # how the tag shows as a key in JSON text
VALUE = "v"
EXTRA = "x"  # pydantic: extra fields (model_config extra="allow")
FIELDS_SET = "s"  # pydantic: model_fields_set, when it is not every field

# Types json writes and reads back unchanged. Exact types only: a subclass (IntEnum,
# OrderedDict, a str subclass) must not silently come back as its base.
PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})
# Python refuses int <-> decimal str conversion past sys.get_int_max_str_digits()
# (4300 digits by default), so huge ints are tagged as hex when that happens.
PLAIN_SAFE: frozenset[type] = PLAIN - {int}
INT_PLAIN_LIMIT = 1 << 64

DECODE_PATH = "stored value"
TEXT: Final = b"\x01"  # a body of raw UTF-8 text follows (see the module docstring)
# how json writes one top-level bytes value, around its base64 (which needs no escapes)
BYTES_OPEN: Final = b'{"~":"bytes","v":"'
BYTES_CLOSE: Final = b'"}'


class DecodeError(ValueError):
    """The bytes are not a payload this codec wrote (malformed or damaged).

    Deliberately not a `ResumableError`: the integrity layer, which knows the run
    and step, turns it into `CorruptCheckpointError`.
    """


def type_name(tp: type) -> str:
    """`module:qualname`, as errors and opaque fingerprints name a type."""
    return f"{getattr(tp, '__module__', '?')}:{getattr(tp, '__qualname__', '?')}"


def enc_int(value: int) -> Json:
    """An int as json writes it, or tagged hex past 64 bits (see PLAIN_SAFE)."""
    if -INT_PLAIN_LIMIT < value < INT_PLAIN_LIMIT:
        return value
    return {TAG: "int", VALUE: format(value, "x")}


# Values with no inner values: one function each, shared by encoder and fingerprint.
LEAF_ENCODERS: dict[type, Callable[[Any], Json]] = {
    bytes: lambda v: {TAG: "bytes", VALUE: base64.b64encode(v).decode("ascii")},
    bytearray: lambda v: {
        TAG: "bytearray",
        VALUE: base64.b64encode(v).decode("ascii"),
    },
    datetime: lambda v: {TAG: "datetime", VALUE: v.isoformat()},
    date: lambda v: {TAG: "date", VALUE: v.isoformat()},
    time: lambda v: {TAG: "time", VALUE: v.isoformat()},
    timedelta: lambda v: {
        TAG: "timedelta",
        VALUE: [v.days, v.seconds, v.microseconds],
    },
    UUID: lambda v: {TAG: "uuid", VALUE: str(v)},
    Decimal: lambda v: {TAG: "decimal", VALUE: str(v)},
}
