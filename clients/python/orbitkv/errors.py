"""Typed failures of the OrbitKV Python client.

Every refusal by the Manager carries an ``ErrorReason`` name in the ``orbitkv-error-reason`` trailer (and at the start
of the status message); :func:`from_rpc_error` maps it onto :class:`OrbitKvError` with :attr:`OrbitKvError.reason`
set, so callers branch on the reason, never on message text.
"""

from __future__ import annotations

import grpc

from orbitkv._proto import engine_pb2

REASON_TRAILER = "orbitkv-error-reason"


class OrbitKvError(Exception):
    """A call the Manager refused (or that failed in transport).

    ``reason`` is the ``ErrorReason`` name (``"UNKNOWN_LEASE"``...), or ``"ERROR_REASON_UNSPECIFIED"`` when the failure
    did not come from the Manager's checks (connection refused, deadline, message too large).
    """

    def __init__(self, reason: str, grpc_status: str, message: str):
        super().__init__(f"{reason}: {message}" if reason != "ERROR_REASON_UNSPECIFIED" else message)
        self.reason = reason
        self.grpc_status = grpc_status
        self.message = message

    @property
    def reason_code(self) -> int:
        return engine_pb2.ErrorReason.Value(self.reason)


class LeaseInvalidError(OrbitKvError):
    """The release said the lease did not stay valid (or the release itself failed): discard what was copied.

    ``invalid_reason`` is the ``LeaseInvalidReason`` name (``"SESSION_ENDED"``) when the Manager answered
    ``lease_valid = false``; ``None`` when the release failed with an error (then ``__cause__`` is that error).
    """

    def __init__(self, lease_id: int, invalid_reason: str | None, message: str):
        super().__init__("ERROR_REASON_UNSPECIFIED", "OK" if invalid_reason else "FAILED", message)
        self.lease_id = lease_id
        self.invalid_reason = invalid_reason


class ChecksumMismatchError(OrbitKvError):
    """A copied page's CRC32C differs from the one the Manager leased it with: the copy must not be used."""

    def __init__(self, group_id: int, position: int, expected: int, actual: int):
        super().__init__("ERROR_REASON_UNSPECIFIED", "OK",
                         f"page group {group_id} position {position}: crc32c {actual:#010x}, leased with {expected:#010x}")
        self.group_id = group_id
        self.position = position
        self.expected = expected
        self.actual = actual


class QueryTimeoutError(OrbitKvError):
    """A query stayed PENDING past the caller's deadline (the ticket is cancelled before this is raised)."""

    def __init__(self, ticket: int, waited_seconds: float):
        super().__init__("ERROR_REASON_UNSPECIFIED", "OK", f"ticket {ticket} still PENDING after {waited_seconds:.3f} s")
        self.ticket = ticket


def from_rpc_error(error: grpc.RpcError) -> OrbitKvError:
    """Maps a failed gRPC call onto an OrbitKvError with the Manager's typed reason."""
    code = error.code() if hasattr(error, "code") else None
    status = code.name if code is not None else "UNKNOWN"
    message = error.details() if hasattr(error, "details") and error.details() else str(error)
    reason = None
    for metadata in (_metadata(error, "trailing_metadata"), _metadata(error, "initial_metadata")):
        for key, value in metadata:
            if key == REASON_TRAILER:
                reason = value if isinstance(value, str) else value.decode()
                break
        if reason:
            break
    if reason is None and ":" in message:
        reason = message.split(":", 1)[0]
    if reason not in engine_pb2.ErrorReason.keys():
        # A newer Manager's reason, or not a Manager refusal: the message explains.
        reason = "ERROR_REASON_UNSPECIFIED"
    return OrbitKvError(reason, status, message)


def _metadata(error, name):
    getter = getattr(error, name, None)
    if getter is None:
        return ()
    try:
        return getter() or ()
    except Exception:  # a transport failure may carry no metadata at all
        return ()
