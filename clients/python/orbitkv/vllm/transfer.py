"""Page moves between the pool mapping and a worker's paged KV caches: whole pages over DMA, layers in groups.

Design note (ownership, ordering, what runs where):

* One OrbitKV page is one vLLM block across all layers of one KV cache group (``[layer 0 bytes | layer 1 bytes |
  ...]``, each layer's block bytes as the attention backend lays them out). A :class:`PageTransfer` belongs to one
  group of one worker connector and holds references to its KV caches, never copies of them.
* Loads (:meth:`start_loads`): every page goes host→device in one contiguous copy into a staging buffer (from the
  pinned pool mapping: one DMA per page, not one per block and layer), then each group of ``layers_per_group`` layers
  is scattered into the caches with one ``index_copy_`` per layer, and an event is recorded after each group.
  :meth:`wait_layer` makes the *current* stream wait on that layer's event (a device-side wait: the host does not
  block, and later layers keep copying while earlier ones compute).
* Saves (:meth:`save_layer`): the transfer stream first waits on an event recorded on the current stream (the layer's
  KV is written), gathers that layer's blocks with ``index_select`` into the staging rows, and after the last layer
  copies each page device→host into its slot; :meth:`finish_saves` makes the current stream wait on the save's end
  (so vLLM may overwrite the blocks only after the copy) and returns the event the sealing thread waits on before it
  computes CRC32C over the slots. No device-wide synchronisation anywhere.
* The host waits only where it must: :meth:`finish_loads` blocks on the last load event before the caller releases
  the leases (the slots must not be reused while a DMA still reads them); it is called after the forward pass.
* Without CUDA (CPU tensors: these machines, the tests) the same staging, scatter and gather run synchronously and
  every event is ``None``: the byte layout and the index logic are exercised here, the stream and events only on a
  GPU host (``perf/gpu/vllm_async_copy.py``).
* No Manager call happens here; the connector makes them before (``start_load_kv``) and after (``wait_for_save``) the
  forward pass.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import torch


class PageTransfer:
    def __init__(self, layer_names: Sequence[str], kv_caches: dict[str, torch.Tensor], block_dims: dict[str, int],
                 layer_page_bytes: Union[int, Mapping[str, int]], layers_per_group: int = 4):
        """``layer_page_bytes``: one block's bytes, the same for every layer (attention) or per layer (a recurrent
        group's layers hold several state tensors of different sizes)."""
        self.layer_names = list(layer_names)
        if isinstance(layer_page_bytes, Mapping):
            self._bytes = {name: int(layer_page_bytes[name]) for name in self.layer_names}
        else:
            self._bytes = {name: int(layer_page_bytes) for name in self.layer_names}
        self.page_bytes = sum(self._bytes.values())
        self.layers_per_group = max(1, int(layers_per_group))
        # Each layer seen as [num_blocks, ...one block...] (a view: writes land in the cache).
        self._blocks = {name: kv_caches[name].movedim(block_dims[name], 0) for name in self.layer_names}
        self._offset = {}
        offset = 0
        for name in self.layer_names:
            self._offset[name] = offset
            offset += self._bytes[name]
        first = kv_caches[self.layer_names[0]]
        self.device = first.device
        self.cuda = first.is_cuda
        self.stream = torch.cuda.Stream(device=self.device) if self.cuda else None
        self._layer_events: dict[str, Optional[torch.cuda.Event]] = {}
        self._load_done: Optional[torch.cuda.Event] = None
        self._save: Optional[tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]] = None

    # --- helpers ------------------------------------------------------------------------------------------------
    def _event(self) -> Optional["torch.cuda.Event"]:
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def _stream_context(self):
        return torch.cuda.stream(self.stream) if self.cuda else _NoStream()

    def _layer_rows(self, staging: torch.Tensor, name: str) -> torch.Tensor:
        """Rows of ``staging`` ([pages, page_bytes] uint8) holding ``name``'s bytes, shaped like that layer's blocks."""
        blocks = self._blocks[name]
        offset = self._offset[name]
        rows = staging[:, offset:offset + self._bytes[name]].view(blocks.dtype)
        return rows.view(staging.shape[0], *blocks.shape[1:])

    # --- loads --------------------------------------------------------------------------------------------------
    def start_loads(self, pages: Sequence[torch.Tensor], block_ids: Sequence[int]) -> None:
        """Queues the copy of ``pages`` (uint8 host tensors over pool slots, page_bytes each) into ``block_ids``."""
        self._layer_events = {}
        if not pages:
            return
        ids = torch.tensor(list(block_ids), dtype=torch.long)
        with self._stream_context():
            staging = torch.empty((len(pages), self.page_bytes), dtype=torch.uint8, device=self.device)
            for row, page in enumerate(pages):
                staging[row].copy_(page, non_blocking=self.cuda)
            ids = ids.to(self.device, non_blocking=self.cuda)
            for start in range(0, len(self.layer_names), self.layers_per_group):
                group = self.layer_names[start:start + self.layers_per_group]
                for name in group:
                    self._blocks[name].index_copy_(0, ids, self._layer_rows(staging, name))
                event = self._event()
                for name in group:
                    self._layer_events[name] = event
            if self.cuda:
                staging.record_stream(self.stream)
        self._load_done = self._layer_events[self.layer_names[-1]]

    def wait_layer(self, name: str) -> None:
        """The current stream waits for ``name``'s load (device-side; the host goes on)."""
        event = self._layer_events.get(name)
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)

    def wait_all(self) -> None:
        """The current stream waits for every queued load (layers whose forward never calls ``wait_layer``)."""
        if self.layer_names:
            self.wait_layer(self.layer_names[-1])  # events follow each other on one stream: the last implies all

    def finish_loads(self) -> None:
        """Blocks the host until every queued load copied out of the pool (before the leases are released)."""
        if self._load_done is not None:
            self._load_done.synchronize()
        self._load_done = None
        self._layer_events = {}

    # --- saves --------------------------------------------------------------------------------------------------
    def begin_saves(self, slots: Sequence[torch.Tensor], block_ids: Sequence[int]) -> None:
        """Starts a step's saves of ``block_ids`` into ``slots`` (uint8 host tensors over allocated pool slots)."""
        if not slots:
            self._save = None
            return
        ids = torch.tensor(list(block_ids), dtype=torch.long).to(self.device, non_blocking=self.cuda)
        staging = torch.empty((len(slots), self.page_bytes), dtype=torch.uint8, device=self.device)
        self._save = (staging, ids, list(slots))
        self._saved_layers: set[str] = set()

    def save_layer(self, name: str) -> None:
        """Gathers ``name``'s blocks once the current stream has written them (call after the layer's attention)."""
        if self._save is None or name in self._saved_layers:
            return
        staging, ids, _ = self._save
        if self.cuda:
            written = torch.cuda.Event()
            written.record(torch.cuda.current_stream(self.device))
            self.stream.wait_event(written)
        with self._stream_context():
            self._layer_rows(staging, name).copy_(self._blocks[name].index_select(0, ids))
        self._saved_layers.add(name)

    def finish_saves(self) -> Optional["torch.cuda.Event"]:
        """Gathers any layer not yet saved, queues each page device→host into its slot, and returns the event that
        marks the slots complete (None on CPU: already complete). The current stream waits on it, so vLLM's later
        kernels cannot overwrite the blocks before they are copied."""
        if self._save is None:
            return None
        for name in self.layer_names:
            self.save_layer(name)
        staging, _, slots = self._save
        with self._stream_context():
            for row, slot in enumerate(slots):
                slot.copy_(staging[row], non_blocking=self.cuda)
            if self.cuda:
                staging.record_stream(self.stream)
        done = self._event()
        if done is not None:
            torch.cuda.current_stream(self.device).wait_event(done)
        self._save = None
        return done


class _NoStream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
