"""Stand-in for SGLang's ``HiCacheStorage`` base, used only where SGLang is not installed (these machines, tests).

Inside SGLang, :mod:`orbitkv.sglang.storage` subclasses the real class from
``python/sglang/srt/mem_cache/hicache_storage.py`` (commit 001067fffe33). This keeps only what the backend inherits:
``register_mem_pool_host`` storing the host pool, and the default ``batch_exists`` (consecutive ``exists`` from the
start), ``clear`` and ``get_stats``.
"""

from __future__ import annotations

from abc import ABC


class HiCacheStorage(ABC):
    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def batch_exists(self, keys, extra_info=None) -> int:
        for i, key in enumerate(keys):
            if not self.exists(key):
                return i
        return len(keys)

    def clear(self) -> None:
        pass

    def get_stats(self):
        return None
