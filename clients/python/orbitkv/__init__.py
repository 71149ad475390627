"""OrbitKV engine client for Python: sessions, the shared-memory pool, publish, query, leases.

Adapters: :mod:`orbitkv.vllm` (a vLLM ``KVConnectorBase_V1`` connector) and :mod:`orbitkv.sglang` (an SGLang
``HiCacheStorage`` backend). Generated protocol stubs live in :mod:`orbitkv._proto` (see ``generate-stubs.sh``).
"""

from orbitkv._proto import engine_pb2 as pb
from orbitkv.client import Lease, OrbitKvClient, PublishResult, Session, identity, read_token
from orbitkv.checksum import crc32c
from orbitkv import hashing
from orbitkv.errors import (ChecksumMismatchError, LeaseInvalidError, OrbitKvError, QueryTimeoutError)

__all__ = [
    "pb", "hashing", "Lease", "OrbitKvClient", "PublishResult", "Session", "identity", "read_token", "crc32c",
    "ChecksumMismatchError", "LeaseInvalidError", "OrbitKvError", "QueryTimeoutError",
]
