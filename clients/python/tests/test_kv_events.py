"""KV events from a real Manager, read by an independent subscriber written from vLLM's published format.

The subscriber knows only ``vllm/distributed/kv_events.py`` (vLLM commit 0181ea3173e53eea8cf04a86891488e3dc89bb34):
multipart ``(topic, seq, payload)`` on a ZMQ SUB socket, ``payload`` a msgpack ``KVEventBatch`` of tagged
``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared`` maps, and a replay socket answering ``("", start_seq)`` with
``("", seq, payload)`` frames and ``("", -1, "")``. It rebuilds the Manager's DRAM (``CPU``) and SSD (``DISK``) index
and is compared with what the Manager itself reports, through evictions, SSD writes, read-backs, a range of batches it
missed (caught up through replay) and a Manager restart.
"""

import json
import socket
import threading
import urllib.request

import msgpack
import pytest
import zmq

from manager import ManagerProcess, wait_until
from orbitkv import pb
from test_client import hashes, make_identity, page

PAGE = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Subscriber:
    """A router's index of one Manager, rebuilt only from its KV events."""

    def __init__(self, endpoint: str, replay_endpoint: str):
        self.context = zmq.Context()
        self.sub = self.context.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(endpoint)
        self.replay_endpoint = replay_endpoint
        self.cpu: set[tuple[str, bytes]] = set()
        self.disk: set[tuple[str, bytes]] = set()
        self.lock = threading.Lock()
        self.last_seq = -1
        self.awaiting_clear = True  # nothing applied yet: start from a batch that begins with AllBlocksCleared
        self.dropping = False
        self.dropped = 0
        self.replayed = 0
        self.clears = 0
        self.removed_from_cpu = 0
        self.stored_on_disk = 0
        self.failure = None
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self._catch_up()
            while self.running:
                if not self.sub.poll(20):
                    continue
                _topic, seq_bytes, payload = self.sub.recv_multipart()
                seq = int.from_bytes(seq_bytes, "big", signed=True)
                if self.dropping:
                    self.dropped += 1
                    continue
                if not self.awaiting_clear and seq <= self.last_seq:
                    continue  # applied already through a replay
                if self.awaiting_clear or seq != self.last_seq + 1:
                    self._catch_up()
                self._offer(seq, payload)
        except Exception as e:  # reported by the test through snapshot()
            self.failure = e

    def _catch_up(self):
        replay = self.context.socket(zmq.DEALER)
        try:
            replay.connect(self.replay_endpoint)
            start = 0 if self.awaiting_clear else self.last_seq + 1
            replay.send_multipart([b"", start.to_bytes(8, "big", signed=True)])
            while True:
                if not replay.poll(10_000):
                    raise AssertionError("no replay answer within 10 s")
                _empty, seq_bytes, payload = replay.recv_multipart()
                seq = int.from_bytes(seq_bytes, "big", signed=True)
                if seq == -1:
                    return
                if self._offer(seq, payload):
                    self.replayed += 1
        finally:
            replay.close(linger=0)

    def _offer(self, seq: int, payload: bytes) -> bool:
        batch = msgpack.unpackb(payload, raw=False)
        if not self.awaiting_clear and seq > self.last_seq + 1:
            self.awaiting_clear = True  # what came in between is gone: start over at the next clear
        if self.awaiting_clear:
            events = batch["events"]
            if not events or events[0]["type"] != "AllBlocksCleared":
                return False
            self.awaiting_clear = False
        elif seq != self.last_seq + 1:
            return False
        self._apply(batch)
        self.last_seq = seq
        return True

    def _apply(self, batch: dict):
        assert isinstance(batch["ts"], float)
        namespace = batch.get("namespace")
        with self.lock:
            for event in batch["events"]:
                kind = event["type"]
                if kind == "AllBlocksCleared":
                    self.cpu.clear()
                    self.disk.clear()
                    self.clears += 1
                    continue
                assert kind in ("BlockStored", "BlockRemoved"), kind
                assert event["medium"] in ("CPU", "DISK")
                index = self.cpu if event["medium"] == "CPU" else self.disk
                keys = {(namespace, bytes(h)) for h in event["block_hashes"]}
                if kind == "BlockStored":
                    assert event["parent_block_hash"] is None and event["token_ids"] == []
                    index |= keys
                    if event["medium"] == "DISK":
                        self.stored_on_disk += len(keys)
                else:
                    index -= keys
                    if event["medium"] == "CPU":
                        self.removed_from_cpu += len(keys)

    def snapshot(self):
        if self.failure is not None:
            raise AssertionError(f"the subscriber failed: {self.failure!r}")
        with self.lock:
            return set(self.cpu), set(self.disk)

    def close(self):
        self.running = False
        self.thread.join(timeout=10)
        self.sub.close(linger=0)
        self.context.term()


def http_json(manager: ManagerProcess, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{manager.metrics_port}{path}", timeout=20) as response:
        return json.loads(response.read().decode())


def manager_residency(manager: ManagerProcess):
    """What the Manager itself holds: sealed DRAM images (/health) and committed SSD keys (its SSD metric)."""
    return http_json(manager, "/health")["resident_images"], int(manager.metric("orbitkv_ssd_keys"))


def assert_matches(subscriber: Subscriber, manager: ManagerProcess, namespace: str, published: set[bytes]):
    def same():
        cpu, disk = subscriber.snapshot()
        dram_images, ssd_keys = manager_residency(manager)
        return len(cpu) == dram_images and len(disk) == ssd_keys
    wait_until(same, timeout_seconds=30, message="the subscriber's index equal to the Manager's residency")
    cpu, disk = subscriber.snapshot()
    for ns, block_hash in cpu | disk:
        assert ns == namespace and block_hash in published, "a block the engine never published"


@pytest.fixture
def events_manager():
    ports = {"events.endpoint": f"tcp://127.0.0.1:{free_port()}",
             "events.replay-endpoint": f"tcp://127.0.0.1:{free_port()}"}
    settings = {"pool.size": "16MiB", "ssd.capacity": "96MiB", "events.interval-ms": "5", **ports}
    process = ManagerProcess(settings).start()
    holder = {"process": process, "settings": settings}
    try:
        yield holder
    finally:
        try:
            holder["process"].stop()
        finally:
            holder["process"].remove_data_dir()


def test_an_independent_subscriber_rebuilds_the_residency(events_manager):
    manager = events_manager["process"]
    settings = events_manager["settings"]
    subscriber = Subscriber(settings["events.endpoint"], settings["events.replay-endpoint"])
    try:
        published: set[bytes] = set()
        with manager.client() as client, client.register(make_identity("py-events/model", PAGE)) as session:
            namespace = session.namespace.hex()
            first = hashes(501, 6)
            session.publish([(0, h, page(501, i, PAGE)) for i, h in enumerate(first)])
            published |= set(first)
            wait_until(lambda: manager.metric("orbitkv_ssd_keys") >= 6, message="SSD writes of the first pages")
            for seed in (502, 503):  # 16 more MiB through a 16 MiB pool: the first pages leave DRAM
                keys = hashes(seed, 8)
                session.publish([(0, h, page(seed, i, PAGE)) for i, h in enumerate(keys)])
                published |= set(keys)
            assert manager.metric("orbitkv_evictions_total") >= 6
            assert_matches(subscriber, manager, namespace, published)
            assert subscriber.removed_from_cpu >= 6 and subscriber.stored_on_disk >= 6

            # A range of batches the subscriber misses: the first pages are read back from SSD meanwhile.
            subscriber.dropping = True
            events = manager.metric("orbitkv_events_published_total")  # events, so heartbeats do not count
            reply = session.query({0: first})
            assert reply.status == pb.READY and reply.ready_blocks == 6
            with session.lease(reply) as lease:
                assert len(lease.pages) == 6
            wait_until(lambda: subscriber.dropped > 0
                       and manager.metric("orbitkv_events_published_total") > events,
                       message="batches published while the subscriber was away")
            subscriber.dropping = False
            replayed = subscriber.replayed
            last = hashes(504, 2)  # the next batch shows the gap; the subscriber replays what it missed
            session.publish([(0, h, page(504, i, PAGE)) for i, h in enumerate(last)])
            published |= set(last)
            assert_matches(subscriber, manager, namespace, published)
            assert subscriber.replayed > replayed
            cpu, _ = subscriber.snapshot()
            assert {(namespace, h) for h in first} <= cpu, "pages read back from SSD are stored on CPU again"
            wait_until(lambda: manager.metric("orbitkv_ssd_keys") >= 24, message="SSD writes settled")
            assert_matches(subscriber, manager, namespace, published)
            assert manager.metric("orbitkv_events_replays_served_total") >= 2
        _, disk_before = subscriber.snapshot()
        assert subscriber.clears == 1

        # A restart on the same data directory and endpoints: the subscriber sees a gap it cannot replay, starts over
        # at the new start's AllBlocksCleared and learns the recovered SSD extents; DRAM is empty.
        manager.stop()
        restarted = ManagerProcess(settings, data_dir=str(manager.data_dir))
        restarted.owns_data_dir = True
        events_manager["process"] = restarted.start()
        manager.owns_data_dir = False
        wait_until(lambda: subscriber.clears == 2, timeout_seconds=30, message="AllBlocksCleared after the restart")
        assert_matches(subscriber, restarted, namespace, published)
        cpu, disk = subscriber.snapshot()
        assert cpu == set()
        assert disk == disk_before, "every committed extent is recovered and announced again"
        summary = http_json(restarted, "/kv/summary")
        [ns] = [n for n in summary["namespaces"] if n["namespace"] == namespace]
        assert ns["blocks"] == {"dram": 0, "ssd": len(disk)}
    finally:
        subscriber.close()
