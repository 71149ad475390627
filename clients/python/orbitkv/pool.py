"""The engine's mapping of the Manager's shared-memory pool.

Design note (ownership): a :class:`PoolMapping` belongs to one :class:`~orbitkv.client.Session`; it maps the pool
file (owner-only, created by the Manager) read-write with ``MAP_SHARED`` and unmaps it when the session closes. Views
it hands out are bounds-checked against the mapping and the region id; they alias pool memory and are only
meaningful while the lease or publish that named the descriptor lives (copy, then release). ``close`` refuses to
unmap while a view is still exported (Python's mmap raises ``BufferError``) and says so, instead of leaving a
dangling pointer. CUDA hosts pin the mapping once (``cudaHostRegister``) so slot-to-HBM copies are DMA; the pin is
undone before unmapping.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading


class PoolMapping:
    def __init__(self, region_id: int, path: str, size_bytes: int):
        self.region_id = region_id
        self.path = path
        self.size_bytes = size_bytes
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual < size_bytes:
                raise ValueError(f"pool file {path} holds {actual} bytes, the Manager announced {size_bytes}")
            self._map = mmap.mmap(fd, size_bytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._lock = threading.Lock()
        self._cuda_registered = False
        self._closed = False

    def _check(self, region_id: int, offset: int, length: int):
        if self._closed:
            raise ValueError("the pool mapping is closed")
        if region_id != self.region_id:
            raise ValueError(f"descriptor names region {region_id}, this pool is region {self.region_id}")
        if offset < 0 or length < 0 or offset + length > self.size_bytes:
            raise ValueError(f"descriptor [{offset}, {offset + length}) lies outside the pool of {self.size_bytes} bytes")

    def view(self, descriptor) -> memoryview:
        """A writable view of the bytes a ``PoolDescriptor`` names (release it, or let it go, before closing)."""
        self._check(descriptor.region_id, descriptor.offset, descriptor.length)
        return memoryview(self._map)[descriptor.offset:descriptor.offset + descriptor.length]

    def write(self, descriptor, data) -> None:
        """Copies ``data`` (exactly the descriptor's length) into the slot."""
        self._check(descriptor.region_id, descriptor.offset, descriptor.length)
        source = memoryview(data).cast("B")
        if source.nbytes != descriptor.length:
            raise ValueError(f"page of {source.nbytes} bytes for a slot of {descriptor.length}")
        self._map[descriptor.offset:descriptor.offset + descriptor.length] = source

    def read(self, descriptor) -> bytes:
        """A private copy of the slot's bytes."""
        self._check(descriptor.region_id, descriptor.offset, descriptor.length)
        return self._map[descriptor.offset:descriptor.offset + descriptor.length]

    def address(self) -> int:
        """The mapping's virtual address (for cudaHostRegister and DMA engines)."""
        anchor = ctypes.c_char.from_buffer(self._map)
        try:
            return ctypes.addressof(anchor)
        finally:
            del anchor

    def cuda_host_register(self) -> None:
        """Pins the mapping for CUDA DMA (``cudaHostRegister``); raises with CUDA's error when it cannot."""
        import torch

        with self._lock:
            if self._cuda_registered:
                return
            status = torch.cuda.cudart().cudaHostRegister(self.address(), self.size_bytes, 0)
            code = int(status.value) if hasattr(status, "value") else int(status)
            if code != 0:
                raise RuntimeError(f"cudaHostRegister of the pool mapping failed with CUDA error {code}")
            self._cuda_registered = True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._cuda_registered:
                import torch

                torch.cuda.cudart().cudaHostUnregister(self.address())
                self._cuda_registered = False
            try:
                self._map.close()
            except BufferError as e:
                raise BufferError("views of the pool mapping are still alive; drop them before closing the session") from e
            self._closed = True
