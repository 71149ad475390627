"""orbitkv.vllm.transfer on CPU tensors: the byte layout and the block indices of the asynchronous path are the ones
the connector's page format defines (one page = one block across all layers, layer after layer). The CUDA stream and
events only run on a GPU host: perf/gpu/vllm_async_copy.py checks them there and measures them."""

import pytest
import torch

from orbitkv.vllm.transfer import PageTransfer

LAYERS = ["l0", "l1", "l2", "l3", "l4"]
NUM_BLOCKS, BLOCK, HEADS, DIM = 12, 4, 2, 8


def caches(layout):
    generator = torch.Generator().manual_seed(7)
    shape = (2, NUM_BLOCKS, BLOCK, HEADS, DIM) if layout == "flash" else (NUM_BLOCKS, BLOCK, 2 * HEADS * DIM)
    return ({name: torch.randn(shape, generator=generator).to(torch.float16) for name in LAYERS},
            {name: 1 if layout == "flash" else 0 for name in LAYERS})


def page_of(kv, dims, block_id):
    """The page format by definition: each layer's block, contiguous, layer after layer."""
    return torch.cat([kv[name].select(dims[name], block_id).contiguous().view(-1).view(torch.uint8) for name in LAYERS])


@pytest.mark.parametrize("layout", ["flash", "blocks_first"])
@pytest.mark.parametrize("layers_per_group", [1, 2, 5])
def test_loads_scatter_whole_pages_into_their_blocks(layout, layers_per_group):
    source, dims = caches(layout)
    target = {name: torch.zeros_like(t) for name, t in source.items()}
    layer_page_bytes = source["l0"].select(dims["l0"], 0).numel() * 2
    transfer = PageTransfer(LAYERS, target, dims, layer_page_bytes, layers_per_group)
    assert not transfer.cuda and transfer.stream is None
    pages = [page_of(source, dims, b) for b in (3, 7, 8)]
    transfer.start_loads(pages, [10, 0, 5])
    for name in LAYERS:
        transfer.wait_layer(name)  # CPU: already complete
    transfer.finish_loads()
    for page, block in zip(pages, [10, 0, 5]):
        assert torch.equal(page_of(target, dims, block), page)
    for block in (b for b in range(NUM_BLOCKS) if b not in (10, 0, 5)):
        assert not page_of(target, dims, block).any(), f"block {block} was written"


@pytest.mark.parametrize("layout", ["flash", "blocks_first"])
def test_saves_gather_blocks_into_their_slots(layout):
    kv, dims = caches(layout)
    layer_page_bytes = kv["l0"].select(dims["l0"], 0).numel() * 2
    transfer = PageTransfer(LAYERS, kv, dims, layer_page_bytes, layers_per_group=2)
    pool = bytearray(3 * layer_page_bytes * len(LAYERS))
    slots = [torch.frombuffer(memoryview(pool)[i * transfer.page_bytes:(i + 1) * transfer.page_bytes], dtype=torch.uint8)
             for i in range(3)]
    transfer.begin_saves(slots, [4, 11, 2])
    transfer.save_layer("l1")  # as save_kv_layer would, for the layers a hook saw
    transfer.save_layer("l3")
    assert transfer.finish_saves() is None  # CPU: complete on return, no event
    for slot, block in zip(slots, [4, 11, 2]):
        assert torch.equal(slot, page_of(kv, dims, block))
