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

    def __init__(self, block_ids: list[int]):
        self._ids = list(block_ids)

    def get_block_ids(self):
        return (self._ids,)


class MiniVllm:
    """One engine instance: a scheduler-role connector, a worker-role connector, CPU KV caches, a block pool."""

    def __init__(self, data_dir: str, model: str = "orbitkv-test/tiny", extra: Optional[dict] = None,
                 resumed_style: str = "ids", decode_context_parallel_size: int = 1):
        # resumed_style: how scheduled cached requests flag a resume from preemption: "ids" (newer vLLM,
        # CachedRequestData.resumed_req_ids) or "flags" (older vLLM, resumed_from_preemption: list[bool]).
        self.resumed_style = resumed_style
        extra_config = {"orbitkv.data_dir": data_dir, "orbitkv.query_timeout_s": 5.0, **(extra or {})}
        self.vllm_config = SimpleNamespace(
            kv_transfer_config=SimpleNamespace(kv_connector="OrbitKvConnector", kv_connector_module_path="orbitkv.vllm",
                                               kv_role="kv_both", kv_connector_extra_config=extra_config),
            cache_config=SimpleNamespace(block_size=BLOCK),
            model_config=SimpleNamespace(model=model),
            parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0,
                                            decode_context_parallel_size=decode_context_parallel_size))
        spec = SimpleNamespace(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD_DIM, dtype=DTYPE,
                               page_size_bytes=LAYER_PAGE_BYTES)
        self.kv_cache_config = SimpleNamespace(num_blocks=NUM_BLOCKS, kv_cache_groups=[
            SimpleNamespace(layer_names=list(LAYERS), kv_cache_spec=spec)])
        self.scheduler = OrbitKvConnector(self.vllm_config, KVConnectorRole.SCHEDULER, self.kv_cache_config)
        self.worker = OrbitKvConnector(self.vllm_config, KVConnectorRole.WORKER, self.kv_cache_config)
        self.kv_caches = {name: torch.zeros((2, NUM_BLOCKS, BLOCK, HEADS, HEAD_DIM), dtype=DTYPE) for name in LAYERS}
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

    # --- requests -------------------------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt: list[int], max_tokens: int = 1) -> Request:
        request = Request(request_id, list(prompt), max_tokens=max_tokens)
        self.waiting.append(request)
        self.computed_tokens[request_id] = 0
        return request

    def _allocate(self, request: Request, num_tokens: int) -> list[int]:
        need = -(-num_tokens // BLOCK) - len(request.block_ids)
        added = [self.free_blocks.pop(0) for _ in range(max(0, need))]
        request.block_ids.extend(added)
        return added

    def preempt(self, request_id: str):
        """``Scheduler._preempt_request``: out of running, blocks freed (reused first), computed tokens reset, back
        to the front of the waiting queue. The connector is not told; it sees the request again in
        ``get_num_new_matched_tokens`` and then as a resumed cached request."""
        request = next(r for r in self.running if r.request_id == request_id)
        self.running.remove(request)
        self.free_blocks[:0] = request.block_ids
        request.block_ids = []
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
        delay, _ = self.scheduler.request_finished(request, list(request.block_ids))
        if delay:
            self.deferred_free[request_id] = request
        else:
            self._free(request)

    # --- one engine step --------------------------------------------------------------------------------------
    def step(self, before_wait_for_save: Optional[Callable[[], None]] = None):
        scheduled_new, scheduled_cached, num_scheduled, new_block_ids, resumed = [], [], {}, {}, set()
        for request in self.running:
            if request.num_computed_tokens < request.num_tokens:
                num_scheduled[request.request_id] = request.num_tokens - request.num_computed_tokens
                added = self._allocate(request, request.num_tokens)
                new_block_ids[request.request_id] = (added,) if added else None
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
            num_new = 0 if load_async else request.num_tokens - num_computed
            self._allocate(request, num_computed + num_new)
            self.scheduler.update_state_after_alloc(request, KVCacheBlocks(request.block_ids), external)
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
                new_block_ids[request.request_id] = (list(request.block_ids),)
                scheduled_cached.append(request)
            else:
                scheduled_new.append(request)
            num_scheduled[request.request_id] = num_new
        output = SimpleNamespace(
            scheduled_new_reqs=[SimpleNamespace(req_id=r.request_id, prompt_token_ids=r.prompt_token_ids,
                                                block_ids=(list(r.block_ids),), num_computed_tokens=r.num_computed_tokens)
                                for r in scheduled_new],
            scheduled_cached_reqs=self._cached_request_data(scheduled_cached, new_block_ids, resumed),
            num_scheduled_tokens=num_scheduled, finished_req_ids=set(self.finished_req_ids))
        self.finished_req_ids.clear()
        meta = self.scheduler.build_connector_meta(output)

        # --- worker: the model runner's connector lifecycle around the forward
        self.worker.bind_connector_metadata(meta)
        self.worker.start_load_kv(SimpleNamespace(attn_metadata={}, no_compile_layers={}))
        scheduled = [r for r in self.running if r.request_id in num_scheduled and num_scheduled[r.request_id] > 0]
        for layer_index, name in enumerate(LAYERS):
            self.worker.wait_for_layer_load(name)
            for request in scheduled:
                self._forward_layer(request, layer_index, name, num_scheduled[request.request_id])
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
                bad = [i for i, block in enumerate(request.block_ids) if block in invalid]
                if bad:
                    request.num_computed_tokens = min(request.num_computed_tokens, bad[0] * BLOCK)
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
                delay, _ = self.scheduler.request_finished(request, list(request.block_ids))
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

    def _free(self, request: Request):
        # Blocks go back to the pool but keep their contents (vLLM's prefix cache would too); tests read them.
        self.free_blocks.extend(request.block_ids)

    def _forward_layer(self, request: Request, layer_index: int, name: str, count: int):
        tokens = request.all_token_ids
        for position in range(request.num_computed_tokens, request.num_computed_tokens + count):
            block = request.block_ids[position // BLOCK]
            self.kv_caches[name][:, block, position % BLOCK] = kv_of(tokens, position, layer_index)

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

    def shutdown(self):
        self.worker.shutdown()
        self.scheduler.shutdown()
