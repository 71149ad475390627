"""OrbitKV as an SGLang HiCache storage backend (``HiCacheStorage``).

Written against SGLang's interfaces as read at SGLang commit ``001067fffe33427bee0ed2f007fb7551a1d76b44``:
``python/sglang/srt/mem_cache/hicache_storage.py`` (``HiCacheStorage``: ``batch_exists``, ``batch_get_v1`` /
``batch_set_v1`` into host pool indices, ``exists``, ``get``, ``set``, ``batch_get``, ``batch_set``),
``python/sglang/srt/mem_cache/storage/backend_factory.py`` (``dynamic`` backends are built as
``backend_class(storage_config, kwargs)``) and ``python/sglang/srt/managers/cache_controller.py``
(``attach_storage_backend`` calls ``register_mem_pool_host`` next, and picks the zero-copy ``batch_get_v1`` /
``batch_set_v1`` path for a dynamic backend whose extra config sets ``interface_v1``). No SGLang code is copied; it
has not run inside SGLang here (SGLang cannot be installed on these machines): ``tests/test_sglang_storage.py``
calls it in the controller's order.

Design note:

* Registration waits for ``register_mem_pool_host``: the page size and bytes per page come from the host pool. The
  identity is the model name, the host layout, the page geometry and the TP/PP shape (MLA pools are
  rank-replicated: every rank registers as rank 0 of 1, so all ranks share pages).
* Keys: SGLang's page keys (``get_hash_str``: hex SHA-256 chained over the prior key) are 64 hex characters and
  become the 32-byte block hash; another string becomes its SHA-256. Keys of one call are consecutive pages of one
  prefix, so a call is one prefix query; the Manager's answer counts the leading pages present.
* ``batch_exists`` queries, waits out PENDING (pages read back from SSD or being published) and releases at once.
  ``batch_get_v1`` queries, copies every leased page into its host page (``set_from_flat_data_page``), then
  releases; if the release says the lease did not stay valid, or fails, every page of the call reports False, and
  SGLang's controller stops at the first False. ``batch_set_v1`` publishes the host pages (``get_data_page``) with
  CRC32C; a page already present counts as stored.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, List, Optional

import torch

from orbitkv import pb
from orbitkv.client import OrbitKvClient, Session, identity as make_identity
from orbitkv.errors import LeaseInvalidError, OrbitKvError

try:
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage

    SGLANG_UNAVAILABLE_CAUSE: Optional[BaseException] = None
except ImportError as missing:
    SGLANG_UNAVAILABLE_CAUSE = missing
    from orbitkv.sglang._standin import HiCacheStorage

log = logging.getLogger(__name__)


def key_to_block_hash(key: str) -> bytes:
    if len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return hashlib.sha256(key.encode()).digest()


class OrbitKvHiCacheStorage(HiCacheStorage):
    def __init__(self, storage_config, kwargs: Optional[dict] = None):
        self._config = storage_config
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        self._timeout = float(extra.get("orbitkv_query_timeout_s", 5.0))
        self._client = OrbitKvClient.from_data_dir(extra.get("orbitkv_data_dir", "./data"), tcp=extra.get("orbitkv_tcp"))
        self._session: Optional[Session] = None
        self._page_bytes = 0
        # Testing seam: called after a batch's pages are copied, before the lease is released.
        self.after_copy: Optional[Callable[[List[str]], None]] = None

    # --- setup ----------------------------------------------------------------------------------------------
    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        page = mem_pool_host.get_data_page(0, flat=True)
        self._page_bytes = page.numel() * page.element_size()
        self._dtype = page.dtype
        config = self._config
        replicated = bool(getattr(config, "is_mla_model", False))
        geometry = (f"page_bytes={self._page_bytes};dtype={str(page.dtype).replace('torch.', '')};"
                    f"layout={mem_pool_host.layout};mla={int(replicated)}")
        engine = make_identity(str(getattr(config, "model_name", None) or "sglang-model"),
                               "sglang:" + str(mem_pool_host.layout), geometry, int(mem_pool_host.page_size),
                               [(0, pb.FULL_ATTENTION, self._page_bytes)],
                               tp_rank=0 if replicated else int(config.tp_rank),
                               tp_size=1 if replicated else int(config.tp_size),
                               pp_rank=int(getattr(config, "pp_rank", 0)), pp_size=int(getattr(config, "pp_size", 1)))
        self._session = self._client.register(engine, pb.PREFILL_AND_DECODE, label="sglang-hicache")

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("register_mem_pool_host has not been called")
        if self._session.lost_reason is not None:  # lapsed or the Manager restarted: same identity, new session
            old = self._session
            try:
                old.close()
            except BufferError:
                pass
            self._session = self._client.register(old.identity, pb.PREFILL_AND_DECODE, label="sglang-hicache")
        return self._session

    def _query(self, keys: List[str]) -> pb.QueryReply:
        session = self.session
        return session.query({0: [key_to_block_hash(k) for k in keys]}, self._timeout)

    def _host_page_index(self, host_indices: torch.Tensor, i: int) -> int:
        return int(host_indices[i * self.mem_pool_host.page_size])

    # --- zero-copy interface --------------------------------------------------------------------------------
    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        if not keys:
            return 0
        try:
            reply = self._query(keys)
        except OrbitKvError as e:
            log.warning("OrbitKV exists refused (%s)", e.reason)
            return 0
        if reply.status != pb.READY:
            return 0
        self._end(reply)
        return int(reply.ready_blocks)

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor, extra_info: Any = None) -> List[bool]:
        results = [False] * len(keys)
        if not keys:
            return results
        try:
            reply = self._query(keys)
            if reply.status != pb.READY:
                self._end(reply)
                return results
            with self.session.lease(reply) as lease:
                for page in lease.pages:
                    if page.position >= len(keys):
                        continue
                    source = torch.frombuffer(lease.view(page), dtype=torch.uint8).view(self._dtype)
                    self.mem_pool_host.set_from_flat_data_page(self._host_page_index(host_indices, page.position), source)
                    results[page.position] = True
                if self.after_copy is not None:
                    self.after_copy(keys)
            self._cancel(reply)
        except (LeaseInvalidError, OrbitKvError) as e:
            log.warning("OrbitKV get of %d pages discarded: %s", len(keys), e)
            return [False] * len(keys)
        return results

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor, extra_info: Any = None) -> List[bool]:
        pages = [(0, key_to_block_hash(key), self._page_buffer(self.mem_pool_host.get_data_page(
            self._host_page_index(host_indices, i), flat=True))) for i, key in enumerate(keys)]
        return self._publish(pages)

    # --- generic interface ----------------------------------------------------------------------------------
    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None):
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None, target_sizes: Optional[Any] = None):
        found: List[Optional[torch.Tensor]] = [None] * len(keys)
        try:
            reply = self._query(keys)
            if reply.status != pb.READY:
                self._end(reply)
                return found
            with self.session.lease(reply) as lease:
                for page in lease.pages:
                    if page.position >= len(keys):
                        continue
                    target = (target_locations[page.position] if target_locations is not None
                              else torch.empty(page.slot.length // torch.tensor([], dtype=self._dtype).element_size(),
                                               dtype=self._dtype))
                    target.view(torch.uint8).copy_(torch.frombuffer(lease.view(page), dtype=torch.uint8))
                    found[page.position] = target
            self._cancel(reply)
        except (LeaseInvalidError, OrbitKvError) as e:
            log.warning("OrbitKV get of %d pages discarded: %s", len(keys), e)
            return [None] * len(keys)
        return found

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        return all(self._publish([(0, key_to_block_hash(k), self._page_buffer(v)) for k, v in zip(keys, values)]))

    # --- helpers ------------------------------------------------------------------------------------------
    @staticmethod
    def _page_buffer(tensor: torch.Tensor):
        return tensor.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy()

    def _publish(self, pages) -> List[bool]:
        if not pages:
            return []
        try:
            self.session.publish(pages)
        except (OrbitKvError, ValueError) as e:
            log.warning("OrbitKV set of %d pages refused: %s", len(pages), e)
            return [False] * len(pages)
        return [True] * len(pages)

    def _end(self, reply: pb.QueryReply):
        """Releases a lease taken only to learn what exists, and forgets the ticket."""
        try:
            if reply.status == pb.READY:
                self.session.release(reply.lease.lease_id)
        except OrbitKvError as e:
            log.debug("release after exists: %s", e.reason)
        self._cancel(reply)

    def _cancel(self, reply: pb.QueryReply):
        try:
            self.session.cancel(reply.ticket)
        except OrbitKvError as e:
            log.debug("cancel: %s", e.reason)

    def clear(self) -> None:
        pass

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
        self._client.close()
