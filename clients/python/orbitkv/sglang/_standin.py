"""Stand-in for SGLang's ``HiCacheStorage`` base, used only where SGLang is not installed (these machines, tests).

Inside SGLang, :mod:`orbitkv.sglang.storage` subclasses the real class from
``python/sglang/srt/mem_cache/hicache_storage.py`` (commit 001067fffe33). This keeps only what the backend inherits:
``register_mem_pool_host`` storing the host pool, ``register_mem_host_pool_v2`` storing a named host pool, the
default ``batch_exists`` (consecutive ``exists`` from the start), ``clear`` and ``get_stats``; and the result type of
``batch_exists_v2``, ``PoolTransferResult`` (pages of the usable KV prefix, and per pool the pages found).
"""

from __future__ import annotations

import dataclasses
from abc import ABC


class HiCacheStorage(ABC):
    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        if not hasattr(self, "registered_pools"):
            self.registered_pools = {}
        self.registered_pools[host_pool_name] = host_pool

    def batch_exists(self, keys, extra_info=None) -> int:
        for i, key in enumerate(keys):
            if not self.exists(key):
                return i
        return len(keys)

    def clear(self) -> None:
        pass

    def get_stats(self):
        return None


@dataclasses.dataclass
class PoolTransferResult:
    kv_hit_pages: int
    extra_pool_hit_pages: dict
