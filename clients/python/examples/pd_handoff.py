#!/usr/bin/env python3
"""Prefill-to-decode readiness (P/D) against a running Manager: a decode session's demand names the prefill session
and its request, waits (PENDING, WAITING_FOR_PRODUCER) until the prefill session publishes the pages under that
request, then reads the prefill's bytes; a second demand whose producer ends answers MISS.

    ./scripts/orbitkv manager &                                   # in the repository root
    /usr/bin/python3 clients/python/examples/pd_handoff.py        # reads ./data/engine.sock and ./data/engine.token

Prints one JSON object last; exits 0 when the decode read exactly the prefill's bytes and the ended producer was a MISS.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYTHONHASHSEED", "0")

from orbitkv import OrbitKvClient, OrbitKvError, hashing, identity, pb  # noqa: E402

BLOCK_TOKENS = 16


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="./data", help="the Manager's data directory (socket and token)")
    parser.add_argument("--pages", type=int, default=8, help="pages the prefill publishes")
    parser.add_argument("--page-bytes", type=int, default=64 * 1024, help="bytes per page")
    args = parser.parse_args(argv)

    # A model of its own per run, so the pages are new to the Manager.
    model = f"orbitkv-example/pd/{uuid.uuid4()}"
    engine = identity(model, "example:NHD", "layers=1;dtype=u8", BLOCK_TOKENS, [(0, pb.FULL_ATTENTION, args.page_bytes)])
    keys = hashing.chain(list(range(args.pages * BLOCK_TOKENS)), BLOCK_TOKENS)
    pages = [bytes([i % 251]) * args.page_bytes for i in range(len(keys))]
    problems = []
    waited = False
    try:
        with OrbitKvClient.from_data_dir(args.data_dir) as client, \
                client.register(engine, role=pb.PREFILL, label="pd prefill") as prefill, \
                client.register(engine, role=pb.DECODE, label="pd decode") as decode:
            # The router hands the decode engine the prefill's session and request id with the request.
            producer = prefill.producer("prefill-request-1")
            reply = decode.submit_demand(decode.prefix_demand("decode-request-1", keys, producer=producer,
                                                              max_wait_micros=10_000_000))
            waited = reply.detail == pb.WAITING_FOR_PRODUCER
            print(f"decode demand: {pb.QueryStatus.Name(reply.status)} / {pb.QueryStatus.Name(reply.detail)}",
                  file=sys.stderr)
            prefill.publish([(0, key, data) for key, data in zip(keys, pages)], request_id="prefill-request-1")
            reply = decode.settle(reply, timeout_seconds=10)
            if reply.status != pb.READY or reply.ready_blocks != len(keys):
                problems.append(f"decode answered {pb.QueryStatus.Name(reply.status)} with {reply.ready_blocks} blocks")
            else:
                with decode.lease(reply) as lease:
                    for leased in lease.pages:
                        if bytes(lease.read(leased)) != pages[leased.position]:
                            problems.append(f"block {leased.position} differs from the prefill's")
                print(f"decode demand: READY with {reply.ready_blocks} blocks, the prefill's bytes", file=sys.stderr)

            gone = client.register(engine, role=pb.PREFILL, label="pd prefill that ends")
            other = decode.submit_demand(decode.prefix_demand("decode-request-2", hashing.chain([3] * 64, BLOCK_TOKENS),
                                                              producer=gone.producer("prefill-request-2")))
            gone.close()
            ended = decode.settle(other, timeout_seconds=10)
            if ended.status != pb.MISS:
                problems.append(f"a demand whose producer ended answered {pb.QueryStatus.Name(ended.status)}")
            print(f"demand whose producer ended: {pb.QueryStatus.Name(ended.status)}", file=sys.stderr)
    except OrbitKvError as e:
        problems.append(f"the Manager refused a call: {e}")
    except FileNotFoundError as e:
        print(f"pd_handoff: no Manager data directory here ({e}); start ./scripts/orbitkv manager or pass --data-dir",
              file=sys.stderr)
        return 1
    print(("OK" if not problems else "FAILED: " + "; ".join(problems)), file=sys.stderr)
    print(f'{{"ok": {str(not problems).lower()}, "waited_for_producer": {str(bool(waited)).lower()}, '
          f'"problems": {len(problems)}}}')
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
