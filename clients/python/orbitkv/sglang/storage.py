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
  identity is the model name, the host layout, the page geometry, the TP/PP shape (MLA pools are rank-replicated:
  every rank registers as rank 0 of 1, so all ranks share pages) and, with attention context parallelism, the CP
  rank (each rank holds its own slice of a page).
* Sessions: a :class:`~orbitkv.keeper.SessionKeeper` registers (or, with no Manager there, starts the cache off with
  one WARNING) and registers again after a loss, in the background and once however many of SGLang's threads notice.
  Without a session every call answers a miss or False; no Manager failure raises into SGLang's threads.
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
from orbitkv.errors import OrbitKvError

from orbitkv.engine_check import check_version, engine_installed, require_methods
from orbitkv.keeper import SessionKeeper

# The SGLang release range this backend is written for (the interface was read at SGLang commit 001067fffe33; the
# zero-copy batch_get_v1 / batch_set_v1 and HiCacheStorageConfig.attn_cp_rank are in every release from 0.5.5 on).
SGLANG_MINIMUM = (0, 5, 5)
SGLANG_BELOW = (1, 0)
SGLANG_READ_AT = "SGLang commit 001067fffe33427bee0ed2f007fb7551a1d76b44"

if engine_installed("sglang"):  # Inside SGLang: the real base class (import errors surface).
    import sglang as _sglang

    check_version("SGLang", getattr(_sglang, "__version__", "0"), SGLANG_MINIMUM, SGLANG_BELOW, SGLANG_READ_AT)
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage

    require_methods("SGLang", HiCacheStorage, ("batch_get_v1", "batch_set_v1", "register_mem_pool_host"))
    SGLANG_UNAVAILABLE_CAUSE: Optional[str] = None
else:
    SGLANG_UNAVAILABLE_CAUSE = "the sglang module is not installed"
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
        data_dir, tcp = extra.get("orbitkv_data_dir", "./data"), extra.get("orbitkv_tcp")
        call_timeout = float(extra.get("orbitkv_call_timeout_s", 2.0))
        self._connect = lambda: OrbitKvClient.from_data_dir(data_dir, tcp=tcp, call_timeout_seconds=call_timeout)
        self._where = tcp or str(data_dir)
        self._reconnect_max = float(extra.get("orbitkv_reconnect_max_s", 1.0))
        self.keeper: Optional[SessionKeeper] = None
        self._page_bytes = 0
        # Testing seam: called after a batch's pages are copied, before the lease is released.
        self.after_copy: Optional[Callable[[List[str]], None]] = None

    # --- setup ----------------------------------------------------------------------------------------------
    def register_mem_pool_host(self, mem_pool_host):
        """Derives the identity from the host pool and starts the session keeper: with no Manager there the engine
        starts anyway (one WARNING, the cache off, registering in the background)."""
        super().register_mem_pool_host(mem_pool_host)
        page = mem_pool_host.get_data_page(0, flat=True)
        self._page_bytes = page.numel() * page.element_size()
        self._dtype = page.dtype
        config = self._config
        replicated = bool(getattr(config, "is_mla_model", False))
        geometry = (f"page_bytes={self._page_bytes};dtype={str(page.dtype).replace('torch.', '')};"
                    f"layout={mem_pool_host.layout};mla={int(replicated)}")
        # Attention context parallelism gives each CP rank a disjoint slice of every page (MLA too): the rank goes
        # into the geometry, hence the namespace, so slices never share a key. Without CP nothing changes.
        cp_size = int(getattr(config, "attn_cp_size", 1) or 1)
        if cp_size > 1:
            geometry += f";cp={int(config.attn_cp_rank)}/{cp_size}"
        engine = make_identity(str(getattr(config, "model_name", None) or "sglang-model"),
                               "sglang:" + str(mem_pool_host.layout), geometry, int(mem_pool_host.page_size),
                               [(0, pb.FULL_ATTENTION, self._page_bytes)],
                               tp_rank=0 if replicated else int(config.tp_rank),
                               tp_size=1 if replicated else int(config.tp_size),
                               pp_rank=int(getattr(config, "pp_rank", 0)), pp_size=int(getattr(config, "pp_size", 1)))
        self.keeper = SessionKeeper(self._connect, engine, "sglang-hicache", backoff_max_seconds=self._reconnect_max,
                                    where=self._where)

    @property
    def session(self) -> Optional[Session]:
        """The live session, or None while the Manager is away (the cache is off; see :mod:`orbitkv.keeper`). Safe
        from SGLang's prefetch, backup and scheduler threads at once: one registration follows a loss."""
        if self.keeper is None:
            raise RuntimeError("register_mem_pool_host has not been called")
        return self.keeper.session()

    def _live(self) -> Session:
        session = self.session
        if session is None:
            raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE", "no session with a Manager (cache off)")
        return session

    def _query(self, session: Session, keys: List[str]) -> pb.QueryReply:
        return session.query({0: [key_to_block_hash(k) for k in keys]}, self._timeout)

    def _host_page_index(self, host_indices: torch.Tensor, i: int) -> int:
        return int(host_indices[i * self.mem_pool_host.page_size])

    # --- zero-copy interface --------------------------------------------------------------------------------
    # Every call takes the live session once and uses only it; any failure (no session, a refusal, a Manager gone
    # mid-call, an invalid lease) is a miss or a False, never an exception in SGLang's threads.
    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        if not keys:
            return 0
        try:
            session = self._live()
            reply = self._query(session, keys)
        except OrbitKvError as e:
            log.debug("OrbitKV exists: %s", str(e))
            return 0
        self._end(session, reply)
        return int(reply.ready_blocks) if reply.status == pb.READY else 0

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor, extra_info: Any = None) -> List[bool]:
        results = [False] * len(keys)
        if not keys:
            return results
        try:
            session = self._live()
            reply = self._query(session, keys)
            if reply.status != pb.READY:
                self._end(session, reply)
                return results
            with session.lease(reply) as lease:
                for page in lease.pages:
                    if page.position >= len(keys):
                        continue
                    source = torch.frombuffer(lease.view(page), dtype=torch.uint8).view(self._dtype)
                    self.mem_pool_host.set_from_flat_data_page(self._host_page_index(host_indices, page.position), source)
                    results[page.position] = True
                if self.after_copy is not None:
                    self.after_copy(keys)
            self._cancel(session, reply)
        except OrbitKvError as e:  # LeaseInvalidError too: the copy is discarded
            log.warning("OrbitKV get of %d pages discarded: %s", len(keys), str(e))
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
            session = self._live()
            reply = self._query(session, keys)
            if reply.status != pb.READY:
                self._end(session, reply)
                return found
            with session.lease(reply) as lease:
                for page in lease.pages:
                    if page.position >= len(keys):
                        continue
                    target = (target_locations[page.position] if target_locations is not None
                              else torch.empty(page.slot.length // torch.tensor([], dtype=self._dtype).element_size(),
                                               dtype=self._dtype))
                    target.view(torch.uint8).copy_(torch.frombuffer(lease.view(page), dtype=torch.uint8))
                    found[page.position] = target
            self._cancel(session, reply)
        except OrbitKvError as e:
            log.warning("OrbitKV get of %d pages discarded: %s", len(keys), str(e))
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
            self._live().publish(pages)
        except (OrbitKvError, ValueError) as e:  # ValueError: the mapping of a session lost meanwhile was closed
            log.warning("OrbitKV set of %d pages refused: %s", len(pages), str(e))
            return [False] * len(pages)
        return [True] * len(pages)

    @staticmethod
    def _end(session: Session, reply: pb.QueryReply):
        """Releases a lease taken only to learn what exists, and forgets the ticket."""
        try:
            if reply.status == pb.READY:
                session.release(reply.lease.lease_id)
        except OrbitKvError as e:
            log.debug("release after exists: %s", e.reason)
        OrbitKvHiCacheStorage._cancel(session, reply)

    @staticmethod
    def _cancel(session: Session, reply: pb.QueryReply):
        try:
            session.cancel(reply.ticket)
        except OrbitKvError as e:
            log.debug("cancel: %s", e.reason)

    def clear(self) -> None:
        pass

    def get_stats(self):
        """The session keeper's counters (registrations, sessions lost, failed attempts, connected)."""
        return self.keeper.stats() if self.keeper is not None else None

    def close(self) -> None:
        if self.keeper is not None:
            self.keeper.close()
