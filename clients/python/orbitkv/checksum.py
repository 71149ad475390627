"""CRC32C (Castagnoli), bit-for-bit the same as Java's ``java.util.zip.CRC32C`` and the Manager's checks.

Uses a native implementation: Debian's ``python3-crc32c`` (the ``crc32c`` package: SSE4.2 or table-sliced C), else
``python3-crcmod`` when its C extension is built. The table-driven pure-Python loop is kept as the reference the tests
check the others against, never used for pages: at about 13 MB/s it would spend minutes of an engine step verifying a
long prefix. Without a native implementation :func:`crc32c` and :func:`require_native` raise
:class:`NativeCrc32cMissingError` saying what to install; the client calls :func:`require_native` when it is created,
so an engine refuses to start rather than stalling later. Which one runs is in :data:`IMPLEMENTATION`.
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
        import sys

        import crcmod.predefined as _crcmod  # Debian python3-crcmod

        if getattr(sys.modules.get("crcmod.crcmod"), "_usingExtension", False):  # only its C extension, not its pure-Python loop
            _fn = _crcmod.mkCrcFun("crc-32c")
            found["crcmod"] = lambda data, value=0: _fn(data, value)
    except ImportError:
        pass
    return found


class NativeCrc32cMissingError(RuntimeError):
    """No native CRC32C implementation is installed; the pure-Python one is too slow for pages."""


IMPLEMENTATIONS = _implementations()
IMPLEMENTATION = next(iter(IMPLEMENTATIONS), None)
_best = IMPLEMENTATIONS.get(IMPLEMENTATION) if IMPLEMENTATION else None
# The reference implementation, for tests only.
REFERENCE = crc32c_python


def require_native() -> str:
    """The native implementation's name; raises :class:`NativeCrc32cMissingError` when there is none."""
    if _best is None:
        raise NativeCrc32cMissingError(
            "OrbitKV needs a native CRC32C to verify pages: install python3-crc32c (Debian/Ubuntu) or "
            "`pip install crc32c`. The pure-Python fallback (about 13 MB/s) is refused: it would stall the engine.")
    return IMPLEMENTATION


def crc32c(data, value: int = 0) -> int:
    """CRC32C of a bytes-like object (bytes, bytearray, memoryview of a pool slot), optionally continuing ``value``."""
    if _best is None:
        require_native()
    if isinstance(data, memoryview) and not data.contiguous:
        data = data.tobytes()
    return _best(data, value) & 0xFFFFFFFF
