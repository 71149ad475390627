"""CRC32C (Castagnoli), bit-for-bit the same as Java's ``java.util.zip.CRC32C`` and the Manager's checks.

Uses the fastest implementation present: Debian's ``python3-crc32c`` (table-sliced C), then ``python3-crcmod``'s C
extension, then a table-driven pure-Python loop (correct, slow: only for machines with neither package). Which one
runs is in :data:`IMPLEMENTATION`; tests check every available one against the same vectors the Java side asserts.
"""

from __future__ import annotations


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()


def crc32c_python(data, value: int = 0) -> int:
    """Reference implementation (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF)."""
    crc = value ^ 0xFFFFFFFF
    table = _TABLE
    for byte in memoryview(data).cast("B"):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _implementations():
    found = {}
    try:
        import crc32c as _ext  # Debian python3-crc32c

        found["crc32c"] = lambda data, value=0: _ext.crc32c(data, value)
    except ImportError:
        pass
    try:
        import crcmod.predefined as _crcmod  # Debian python3-crcmod

        _fn = _crcmod.mkCrcFun("crc-32c")
        found["crcmod"] = lambda data, value=0: _fn(data, value)
    except ImportError:
        pass
    found["python"] = crc32c_python
    return found


IMPLEMENTATIONS = _implementations()
IMPLEMENTATION = next(iter(IMPLEMENTATIONS))
_best = IMPLEMENTATIONS[IMPLEMENTATION]


def crc32c(data, value: int = 0) -> int:
    """CRC32C of a bytes-like object (bytes, bytearray, memoryview of a pool slot), optionally continuing ``value``."""
    if isinstance(data, memoryview) and not data.contiguous:
        data = data.tobytes()
    return _best(data, value) & 0xFFFFFFFF
