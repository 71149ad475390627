"""A miniature vLLM engine that drives :class:`orbitkv.vllm.OrbitKvConnector` the way vLLM does.

vLLM cannot be installed here, so this harness calls the connector in the order and with the arguments vLLM uses,
as read at vLLM commit 003df2961dd8830c317a61f9745ccd557da9fa06:

* ``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``, waiting loop: for a request with no computed tokens,
  ``connector.get_num_new_matched_tokens(request, block_aligned_local)``; ``None`` pops the request into the
  skipped queue for this step; then ``kv_cache_manager.allocate_slots(...)`` and
  ``connector.update_state_after_alloc(request, kv_cache_manager.get_blocks(request_id), num_external_computed_tokens)``;
  with ``load_kv_async`` the request becomes ``WAITING_FOR_REMOTE_KVS`` with ``num_computed_tokens`` set and schedules
  no tokens. After the loop: ``scheduler_output.kv_connector_metadata = connector.build_connector_meta(scheduler_output)``.
* ``vllm/v1/worker/kv_connector_model_runner_mixin.py`` ``_get_kv_connector_output``: ``bind_connector_metadata``,
  ``start_load_kv``, the forward (per attention layer ``wait_for_layer_load`` then ``save_kv_layer``),
  ``wait_for_save``, ``get_finished(scheduler_output.finished_req_ids)``, ``get_block_ids_with_load_errors``,
  ``clear_connector_metadata``.
* ``Scheduler.update_from_output``: invalid block ids truncate the affected request's ``num_computed_tokens`` to the
  first invalid block (``kv_load_failure_policy="recompute"``); ``_update_from_kv_xfer_finished`` moves
  ``finished_recving`` requests back to WAITING and frees ``finished_sending`` requests' blocks;
  ``connector.update_connector_output``; a finished request goes through ``_free_request`` →
  ``connector.request_finished(request, block_ids)``, whose True defers freeing its blocks.

The "model" writes, for every token position and layer, KV values that are a deterministic function of the token
prefix (like a real model), so a restored block can be checked byte for byte against recomputation and against the
instance that produced it. KV caches are CPU torch tensors in FlashAttention's layout [2, num_blocks, block, heads, dim].

Hybrid models (``groups=``): several KV cache groups share one block pool (block 0 is the null block, as
``BlockPool.null_block``), each with its own block table, as vLLM's hybrid KV cache manager keeps them
(``vllm/v1/core/kv_cache_interface.py`` ``KVCacheConfig.kv_cache_groups``, ``KVCacheBlocks.get_block_ids()`` one list
per group, ``request_finished_all_groups`` with one list per group):

* a sliding-window group of window W holds the null block at positions below ``(computed - W + 1) // BLOCK`` (its
  manager's ``remove_skipped_blocks``); a Mamba group in ``mamba_cache_mode="align"`` gets one real block per
  allocation, at the last position, and the null block before it (``MambaManager.allocate_new_blocks``), so a prefix
  hit at b holds its state in block ``b / BLOCK - 1`` (``MambaManager.find_longest_cache_hit``);
* a Mamba layer's cache is a list of state tensors ``[num_blocks, ...]``; a step writes the state after its last
  token into the block of that token's position, and the next step starts from it, so a wrong state changes every
  later one;
* with a Mamba group the scheduler ends prefill chunks on block boundaries (``need_mamba_block_aligned_split``), and
  ``chunk_tokens`` caps a step's tokens (chunked prefill).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from types import SimpleNamespace
from typing import Callable, Optional

import torch

from orbitkv import hashing
from orbitkv.vllm import OrbitKvConnector
from orbitkv.vllm.connector import KVConnectorRole

BLOCK = 16
HEADS = 2
HEAD_DIM = 8
LAYERS = ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"]
NUM_BLOCKS = 64
DTYPE = torch.float16
LAYER_PAGE_BYTES = 2 * BLOCK * HEADS * HEAD_DIM * 2  # K and V, fp16


NULL_BLOCK = 0
MAMBA_CONV = 4
STATE_DTYPE = torch.float32


@dataclasses.dataclass(frozen=True)
class FullAttentionSpec:
    """The fields of vLLM's spec the connector reads (named like vLLM's class, which is how it recognises them)."""
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: torch.dtype
    page_size_bytes: int


@dataclasses.dataclass(frozen=True)
class SlidingWindowSpec(FullAttentionSpec):
    sliding_window: int = 0


@dataclasses.dataclass(frozen=True)
class MambaSpec:
    block_size: int
    shapes: tuple
    dtypes: tuple
    mamba_cache_mode: str = "align"

    @property
    def page_size_bytes(self) -> int:
        return sum(torch.Size(shape).numel() * torch.empty((), dtype=d).element_size()
                   for shape, d in zip(self.shapes, self.dtypes))


@dataclasses.dataclass(frozen=True)
class Group:
    """One KV cache group of the harness: ``kind`` is "full", "swa" or "mamba"."""
    kind: str
    layers: tuple
    window: int = 0  # vLLM's sliding_window (the token being computed included)


def hybrid_groups(window: int = 2 * BLOCK + 1) -> list[Group]:
    """A full-attention group, a sliding-window group and a Mamba group, one layer each (their layer indices differ,
    so the same position holds different bytes in each group)."""
    return [Group("full", ("model.layers.0.self_attn.attn",)),
            Group("swa", ("model.layers.1.self_attn.attn",), window=window),
            Group("mamba", ("model.layers.2.mixer",))]


def state_step(state: tuple, token: int, layer: int) -> tuple:
    """A recurrent layer's state after one more token: a decaying sum and a shift register (deterministic)."""
    conv, ssm = state
    generator = torch.Generator().manual_seed((token * 1000003 + layer) & ((1 << 63) - 1))
    ssm = ssm * 0.5 + torch.randn((HEADS, HEAD_DIM), generator=generator, dtype=STATE_DTYPE)
    conv = torch.cat([conv[1:], torch.tensor([float(token % 97)], dtype=STATE_DTYPE)])
    return conv, ssm


def zero_state() -> tuple:
    return torch.zeros(MAMBA_CONV, dtype=STATE_DTYPE), torch.zeros((HEADS, HEAD_DIM), dtype=STATE_DTYPE)


def state_after(tokens: list[int], count: int, layer: int) -> tuple:
    state = zero_state()
    for token in tokens[:count]:
        state = state_step(state, token, layer)
    return state


def kv_of(tokens: list[int], position: int, layer: int) -> torch.Tensor:
    """The (2, heads, dim) K/V values the model computes at ``position`` given the prefix ``tokens[:position+1]``."""
    digest = hashlib.sha256(repr((layer, tokens[:position + 1])).encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    return torch.randn((2, HEADS, HEAD_DIM), generator=generator).to(DTYPE)


@dataclasses.dataclass
class Request:
    """The attributes of vLLM's ``vllm.v1.request.Request`` the connector reads."""
    request_id: str
    prompt_token_ids: list[int]
    num_computed_tokens: int = 0
    status: str = "WAITING"
    block_ids: list[int] = dataclasses.field(default_factory=list)
    output_token_ids: list[int] = dataclasses.field(default_factory=list)
    max_tokens: int = 1
    preempted: bool = False  # set by a preemption until the request is scheduled again
    group_blocks: list = dataclasses.field(default_factory=list)  # per KV cache group, the block table
    kv_transfer_params: Optional[dict] = None  # vLLM: from the request's sampling params, per connector

    @property
    def block_hashes(self) -> list[bytes]:
        # vLLM hashes every full block of the request, output tokens included, as blocks fill.
        return hashing.chain(self.all_token_ids, BLOCK)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids


class KVCacheBlocks:
    """vLLM's ``KVCacheBlocks.get_block_ids()``: one list of block ids per KV cache group."""

    def __init__(self, tables: list[list[int]]):
        self._tables = tuple(list(table) for table in tables)

    def get_block_ids(self):
        return self._tables


class MiniVllm:
    """One engine instance: a scheduler-role connector, a worker-role connector, CPU KV caches, a block pool."""

    def __init__(self, data_dir: str, model: str = "orbitkv-test/tiny", extra: Optional[dict] = None,
                 resumed_style: str = "ids", decode_context_parallel_size: int = 1,
                 groups: Optional[list[Group]] = None, chunk_tokens: Optional[int] = None):
        # resumed_style: how scheduled cached requests flag a resume from preemption: "ids" (newer vLLM,
        # CachedRequestData.resumed_req_ids) or "flags" (older vLLM, resumed_from_preemption: list[bool]).
        self.resumed_style = resumed_style
        # groups: None is the single full-attention group of LAYERS (a plain spec object, as before the hybrid
        # manager); otherwise the hybrid manager's groups.
        self.groups = groups or [Group("full", tuple(LAYERS))]
        self.hybrid = groups is not None
        self.chunk_tokens = chunk_tokens
        self.layer_index = {name: i for i, name in enumerate(n for g in self.groups for n in g.layers)}
        extra_config = {"orbitkv.data_dir": data_dir, "orbitkv.query_timeout_s": 5.0, **(extra or {})}
        self.vllm_config = SimpleNamespace(
            kv_transfer_config=SimpleNamespace(kv_connector="OrbitKvConnector", kv_connector_module_path="orbitkv.vllm",
                                               kv_role="kv_both", kv_connector_extra_config=extra_config),
            cache_config=SimpleNamespace(block_size=BLOCK),
            model_config=SimpleNamespace(model=model),
            parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0,
                                            decode_context_parallel_size=decode_context_parallel_size))
        self.kv_cache_config = SimpleNamespace(num_blocks=NUM_BLOCKS, kv_cache_groups=[
            SimpleNamespace(layer_names=list(g.layers), kv_cache_spec=self._spec(g)) for g in self.groups])
        self.scheduler = OrbitKvConnector(self.vllm_config, KVConnectorRole.SCHEDULER, self.kv_cache_config)
        self.worker = OrbitKvConnector(self.vllm_config, KVConnectorRole.WORKER, self.kv_cache_config)
        self.kv_caches = {}
        for group in self.groups:
            for name in group.layers:
                self.kv_caches[name] = ([torch.zeros((NUM_BLOCKS, MAMBA_CONV), dtype=STATE_DTYPE),
                                         torch.zeros((NUM_BLOCKS, HEADS, HEAD_DIM), dtype=STATE_DTYPE)]
                                        if group.kind == "mamba"
                                        else torch.zeros((2, NUM_BLOCKS, BLOCK, HEADS, HEAD_DIM), dtype=DTYPE))
        self.worker.register_kv_caches(self.kv_caches)
        self.free_blocks = list(range(1, NUM_BLOCKS))  # block 0 is vLLM's null block, never handed out
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.finished: dict[str, Request] = {}
        self.deferred_free: dict[str, Request] = {}
        self.finished_req_ids: set[str] = set()
        self.matched: dict[str, list] = {}  # every get_num_new_matched_tokens answer, per request
        self.load_errors: set[int] = set()
        self.computed_tokens: dict[str, int] = {}  # tokens the model computed (not loaded), per request

    def _spec(self, group: Group):
        if not self.hybrid:
            return SimpleNamespace(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD_DIM, dtype=DTYPE,
                                   page_size_bytes=LAYER_PAGE_BYTES)
        if group.kind == "mamba":
            return MambaSpec(BLOCK, ((MAMBA_CONV,), (HEADS, HEAD_DIM)), (STATE_DTYPE, STATE_DTYPE))
        if group.kind == "swa":
            return SlidingWindowSpec(BLOCK, HEADS, HEAD_DIM, DTYPE, LAYER_PAGE_BYTES, sliding_window=group.window)
        return FullAttentionSpec(BLOCK, HEADS, HEAD_DIM, DTYPE, LAYER_PAGE_BYTES)

    # --- requests -------------------------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt: list[int], max_tokens: int = 1,
                    kv_transfer_params: Optional[dict] = None) -> Request:
        request = Request(request_id, list(prompt), max_tokens=max_tokens, kv_transfer_params=kv_transfer_params)
        request.group_blocks = [[] for _ in self.groups]
        request.block_ids = request.group_blocks[0]
        self.waiting.append(request)
        self.computed_tokens[request_id] = 0
        return request

    def _first_real(self, group: Group, computed: int, num_tokens: int) -> int:
        """The first new position that gets a real block: a sliding window skips the blocks before its window; a
        Mamba group (align mode, ``MambaManager.allocate_new_blocks``) gets one block, for the state at the step's
        end, and the null block before it."""
        if group.kind == "swa":
            return max(0, (computed - group.window + 1) // BLOCK)
        if group.kind == "mamba":
            return -(-num_tokens // BLOCK) - 1
        return 0

    def _allocate(self, request: Request, num_tokens: int, computed: int) -> list[list[int]]:
        """Blocks for ``num_tokens`` tokens in every group; a position the group does not need gets the null block."""
        added_per_group = []
        for group, table in zip(self.groups, request.group_blocks):
            added = []
            first_real = self._first_real(group, computed, num_tokens)
            for position in range(len(table), -(-num_tokens // BLOCK)):
                added.append(NULL_BLOCK if position < first_real else self.free_blocks.pop(0))
            table.extend(added)
            added_per_group.append(added)
        return added_per_group

    def _real_blocks(self, request: Request) -> list[int]:
        return [b for table in request.group_blocks for b in table if b != NULL_BLOCK]

    def _num_to_schedule(self, request: Request, computed: int) -> int:
        """Chunked prefill: at most ``chunk_tokens``; with a Mamba group a chunk that is not the last one ends on a
        block boundary (vLLM's ``need_mamba_block_aligned_split``)."""
        remaining = request.num_tokens - computed
        if self.chunk_tokens is None or remaining <= self.chunk_tokens:
            return remaining
        count = self.chunk_tokens
        if any(g.kind == "mamba" for g in self.groups):
            count = max(BLOCK, (computed + count) // BLOCK * BLOCK - computed)
        return count

    def preempt(self, request_id: str):
        """``Scheduler._preempt_request``: out of running, blocks freed (reused first), computed tokens reset, back
        to the front of the waiting queue. The connector is not told; it sees the request again in
        ``get_num_new_matched_tokens`` and then as a resumed cached request."""
        request = next(r for r in self.running if r.request_id == request_id)
        self.running.remove(request)
        self.free_blocks[:0] = self._real_blocks(request)
        request.group_blocks = [[] for _ in self.groups]
        request.block_ids = request.group_blocks[0]
        request.num_computed_tokens = 0
        request.status = "PREEMPTED"
        request.preempted = True
        self.waiting.insert(0, request)

    def abort(self, request_id: str):
        """``Scheduler.finish_requests(..., FINISHED_ABORTED)``: wherever the request is, ``_free_request`` calls
        ``request_finished`` and the worker hears of it in the next step's ``finished_req_ids``."""
        request = next(r for r in self.waiting + self.running if r.request_id == request_id)
        (self.waiting if request in self.waiting else self.running).remove(request)
        request.status = "FINISHED_ABORTED"
        self.finished[request_id] = request
        self.finished_req_ids.add(request_id)
        delay, _ = self._request_finished(request)
        if delay:
            self.deferred_free[request_id] = request
        else:
            self._free(request)

    # --- one engine step --------------------------------------------------------------------------------------
    def step(self, before_wait_for_save: Optional[Callable[[], None]] = None):
        scheduled_new, scheduled_cached, num_scheduled, new_block_ids, resumed = [], [], {}, {}, set()
        for request in self.running:
            if request.num_computed_tokens < request.num_tokens:
                count = self._num_to_schedule(request, request.num_computed_tokens)
                num_scheduled[request.request_id] = count
                added = self._allocate(request, request.num_computed_tokens + count, request.num_computed_tokens)
                new_block_ids[request.request_id] = tuple(added) if any(added) else None
                scheduled_cached.append(request)
        for request in list(self.waiting):
            if request.status == "WAITING_FOR_REMOTE_KVS":
                continue
            external, load_async = 0, False
            if request.num_computed_tokens == 0:
                external, load_async = self.scheduler.get_num_new_matched_tokens(request, 0)
                self.matched.setdefault(request.request_id, []).append((external, load_async))
                if external is None:
                    continue  # skipped this step; asked again next step
            num_computed = request.num_computed_tokens + external
            num_new = 0 if load_async else self._num_to_schedule(request, num_computed)
            self._allocate(request, num_computed + num_new, num_computed)
            self.scheduler.update_state_after_alloc(request, KVCacheBlocks(request.group_blocks), external)
            if load_async:
                request.status = "WAITING_FOR_REMOTE_KVS"
                request.num_computed_tokens = num_computed
                continue
            self.waiting.remove(request)
            request.status = "RUNNING"
            request.num_computed_tokens = num_computed
            self.running.append(request)
            if request.preempted:  # a resumed request: its whole new block table, flagged as resumed
                request.preempted = False
                resumed.add(request.request_id)
                new_block_ids[request.request_id] = tuple(list(t) for t in request.group_blocks)
                scheduled_cached.append(request)
            else:
                scheduled_new.append(request)
            num_scheduled[request.request_id] = num_new
        output = SimpleNamespace(
            scheduled_new_reqs=[SimpleNamespace(req_id=r.request_id, prompt_token_ids=r.prompt_token_ids,
                                                block_ids=tuple(list(t) for t in r.group_blocks),
                                                num_computed_tokens=r.num_computed_tokens)
                                for r in scheduled_new],
            scheduled_cached_reqs=self._cached_request_data(scheduled_cached, new_block_ids, resumed),
            num_scheduled_tokens=num_scheduled, finished_req_ids=set(self.finished_req_ids))
        self.finished_req_ids.clear()
        meta = self.scheduler.build_connector_meta(output)

        # --- worker: the model runner's connector lifecycle around the forward
        self.worker.bind_connector_metadata(meta)
        self.worker.start_load_kv(SimpleNamespace(attn_metadata={}, no_compile_layers={}))
        scheduled = [r for r in self.running if r.request_id in num_scheduled and num_scheduled[r.request_id] > 0]
        for g, group in enumerate(self.groups):
            for name in group.layers:
                if group.kind == "mamba":  # a Mamba mixer calls neither wait_for_layer_load nor save_kv_layer
                    for request in scheduled:
                        self._forward_mamba(request, g, name, num_scheduled[request.request_id])
                    continue
                self.worker.wait_for_layer_load(name)
                for request in scheduled:
                    self._forward_layer(request, self.layer_index[name], name, num_scheduled[request.request_id], g)
                self.worker.save_kv_layer(name, self.kv_caches[name], None)
        if before_wait_for_save is not None:
            before_wait_for_save()
        self.worker.wait_for_save()
        finished_sending, finished_recving = self.worker.get_finished(output.finished_req_ids)
        invalid = self.worker.get_block_ids_with_load_errors()
        self.worker.clear_connector_metadata()

        # --- scheduler: update_from_output
        self.load_errors |= invalid
        for request in self.waiting:
            if invalid and request.status == "WAITING_FOR_REMOTE_KVS":
                bad = [i for table in request.group_blocks for i, block in enumerate(table) if block in invalid]
                if bad:
                    request.num_computed_tokens = min(request.num_computed_tokens, min(bad) * BLOCK)
                    keep = request.num_computed_tokens // BLOCK
                    if any(b == NULL_BLOCK for table in request.group_blocks for b in table[keep:]):
                        # Positions to recompute whose group holds the null block there (a window or a state
                        # allocated for the load): the harness gives the request fresh blocks. How vLLM itself
                        # re-allocates them is not modelled from its source.
                        self.free_blocks[:0] = self._real_blocks(request)
                        request.group_blocks = [[] for _ in self.groups]
                        request.block_ids = request.group_blocks[0]
                        request.num_computed_tokens = 0
        for request in scheduled:
            request.num_computed_tokens += num_scheduled[request.request_id]
            self.computed_tokens[request.request_id] += num_scheduled[request.request_id]
            if request.num_computed_tokens >= len(request.prompt_token_ids):
                request.output_token_ids.append(1000 + len(request.output_token_ids))
        for req_id in finished_recving or ():
            request = next(r for r in self.waiting if r.request_id == req_id)
            request.status = "WAITING"
        self.scheduler.update_connector_output(SimpleNamespace(finished_sending=finished_sending,
                                                               finished_recving=finished_recving,
                                                               invalid_block_ids=invalid))
        for request in list(self.running):
            if len(request.output_token_ids) >= request.max_tokens:
                self.running.remove(request)
                request.status = "FINISHED_LENGTH_CAPPED"
                self.finished[request.request_id] = request
                self.finished_req_ids.add(request.request_id)
                delay, _ = self._request_finished(request)
                if delay:
                    self.deferred_free[request.request_id] = request
                else:
                    self._free(request)
        for req_id in finished_sending or ():
            self._free(self.deferred_free.pop(req_id))

    def _cached_request_data(self, scheduled_cached, new_block_ids, resumed):
        cached = SimpleNamespace(req_ids=[r.request_id for r in scheduled_cached],
                                 new_block_ids=[new_block_ids.get(r.request_id) for r in scheduled_cached],
                                 num_computed_tokens=[r.num_computed_tokens for r in scheduled_cached])
        if self.resumed_style == "ids":
            cached.resumed_req_ids = set(resumed)
        else:
            cached.resumed_from_preemption = [r.request_id in resumed for r in scheduled_cached]
        return cached

    def _request_finished(self, request: Request):
        """``Scheduler._connector_finished``: a hybrid (SupportsHMA) connector hears every group's blocks."""
        if self.hybrid:
            return self.scheduler.request_finished_all_groups(request, tuple(list(t) for t in request.group_blocks))
        return self.scheduler.request_finished(request, list(request.block_ids))

    def _free(self, request: Request):
        # Blocks go back to the pool but keep their contents (vLLM's prefix cache would too); tests read them.
        self.free_blocks.extend(self._real_blocks(request))

    def _forward_layer(self, request: Request, layer_index: int, name: str, count: int, group: int = 0):
        tokens = request.all_token_ids
        for position in range(request.num_computed_tokens, request.num_computed_tokens + count):
            block = request.group_blocks[group][position // BLOCK]
            assert block != NULL_BLOCK, f"{request.request_id}: computing position {position} into the null block"
            self.kv_caches[name][:, block, position % BLOCK] = kv_of(tokens, position, layer_index)

    def _forward_mamba(self, request: Request, group: int, name: str, count: int):
        """Continues the layer's state from the one held for the computed boundary (zero at the start), writing the
        state after each block into that block, and the running state of a partial block into its block."""
        tokens, table, layer = request.all_token_ids, request.group_blocks[group], self.layer_index[name]
        conv, ssm = self.kv_caches[name]
        computed = request.num_computed_tokens
        if computed == 0:
            state = zero_state()
        else:
            slot = table[_state_slot(computed)]
            assert slot != NULL_BLOCK, f"{request.request_id}: the state for {computed} tokens is in the null block"
            state = (conv[slot].clone(), ssm[slot].clone())
        for position in range(computed, computed + count):
            state = state_step(state, tokens[position], layer)
        block = table[(computed + count - 1) // BLOCK]
        assert block != NULL_BLOCK, f"{request.request_id}: the state after {computed + count} tokens into the null block"
        conv[block], ssm[block] = state

    def run(self, timeout_seconds: float = 30.0, **step_kwargs):
        """Steps until every request finished and every deferred free was reported (vLLM's engine loop keeps
        stepping while the scheduler has finished requests whose blocks wait on the connector)."""
        deadline = time.monotonic() + timeout_seconds
        while self.waiting or self.running or self.deferred_free:
            if time.monotonic() > deadline:
                raise AssertionError(f"requests still open after {timeout_seconds} s: "
                                     f"waiting={[r.request_id for r in self.waiting]} "
                                     f"running={[r.request_id for r in self.running]} deferred={list(self.deferred_free)}")
            self.step(**step_kwargs)
            if not self.running and not any(r.status == "WAITING" for r in self.waiting):
                time.sleep(0.001)  # only background work (seals, lookups) left: an idle engine step

    # --- checks -------------------------------------------------------------------------------------------------
    def block_bytes(self, request: Request, position: int) -> bytes:
        block = request.block_ids[position]
        return b"".join(self.kv_caches[name][:, block].contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                        for name in LAYERS)

    def assert_kv_exact(self, request: Request, tokens: int):
        """Every K/V value of positions [0, tokens) equals what the model computes for this prompt."""
        for position in range(tokens):
            block = request.block_ids[position // BLOCK]
            for layer_index, name in enumerate(LAYERS):
                actual = self.kv_caches[name][:, block, position % BLOCK]
                expected = kv_of(request.all_token_ids, position, layer_index)
                assert torch.equal(actual, expected), f"{request.request_id} position {position} layer {layer_index}"

    # --- hybrid checks and pages --------------------------------------------------------------------------------
    def assert_hybrid_exact(self, request: Request, tokens: int):
        """What vLLM needs to go on after ``tokens`` tokens equals what the model computes for this prompt: every full
        attention position, the sliding window's positions, the Mamba state at ``tokens``; and the null block holds
        nothing (no group ever wrote into it)."""
        prompt = request.all_token_ids
        for g, group in enumerate(self.groups):
            table = request.group_blocks[g]
            for name in group.layers:
                layer = self.layer_index[name]
                if group.kind == "mamba":
                    block = table[_state_slot(tokens)]
                    assert block != NULL_BLOCK, f"{request.request_id}: no state block for {tokens} tokens"
                    conv, ssm = self.kv_caches[name]
                    expected = state_after(prompt, tokens, layer)
                    assert torch.equal(conv[block], expected[0]) and torch.equal(ssm[block], expected[1]), \
                        f"{request.request_id}: {name} state after {tokens} tokens"
                    continue
                first = 0 if group.kind == "full" else max(0, tokens - group.window + 1)
                for position in range(first, tokens):
                    block = table[position // BLOCK]
                    assert block != NULL_BLOCK, f"{request.request_id}: {name} position {position} in the null block"
                    assert torch.equal(self.kv_caches[name][:, block, position % BLOCK],
                                       kv_of(prompt, position, layer)), f"{request.request_id} {name} position {position}"
        self.assert_null_block_untouched()

    def assert_null_block_untouched(self):
        for name, cache in self.kv_caches.items():
            parts = cache if isinstance(cache, list) else [cache.movedim(1, 0)]
            for part in parts:
                assert not part[NULL_BLOCK].any(), f"{name}: something was written into the null block"

    def page_bytes(self, group: int, tokens: list[int], position: int) -> bytes:
        """The bytes of ``group``'s page at ``position`` as the connector publishes them (layer after layer, each as
        the cache lays out one block), computed from the model: for publishing pages a test chooses directly."""
        out = []
        for name in self.groups[group].layers:
            layer = self.layer_index[name]
            if self.groups[group].kind == "mamba":
                for part in state_after(tokens, (position + 1) * BLOCK, layer):
                    out.append(part.contiguous().view(torch.uint8).numpy().tobytes())
                continue
            block = torch.stack([kv_of(tokens, p, layer) for p in range(position * BLOCK, (position + 1) * BLOCK)])
            out.append(block.transpose(0, 1).contiguous().view(torch.uint8).numpy().tobytes())
        return b"".join(out)

    def shutdown(self):
        self.worker.shutdown()
        self.scheduler.shutdown()


def _state_slot(computed: int) -> int:
    """The block position holding a recurrent layer's state after ``computed`` tokens."""
    return computed // BLOCK if computed % BLOCK else computed // BLOCK - 1
