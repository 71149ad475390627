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
* Hybrid models (the ``_v2`` calls): every host pool SGLang registers with ``register_mem_host_pool_v2`` is one
  OrbitKV group: ``kv`` group 0 (full attention), ``mamba`` a recurrent group with a state possible at every page
  boundary, ``swa`` (and ``draft_swa``) a sliding window of ``orbitkv_swa_window_tokens`` (extra config; required,
  SGLang's storage config does not carry the window), any other pool full attention (every page of the prefix). The
  other pools get ids 1.. in name order. Registering a pool re-registers the session with the grown group set (this
  happens once per pool at start). A call is one demand: the KV keys are the selected group's chain, positions
  counted after ``extra_info.prefix_keys`` (the pages the engine holds: the valid prefix), each pool declaring the
  positions of its own keys. The Manager answers only a boundary every group can resume from (a window's early pages
  and states at other boundaries are not needed, a missing state shortens the prefix), so ``batch_exists_v2``
  reports that boundary for every pool and ``batch_get_v2`` copies each leased page into its own pool by
  ``(group, position)``; a page a pool did not get is False.
* Storage hints: SGLang's own controller passes no per-request hint to a storage backend (its ``extra_info`` carries
  only ``prefix_keys``), so the hints are backend-wide, from the extra config: ``orbitkv_do_not_store`` (nothing is
  published: a reader only, e.g. a decode instance), ``orbitkv_max_stored_tokens`` (no page at or past that token of
  its prefix is published), ``orbitkv_retain_ttl_ms`` / ``orbitkv_retain_priority`` (every published KV page is
  retained; a refusal is one WARNING a minute). A call whose ``extra_info.extra_info`` holds an ``orbitkv`` dict (the
  same keys, unprefixed) uses those hints instead. A page not published by choice answers True (stored), as the
  Manager's own ``NOT_STORED`` pages do: SGLang must not treat a hint as a failed backup.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
from typing import Any, Callable, List, Optional

import torch

from orbitkv import pb
from orbitkv.client import OrbitKvClient, Session, identity as make_identity
from orbitkv.errors import LeaseInvalidError, OrbitKvError
from orbitkv.hints import RateLimitedWarning, StoreHints, parse_hints
from orbitkv.hybrid import group_demand

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
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, PoolTransferResult

    require_methods("SGLang", HiCacheStorage, ("batch_get_v1", "batch_set_v1", "register_mem_pool_host",
                                               "batch_exists_v2", "batch_get_v2", "batch_set_v2",
                                               "register_mem_host_pool_v2"))
    SGLANG_UNAVAILABLE_CAUSE: Optional[str] = None
else:
    SGLANG_UNAVAILABLE_CAUSE = "the sglang module is not installed"
    from orbitkv.sglang._standin import HiCacheStorage, PoolTransferResult

log = logging.getLogger(__name__)


KV_POOL = "kv"
# Request ids of the backend's demands: one live ticket per id, and the calls of SGLang's threads never share one.
_REQUESTS = itertools.count(1)


def _pool_name(name) -> str:
    """SGLang's ``PoolName`` members are ``str`` enums; plain strings are accepted too."""
    return str(getattr(name, "value", name))


def _pool_kind(name: str) -> int:
    if name == "mamba":
        return pb.RECURRENT
    if name in ("swa", "draft_swa"):
        return pb.SLIDING_WINDOW
    return pb.FULL_ATTENTION  # every page of the prefix (e.g. an indexer pool): never less than the pool needs


def key_to_block_hash(key: str) -> bytes:
    if len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return hashlib.sha256(key.encode()).digest()


HINT_PREFIX = "orbitkv_"


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
        self._swa_window_tokens = int(extra.get("orbitkv_swa_window_tokens", 0))
        self.registered_pools: dict = {}
        # Extra (non-KV) host pools by name: (group id, kind, page bytes, dtype); ids follow the names' order.
        self._extra_groups: dict[str, tuple[int, int, int, Any]] = {}
        self._hints = parse_hints({k: v for k, v in extra.items() if k.startswith(HINT_PREFIX)},
                                  "the SGLang backend's extra config", keys_prefix=HINT_PREFIX)
        if self._hints.producer is not None or self._hints.handoff:
            # P/D is per request: a backend-wide producer would make every lookup wait for one request.
            log.warning("OrbitKV: orbitkv_producer and orbitkv_handoff are per-request hints SGLang cannot carry to "
                        "a storage backend; ignored")
            self._hints = dataclasses.replace(self._hints, producer=None, handoff=False)
        self._retain_refused = RateLimitedWarning(log)
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
        self._start_keeper()

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        """A named host pool of a hybrid model (``kv``, ``mamba``, ``swa``, ...): one more OrbitKV group, so the
        session registers again with the whole group set (a configuration error, such as a sliding window without
        its size, refuses the engine's start)."""
        name = _pool_name(host_pool_name)
        super().register_mem_host_pool_v2(host_pool, name)
        if name == KV_POOL:
            if getattr(self, "mem_pool_host", None) is None:
                self.register_mem_pool_host(host_pool)
            return
        kind = _pool_kind(name)
        if kind == pb.SLIDING_WINDOW and self._swa_window_tokens <= 0:
            raise ValueError(f"OrbitKV: host pool {name!r} is a sliding window; set orbitkv_swa_window_tokens in "
                             "--hicache-storage-backend-extra-config to the model's window in tokens")
        page = host_pool.get_data_page(0, flat=True)
        self._extra_groups[name] = (0, kind, page.numel() * page.element_size(), page.dtype)
        for group_id, pool in enumerate(sorted(self._extra_groups), start=1):
            _, pool_kind, page_bytes, dtype = self._extra_groups[pool]
            self._extra_groups[pool] = (group_id, pool_kind, page_bytes, dtype)
        if self.keeper is not None:
            # Without a Manager the first keeper warned already: the engine's start logs one WARNING, not one per pool.
            reported = self.keeper.session() is None
            self.keeper.close()
            self._start_keeper(warn_at_start=not reported)

    def _start_keeper(self, warn_at_start: bool = True):
        mem_pool_host = self.mem_pool_host
        config = self._config
        replicated = bool(getattr(config, "is_mla_model", False))
        geometry = (f"page_bytes={self._page_bytes};dtype={str(self._dtype).replace('torch.', '')};"
                    f"layout={mem_pool_host.layout};mla={int(replicated)}")
        # Attention context parallelism gives each CP rank a disjoint slice of every page (MLA too): the rank goes
        # into the geometry, hence the namespace, so slices never share a key. Without CP nothing changes.
        cp_size = int(getattr(config, "attn_cp_size", 1) or 1)
        if cp_size > 1:
            geometry += f";cp={int(config.attn_cp_rank)}/{cp_size}"
        page_size = int(mem_pool_host.page_size)
        groups = [pb.GroupSpec(group_id=0, kind=pb.FULL_ATTENTION, bytes_per_page=self._page_bytes)]
        for name, (group_id, kind, page_bytes, _) in sorted(self._extra_groups.items(), key=lambda item: item[1][0]):
            # A model with the KV pool alone keeps the geometry (and so the namespace) it always had.
            geometry += f";{name}={pb.GroupKind.Name(kind).lower()}:page_bytes={page_bytes}"
            groups.append(pb.GroupSpec(group_id=group_id, kind=kind, bytes_per_page=page_bytes,
                                       window_tokens=self._swa_window_tokens if kind == pb.SLIDING_WINDOW else 0,
                                       checkpoint_interval_tokens=page_size if kind == pb.RECURRENT else 0))
        engine = make_identity(str(getattr(config, "model_name", None) or "sglang-model"),
                               "sglang:" + str(mem_pool_host.layout), geometry, page_size, groups,
                               tp_rank=0 if replicated else int(config.tp_rank),
                               tp_size=1 if replicated else int(config.tp_size),
                               pp_rank=int(getattr(config, "pp_rank", 0)), pp_size=int(getattr(config, "pp_size", 1)))
        self.keeper = SessionKeeper(self._connect, engine, "sglang-hicache", backoff_max_seconds=self._reconnect_max,
                                    where=self._where, warn_at_start=warn_at_start)

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
        hints = self._hints_of(extra_info)
        stored = self._stored_pages(hints, extra_info, len(keys))
        pages = [(0, key_to_block_hash(key), self._page_buffer(self.mem_pool_host.get_data_page(
            self._host_page_index(host_indices, i), flat=True))) for i, key in enumerate(keys[:stored])]
        return self._publish(pages, hints) + [True] * (len(keys) - stored)

    # --- hybrid interface (v2) --------------------------------------------------------------------------------
    def _pool(self, name: str):
        pool = self.registered_pools.get(name)
        return pool if pool is not None else (self.mem_pool_host if name == KV_POOL else None)

    def _group_of(self, name: str) -> Optional[int]:
        if name == KV_POOL:
            return 0
        found = self._extra_groups.get(name)
        return found[0] if found is not None else None

    def _pool_of_group(self, group_id: int) -> str:
        if group_id == 0:
            return KV_POOL
        return next(name for name, found in self._extra_groups.items() if found[0] == group_id)

    def _hybrid_demand(self, session: Session, keys: List[str], extra_info, positions: dict[int, list[int]]):
        """One demand for ``keys`` (KV pages after ``extra_info.prefix_keys``, the pages the engine holds), each
        group declaring ``positions``; settled (PENDING waited out) within the query timeout."""
        prefix = list(getattr(extra_info, "prefix_keys", None) or [])
        hashes = [key_to_block_hash(k) for k in prefix + list(keys)]
        declared = {0: [], **{found[0]: [] for found in self._extra_groups.values()}, **positions}
        demand = group_demand(session, f"sglang-{next(_REQUESTS)}", hashes, start_block=len(prefix),
                              end_block=len(hashes), selected_group=0, positions=declared,
                              max_wait_micros=int(self._timeout * 1e6))
        return session.demand(demand, self._timeout), len(prefix)

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[list] = None,
                        extra_info: Any = None) -> "PoolTransferResult":
        """The longest prefix of ``keys`` every pool can resume from: every group declares every position (the
        Manager needs only what the answered boundary needs: a window's trailing pages, one state), and the answer
        is released at once."""
        names = [_pool_name(t.name) for t in (pool_transfers or [])]
        if not keys:
            return PoolTransferResult(0, {})
        try:
            session = self._live()
            prefix_pages = len(getattr(extra_info, "prefix_keys", None) or [])
            everywhere = list(range(prefix_pages, prefix_pages + len(keys)))
            groups = {0, *(found[0] for found in self._extra_groups.values())}
            reply, origin = self._hybrid_demand(session, keys, extra_info, {g: everywhere for g in groups})
        except OrbitKvError as e:
            log.debug("OrbitKV exists: %s", str(e))
            return PoolTransferResult(0, {})
        self._end(session, reply)
        if reply.status != pb.READY:
            return PoolTransferResult(0, {})
        pages = int(reply.boundary_tokens) // int(self.mem_pool_host.page_size) - origin
        return PoolTransferResult(pages, {name: pages for name in [KV_POOL, *names]})

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict[str, List[bool]]:
        """Copies the leased pages of one demand into their pools: each transfer declares the positions of its own
        keys (the KV transfer's keys are the chain); True only for a page copied under a lease that stayed valid."""
        results = {_pool_name(t.name): [False] * len(self._transfer_keys(t, transfers)) for t in transfers}
        kv = next((t for t in transfers if _pool_name(t.name) == KV_POOL), None)
        if kv is None or not kv.keys:
            return results
        prefix_pages = len(getattr(extra_info, "prefix_keys", None) or [])
        position_of = {key: prefix_pages + i for i, key in enumerate(kv.keys)}
        slots: dict[tuple[int, int], tuple[str, int]] = {}  # (group, position) -> (pool, index in its transfer)
        positions: dict[int, list[int]] = {}
        for transfer in transfers:
            name = _pool_name(transfer.name)
            group = self._group_of(name)
            if group is None:
                log.warning("OrbitKV get: pool %r was never registered", name)
                return results
            for i, key in enumerate(self._transfer_keys(transfer, transfers)):
                if key in position_of:
                    slots[(group, position_of[key])] = (name, i)
                    positions.setdefault(group, []).append(position_of[key])
        copied: list[tuple[str, int]] = []
        try:
            session = self._live()
            reply, _ = self._hybrid_demand(session, kv.keys, extra_info, positions)
            if reply.status != pb.READY:
                self._end(session, reply)
                return results
            by_name = {_pool_name(t.name): t for t in transfers}
            with session.lease(reply) as lease:
                for page in lease.pages:
                    found = slots.get((page.group_id, page.position))
                    if found is None:
                        raise LeaseInvalidError(lease.lease_id, None, f"leased page of group {page.group_id} at "
                                                f"position {page.position} was not asked for")
                    name, i = found
                    pool = self._pool(name)
                    dtype = self._dtype if name == KV_POOL else self._extra_groups[name][3]
                    index = int(by_name[name].host_indices[i * int(getattr(pool, "page_size", 1) or 1)])
                    pool.set_from_flat_data_page(index, torch.frombuffer(lease.view(page), dtype=torch.uint8)
                                                 .view(dtype))
                    copied.append(found)
                if self.after_copy is not None:
                    self.after_copy(list(kv.keys))
            self._cancel(session, reply)
        except (OrbitKvError, ValueError) as e:  # LeaseInvalidError too; ValueError: a lost session's mapping closed
            log.warning("OrbitKV get of %d pages discarded: %s", len(kv.keys), str(e))
            return {name: [False] * len(flags) for name, flags in results.items()}
        for name, i in copied:
            results[name][i] = True
        return results

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict[str, List[bool]]:
        """Publishes every transfer's host pages under its pool's group, in one publish."""
        pages, counts = [], {}
        hints = self._hints_of(extra_info)
        kv_keys = next((self._transfer_keys(t, transfers) for t in transfers if _pool_name(t.name) == KV_POOL), [])
        stored = self._stored_pages(hints, extra_info, len(kv_keys))
        # A cut KV chain drops the call's other pools too: a state or window page past the stored KV is never usable.
        cut = stored < len(kv_keys)
        for transfer in transfers:
            name = _pool_name(transfer.name)
            keys = self._transfer_keys(transfer, transfers)
            counts[name] = len(keys)
            keys = keys[:stored] if name == KV_POOL else ([] if cut else keys)
            group, pool = self._group_of(name), self._pool(name)
            if group is None or pool is None:
                log.warning("OrbitKV set: pool %r was never registered", name)
                return {n: [False] * len(self._transfer_keys(t, transfers)) for t in transfers
                        for n in [_pool_name(t.name)]}
            page_size = int(getattr(pool, "page_size", 1) or 1)
            pages.extend((group, key_to_block_hash(key), self._page_buffer(pool.get_data_page(
                int(transfer.host_indices[i * page_size]), flat=True))) for i, key in enumerate(keys))
        published = all(self._publish(pages, hints))
        return {name: [published] * count for name, count in counts.items()}

    @staticmethod
    def _transfer_keys(transfer, transfers) -> List[str]:
        """A pool transfer's keys; a sidecar pool reusing another pool's indices may carry none: then that pool's."""
        if transfer.keys is not None:
            return list(transfer.keys)
        source = _pool_name(getattr(transfer, "indices_from_pool", None) or KV_POOL)
        return next((list(t.keys or []) for t in transfers if _pool_name(t.name) == source), [])

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
        hints = self._hints
        stored = self._stored_pages(hints, None, len(keys))
        return all(self._publish([(0, key_to_block_hash(k), self._page_buffer(v))
                                  for k, v in zip(keys[:stored], values)], hints))

    # --- helpers ------------------------------------------------------------------------------------------
    @staticmethod
    def _page_buffer(tensor: torch.Tensor):
        return tensor.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy()

    def _hints_of(self, extra_info) -> StoreHints:
        """The call's own hints (``extra_info.extra_info["orbitkv"]``) when it carries any, else the backend's."""
        carried = getattr(extra_info, "extra_info", None)
        if isinstance(carried, dict) and "orbitkv" in carried:
            return parse_hints(carried["orbitkv"], "a storage call's extra_info")
        return self._hints

    def _stored_pages(self, hints: StoreHints, extra_info, count: int) -> int:
        """How many of a call's ``count`` pages (after ``extra_info.prefix_keys``) may be published."""
        if hints.do_not_store:
            return 0
        pool = self.registered_pools.get(KV_POOL) or getattr(self, "mem_pool_host", None)
        page_tokens = int(getattr(pool, "page_size", 0) or 0)
        cap = hints.stored_blocks(page_tokens) if page_tokens else None
        if cap is None:
            return count
        prefix = len(getattr(extra_info, "prefix_keys", None) or [])
        return max(0, min(count, cap - prefix))

    def _publish(self, pages, hints: StoreHints) -> List[bool]:
        if not pages:
            return []
        try:
            session = self._live()
            session.publish(pages)
        except (OrbitKvError, ValueError) as e:  # ValueError: the mapping of a session lost meanwhile was closed
            log.warning("OrbitKV set of %d pages refused: %s", len(pages), str(e))
            return [False] * len(pages)
        if hints.retain_ttl_ms:
            chains: dict[int, list] = {}
            for group, block_hash, _ in pages:
                chains.setdefault(group, []).append(block_hash)
            try:
                session.retain(chains, hints.retain_ttl_ms, hints.retain_priority)
            except OrbitKvError as e:
                self._retain_refused.warn("OrbitKV retention of %d pages refused (%s): cached without it", len(pages),
                                          e.reason)
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
