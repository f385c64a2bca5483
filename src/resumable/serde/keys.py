"""Encryption keys: a `KeyRing` of named AES-256 keys, one of them current.

Frames record the id of the key that sealed them, so keys rotate without
rewriting history (`Engine.rekey` re-seals old frames under the current key).
`cryptography` is an optional extra, imported on first use.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Mapping
from typing import Any, Protocol, cast

__all__ = ["Aead", "KeyRing", "invalid_tag", "new_aead"]

_KEY_SIZE = 32
_GENERATE_KEY_HINT = (
    'generate one with: python -c "import base64, os; '
    'print(base64.b64encode(os.urandom(32)).decode())"'
)


class Aead(Protocol):
    """The part of cryptography's `AESGCM` this module uses."""

    def encrypt(
        self, nonce: bytes, data: bytes | memoryview, associated_data: bytes | None
    ) -> bytes:
        """Encrypt and authenticate `data`; return ciphertext + tag."""
        ...

    def decrypt(
        self, nonce: bytes, data: bytes | memoryview, associated_data: bytes | None
    ) -> bytes:
        """Check the tag and decrypt; raise `InvalidTag` on failure."""
        ...


# The optional extras are imported by name at run time, so type checkers of a
# checkout without them installed see no unresolved import.
def new_aead(key: bytes) -> Aead:
    """An AES-256-GCM cipher of `key` (ImportError naming the extra without it)."""
    try:
        module = importlib.import_module("cryptography.hazmat.primitives.ciphers.aead")
    except ImportError as exc:
        raise ImportError(
            "encryption needs the cryptography package: "
            "pip install 'resumable[encryption]'"
        ) from exc
    return cast("Aead", module.AESGCM(key))


def invalid_tag() -> type[Exception]:
    """The exception a cipher raises for a frame its key did not seal."""
    module = importlib.import_module("cryptography.exceptions")
    return cast("type[Exception]", module.InvalidTag)


class KeyRing:
    """AES-256 keys by id: new frames use `current`, old frames name their key.

    Keeping retired keys in the ring keeps the frames they wrote readable, which is
    how keys are rotated. Key material never appears in `repr()` or in messages.

    Raises:
        ValueError: A key is not 32 bytes, an id is empty or too long, or
            `current` is not one of the ids.
        TypeError: A key is not bytes.
    """

    __slots__ = ("_ciphers", "_current", "_keys")

    def __init__(self, keys: Mapping[str, bytes], *, current: str) -> None:
        if not keys:
            raise ValueError("a KeyRing needs at least one key")
        checked = {key_id: _checked_key(key_id, key) for key_id, key in keys.items()}
        if current not in checked:
            raise ValueError(
                f"current key id {current!r} is not one of {list(checked)}"
            )
        self._keys = checked
        self._current = current
        self._ciphers: dict[str, Aead] = {}

    @classmethod
    def from_env(cls, value: str) -> KeyRing:
        """Parse the `RESUMABLE_ENCRYPTION_KEY` format.

        Either `"id1:base64key,id2:base64key"` (the first is current) or a single
        base64 key, which gets the id `"k1"`. Standard and URL-safe base64 are
        accepted, with or without padding.

        Raises:
            ValueError: The value is malformed; the message says where, never what
                the key material is.
        """
        text = value.strip()
        if not text:
            raise ValueError(
                "RESUMABLE_ENCRYPTION_KEY is empty; set it to a base64 32-byte key, "
                f"or to 'id1:key1,id2:key2' with the current key first ({_GENERATE_KEY_HINT})"
            )
        if ":" not in text and "," not in text:
            return cls({"k1": _decode_key(text, "k1")}, current="k1")
        keys: dict[str, bytes] = {}
        for number, item in enumerate(text.split(","), start=1):
            key_id, colon, encoded = item.strip().partition(":")
            key_id = key_id.strip()
            if not colon or not key_id or not encoded.strip():
                raise ValueError(
                    f"RESUMABLE_ENCRYPTION_KEY entry {number} is not 'id:base64key' "
                    f"(entries are separated by commas, the current key first)"
                )
            if key_id in keys:
                raise ValueError(
                    f"RESUMABLE_ENCRYPTION_KEY names key id {key_id!r} twice"
                )
            keys[key_id] = _decode_key(encoded, key_id)
        return cls(keys, current=next(iter(keys)))

    @property
    def current(self) -> str:
        """The id of the key new frames are encrypted with."""
        return self._current

    @property
    def ids(self) -> tuple[str, ...]:
        """Every key id in the ring."""
        return tuple(self._keys)

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self._keys)!r}, current={self._current!r})"

    def current_cipher(self) -> Aead:
        """The AES-GCM cipher for the current key.

        Raises:
            ImportError: The `cryptography` package is not installed.
        """
        cipher = self.cipher(self._current)
        if cipher is None:  # pragma: no cover - __init__ checks current is a key id
            raise KeyError(self._current)
        return cipher

    def cipher(self, key_id: str) -> Aead | None:
        """The AES-GCM cipher for a key id, or None if the ring lacks that id.

        Raises:
            ImportError: The `cryptography` package is not installed.
        """
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            key = self._keys.get(key_id)
            if key is None:
                return None
            cipher = self._ciphers[key_id] = new_aead(key)
        return cipher

    def gcm(self, key_id: str, nonce: bytes, *, decrypt: bool) -> Any:
        """A streaming AES-GCM context (cryptography's `CipherContext`) for a key id.

        An encryptor, or a decryptor whose `finalize_with_tag(tag)` checks the
        tag; they write what `Aead.encrypt`/`decrypt` do, a chunk at a time.
        None when the ring lacks the key id.

        Raises:
            ImportError: The `cryptography` package is not installed.
        """
        key = self._keys.get(key_id)
        if key is None:
            return None
        ciphers = importlib.import_module("cryptography.hazmat.primitives.ciphers")
        cipher = ciphers.Cipher(ciphers.algorithms.AES(key), ciphers.modes.GCM(nonce))
        return cipher.decryptor() if decrypt else cipher.encryptor()


def _checked_key(key_id: object, key: object) -> bytes:
    # Typed as object: keys often come from config code that mypy never saw.
    if not isinstance(key_id, str) or not key_id:
        raise ValueError("key ids must be non-empty strings")
    if len(key_id.encode("utf-8")) > 255:
        raise ValueError(f"key id {key_id[:20]!r}... is longer than 255 bytes")
    if not isinstance(key, bytes | bytearray):
        raise TypeError(f"key {key_id!r} must be bytes, not {type(key).__name__}")
    if len(key) != _KEY_SIZE:
        raise ValueError(
            f"key {key_id!r} is {len(key)} bytes; AES-256 needs exactly "
            f"{_KEY_SIZE} ({_GENERATE_KEY_HINT})"
        )
    return bytes(key)


def _decode_key(encoded: str, key_id: str) -> bytes:
    text = "".join(encoded.split())
    text += "=" * (-len(text) % 4)
    try:
        altchars = b"-_" if "-" in text or "_" in text else None  # URL-safe form
        key = base64.b64decode(text, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        # from None: the decoder's message may quote the input, which is a secret.
        raise ValueError(
            f"key {key_id!r} in RESUMABLE_ENCRYPTION_KEY is not valid base64 "
            f"({_GENERATE_KEY_HINT})"
        ) from None
    if len(key) != _KEY_SIZE:
        raise ValueError(
            f"key {key_id!r} in RESUMABLE_ENCRYPTION_KEY decodes to {len(key)} bytes; "
            f"AES-256 needs exactly {_KEY_SIZE} ({_GENERATE_KEY_HINT})"
        )
    return key
