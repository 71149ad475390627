#!/usr/bin/python3
"""The co-located channel from Python: a 64-page hit query against the channel's own no-op round trip.

Starts a Manager from the fat jar (or uses ``--data-dir`` of a running one), publishes 64 pages over gRPC, then runs
the query over the co-located channel (``SubmitQuery`` → READY with 64 leased descriptors) and a ``Ping`` on the same
channel, interleaved one for one (Ping first in even iterations); each lease is released over the channel, untimed.
The same pair over gRPC from the same process is reported beside it, and the client's own protobuf work for the query
(``client_protobuf_p50_micros``; alone with ``--protobuf-only``). Prints one JSON object; the headline is
``query_p50_ratio`` (query p50 / no-op p50 on the channel).

    PYTHONHASHSEED=0 /usr/bin/python3 clients/python/bench_colocated.py [--iterations 5000] [--warmup 2000] [--spin-micros 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from orbitkv import OrbitKvClient, identity, pb  # noqa: E402
from orbitkv.colocated import ColocatedTransport  # noqa: E402

HIT_PAGES = 64
PAGE_BYTES = 4096


def percentile(sorted_nanos: list[int], fraction: float) -> int:
    return sorted_nanos[min(len(sorted_nanos) - 1, int(fraction * len(sorted_nanos)))]


def summary(nanos: list[int]) -> dict:
    ordered = sorted(nanos)
    return {"count": len(ordered), "p50_micros": percentile(ordered, 0.50) / 1e3,
            "p90_micros": percentile(ordered, 0.90) / 1e3, "p99_micros": percentile(ordered, 0.99) / 1e3,
            "mean_micros": sum(ordered) / len(ordered) / 1e3}


def interleaved(client: OrbitKvClient, session_ref, namespace, keys, iterations: int, warmup: int) -> dict:
    query = pb.SubmitQueryRequest(session=session_ref, namespace_id=namespace,
                                  groups=[pb.GroupChain(group_id=0, block_hashes=keys)])
    ping = pb.PingRequest()
    queries, pings = [], []
    clock = time.perf_counter_ns
    for i in range(iterations + warmup):
        ping_first = i % 2 == 0
        if ping_first:
            t0 = clock()
            client.call("Ping", ping)
            ping_nanos = clock() - t0
        t0 = clock()
        reply = client.call("SubmitQuery", query)
        query_nanos = clock() - t0
        if reply.status != pb.READY or reply.ready_blocks != HIT_PAGES:
            raise RuntimeError(f"expected a {HIT_PAGES}-page hit, got {pb.QueryStatus.Name(reply.status)} "
                               f"{reply.ready_blocks}")
        client.call("ReleaseLease", pb.ReleaseLeaseRequest(session=session_ref, lease_id=reply.lease.lease_id))
        if not ping_first:
            t0 = clock()
            client.call("Ping", ping)
            ping_nanos = clock() - t0
        if i >= warmup:
            queries.append(query_nanos)
            pings.append(ping_nanos)
    q, p = summary(queries), summary(pings)
    return {"query_64_page_hit": q, "noop_ping": p, "query_p50_ratio": q["p50_micros"] / p["p50_micros"],
            "query_p99_ratio": q["p99_micros"] / p["p99_micros"]}


def protobuf_micros(iterations: int = 5000) -> dict:
    """The Python client's own protobuf work for one 64-page hit, no I/O: build and serialize the request, parse a
    READY reply of 64 leased pages. p50 µs of each."""
    keys = [hashlib.sha256(f"bench-colocated/{i}".encode()).digest() for i in range(HIT_PAGES)]
    ref = pb.SessionRef(instance_id=1, session_epoch=1)
    reply = pb.QueryReply(ticket=1, status=pb.READY, ready_blocks=HIT_PAGES)
    reply.lease.lease_id = 1
    for i in range(HIT_PAGES):
        page = reply.lease.pages.add(position=i)
        page.slot.region_id, page.slot.offset, page.slot.length, page.slot.generation = 1, i * PAGE_BYTES, PAGE_BYTES, 7
    body = memoryview(bytearray(reply.SerializeToString()))
    clock = time.perf_counter_ns
    build, serialize, parse = [], [], []
    for _ in range(iterations):
        t0 = clock()
        request = pb.SubmitQueryRequest(session=ref, namespace_id=bytes(16),
                                        groups=[pb.GroupChain(group_id=0, block_hashes=keys)])
        t1 = clock()
        request.SerializeToString()
        t2 = clock()
        pb.QueryReply.FromString(body)
        t3 = clock()
        build.append(t1 - t0)
        serialize.append(t2 - t1)
        parse.append(t3 - t2)
    return {name: summary(values)["p50_micros"] for name, values in
            (("build_request", build), ("serialize_request", serialize), ("parse_reply", parse))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--data-dir", help="a running Manager's data directory (default: start one)")
    parser.add_argument("--protobuf-only", action="store_true", help="only the client's own protobuf work, no Manager")
    parser.add_argument("--spin-micros", type=int, default=0,
                        help="the channel's calls poll for their reply this long before sleeping (default 0)")
    args = parser.parse_args()
    if args.protobuf_only:
        print(json.dumps({"bench": "colocated-python-protobuf", "p50_micros": protobuf_micros()}, indent=2))
        return
    manager = None
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        from manager import ManagerProcess

        manager = ManagerProcess({"ssd.enabled": "false"}).start()
        data_dir = manager.data_dir
    try:
        token = (data_dir / "engine.token").read_text().strip()
        keys = [hashlib.sha256(f"bench-colocated/{i}".encode()).digest() for i in range(HIT_PAGES)]
        with OrbitKvClient.connect_unix(data_dir / "engine.sock", token) as grpc_client, \
                grpc_client.register(identity("bench/colocated", "bench", "bench", 16,
                                              [(0, pb.FULL_ATTENTION, PAGE_BYTES)])) as session:
            session.publish([(0, h, bytes([i % 251]) * PAGE_BYTES) for i, h in enumerate(keys)])
            transport = ColocatedTransport(data_dir / "colocated.sock", token, spin_seconds=args.spin_micros / 1e6)
            with OrbitKvClient(f"colocated:{data_dir / 'colocated.sock'}", token, transport=transport) as channel:
                colocated = interleaved(channel, session.ref, session.namespace, keys, args.iterations, args.warmup)
            grpc = interleaved(grpc_client, session.ref, session.namespace, keys, args.iterations, args.warmup)
            leases = session.stats().session_leases
        result = {"bench": "colocated-python", "query_p50_ratio": colocated["query_p50_ratio"],
                  "query_p50_micros": colocated["query_64_page_hit"]["p50_micros"],
                  "colocated": colocated, "grpc": grpc, "client_protobuf_p50_micros": protobuf_micros(),
                  "config": {"iterations": args.iterations, "warmup": args.warmup, "hit_pages": HIT_PAGES,
                             "spin_micros": args.spin_micros,
                             "python": sys.version.split()[0], "cpus": os.cpu_count()},
                  "checks": {"leases_left": leases}}
        print(json.dumps(result, indent=2))
        if leases:
            sys.exit(1)
    finally:
        if manager is not None:
            manager.stop()
            manager.remove_data_dir()


if __name__ == "__main__":
    main()
