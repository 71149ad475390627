#!/usr/bin/env python3
"""The vLLM connector's asynchronous page path (orbitkv.vllm.transfer.PageTransfer) on a GPU: bytes and GB/s.

What it measures, on one GPU, with torch and CUDA (no Manager, no vLLM: the pool is a /dev/shm file mapped and pinned
exactly as a worker maps and pins the Manager's pool, with cudaHostRegister, once):

* load: PageTransfer.start_loads of P pages (host→device: one DMA per page into a staging buffer, then one
  index_copy_ per layer, events per layer group) until finish_loads returns; every loaded block is then compared on
  the device, byte for byte, with the page it came from (copied to the device separately);
* save: begin_saves / save_layer per layer / finish_saves of the same blocks into other slots, the event waited on,
  and every slot compared on the host with the page;
* baseline: a plain ``copy_`` (non_blocking, then a stream synchronize) of the same P pages' bytes from the pinned pool
  into one device buffer, i.e. the DMA ceiling for these bytes; and the previous synchronous path (one copy_ per block
  and layer, then torch.cuda.synchronize) for comparison;
* overlap: a stand-in forward (one matmul per layer on the current stream, each after wait_layer) with the load in
  flight, against the same forward after a completed load.

Prints one JSON line: sizes, medians over --rounds of each GB/s, the ratios, and `verified: true` (it exits 1 on any
mismatch). Without CUDA it says so and exits 3, unless --allow-cpu, which runs the same code on CPU tensors to check the
script itself (the figures then are not GPU figures and are labelled "device": "cpu").

    python3 perf/gpu/vllm_async_copy.py --pages 256 --layers 32 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "clients" / "python"))

import torch  # noqa: E402

from orbitkv.pool import PoolMapping  # noqa: E402
from orbitkv.vllm.transfer import PageTransfer  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=256, help="pages (vLLM blocks) moved per round")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--block", type=int, default=16, help="tokens per block")
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--layers-per-group", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--allow-cpu", action="store_true", help="run on CPU tensors (checks the script, not a GPU)")
    return parser.parse_args()


def timed(fn, synchronize):
    synchronize()
    started = time.perf_counter()
    fn()
    synchronize()
    return time.perf_counter() - started


def main() -> int:
    args = parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print(json.dumps({"device": None, "measured": False,
                          "cause": "torch.cuda.is_available() is False: no CUDA device or driver here"}))
        return 3
    device = torch.device("cuda" if cuda else "cpu")
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    dtype = torch.bfloat16
    num_blocks = 2 * args.pages + 8
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(args.layers)]
    kv = {name: torch.zeros((2, num_blocks, args.block, args.kv_heads, args.head_dim), dtype=dtype, device=device)
          for name in layers}
    dims = {name: 1 for name in layers}  # FlashAttention's [2, num_blocks, block, heads, dim]
    layer_page_bytes = 2 * args.block * args.kv_heads * args.head_dim * 2
    page_bytes = layer_page_bytes * args.layers

    # The pool: a /dev/shm file, mapped and pinned once, as a worker maps and pins the Manager's pool.
    pool_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
    handle, path = tempfile.mkstemp(prefix="orbitkv-gpu-bench-", dir=pool_dir)
    result = {}
    try:
        os.ftruncate(handle, 2 * args.pages * page_bytes)
        os.close(handle)
        pool = PoolMapping(0, path, 2 * args.pages * page_bytes)
        if cuda:
            pool.cuda_host_register()
        whole = torch.frombuffer(pool._map, dtype=torch.uint8)
        sources = [whole[i * page_bytes:(i + 1) * page_bytes] for i in range(args.pages)]
        slots = [whole[(args.pages + i) * page_bytes:(args.pages + i + 1) * page_bytes] for i in range(args.pages)]
        generator = torch.Generator().manual_seed(11)
        for page in sources:
            page.copy_(torch.randint(0, 256, (page_bytes,), generator=generator, dtype=torch.uint8))
        block_ids = torch.randperm(num_blocks, generator=generator)[:args.pages].tolist()
        transfer = PageTransfer(layers, kv, dims, layer_page_bytes, args.layers_per_group)

        def load():
            transfer.start_loads(sources, block_ids)
            transfer.finish_loads()

        def save():
            transfer.begin_saves(slots, block_ids)
            for name in layers:
                transfer.save_layer(name)
            done = transfer.finish_saves()
            if done is not None:
                done.synchronize()

        device_buffer = torch.empty((args.pages, page_bytes), dtype=torch.uint8, device=device)
        contiguous_source = whole[:args.pages * page_bytes].view(args.pages, page_bytes)

        def plain_copy():
            device_buffer.copy_(contiguous_source, non_blocking=cuda)

        def per_block_and_layer():  # the synchronous path this replaces
            for page, block in zip(sources, block_ids):
                offset = 0
                for name in layers:
                    target = kv[name].select(1, block)
                    target.copy_(page[offset:offset + layer_page_bytes].view(dtype).view(target.shape),
                                 non_blocking=cuda)
                    offset += layer_page_bytes
            synchronize()

        weights = torch.randn((2048, 2048), dtype=dtype, device=device)
        activations = torch.randn((512, 2048), dtype=dtype, device=device)

        def forward(wait):
            x = activations
            for name in layers:
                if wait:
                    transfer.wait_layer(name)
                x = torch.tanh(x @ weights)
            return x

        def forward_overlapped():
            transfer.start_loads(sources, block_ids)
            forward(wait=True)
            transfer.finish_loads()

        def forward_after_load():
            load()
            forward(wait=False)

        total = args.pages * page_bytes
        figures = {key: [] for key in ("load", "save", "plain_copy", "per_block_and_layer", "overlapped",
                                       "serial")}
        for _ in range(args.rounds + 1):  # the first round warms up and is not counted
            round_figures = {"load": timed(load, synchronize), "save": timed(save, synchronize),
                             "plain_copy": timed(plain_copy, synchronize),
                             "per_block_and_layer": timed(per_block_and_layer, synchronize),
                             "overlapped": timed(forward_overlapped, synchronize),
                             "serial": timed(forward_after_load, synchronize)}
            for key, seconds in round_figures.items():
                figures[key].append(seconds)
        for values in figures.values():
            values.pop(0)

        # Verify: every loaded block on the device equals its page; every saved slot equals its page.
        load()
        expected = torch.stack(sources).to(device)
        for row, block in enumerate(block_ids):
            actual = torch.cat([kv[name].select(1, block).contiguous().view(-1).view(torch.uint8) for name in layers])
            if not torch.equal(actual, expected[row]):
                print(json.dumps({"verified": False, "failed": "load", "page": row, "block": block}))
                return 1
        save()
        for row, slot in enumerate(slots):
            if not torch.equal(slot, sources[row]):
                print(json.dumps({"verified": False, "failed": "save", "page": row}))
                return 1

        def rate(key):
            return total / statistics.median(figures[key]) / 1e9

        result = {
            "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__,
            "pages": args.pages, "layers": args.layers, "page_bytes": page_bytes, "bytes_per_round": total,
            "layers_per_group": args.layers_per_group, "rounds": args.rounds,
            "load_gb_per_s": rate("load"), "save_gb_per_s": rate("save"), "plain_copy_gb_per_s": rate("plain_copy"),
            "per_block_and_layer_gb_per_s": rate("per_block_and_layer"),
            "load_vs_plain_copy": rate("load") / rate("plain_copy"),
            "forward_with_load_overlapped_ms": statistics.median(figures["overlapped"]) * 1e3,
            "forward_after_load_ms": statistics.median(figures["serial"]) * 1e3,
            "verified": True,
        }
        print(json.dumps(result))
        del whole, sources, slots, contiguous_source
        pool.close()
        return 0
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
