#!/usr/bin/python3
"""The co-located channel from Python: a 64-page hit query against the channel's own no-op round trip.

Starts a Manager from the fat jar (or uses ``--data-dir`` of a running one), publishes 64 pages over gRPC, then runs
the query over the co-located channel (``SubmitQuery`` → READY with 64 leased descriptors) and a ``Ping`` on the same
channel, interleaved one for one (Ping first in even iterations); the query's time ends once its status, ready blocks
and lease id are read; each lease is released over the channel, untimed.
The same query as an engine makes it (``session_query_p50_micros``: its session's ``submit_query``, the request built
from the chain each call, on a session registered over the channel) and the same pair over gRPC from the same process
are reported beside it, and the client's own protobuf work for the query
(``client_protobuf_p50_micros``; alone with ``--protobuf-only``); ``--steps`` times each step of the channel's calls.
Prints one JSON object; the headline is ``query_p50_ratio`` (query p50 / no-op p50 on the channel).

    PYTHONHASHSEED=0 /usr/bin/python3 clients/python/bench_colocated.py [--iterations 5000] [--warmup 2000] [--spin-micros 0] [--steps]
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

from google.protobuf.internal import api_implementation  # noqa: E402

from orbitkv import OrbitKvClient, identity, pb  # noqa: E402
from orbitkv.colocated import ColocatedTransport, QueryReplyView  # noqa: E402

HIT_PAGES = 64
PAGE_BYTES = 4096
ENGINE_IDENTITY = ("bench/colocated", "bench", "bench", 16, [(0, pb.FULL_ATTENTION, PAGE_BYTES)])


def percentile(sorted_nanos: list[int], fraction: float) -> int:
    return sorted_nanos[min(len(sorted_nanos) - 1, int(fraction * len(sorted_nanos)))]


def summary(nanos: list[int]) -> dict:
    ordered = sorted(nanos)
    return {"count": len(ordered), "p50_micros": percentile(ordered, 0.50) / 1e3,
            "p90_micros": percentile(ordered, 0.90) / 1e3, "p99_micros": percentile(ordered, 0.99) / 1e3,
            "mean_micros": sum(ordered) / len(ordered) / 1e3}


STEPS = ("encode", "send", "wait", "decode", "return", "use")


class StepClock:
    """``--steps``: timestamps at the boundaries of a call over the co-located channel, by wrapping the transport's
    step methods (``_send``, ``_receive``, ``_decode``): encode = the request's serialization and framing, send = the
    send syscall (it wakes the Manager), wait = until the reply is read (the Manager's work and both wake-ups), decode
    = the frame checks and the reply's parse, return = back to the caller, use = the caller reading the reply (status,
    ready blocks, lease id). Costs a few function calls per step; the headline runs without it."""

    def __init__(self, transport: ColocatedTransport):
        self.marks: list[int] = []
        self.steps: dict[str, list[list[int]]] = {"SubmitQuery": [], "Ping": []}
        clock, marks = time.perf_counter_ns, self.marks
        send, receive, decode = transport._send, transport._receive, transport._decode

        def timed_send(frame):
            marks.append(clock())
            send(frame)
            marks.append(clock())

        def timed_receive():
            n = receive()
            marks.append(clock())
            return n

        def timed_decode(*args):
            reply = decode(*args)
            marks.append(clock())
            return reply

        self.originals = send, receive, decode
        transport._send, transport._receive, transport._decode = timed_send, timed_receive, timed_decode

    def record(self, method: str, started: int, returned: int, used: int) -> None:
        send_start, send_end, received, decoded = self.marks[-4:]
        self.steps[method].append([send_start - started, send_end - send_start, received - send_end,
                                   decoded - received, returned - decoded, used - returned])
        self.marks.clear()

    def p50_micros(self, measured_from: int) -> dict:
        return {method: {name: summary([row[i] for row in rows[measured_from:]])["p50_micros"]
                         for i, name in enumerate(STEPS)} for method, rows in self.steps.items()}


def interleaved(client: OrbitKvClient, query, release, iterations: int, warmup: int,
                steps: StepClock | None = None) -> dict:
    """``query()`` answers the 64-page hit, ``release(lease_id)`` (untimed) ends its lease; a Ping on ``client``
    beside each, Ping first in even iterations. The query's time includes reading what a lookup reads of the reply
    (status, ready blocks, lease id), so that a reply read lazily pays for those fields inside it."""
    ping = pb.PingRequest()
    queries, pings = [], []
    clock = time.perf_counter_ns
    for i in range(iterations + warmup):
        ping_first = i % 2 == 0
        if ping_first:
            t0 = clock()
            client.call("Ping", ping)
            ping_nanos = clock() - t0
            if steps is not None:
                steps.record("Ping", t0, t0 + ping_nanos, t0 + ping_nanos)
        t0 = clock()
        reply = query()
        t1 = clock()
        status, ready_blocks, lease_id = reply.status, reply.ready_blocks, reply.lease.lease_id
        t2 = clock()
        query_nanos = t2 - t0
        if steps is not None:
            steps.record("SubmitQuery", t0, t1, t2)
        if status != pb.READY or ready_blocks != HIT_PAGES:
            raise RuntimeError(f"expected a {HIT_PAGES}-page hit, got {pb.QueryStatus.Name(status)} {ready_blocks}")
        release(lease_id)
        if steps is not None:
            steps.marks.clear()
        if not ping_first:
            t0 = clock()
            client.call("Ping", ping)
            ping_nanos = clock() - t0
            if steps is not None:
                steps.record("Ping", t0, t0 + ping_nanos, t0 + ping_nanos)
        if i >= warmup:
            queries.append(query_nanos)
            pings.append(ping_nanos)
    q, p = summary(queries), summary(pings)
    result = {"query_64_page_hit": q, "noop_ping": p, "query_p50_ratio": q["p50_micros"] / p["p50_micros"],
              "query_p99_ratio": q["p99_micros"] / p["p99_micros"]}
    if steps is not None:
        result["steps_p50_micros"] = steps.p50_micros(warmup)
    return result


def prebuilt_query(client: OrbitKvClient, session_ref, namespace, keys):
    """The headline's query and release: ``client.call`` with a request built once."""
    query = pb.SubmitQueryRequest(session=session_ref, namespace_id=namespace,
                                  groups=[pb.GroupChain(group_id=0, block_hashes=keys)])
    return (lambda: client.call("SubmitQuery", query),
            lambda lease_id: client.call("ReleaseLease", pb.ReleaseLeaseRequest(session=session_ref, lease_id=lease_id)))


def protobuf_micros(iterations: int = 5000) -> dict:
    """The Python client's own protobuf work for one 64-page hit, no I/O, p50 µs of each: build and serialize the
    request; parse a READY reply of 64 leased pages whole (``parse_reply``); read it as the channel's transport does
    (``read_reply_head``: :class:`QueryReplyView`, the head and the lease id, as a lookup reads it); and what an engine
    that copies the pages pays on top of that (``read_pages_after_head``: the whole parse, deferred, and each page's
    slot read once)."""
    keys = [hashlib.sha256(f"bench-colocated/{i}".encode()).digest() for i in range(HIT_PAGES)]
    ref = pb.SessionRef(instance_id=1, session_epoch=1)
    reply = pb.QueryReply(ticket=1, status=pb.READY, ready_blocks=HIT_PAGES)
    reply.lease.lease_id = 1
    for i in range(HIT_PAGES):
        page = reply.lease.pages.add(position=i)
        page.slot.region_id, page.slot.offset, page.slot.length, page.slot.generation = 1, i * PAGE_BYTES, PAGE_BYTES, 7
    body = memoryview(bytearray(reply.SerializeToString()))
    clock = time.perf_counter_ns
    build, serialize, parse, head, pages = [], [], [], [], []
    for _ in range(iterations):
        t0 = clock()
        request = pb.SubmitQueryRequest(session=ref, namespace_id=bytes(16),
                                        groups=[pb.GroupChain(group_id=0, block_hashes=keys)])
        t1 = clock()
        request.SerializeToString()
        t2 = clock()
        pb.QueryReply.FromString(body)
        t3 = clock()
        view = QueryReplyView(bytes(body))
        if view.status != pb.READY or view.ready_blocks != HIT_PAGES or view.lease.lease_id != 1:
            raise RuntimeError("the reply's head does not read back")
        t4 = clock()
        if sum(page.slot.length for page in view.lease.pages) != HIT_PAGES * PAGE_BYTES:
            raise RuntimeError("the reply's pages do not read back")
        del view  # freeing the parsed pages is part of their cost (as freeing the whole parse is part of parse_reply)
        t5 = clock()
        build.append(t1 - t0)
        serialize.append(t2 - t1)
        parse.append(t3 - t2)
        head.append(t4 - t3)
        pages.append(t5 - t4)
    return {name: summary(values)["p50_micros"] for name, values in
            (("build_request", build), ("serialize_request", serialize), ("parse_reply", parse),
             ("read_reply_head", head), ("read_pages_after_head", pages))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--data-dir", help="a running Manager's data directory (default: start one)")
    parser.add_argument("--protobuf-only", action="store_true", help="only the client's own protobuf work, no Manager")
    parser.add_argument("--spin-micros", type=int, default=0,
                        help="the channel's calls poll for their reply this long before sleeping (default 0)")
    parser.add_argument("--steps", action="store_true",
                        help="time each step of the channel's calls (encode, send, wait, decode, return, use)")
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
                grpc_client.register(identity(*ENGINE_IDENTITY)) as session:
            session.publish([(0, h, bytes([i % 251]) * PAGE_BYTES) for i, h in enumerate(keys)])
            transport = ColocatedTransport(data_dir / "colocated.sock", token, spin_seconds=args.spin_micros / 1e6)
            steps = StepClock(transport) if args.steps else None
            with OrbitKvClient(f"colocated:{data_dir / 'colocated.sock'}", token, transport=transport) as channel:
                colocated = interleaved(channel, *prebuilt_query(channel, session.ref, session.namespace, keys),
                                        args.iterations, args.warmup, steps)
                if steps is not None:
                    transport._send, transport._receive, transport._decode = steps.originals
                # What an engine calls: its own session's submit_query (the request built from the chain each time)
                # and release, on a session registered over the channel.
                with channel.register(identity(*ENGINE_IDENTITY)) as engine:
                    session_path = interleaved(channel, lambda: engine.submit_query({0: keys}), engine.release,
                                               args.iterations, args.warmup)
                    leases = engine.stats().session_leases
            grpc = interleaved(grpc_client, *prebuilt_query(grpc_client, session.ref, session.namespace, keys),
                               args.iterations, args.warmup)
            leases += session.stats().session_leases
        result = {"bench": "colocated-python", "query_p50_ratio": colocated["query_p50_ratio"],
                  "query_p50_micros": colocated["query_64_page_hit"]["p50_micros"],
                  "session_query_p50_micros": session_path["query_64_page_hit"]["p50_micros"],
                  "colocated": colocated, "colocated_session": session_path, "grpc": grpc,
                  "client_protobuf_p50_micros": protobuf_micros(),
                  "config": {"iterations": args.iterations, "warmup": args.warmup, "hit_pages": HIT_PAGES,
                             "spin_micros": args.spin_micros, "steps": args.steps,
                             "protobuf": api_implementation.Type(),
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
