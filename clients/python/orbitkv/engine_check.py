"""Which engine the adapters run in: the real one when its module is installed, stand-ins only when it is absent.

An installed engine whose import fails (a broken CUDA library, a missing dependency of the engine) is an error the
operator must see, not a reason to run on stand-ins; so the choice is made on whether the module exists
(``importlib.util.find_spec``), never on an ``ImportError``. An installed engine older than the adapters support is
refused with :class:`UnsupportedEngineError`, naming the version found and the versions supported.
"""

from __future__ import annotations

import importlib.util
import re


class UnsupportedEngineError(RuntimeError):
    """The engine is installed but its version (or its interface) is not one the adapter supports."""


def engine_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is not a package, or a broken __spec__
        return False


def parse_version(text: str) -> tuple[int, ...]:
    """``"0.11.1rc2.dev3+gabc"`` → ``(0, 11, 1)``: the leading release numbers (pre/dev/local parts ignored)."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
    if not match:
        raise UnsupportedEngineError(f"cannot read a version from {text!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def check_version(engine: str, found: str, minimum: tuple[int, ...], below: tuple[int, ...], read_at: str) -> None:
    """Refuses ``found`` outside ``[minimum, below)`` with a message an operator can act on."""
    version = parse_version(found)
    if not minimum <= version < below:
        raise UnsupportedEngineError(
            f"OrbitKV supports {engine} >= {'.'.join(map(str, minimum))} and < {'.'.join(map(str, below))} "
            f"(interfaces read at {read_at}); this is {engine} {found}. Use a supported {engine}, or disable the "
            f"OrbitKV {'connector' if engine == 'vLLM' else 'backend'}.")


def require_methods(engine: str, cls, names: tuple[str, ...]) -> None:
    missing = [name for name in names if not hasattr(cls, name)]
    if missing:
        raise UnsupportedEngineError(f"{engine}'s {cls.__name__} lacks {missing}: this {engine} predates the interface "
                                     "OrbitKV is written against")
