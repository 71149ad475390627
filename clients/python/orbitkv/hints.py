"""Per-request storage hints an engine adapter carries to the Manager: retention, do-not-store, a cap on stored tokens,
and the producer a consumer waits for (P/D).

Both adapters read one dict with the same keys (vLLM: a request's ``kv_transfer_params["orbitkv"]``; SGLang: the
backend's extra config, ``orbitkv_``-prefixed). A bad value never fails the request: :func:`parse_hints` logs one
WARNING naming every bad key and drops only those hints. :class:`RateLimitedWarning` keeps a refused retention (a
budget that is full for every request) to one log line per interval.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Mapping, Optional

from orbitkv import pb

log = logging.getLogger(__name__)

HINT_KEYS = ("retain_ttl_ms", "retain_priority", "do_not_store", "max_stored_tokens", "handoff", "producer")
PRODUCER_KEYS = ("instance_id", "session_epoch", "request_id", "member")
MAX_PRODUCER_REQUEST_ID_CHARS = 128


@dataclasses.dataclass(frozen=True)
class StoreHints:
    """``retain_ttl_ms`` 0: no retention. ``max_stored_tokens`` 0: no cap. ``handoff``: a producer's request (P/D
    prefill) whose pages a consumer waits for: they are published under the request's id. ``producer``: the session
    and request whose seals a consumer's lookup waits for."""
    retain_ttl_ms: int = 0
    retain_priority: int = 0
    do_not_store: bool = False
    max_stored_tokens: int = 0
    handoff: bool = False
    producer: Optional[pb.Producer] = None

    def stored_blocks(self, block_tokens: int) -> Optional[int]:
        """How many leading blocks may be stored, or None for no cap."""
        return self.max_stored_tokens // block_tokens if self.max_stored_tokens else None


NO_HINTS = StoreHints()


def _int(value: Any, low: int, high: int) -> int:
    # bool is an int in Python: True as a ttl is a mistake, not 1 ms.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"an integer in [{low}, {high}]")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _producer(value: Any) -> pb.Producer:
    if not isinstance(value, Mapping):
        raise ValueError("a dict with instance_id, session_epoch, request_id (and member when on another Manager)")
    unknown = sorted(set(value) - set(PRODUCER_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown}")
    request_id = value.get("request_id")
    if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_PRODUCER_REQUEST_ID_CHARS:
        raise ValueError(f"request_id must be a string of 1 to {MAX_PRODUCER_REQUEST_ID_CHARS} characters")
    member = value.get("member", "")
    if not isinstance(member, str):
        raise ValueError("member must be a string")
    try:
        instance_id = _int(value.get("instance_id"), 1, 2 ** 63 - 1)
        session_epoch = _int(value.get("session_epoch"), 0, 2 ** 63 - 1)
    except ValueError as e:
        raise ValueError(f"instance_id and session_epoch must be {e}") from None
    return pb.Producer(instance_id=instance_id, session_epoch=session_epoch, request_id=request_id, member=member)


def parse_hints(raw: Any, where: str, *, keys_prefix: str = "") -> StoreHints:
    """The hints in ``raw`` (a dict of :data:`HINT_KEYS`, each optionally prefixed by ``keys_prefix``; None: none).
    Every bad or unknown key is named in one WARNING (``where`` says whose) and ignored; the others hold."""
    if raw is None:
        return NO_HINTS
    if not isinstance(raw, Mapping):
        log.warning("OrbitKV hints of %s ignored: expected a dict, got %s", where, type(raw).__name__)
        return NO_HINTS
    problems = []
    values: dict[str, Any] = {}
    checks = {
        "retain_ttl_ms": lambda v: _int(v, 1, 2 ** 62),
        "retain_priority": lambda v: _int(v, -(2 ** 31), 2 ** 31 - 1),
        "do_not_store": _bool,
        "max_stored_tokens": lambda v: _int(v, 0, 2 ** 62),
        "handoff": _bool,
        "producer": _producer,
    }
    for key, value in raw.items():
        name = key[len(keys_prefix):] if isinstance(key, str) and key.startswith(keys_prefix) else None
        if name not in checks:
            if not keys_prefix:  # with a prefix, other keys belong to the adapter's own options
                problems.append(f"{key!r} is not a hint (known: {', '.join(HINT_KEYS)})")
            continue
        try:
            values[name] = checks[name](value)
        except ValueError as e:
            problems.append(f"{key}={value!r}: {e}")
    if "retain_priority" in values and "retain_ttl_ms" not in values:
        problems.append(f"{keys_prefix}retain_priority without {keys_prefix}retain_ttl_ms retains nothing")
    if problems:
        log.warning("OrbitKV hints of %s: %s; those hints are ignored, the request is served", where,
                    "; ".join(problems))
    return StoreHints(**values) if values else NO_HINTS


class RateLimitedWarning:
    """One WARNING per ``interval_seconds`` for one kind of event; the next line says how many were suppressed."""

    def __init__(self, logger: logging.Logger, interval_seconds: float = 60.0):
        self._log = logger
        self._interval = interval_seconds
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._suppressed = 0

    def warn(self, message: str, *args) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self._interval:
                self._suppressed += 1
                return
            suppressed, self._suppressed, self._last = self._suppressed, 0, now
        if suppressed:
            message += " (%d more like it in the last %.0f s)"
            args = (*args, suppressed, self._interval)
        self._log.warning(message, *args)
