"""Chained block hashes: vLLM's sha256_cbor scheme, golden vectors shared with the Java test
(client/src/test/java/io/orbitkv/client/hash/BlockHashesTest.java asserts the same hex strings)."""

import hashlib

import cbor2
import pytest

from orbitkv import hashing

# Tokens 0..39 in blocks of 16 (two full blocks), seed "0": the same vectors BlockHashesTest asserts in Java.
GOLDEN_NONE_HASH_SEED_0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
GOLDEN_CHAIN_SEED_0 = ["d830de3d42c00f25a2949b5d12d98642664a44872c1614c5b0147556276afc9c",
                       "fedd9e4abebebbe6f6cf96b682f08d316063fe2f22a5c552192dd62904fcccac"]
# Tokens 0..31, seed "42", block 0 with extra keys ("lora-a", 7) (a text string and an int), block 1 none.
GOLDEN_WITH_EXTRA = ["951234d5b123ec6acae4492ff66bb1092468882a96a37e5a414c8e344c51f951",
                     "6c8e49de3ebef535a8e356734b46b5b96061e74b6a70c803616d1a179b646c82"]


def test_cbor_is_the_canonical_encoding_vllm_hashes():
    parent = bytes(range(32))
    encoded = cbor2.dumps((parent, (1, 23, 24, 255, 256, 65536), None), canonical=True)
    # array(3), bytes(32), array(6) of shortest-form unsigned ints, null
    expected = (b"\x83" + b"\x58\x20" + parent + b"\x86" + b"\x01" + b"\x17" + b"\x18\x18" + b"\x18\xff"
                + b"\x19\x01\x00" + b"\x1a\x00\x01\x00\x00" + b"\xf6")
    assert encoded == expected
    assert hashing.hash_block_tokens(parent, [1, 23, 24, 255, 256, 65536], seed="0") == hashlib.sha256(expected).digest()


def test_none_hash_is_sha256_of_the_seed_string():
    assert hashing.none_hash("0") == hashlib.sha256(b"\x61\x30").digest()
    assert hashing.none_hash("0").hex() == GOLDEN_NONE_HASH_SEED_0


def test_golden_chain():
    chain = hashing.chain(list(range(40)), 16, seed="0")
    assert len(chain) == 2  # the trailing partial block has no hash
    assert [h.hex() for h in chain] == GOLDEN_CHAIN_SEED_0
    assert chain[1] == hashing.hash_block_tokens(chain[0], range(16, 32), seed="0")


def test_golden_with_extra_keys():
    chain = hashing.chain(list(range(32)), 16, seed="42", extra_keys=[("lora-a", 7), None])
    assert [h.hex() for h in chain] == GOLDEN_WITH_EXTRA


def test_seed_comes_from_pythonhashseed(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "42")
    assert hashing.none_hash() == hashing.none_hash("42")
    monkeypatch.delenv("PYTHONHASHSEED")
    with pytest.raises(hashing.HashSeedMissingError):
        hashing.chain([1] * 16, 16)
