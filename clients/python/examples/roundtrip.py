#!/usr/bin/env python3
"""Round trip against a running Manager: register, publish pages, query them, verify every byte, release.

    ./scripts/orbitkv manager &                                   # in the repository root
    /usr/bin/python3 clients/python/examples/roundtrip.py         # reads ./data/engine.sock and ./data/engine.token
    /usr/bin/python3 clients/python/examples/roundtrip.py --data-dir /path/to/data --tcp 127.0.0.1:50055

Exits 0 when every byte came back as published and every lease was released valid; 1 on any mismatch or refusal.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYTHONHASHSEED", "0")

from orbitkv import LeaseInvalidError, OrbitKvClient, OrbitKvError, hashing, identity, pb  # noqa: E402

BLOCK_TOKENS = 16


def page_bytes(tokens: list[int], block: int, size: int) -> bytes:
    """Deterministic page content for a block (what a model's KV would be: a function of the token prefix)."""
    import hashlib

    seed = hashlib.sha256(repr(tokens[:(block + 1) * BLOCK_TOKENS]).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="./data", help="the Manager's data directory (socket and token)")
    parser.add_argument("--tcp", default=None, help="host:port instead of the Unix socket")
    parser.add_argument("--pages", type=int, default=32, help="pages to publish")
    parser.add_argument("--page-bytes", type=int, default=64 * 1024, help="bytes per page")
    args = parser.parse_args(argv)

    tokens = [(i * 7919) % 32000 for i in range(args.pages * BLOCK_TOKENS + 5)]
    keys = hashing.chain(tokens, BLOCK_TOKENS)  # vLLM-compatible chained hashes (PYTHONHASHSEED fixed)
    problems = []
    try:
        with OrbitKvClient.from_data_dir(args.data_dir, tcp=args.tcp) as client:
            engine = identity("orbitkv-example/roundtrip", "example:NHD", "layers=1;dtype=u8", BLOCK_TOKENS,
                              [(0, pb.FULL_ATTENTION, args.page_bytes)])
            with client.register(engine, label="roundtrip.py") as session:
                print(f"registered instance {session.instance_id}; pool {session.pool.path}", file=sys.stderr)
                published = session.publish([(0, key, page_bytes(tokens, i, args.page_bytes))
                                             for i, key in enumerate(keys)])
                print(f"published {published.sealed_pages} pages ({published.sealed_bytes} bytes; "
                      f"{len(keys) - published.sealed_pages} were already present)", file=sys.stderr)
                verified = 0
                for end in (len(keys), len(keys) // 2, 1):
                    reply = session.query({0: keys[:end]})
                    if reply.status != pb.READY or reply.ready_blocks != end:
                        problems.append(f"query of {end} blocks answered {pb.QueryStatus.Name(reply.status)} "
                                        f"with {reply.ready_blocks} blocks")
                        if reply.status != pb.READY:
                            continue
                    try:
                        with session.lease(reply) as lease:
                            for leased in lease.pages:
                                copy = lease.read(leased)  # checks the leased CRC32C when the Manager has one
                                if bytes(copy) != page_bytes(tokens, leased.position, args.page_bytes):
                                    problems.append(f"block {leased.position}: bytes differ from what was published")
                                else:
                                    verified += len(copy)
                    except LeaseInvalidError as e:
                        problems.append(f"lease not valid at release: {e}")
                    print(f"query of {end} blocks: READY {reply.ready_blocks}, copied, verified, released",
                          file=sys.stderr)
                unknown = session.query({0: hashing.chain([7] * 3 * BLOCK_TOKENS, BLOCK_TOKENS)})
                if unknown.status != pb.MISS:
                    problems.append(f"unknown blocks answered {pb.QueryStatus.Name(unknown.status)}, not MISS")
                if session.stats().session_leases:
                    problems.append("leases still held after release")
    except OrbitKvError as e:
        problems.append(f"the Manager refused a call: {e}")
    except FileNotFoundError as e:
        print(f"roundtrip: no Manager data directory here ({e}); start ./scripts/orbitkv manager or pass --data-dir",
              file=sys.stderr)
        return 1
    print(("OK: every byte verified" if not problems else "FAILED: " + "; ".join(problems)), file=sys.stderr)
    print(f'{{"ok": {str(not problems).lower()}, "verified_bytes": {verified if not problems else 0}, '
          f'"problems": {len(problems)}}}')
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
