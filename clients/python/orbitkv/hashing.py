"""Chained block hashes that Java, Python and vLLM compute identically.

OrbitKV standardizes on vLLM's own prefix-cache hash with its ``sha256_cbor`` algorithm, so the keys a vLLM engine
already has (``Request.block_hashes``) are the keys OrbitKV stores, and a Java tool (``io.orbitkv.client.hash``)
addresses the same pages:

    hash(block i) = SHA-256( canonical-CBOR( [parent, [token, ...], extra_keys] ) )

where ``parent`` is the previous block's 32-byte hash, or for block 0 ``NONE_HASH = SHA-256(canonical-CBOR(seed))``
with ``seed`` the *string* value of ``PYTHONHASHSEED``; ``extra_keys`` is ``None`` (CBOR null) unless the block
carries LoRA, multimodal or cache-salt keys. Only full blocks are hashed.

This follows vLLM's ``vllm/utils/hashing.py`` (``sha256_cbor``: ``cbor2.dumps(input, canonical=True)`` then SHA-256)
and ``vllm/v1/core/kv_cache_utils.py`` (``init_none_hash``, ``hash_block_tokens``) as read at vLLM commit
``003df2961dd8830c317a61f9745ccd557da9fa06``. vLLM settings that make its hashes stable across processes and equal to
these: ``--prefix-caching-hash-algo sha256_cbor`` and the same fixed ``PYTHONHASHSEED`` (e.g. ``0``) in every engine
process. Without ``PYTHONHASHSEED`` vLLM draws ``NONE_HASH`` at random per process and no two processes share a key.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import cbor2

BLOCK_HASH_BYTES = 32


class HashSeedMissingError(RuntimeError):
    """PYTHONHASHSEED is not set: chained hashes would differ in every process (vLLM would draw NONE_HASH at random)."""


def sha256_cbor(value: Any) -> bytes:
    """SHA-256 of the canonical CBOR encoding (vLLM's ``sha256_cbor``)."""
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def none_hash(seed: str | None = None) -> bytes:
    """The parent of block 0: ``sha256_cbor(seed)``; ``seed`` defaults to the ``PYTHONHASHSEED`` environment value."""
    if seed is None:
        seed = os.environ.get("PYTHONHASHSEED")
        if seed is None:
            raise HashSeedMissingError(
                "PYTHONHASHSEED is not set: set it to the same value (e.g. 0) in every engine process so chained "
                "block hashes agree across processes")
    return sha256_cbor(seed)


def hash_block_tokens(parent: bytes | None, tokens: Sequence[int], extra_keys: tuple | None = None, *,
                      seed: str | None = None) -> bytes:
    """One block's hash from its parent's (``None`` or empty for block 0), its tokens and its extra keys."""
    if not parent:
        parent = none_hash(seed)
    return sha256_cbor((parent, tuple(int(t) for t in tokens), extra_keys))


def chain(tokens: Sequence[int], block_size: int, *, seed: str | None = None,
          extra_keys: Sequence[tuple | None] | None = None) -> list[bytes]:
    """The chained hashes of every full block of ``tokens`` (a trailing partial block has none)."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    hashes: list[bytes] = []
    parent = none_hash(seed)
    for index in range(len(tokens) // block_size):
        extra = extra_keys[index] if extra_keys is not None and index < len(extra_keys) else None
        parent = sha256_cbor((parent, tuple(int(t) for t in tokens[index * block_size:(index + 1) * block_size]), extra))
        hashes.append(parent)
    return hashes
