"""OrbitKV as a vLLM KV connector (``KVConnectorBase_V1``).

Written against vLLM's connector interface as read at vLLM commit ``003df2961dd8830c317a61f9745ccd557da9fa06``:
``vllm/distributed/kv_transfer/kv_connector/v1/base.py`` (the API), ``vllm/v1/core/sched/scheduler.py`` (the
scheduler's call order: ``get_num_new_matched_tokens`` → ``allocate_slots`` → ``update_state_after_alloc`` in the
waiting loop of ``Scheduler.schedule``, ``build_connector_meta`` once per step, ``update_connector_output`` from
``update_from_output``, ``request_finished`` from ``_free_request``) and the worker side in
``vllm/v1/worker/kv_connector_model_runner_mixin.py`` (``bind_connector_metadata`` → ``start_load_kv`` → per layer
``wait_for_layer_load`` / ``save_kv_layer`` → ``wait_for_save`` → ``get_finished`` →
``get_block_ids_with_load_errors`` → ``clear_connector_metadata``). No vLLM code is copied; it has not run inside vLLM
here (vLLM cannot be installed on these machines): ``clients/python/tests/test_vllm_connector.py`` drives it in the
same order with the same arguments.

Enable it with::

    PYTHONHASHSEED=0 vllm serve MODEL --prefix-caching-hash-algo sha256_cbor \\
      --kv-transfer-config '{"kv_connector": "OrbitKvConnector", "kv_connector_module_path": "orbitkv.vllm",
                             "kv_role": "kv_both", "kv_connector_extra_config": {"orbitkv.data_dir": "/path/data"}}'

Design note (who owns what):

* Keys are vLLM's own block hashes (``Request.block_hashes``); with ``sha256_cbor`` and a fixed ``PYTHONHASHSEED``
  they are equal in every process and equal to :func:`orbitkv.hashing.chain` (see that module).
* Both roles register the same OrbitKV identity, derived only from the configs both receive (model, block size,
  the KV cache groups' specs and layer counts, TP/PP shape), so they share one namespace. Each of vLLM's KV cache
  groups is one OrbitKV group (:func:`kv_groups`: full attention, sliding window, Mamba; ``SupportsHMA``). One OrbitKV
  page is one vLLM block across all layers of one group of this rank, layer after layer in ``layer_names`` order, each
  layer's block bytes as the attention backend lays them out (a Mamba layer: its state tensors one after another).
* Hybrid groups: a demand covers every group; the Manager answers only a boundary every group can resume from. The
  scheduler declares every position; the worker only those whose block is not vLLM's null block (a sliding window's
  skipped blocks, a Mamba group's blocks before its state), and copies each leased page by ``(group, position)``.
  A Mamba state is saved for a step that ends on a block boundary, from the block of the boundary's last position;
  Mamba layers call no ``wait_for_layer_load``, so the forward waits for their loads up front (device-side).
  ``clients/python/tests/test_vllm_hybrid.py`` drives this with vLLM's hybrid call shapes.
* Sessions: each role's :class:`~orbitkv.keeper.SessionKeeper` registers at start if a Manager is there and again
  after any loss (a Manager restart, a lapse during a stall), in the background. With a local Manager that offers the
  co-located channel (``colocated.sock``), the session and so every lookup use it (:mod:`orbitkv.colocated`);
  otherwise, or with ``orbitkv.colocated`` false, gRPC. Without a session the cache is off:
  lookups answer ``(0, False)``, loads are load errors, saves are skipped. No Manager failure raises out of an engine
  call; a Manager that dies mid-step turns into misses and load errors.
* Scheduler: a lookup is a ``SubmitDemand`` for the blocks beyond what vLLM already computed. PENDING answers
  ``None`` (vLLM asks again next step); READY at boundary *b* answers ``(b - computed, True)``, one token less when the
  whole prompt would hit (with a Mamba group, whose boundaries are exact, the lookup asks only up to the last full
  block before the final token). A READY lease is released when the step's metadata is built (the worker takes its own), a
  PENDING ticket is cancelled when its request finishes or aborts, so no lookup holds anything past its step or its
  request; it never copies. ``requires_kv_delivery`` is False: a save lost to a preemption is a future miss.
* Worker, before the forward pass (``start_load_kv``): every Manager call of the step. It demands the same blocks
  (resident, so READY at once), checks each leased page's CRC32C on its slot, allocates the slots of the step's saves,
  and queues the loads on :class:`~orbitkv.vllm.transfer.PageTransfer` (one DMA per page, layers scattered in groups,
  an event per group). During the forward pass it calls nothing of the Manager's: ``wait_for_layer_load`` makes the
  compute stream wait on its layer's event, ``save_kv_layer`` gathers that layer's blocks on the transfer stream.
* Worker, after the forward pass (``wait_for_save``): the pages are copied into their slots (the compute stream, not
  the host, waits for that, so vLLM may reuse the blocks), the seals (CRC32C + ``SealPublish``) go to one background
  thread that waits on the copies' event; then the host waits for the loads to leave the pool and releases the leases.
  Only ``lease_valid`` keeps a copy; an invalid lease, a failed release, a checksum mismatch or pages missing from the
  answer make those blocks load errors (``get_block_ids_with_load_errors``), reported in the same step the request
  comes back from ``get_finished``, so vLLM recomputes them (use ``kv_load_failure_policy="recompute"``). A request
  gets one retry after a failed load, then vLLM computes. ``request_finished`` answers True for a request that had
  saves, and the worker reports it in ``get_finished``'s first set once its seals are done.
* Hints (:mod:`orbitkv.hints`): a request's ``kv_transfer_params["orbitkv"]`` is read once by the scheduler.
  ``do_not_store`` and ``max_stored_tokens`` shape the saves it plans; ``handoff`` and the retention travel with each
  ``SaveSpec``. The worker publishes a handoff's pages under the request id and retains a request's stored prefix on
  the sealing thread after its seals, before ``get_finished`` reports it (a refusal: one WARNING a minute). A
  ``producer`` turns the scheduler's lookup into a demand naming it; WAITING_FOR_PRODUCER is PENDING, so ``None``.
* CUDA: the worker pins its mapping of the pool once per session (``cudaHostRegister``, again after a Manager restart
  maps a new pool file); no device-wide synchronisation happens in any step. Without CUDA the same code copies with
  memcpy. The CUDA stream and events have not run here (no GPU): ``perf/gpu/vllm_async_copy.py`` checks and measures
  them on a GPU host.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import logging
import math
import threading
from typing import Any, Callable, Optional

import torch

from orbitkv import pb
from orbitkv.checksum import crc32c
from orbitkv.client import OrbitKvClient, Session, identity as make_identity
from orbitkv.errors import ChecksumMismatchError, LeaseInvalidError, OrbitKvError
from orbitkv.hints import NO_HINTS, RateLimitedWarning, StoreHints, parse_hints
from orbitkv.hybrid import group_demand

from orbitkv.engine_check import check_version, engine_installed, require_methods
from orbitkv.keeper import SessionKeeper
from orbitkv.vllm.transfer import PageTransfer

# The vLLM release range this connector is written for: the interface was read at vLLM commit 003df2961dd8 (a 0.1x
# development tree); 0.11 is the first release whose base class has every method used here.
VLLM_MINIMUM = (0, 11, 0)
VLLM_BELOW = (1, 0)
VLLM_READ_AT = "vLLM commit 003df2961dd8830c317a61f9745ccd557da9fa06"

if engine_installed("vllm"):  # Inside vLLM: the real base class, metadata type and role enum (import errors surface).
    import vllm as _vllm

    check_version("vLLM", getattr(_vllm, "__version__", "0"), VLLM_MINIMUM, VLLM_BELOW, VLLM_READ_AT)
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1, KVConnectorMetadata,
                                                                    KVConnectorRole, SupportsHMA)

    require_methods("vLLM", KVConnectorBase_V1, ("get_block_ids_with_load_errors", "request_finished",
                                                  "update_connector_output", "requires_kv_delivery"))
    VLLM_UNAVAILABLE_CAUSE: Optional[str] = None
else:  # Here (no vLLM): stand-ins with the same names, kept as small as the harness needs.
    VLLM_UNAVAILABLE_CAUSE = "the vllm module is not installed"
    from orbitkv.vllm._standin import KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole, SupportsHMA

log = logging.getLogger(__name__)

EXTRA_PREFIX = "orbitkv."
# Loads offered per request: one retry after a failed load (a lapse, a Manager restart), then vLLM computes. Without
# a cap a request whose blocks the scheduler sees but its worker cannot load would be offered them forever.
LOADS_PER_REQUEST = 2
MAX_REQUEST_ID_CHARS = 128


# vLLM's null block (``BlockPool.null_block``, the first block of the pool): a position whose block table entry is the
# null block holds nothing (a sliding window's skipped blocks, a recurrent group's earlier states).
NULL_BLOCK_ID = 0


@dataclasses.dataclass(frozen=True)
class KvGroup:
    """One of vLLM's KV cache groups as an OrbitKV group: the group's index in ``kv_cache_groups`` is its group id.
    One OrbitKV page of the group is one vLLM block across the group's layers, layer after layer."""
    group_id: int
    kind: int  # pb.FULL_ATTENTION, pb.SLIDING_WINDOW or pb.RECURRENT
    layer_names: tuple
    layer_page_bytes: int
    window_tokens: int = 0
    checkpoint_interval_tokens: int = 0

    @property
    def page_bytes(self) -> int:
        return self.layer_page_bytes * len(self.layer_names)

    def spec(self) -> pb.GroupSpec:
        return pb.GroupSpec(group_id=self.group_id, kind=self.kind, bytes_per_page=self.page_bytes,
                            window_tokens=self.window_tokens,
                            checkpoint_interval_tokens=self.checkpoint_interval_tokens)


def _spec_classes(spec) -> set[str]:
    # By class name, so that the stand-ins of the harness and vLLM's own spec classes are read the same way.
    return {cls.__name__ for cls in type(spec).__mro__}


def _state_bytes(spec) -> int:
    """One block of a recurrent layer: its state tensors' bytes (without the padding vLLM may add to the block)."""
    return sum(math.prod(shape) * torch.empty((), dtype=dtype).element_size()
               for shape, dtype in zip(spec.shapes, spec.dtypes))


def kv_groups(kv_cache_config, block_size: int) -> list[KvGroup]:
    """vLLM's KV cache groups as OrbitKV groups, or a ValueError naming what cannot be mapped.

    * ``FullAttentionSpec`` (MLA too, and a sliding window the hybrid manager is off for, which vLLM then allocates
      like full attention): FULL_ATTENTION.
    * ``SlidingWindowSpec`` with window W: SLIDING_WINDOW of W - 1 tokens (vLLM's window counts the token being
      computed, so resuming at b attends to ``[b - W + 1, b)``; its blocks before that are the null block).
    * ``MambaSpec`` with ``mamba_cache_mode`` align or all: RECURRENT with a state at every block boundary, the state
      after block p in the group's block p. Mode none keeps one running state and no state per boundary: refused.
    * One group of another spec is full attention (the single-group layout this connector always had); another spec
      in a hybrid model is refused.
    """
    groups = list(getattr(kv_cache_config, "kv_cache_groups", None) or [])
    if not groups:
        raise ValueError("OrbitKvConnector: the KV cache config has no KV cache group")
    result = []
    for index, group in enumerate(groups):
        spec = group.kv_cache_spec
        classes = _spec_classes(spec)
        spec_block = int(getattr(spec, "block_size", block_size))
        if spec_block != block_size:
            raise ValueError(f"OrbitKvConnector: KV cache group {index} ({type(spec).__name__}) uses {spec_block}-token "
                             f"blocks, the scheduler {block_size}: groups with different block sizes are not supported")
        layers = tuple(group.layer_names)
        if "MambaSpec" in classes:
            mode = str(getattr(spec, "mamba_cache_mode", "none"))
            if mode not in ("align", "all"):
                raise ValueError(f"OrbitKvConnector: KV cache group {index} is recurrent (Mamba) with "
                                 f"mamba_cache_mode={mode!r}, which keeps no state per block boundary: run vLLM with "
                                 "--mamba-cache-mode align (or all)")
            result.append(KvGroup(index, pb.RECURRENT, layers, _state_bytes(spec),
                                  checkpoint_interval_tokens=block_size))
        elif "SlidingWindowSpec" in classes:
            result.append(KvGroup(index, pb.SLIDING_WINDOW, layers, int(spec.page_size_bytes),
                                  window_tokens=max(1, int(spec.sliding_window) - 1)))
        elif "FullAttentionSpec" in classes or len(groups) == 1:
            result.append(KvGroup(index, pb.FULL_ATTENTION, layers, int(spec.page_size_bytes)))
        else:
            raise ValueError(f"OrbitKvConnector: KV cache group {index} uses {type(spec).__name__}, which has no "
                             "OrbitKV group kind (full attention, sliding window, Mamba are supported)")
    return result


@dataclasses.dataclass
class LoadSpec:
    """Blocks ``[start_block, end_block)`` of a request to restore: ``block_ids[g][p]`` is group g's block for
    position p (the null block where the group holds nothing at p)."""
    req_id: str
    block_hashes: list[bytes]
    start_block: int
    end_block: int
    block_ids: tuple

    def targets(self) -> dict[int, dict[int, int]]:
        """Per group id, position -> block id of every position in ``[start_block, end_block)`` that can take a
        restored page."""
        return {g: {p: table[p] for p in range(self.start_block, min(self.end_block, len(table)))
                    if table[p] != NULL_BLOCK_ID}
                for g, table in enumerate(self.block_ids)}


@dataclasses.dataclass
class SaveSpec:
    """Newly computed pages of a request to publish: ``(group id, position, block hash, vLLM block id)``.
    ``retain``: ``(ttl_ms, priority, chain)`` when the request asked to retain its stored prefix ``chain`` (the
    selected group's hashes from block 0) once it finishes."""
    req_id: str
    pages: list
    retain: Optional[tuple] = None
    handoff: bool = False  # published under the request's id, for a consumer that names this request (P/D)


@dataclasses.dataclass
class OrbitKvConnectorMetadata(KVConnectorMetadata):
    loads: list[LoadSpec] = dataclasses.field(default_factory=list)
    saves: list[SaveSpec] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Lookup:
    start_block: int
    end_block: int
    revision: int
    reply: pb.QueryReply
    session: Any  # the session that submitted it: its ticket and lease die with that session
    lease_id: int = 0


@dataclasses.dataclass
class _RequestState:
    request: Any
    block_ids: list = dataclasses.field(default_factory=list)  # per group, the block table (position -> block id)
    offered_blocks: int = 0  # blocks [0, offered_blocks) were loaded or handed to the worker to save
    had_saves: bool = False
    hints: StoreHints = NO_HINTS


@dataclasses.dataclass
class _StepPublish:
    spec: SaveSpec
    reply: pb.AllocatePublishReply
    # (index into spec, slot) for each ALLOCATED slot
    slots: list[tuple[int, pb.PublishSlot]]
    session: Any  # the session that allocated the slots (their mapping, their seal)


def _demand_request_id(req_id: str) -> str:
    if 0 < len(req_id) <= MAX_REQUEST_ID_CHARS:
        return req_id
    return "sha256:" + hashlib.sha256(req_id.encode()).hexdigest()


def _end_ticket(session: Optional[Session], ticket: int, lease_id: int):
    """Releases a lease (when one is still held) and cancels its ticket, so the request id is free again. Errors mean
    the Manager already ended them (released, expired, session gone, Manager gone): nothing is held any more."""
    if session is None:
        return
    if lease_id:
        try:
            session.release(lease_id)
        except OrbitKvError as e:
            log.debug("releasing a lookup lease: %s", e.reason)
    try:
        session.cancel(ticket)
    except OrbitKvError as e:
        log.debug("cancelling a ticket: %s", e.reason)


class OrbitKvConnector(KVConnectorBase_V1, SupportsHMA):
    """The connector vLLM loads through ``kv_connector_module_path = "orbitkv.vllm"``."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self._extra = dict(getattr(self._kv_transfer_config, "kv_connector_extra_config", None) or {})
        self._block_size = int(vllm_config.cache_config.block_size)
        self._kv_cache_config = kv_cache_config
        self._groups = kv_groups(kv_cache_config, self._block_size)
        # The group whose hash chain a demand carries (the others name the same tokens under their own id).
        self._selected_group = next((g.group_id for g in self._groups if g.kind == pb.FULL_ATTENTION),
                                    self._groups[0].group_id)
        # With recurrent state a boundary is exact: vLLM must compute at least one token after it, so a lookup never
        # asks past the last full block before the final token (instead of answering one token short of it).
        self._has_recurrent = any(g.kind == pb.RECURRENT for g in self._groups)
        self._spec = kv_cache_config.kv_cache_groups[self._selected_group].kv_cache_spec
        self._identity = self._derive_identity(vllm_config)
        self._query_timeout = float(self._option("query_timeout_s", 5.0))
        self._verify = bool(self._option("verify_crc", True))
        # scheduler state
        self._lookups: dict[str, _Lookup] = {}
        self._states: dict[str, _RequestState] = {}
        self._pending_loads: list[LoadSpec] = []
        self._revisions: dict[str, tuple] = {}  # request -> (revision, operation id, session), both roles
        self._loads_offered: dict[str, int] = {}
        self._request_hints: dict[str, StoreHints] = {}
        # worker state
        self._on_cuda = False
        self._step: Optional[list[_StepPublish]] = None
        self._step_loads: list[_PendingLoad] = []
        self._transfers: dict[int, PageTransfer] = {}  # per group id
        self._layer_group: dict[str, int] = {}
        self._sealer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbitkv-seal")
        self._seals: dict[str, list[concurrent.futures.Future]] = {}
        self._finished_reqs: set[str] = set()
        self._save_reqs: set[str] = set()
        self._done_recving: set[str] = set()
        self._load_errors: set[int] = set()
        self._retains: dict[str, tuple] = {}  # request -> (ttl_ms, priority, chain) to retain once it finishes
        self._retain_refused = RateLimitedWarning(log)
        self._lock = threading.Lock()
        # Testing seam: called after a lease's pages are copied, before it is released.
        self.after_copy: Optional[Callable[[LoadSpec], None]] = None
        data_dir, tcp = self._option("data_dir", "./data"), self._option("tcp", None)
        call_timeout = float(self._option("call_timeout_s", 2.0))
        # The lookup (and the rest of the session) over the co-located channel when the Manager offers it, else gRPC.
        colocated = bool(self._option("colocated", True))
        self.keeper = SessionKeeper(
            lambda: OrbitKvClient.from_data_dir(data_dir, tcp=tcp, colocated=colocated,
                                                call_timeout_seconds=call_timeout),
            self._identity, f"vllm-{role.name.lower()}", on_session=self._on_new_session,
            backoff_max_seconds=float(self._option("reconnect_max_s", 1.0)), where=tcp or str(data_dir))

    @property
    def requires_kv_delivery(self) -> bool:
        # A best-effort cache: a save lost to a preemption is a future miss, never a reason to recompute.
        return False

    # ------------------------------------------------------------------------------------------------------------
    def _option(self, name: str, default):
        return self._extra.get(EXTRA_PREFIX + name, default)

    def _derive_identity(self, vllm_config) -> pb.InstanceIdentity:
        parallel = vllm_config.parallel_config
        tp_size = int(getattr(parallel, "tensor_parallel_size", 1))
        pp_size = int(getattr(parallel, "pipeline_parallel_size", 1))
        tp_rank, pp_rank = self._ranks(tp_size)
        spec = self._spec
        selected = self._groups[self._selected_group]
        geometry = (f"layers={len(selected.layer_names)};layer_page_bytes={selected.layer_page_bytes};"
                    f"kv_heads={getattr(spec, 'num_kv_heads', '?')};head_size={getattr(spec, 'head_size', '?')};"
                    f"dtype={str(getattr(spec, 'dtype', '?')).replace('torch.', '')};block_size={self._block_size}")
        # A hybrid model's other groups change the bytes too: each group's kind, layers and page bytes. A model with
        # one group keeps the geometry (and so the namespace) it always had.
        for group in self._groups:
            if group.group_id != self._selected_group:
                geometry += (f";group{group.group_id}={pb.GroupKind.Name(group.kind).lower()}"
                             f":layers={len(group.layer_names)}:layer_page_bytes={group.layer_page_bytes}")
        geometry += self._context_parallel_geometry(parallel)
        model = self._option("model_fingerprint", None) or str(vllm_config.model_config.model)
        return make_identity(model, "vllm:" + str(self._option("layout", "NHD")), geometry, self._block_size,
                             [group.spec() for group in self._groups],
                             tp_rank=tp_rank, tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size)

    def _context_parallel_geometry(self, parallel) -> str:
        """Context parallelism shards a block's tokens across ranks: each rank's slice is keyed apart by putting the
        rank into the geometry (hence the namespace). Without CP the geometry, and so every key, is unchanged."""
        parts = ""
        for kind, group_getter in (("dcp", "get_dcp_group"), ("pcp", "get_pcp_group")):
            size = int(getattr(parallel, ("decode" if kind == "dcp" else "prefill") + "_context_parallel_size", 1) or 1)
            if size <= 1:
                continue
            rank = self._context_parallel_rank(kind, group_getter)
            if rank is None:
                raise ValueError(f"OrbitKvConnector: {kind.upper()} size {size} but this rank's {kind.upper()} rank is "
                                 f"unknown; set kv_connector_extra_config orbitkv.{kind}_rank or disable context "
                                 "parallelism (its slices must not share keys)")
            parts += f";{kind}={rank}/{size}"
        return parts

    def _context_parallel_rank(self, kind: str, group_getter: str) -> Optional[int]:
        if self.role == KVConnectorRole.SCHEDULER:
            return 0  # the scheduler looks up through rank 0's slice; another rank's miss is a load error there
        if f"orbitkv.{kind}_rank" in self._extra:
            return int(self._extra[f"orbitkv.{kind}_rank"])
        if not engine_installed("vllm"):
            return None
        from vllm.distributed import parallel_state

        getter = getattr(parallel_state, group_getter, None)
        return int(getter().rank_in_group) if getter is not None else None

    def _ranks(self, tp_size: int) -> tuple[int, int]:
        if self.role == KVConnectorRole.SCHEDULER:
            # The scheduler sees the cache through rank 0's identity (a miss on another rank is a load error there).
            return 0, 0
        if "orbitkv.tp_rank" in self._extra:
            return int(self._extra["orbitkv.tp_rank"]), int(self._extra.get("orbitkv.pp_rank", 0))
        if not engine_installed("vllm"):
            return 0, 0
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank

        return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)

    @property
    def session(self) -> Optional[Session]:
        """The live session, or None while the Manager is away (the cache is off; see :mod:`orbitkv.keeper`)."""
        return self.keeper.session()

    def _on_new_session(self, session: Session) -> None:
        # Runs on the keeper's thread for every registration: a restarted Manager maps a new pool file.
        if self._on_cuda:
            session.pool.cuda_host_register()

    # ============================================================================================================
    # Scheduler side
    # ============================================================================================================
    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[Optional[int], bool]:
        """Asks the Manager for the blocks beyond ``num_computed_tokens``, every KV cache group at once (the Manager
        answers only a boundary every group can resume from). A READY answer's lease is released when this step's
        metadata is built (``build_connector_meta``), so no lookup holds pages past its step; a PENDING ticket lives
        until it settles or the request ends. Any failure is a miss."""
        hashes = list(request.block_hashes)
        start = num_computed_tokens // self._block_size
        end = len(hashes)
        if self._has_recurrent:
            end = min(end, (request.num_tokens - 1) // self._block_size)
        if end <= start or self._loads_offered.get(request.request_id, 0) >= LOADS_PER_REQUEST:
            return 0, False
        session = self.session
        if session is None:
            self._end_lookup(request.request_id)
            return 0, False
        lookup = self._lookups.get(request.request_id)
        try:
            if lookup is None or lookup.start_block != start or lookup.end_block != end \
                    or lookup.session is not session:
                self._end_lookup(request.request_id)
                # Every group declares every position: the Manager leases only what the answered boundary needs.
                demand = group_demand(session, _demand_request_id(request.request_id), hashes, start_block=start,
                                      end_block=end, selected_group=self._selected_group,
                                      positions={g.group_id: range(start, end) for g in self._groups},
                                      max_wait_micros=int(self._query_timeout * 1e6))
                producer = self._hints_of(request).producer
                if producer is not None:
                    # P/D: PENDING (WAITING_FOR_PRODUCER) until the named session sealed these pages under its
                    # request; MISS if it ends first or orbitkv.query_timeout_s passes.
                    demand.producer.CopyFrom(producer)
                revision = self._revise(session, request.request_id, demand)
                lookup = _Lookup(start, end, revision, session.submit_demand(demand), session)
                self._lookups[request.request_id] = lookup
            elif lookup.reply.status == pb.PENDING:
                lookup.reply = session.poll(lookup.reply.ticket)
        except OrbitKvError as e:
            log.warning("OrbitKV lookup refused (%s): computing instead", e.reason)
            self._lookups.pop(request.request_id, None)
            return 0, False
        reply = lookup.reply
        if reply.status == pb.PENDING:
            return None, False
        if reply.status != pb.READY:
            self._end_lookup(request.request_id)
            return 0, False
        lookup.lease_id = reply.lease.lease_id
        matched = int(reply.boundary_tokens)
        if matched >= request.num_tokens:
            matched = request.num_tokens - 1  # vLLM must compute at least one token
        need = matched - num_computed_tokens
        if need <= 0:
            self._end_lookup(request.request_id)
            return 0, False
        return need, True

    def _hints_of(self, request) -> StoreHints:
        """The request's ``kv_transfer_params["orbitkv"]`` (read once per request; a bad value is one WARNING and
        that hint is ignored)."""
        hints = self._request_hints.get(request.request_id)
        if hints is None:
            params = getattr(request, "kv_transfer_params", None)
            raw = params.get("orbitkv") if isinstance(params, dict) else None
            hints = parse_hints(raw, f"request {request.request_id}")
            self._request_hints[request.request_id] = hints
        return hints

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        state = self._states.setdefault(request.request_id, _RequestState(request))
        state.request = request
        state.hints = self._hints_of(request)
        tables = [list(table) for table in blocks.get_block_ids()] if blocks is not None else []
        if any(tables):
            state.block_ids = tables
        lookup = self._lookups.get(request.request_id)
        if num_external_tokens <= 0 or lookup is None:
            return
        self._loads_offered[request.request_id] = self._loads_offered.get(request.request_id, 0) + 1
        start = lookup.start_block
        end = -(-(start * self._block_size + num_external_tokens) // self._block_size)
        self._pending_loads.append(LoadSpec(request.request_id, list(request.block_hashes[:end]), start, end,
                                            tuple(list(table[:end]) for table in state.block_ids)))
        state.offered_blocks = max(state.offered_blocks, end)

    def build_connector_meta(self, scheduler_output) -> OrbitKvConnectorMetadata:
        meta = OrbitKvConnectorMetadata(loads=self._pending_loads)
        self._pending_loads = []
        for new in scheduler_output.scheduled_new_reqs:
            state = self._states.get(new.req_id)
            if state is None:
                continue
            state.block_ids = [list(table) for table in new.block_ids]
            self._plan_save(meta, state, new.num_computed_tokens,
                            new.num_computed_tokens + scheduler_output.num_scheduled_tokens[new.req_id])
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            state = self._states.get(req_id)
            if state is None:
                continue
            new_ids = cached.new_block_ids[i]
            if new_ids is not None:
                # A resumed request's new_block_ids are its whole new block tables, not an addition: appending them
                # would save other blocks under this request's hashes.
                if _resumed(cached, i, req_id) or not state.block_ids:
                    state.block_ids = [list(table) for table in new_ids]
                else:
                    state.block_ids = [old + list(added) for old, added in zip(state.block_ids, new_ids)]
            self._plan_save(meta, state, cached.num_computed_tokens[i],
                            cached.num_computed_tokens[i] + scheduler_output.num_scheduled_tokens[req_id])
        # No lookup holds pages past the step that answered it: READY leases end here (the worker demands its own),
        # PENDING tickets stay until they settle or their request ends.
        for req_id in [r for r, lookup in self._lookups.items() if lookup.reply.status != pb.PENDING]:
            self._end_lookup(req_id)
        return meta

    def _plan_save(self, meta: OrbitKvConnectorMetadata, state: _RequestState, computed_before_step: int,
                   computed_after_step: int):
        # Blocks from the first one vLLM did not count as computed are (re)computed now: a failed load (vLLM cut
        # num_computed_tokens back) or a preemption must not leave them marked as already offered.
        state.offered_blocks = min(state.offered_blocks, computed_before_step // self._block_size)
        hashes = list(state.request.block_hashes)
        # vLLM may hash blocks whose keys are not final yet (e.g. successor-aware hashing): never publish those.
        publishable = int(getattr(state.request, "num_publishable_block_hashes", len(hashes)))
        tables = state.block_ids
        selected = tables[self._selected_group] if self._selected_group < len(tables) else []
        full = min(computed_after_step // self._block_size, len(hashes), publishable, len(selected))
        if full <= state.offered_blocks:
            return
        hints = state.hints
        # do_not_store: nothing of the request is published. max_stored_tokens: no block past the cap is.
        cap = 0 if hints.do_not_store else hints.stored_blocks(self._block_size)
        stored = full if cap is None else min(full, cap)
        pages = []
        for group in self._groups:
            table = tables[group.group_id] if group.group_id < len(tables) else []
            if group.kind == pb.RECURRENT:
                # One state per boundary: the one this step ended on, held by the block of the last full position.
                positions = [full - 1] if computed_after_step == full * self._block_size and full <= stored else []
            else:
                positions = range(state.offered_blocks, stored)
            pages.extend((group.group_id, p, hashes[p], table[p]) for p in positions
                         if p < len(table) and table[p] != NULL_BLOCK_ID)
        if pages:
            retain = (hints.retain_ttl_ms, hints.retain_priority, hashes[:stored]) if hints.retain_ttl_ms else None
            meta.saves.append(SaveSpec(state.request.request_id, pages, retain, hints.handoff))
            state.had_saves = True
        state.offered_blocks = full

    def update_connector_output(self, connector_output):
        for req_id in getattr(connector_output, "finished_recving", None) or ():
            self._end_lookup(req_id)

    def request_finished(self, request, block_ids) -> tuple[bool, Optional[dict]]:
        """Finish, abort or length cap: the request's ticket and any lease end here."""
        self._end_lookup(request.request_id)
        self._revisions.pop(request.request_id, None)
        self._loads_offered.pop(request.request_id, None)
        self._request_hints.pop(request.request_id, None)
        state = self._states.pop(request.request_id, None)
        return (state is not None and state.had_saves), None

    def request_finished_all_groups(self, request, block_ids: tuple) -> tuple[bool, Optional[dict]]:
        """``SupportsHMA``: the same end of the request as :meth:`request_finished`, with one block table per group
        (the saves already know their blocks: vLLM keeps them until ``get_finished`` reports the request)."""
        return self.request_finished(request, block_ids[0] if block_ids else [])

    def _revise(self, session: Session, req_id: str, demand: pb.Demand) -> int:
        """A request keeps one operation id per session; each new demand for it raises the revision (the Manager's
        rule). A new session starts the request over (the Manager forgot the old operation)."""
        revision, operation, owner = self._revisions.get(req_id, (-1, 0, None))
        if operation == 0 or owner is not session:
            revision, operation = -1, session.next_operation_id()
        revision += 1
        self._revisions[req_id] = (revision, operation, session)
        demand.revision = revision
        demand.operation_id = operation
        return revision

    def _end_lookup(self, req_id: str):
        """Ends the scheduler's interest: releases its READY lease and cancels the ticket."""
        lookup = self._lookups.pop(req_id, None)
        if lookup is None:
            return
        if lookup.session is self.session:  # a lost session's tickets and leases ended with it
            _end_ticket(lookup.session, lookup.reply.ticket, lookup.lease_id)

    def open_lookups(self) -> int:
        """Lookups still holding a ticket (PENDING ones; READY ones end with their step). For tests and stats."""
        return len(self._lookups)

    # ============================================================================================================
    # Worker side
    # ============================================================================================================
    def register_kv_caches(self, kv_caches: dict[str, Any]):
        """One :class:`~orbitkv.vllm.transfer.PageTransfer` per group. An attention layer's cache is one tensor; a
        recurrent layer's is a list of state tensors (each ``[num_blocks, ...]``), moved as consecutive parts."""
        missing = [name for group in self._groups for name in group.layer_names if name not in kv_caches]
        if missing:
            raise ValueError(f"KV caches lack layers {missing[:3]}")
        num_blocks = int(self._kv_cache_config.num_blocks)
        tensors: list[torch.Tensor] = []
        for group in self._groups:
            parts, dims, sizes, names = {}, {}, {}, []
            for name in group.layer_names:
                value = kv_caches[name]
                layer_parts = list(value) if isinstance(value, (list, tuple)) else [value]
                layer_bytes = 0
                for i, tensor in enumerate(layer_parts):
                    part = name if len(layer_parts) == 1 else f"{name}#{i}"
                    dim = self._block_dim(tensor, num_blocks)
                    parts[part], dims[part], names = tensor, dim, names + [part]
                    sizes[part] = tensor.select(dim, 0).numel() * tensor.element_size()
                    layer_bytes += sizes[part]
                    tensors.append(tensor)
                if layer_bytes != group.layer_page_bytes:
                    raise ValueError(f"layer {name}: a block holds {layer_bytes} bytes, the KV cache spec says "
                                     f"{group.layer_page_bytes}")
                self._layer_group[name] = group.group_id
            self._transfers[group.group_id] = PageTransfer(names, parts, dims, sizes,
                                                           int(self._option("layers_per_group", 4)))
        self._on_cuda = any(t.is_cuda for t in tensors)
        session = self.session
        if self._on_cuda and session is not None:
            session.pool.cuda_host_register()

    @staticmethod
    def _block_dim(tensor: torch.Tensor, num_blocks: int) -> int:
        # FlashAttention lays a layer out as [2, num_blocks, ...], FlashInfer, MLA and recurrent states as
        # [num_blocks, ...].
        if tensor.dim() >= 2 and tensor.shape[0] == 2 and tensor.shape[1] == num_blocks:
            return 1
        if tensor.shape[0] == num_blocks:
            return 0
        raise ValueError(f"no dimension of size num_blocks={num_blocks} in a KV cache of shape {tuple(tensor.shape)}")

    @staticmethod
    def _slot_tensor(session: Session, descriptor) -> torch.Tensor:
        return torch.frombuffer(session.pool.view(descriptor), dtype=torch.uint8)

    def start_load_kv(self, forward_context, **kwargs):
        """Before the forward pass: every Manager call of the step (demands for the loads, slots for the saves), then
        the loads queued on each group's transfer stream; nothing of the Manager's is called again until
        ``wait_for_save``."""
        meta = self._get_connector_metadata()
        self._prepare_step_publishes()
        pages = {g.group_id: ([], []) for g in self._groups}
        for spec in meta.loads:
            pending = self._demand_load(spec)
            if pending is None:
                continue
            self._step_loads.append(pending)
            for page, group_id, block_id in pending.copies:
                pages[group_id][0].append(self._slot_tensor(pending.session, page.slot))
                pages[group_id][1].append(block_id)
        for group in self._groups:
            transfer = self._transfers[group.group_id]
            transfer.start_loads(*pages[group.group_id])
            if group.kind == pb.RECURRENT:
                # Recurrent layers do not call wait_for_layer_load: the forward waits for their states up front
                # (a device-side wait; the host goes on).
                transfer.wait_all()

    def _demand_load(self, spec: LoadSpec) -> Optional["_PendingLoad"]:
        """Leases one request's pages (every group, only the positions whose blocks can take them) and checks their
        CRC32C on the slots; None when nothing can be loaded (its blocks are load errors then). Any failure (no
        session, a refusal, a Manager gone) is a load error, never an exception in the engine's step."""
        targets = spec.targets()
        session = self.session
        reply = None
        try:
            if session is None:
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE", "no session with a Manager")
            demand = group_demand(session, _demand_request_id(spec.req_id), spec.block_hashes,
                                  start_block=spec.start_block, end_block=spec.end_block,
                                  selected_group=self._selected_group,
                                  positions={g.group_id: targets.get(g.group_id, {}).keys() for g in self._groups},
                                  max_wait_micros=int(self._query_timeout * 1e6))
            self._revise(session, spec.req_id, demand)
            reply = session.demand(demand, self._query_timeout)
            if reply.status == pb.READY:
                copies = []
                try:
                    for page in reply.lease.pages:
                        block_id = targets.get(page.group_id, {}).get(page.position)
                        if block_id is None:
                            # Outside what this demand declared: the Manager never leases such a page.
                            raise ValueError(f"leased page of group {page.group_id} at position {page.position} "
                                             "has no block to go to")
                        if self._verify and page.HasField("crc32c"):
                            # Checked on the slot the copy reads: the lease keeps it stable until the release.
                            with session.pool.view(page.slot) as leased:
                                actual = crc32c(leased)
                            if actual != page.crc32c:
                                raise ChecksumMismatchError(page.group_id, page.position, page.crc32c, actual)
                        copies.append((page, page.group_id, block_id))
                except (OrbitKvError, ValueError):
                    _end_ticket(session, reply.ticket, reply.lease.lease_id)
                    raise
                loaded_end = int(reply.boundary_tokens) // self._block_size
                return _PendingLoad(spec, session, reply, copies, targets, loaded_end)
        except (OrbitKvError, ValueError) as e:  # ValueError: a lost session's mapping was closed meanwhile
            log.warning("OrbitKV load of %d blocks discarded: %s", sum(map(len, targets.values())), str(e))
        if reply is not None and reply.status != pb.READY:
            _end_ticket(session, reply.ticket, 0)
        self._record_load(spec, targets, spec.start_block)
        return None

    def _record_load(self, spec: LoadSpec, targets: dict[int, dict[int, int]], loaded_end: int):
        """The request's tokens up to block ``loaded_end`` are restored: every block at or past it, in every group, is
        a load error (vLLM computes from the first one). A boundary below the one offered leaves the tail to vLLM."""
        with self._lock:
            self._load_errors.update(block for table in targets.values() for p, block in table.items()
                                     if p >= loaded_end)
            self._done_recving.add(spec.req_id)

    def _finish_loads(self):
        """After the forward pass: waits for the queued copies to leave the pool, then releases each lease. Only a
        release that confirms the lease stayed valid keeps the copy; otherwise its blocks are load errors."""
        if not self._step_loads:
            return
        for transfer in self._transfers.values():
            transfer.finish_loads()
        pending_loads, self._step_loads = self._step_loads, []
        for pending in pending_loads:
            loaded_end = pending.loaded_end
            try:
                if self.after_copy is not None:
                    self.after_copy(pending.spec)
                released = pending.session.release(pending.reply.lease.lease_id)
                if not released.lease_valid:
                    raise LeaseInvalidError(pending.reply.lease.lease_id, pb.LeaseInvalidReason.Name(
                        released.invalid_reason), "the lease did not stay valid: the copy is discarded")
            except OrbitKvError as e:
                log.warning("OrbitKV load of %d blocks discarded: %s", len(pending.copies), str(e))
                loaded_end = pending.spec.start_block
            _end_ticket(pending.session, pending.reply.ticket, 0)
            self._record_load(pending.spec, pending.targets, loaded_end)

    def wait_for_layer_load(self, layer_name: str):
        # A device-side wait on the event of the layer group that holds this layer (nothing to wait for on CPU).
        group = self._layer_group.get(layer_name)
        if group is not None:
            self._transfers[group].wait_layer(layer_name)

    def _prepare_step_publishes(self):
        if self._step is not None:
            return
        self._step = []
        if not self.has_connector_metadata():
            return
        saves = self._get_connector_metadata().saves
        for spec in saves:
            # Reported by get_finished once its seals are done, whether or not anything could be saved.
            self._save_reqs.add(spec.req_id)
            if spec.retain is not None:
                self._retains[spec.req_id] = spec.retain
        session = self.session
        if session is None:
            return  # the cache is off: these blocks are a future miss
        for spec in saves:
            try:
                # A handoff (P/D prefill) publishes under the request's id: its seals then satisfy a consumer whose
                # demand names this session and request as its producer. Other saves stay untagged (the Manager
                # keeps a bounded record of tagged keys).
                reply = session.allocate(((group_id, h) for group_id, _, h, _ in spec.pages),
                                         request_id=_demand_request_id(spec.req_id) if spec.handoff else "")
            except OrbitKvError as e:  # best effort: a refused save is a future miss, never an engine failure
                log.warning("OrbitKV save of %d pages refused: %s", len(spec.pages), e.reason)
                continue
            slots = [(i, slot) for i, slot in enumerate(reply.slots) if slot.status == pb.ALLOCATED]
            if not slots:
                continue
            self._step.append(_StepPublish(spec, reply, slots, session))
        try:
            for group in self._groups:
                chosen = [(p, i, slot) for p in self._step for i, slot in p.slots if p.spec.pages[i][0] == group.group_id]
                self._transfers[group.group_id].begin_saves(
                    [self._slot_tensor(p.session, slot.slot) for p, _, slot in chosen],
                    [p.spec.pages[i][3] for p, i, _ in chosen])
        except ValueError as e:  # a lost session's mapping was closed meanwhile: these saves are dropped
            log.warning("OrbitKV saves of this step dropped: %s", str(e))
            for publish in self._step:
                _abort_quietly(publish)
            self._step = []
            for transfer in self._transfers.values():
                transfer.begin_saves([], [])

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata, **kwargs):
        # Slots were allocated in start_load_kv; only without a start_load_kv this step would this call the Manager.
        self._prepare_step_publishes()
        group = self._layer_group.get(layer_name)
        if group is not None and layer_name in self._transfers[group].layer_names:
            self._transfers[group].save_layer(layer_name)

    def wait_for_save(self):
        """After the forward pass: queues the pages' copies into their slots (the current stream waits on them, not the
        host), hands the seals to the sealing thread with the events they wait on, then finishes the step's loads."""
        self._prepare_step_publishes()
        done = [event for event in (t.finish_saves() for t in self._transfers.values()) if event is not None]
        for publish in self._step:
            future = self._sealer.submit(self._seal, publish, done)
            self._seals.setdefault(publish.spec.req_id, []).append(future)
        self._step = None
        self._finish_loads()

    @staticmethod
    def _seal(publish: _StepPublish, copied=()):
        session = publish.session
        try:
            for event in copied:
                event.synchronize()  # on the sealing thread: the engine's thread never waits for the copies
            crcs = []
            for _, slot in publish.slots:
                with session.pool.view(slot.slot) as written:
                    crcs.append(crc32c(written))
            session.seal(publish.reply.publish_id, crcs, [slot.slot for _, slot in publish.slots])
        except (OrbitKvError, ValueError) as e:  # ValueError: the session's mapping was closed after a loss
            log.warning("OrbitKV seal refused (%s): aborting the publish", getattr(e, "reason", str(e)))
            _abort_quietly(publish)

    def producer_params(self, req_id: str, member: str = "") -> Optional[dict]:
        """Worker side (the session that publishes): the ``producer`` hint a consumer's request carries to wait for
        this request's pages (the request itself carries ``"handoff": true``), or None without a session.
        ``member``: this Manager's cluster member id when the consumer's Manager is another one."""
        session = self.session
        if session is None:
            return None
        producer = session.producer(_demand_request_id(req_id), member)
        params = {"instance_id": producer.instance_id, "session_epoch": producer.session_epoch,
                  "request_id": producer.request_id}
        return {**params, "member": member} if member else params

    def _retain(self, req_id: str, ttl_ms: int, priority: int, chain: list):
        """Retains the request's stored prefix in every full-attention group. A refusal (budget full, ttl out of
        range, chain too long) leaves the pages cached without it: one WARNING a minute, never an engine failure."""
        session = self.session
        if session is None or not chain:
            return
        groups = [g.group_id for g in self._groups if g.kind == pb.FULL_ATTENTION] or [self._selected_group]
        try:
            session.retain({g: chain for g in groups}, ttl_ms, priority)
        except OrbitKvError as e:
            self._retain_refused.warn("OrbitKV retention of %d blocks of request %s refused (%s): cached without it",
                                      len(chain), req_id, e.reason)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[Optional[set[str]], Optional[set[str]]]:
        self._finish_loads()  # normally done by wait_for_save; here if this step had none
        self._finished_reqs.update(r for r in finished_req_ids if r in self._save_reqs)
        for req_id in finished_req_ids:
            self._revisions.pop(req_id, None)
            retain = self._retains.pop(req_id, None)
            if retain is not None and req_id in self._save_reqs:
                # On the sealing thread, after the request's seals (one thread, in order); get_finished reports the
                # request once the retention answered too.
                self._seals.setdefault(req_id, []).append(self._sealer.submit(self._retain, req_id, *retain))
        done_sending = set()
        for req_id in list(self._finished_reqs):
            if all(f.done() for f in self._seals.get(req_id, ())):
                done_sending.add(req_id)
                self._finished_reqs.discard(req_id)
                self._save_reqs.discard(req_id)
                self._seals.pop(req_id, None)
        with self._lock:
            done_recving, self._done_recving = self._done_recving, set()
        return (done_sending or None), (done_recving or None)

    def get_block_ids_with_load_errors(self) -> set[int]:
        with self._lock:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self):
        self._sealer.shutdown(wait=True)
        for req_id in list(self._lookups):
            self._end_lookup(req_id)
        self.keeper.close()


@dataclasses.dataclass
class _PendingLoad:
    """A request's leased pages queued for copying this step; its lease is released after the forward pass."""
    spec: LoadSpec
    session: Any
    reply: pb.QueryReply
    copies: list  # (LeasedPage, group id, block id)
    targets: dict  # per group id, position -> block id
    loaded_end: int  # the answered boundary, in blocks


def _abort_quietly(publish: _StepPublish):
    try:
        publish.session.abort(publish.reply.publish_id)
    except (OrbitKvError, ValueError):
        pass


def _resumed(cached, index: int, req_id: str) -> bool:
    """Whether a scheduled cached request resumed from preemption: newer vLLM lists them in ``resumed_req_ids``,
    older vLLM flags them in ``resumed_from_preemption`` (one bool per entry of ``req_ids``)."""
    resumed_ids = getattr(cached, "resumed_req_ids", None)
    if resumed_ids is not None:
        return req_id in resumed_ids
    flags = getattr(cached, "resumed_from_preemption", None)
    return bool(flags[index]) if flags is not None else False
