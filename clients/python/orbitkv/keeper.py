"""One engine instance's session, kept alive across Manager restarts, session lapses and a Manager that is not there.

Design note (ownership, threads, failure):

* A :class:`SessionKeeper` owns the :class:`~orbitkv.client.OrbitKvClient` and the current
  :class:`~orbitkv.client.Session` of one adapter (one vLLM connector role, one SGLang backend). Both are replaced
  together on every registration: the token and the socket are read again, and a restarted Manager maps a new pool
  file, so nothing of the old session is reused.
* The engine's threads call :meth:`session`, which never waits for the Manager: it answers the live session or
  ``None``. ``None`` means the cache is off for now: lookups miss, loads fail (the engine recomputes), saves are
  skipped. An engine therefore starts and runs without a Manager.
* Registering is the job of one daemon thread (``orbitkv-reconnect-<label>``), under the keeper's lock, with backoff
  (doubling from ``backoff_initial_seconds`` to ``backoff_max_seconds``, with jitter). It runs when the first
  registration failed and whenever the current session is found gone: a call refused ``UNKNOWN_INSTANCE`` or
  ``STALE_SESSION_EPOCH`` (a restarted Manager, a lapse), a release answered ``SESSION_ENDED``, or the heartbeat
  finding it gone. However many threads find the loss at once, one registration follows.
* A Manager that dies is not a loss yet (calls fail ``UNAVAILABLE``, and the engine gets misses): when it comes back,
  the heartbeat (every third of the ttl) is refused ``UNKNOWN_INSTANCE`` and the keeper registers again, so lookups
  hit again within about a ttl of the Manager's return.
* Logging: one WARNING when the cache goes off (no Manager at start, or a session lost), one INFO when a session is
  registered again; failed attempts are counted, not logged. Counters: :attr:`registrations`,
  :attr:`sessions_lost`, :attr:`failed_attempts`.
* The old session is closed by the reconnect thread after the loss (its unregister is refused or fails, which is
  fine); a copy still reading its mapping keeps the mapping alive until it drops its view.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from typing import Callable, Optional

from orbitkv._proto import engine_pb2 as pb
from orbitkv.checksum import require_native
from orbitkv.client import OrbitKvClient, Session

log = logging.getLogger(__name__)


class SessionKeeper:
    def __init__(self, connect: Callable[[], OrbitKvClient], identity: pb.InstanceIdentity, label: str, *,
                 role: int = pb.PREFILL_AND_DECODE, on_session: Optional[Callable[[Session], None]] = None,
                 backoff_initial_seconds: float = 0.05, backoff_max_seconds: float = 1.0,
                 register_timeout_seconds: float = 10.0, where: str = "the Manager", warn_at_start: bool = True):
        """``warn_at_start``: False for a keeper that replaces one whose outage was already reported (the engine's
        start then still logs one WARNING, not one per keeper)."""
        self._connect = connect
        self.identity = identity
        self.label = label
        self._role = role
        self._on_session = on_session
        self._backoff_initial = backoff_initial_seconds
        self._backoff_max = backoff_max_seconds
        self._where = where
        # Registration runs at engine start and on the keeper's thread, never inside an engine step, so it may wait
        # longer than the engine's calls (a Manager that just started answers its first calls slowly).
        self._register_timeout = register_timeout_seconds
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._needed = False  # a registration is wanted (none yet, or the current one was lost)
        self._session: Optional[Session] = None
        self._client: Optional[OrbitKvClient] = None
        self.registrations = 0
        self.sessions_lost = 0
        self.failed_attempts = 0
        self.last_failure: Optional[BaseException] = None
        require_native()  # a configuration error, not an outage: refuse the engine's start with what to install
        if not self._register_once():
            if warn_at_start:
                log.warning("OrbitKV: no Manager at %s (%s): the KV cache is off, registering in the background",
                            self._where, self.last_failure)
            self._needed = True
        self._thread = threading.Thread(target=self._run, name=f"orbitkv-reconnect-{label}", daemon=True)
        self._thread.start()

    # --- the engine's side ---------------------------------------------------------------------------------
    def session(self) -> Optional[Session]:
        """The live session, or None while there is none (never waits for the Manager)."""
        session = self._session
        if session is None or session.lost_reason is not None:
            return None
        return session

    def wait_for_session(self, timeout_seconds: float) -> Optional[Session]:
        """For callers that may wait (tests, an engine's start): the live session once there is one, or None."""
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            while not self._closed:
                session = self.session()
                if session is not None:
                    return session
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._wake.wait(remaining)
        return None

    # --- registration --------------------------------------------------------------------------------------
    def _on_lost(self, session: Session, reason: str) -> None:
        with self._lock:
            if session is not self._session or self._closed:
                return
            self.sessions_lost += 1
            self._needed = True
            self._wake.notify_all()
        log.warning("OrbitKV session of %s lost (%s): the KV cache is off until it is registered again",
                    self.label, reason)

    def _register_once(self) -> bool:
        """One attempt; on success the new client and session replace the old ones. Called under no lock."""
        client = None
        try:
            client = self._connect()
            session = client.register(self.identity, self._role, label=self.label, timeout=self._register_timeout)
        except Exception as e:  # noqa: BLE001 - any failed attempt is counted and retried, never kills the thread
            # OrbitKvError: refused or unreachable; OSError: no token file yet (the Manager never ran here);
            # ValueError: a bad pool mapping. Configuration errors were raised by the constructor already.
            self.failed_attempts += 1
            # Kept without its traceback: the frames would pin whatever they held (views of a pool mapping).
            self.last_failure = e.with_traceback(None)
            log.debug("OrbitKV registration of %s failed: %s", self.label, str(e))
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
            return False
        if self._on_session is not None:
            try:
                self._on_session(session)
            except Exception as e:  # e.g. pinning the mapping failed: this session is no use to the engine
                self.failed_attempts += 1
                self.last_failure = e.with_traceback(None)
                with contextlib.suppress(Exception):
                    session.close()
                client.close()
                return False
        with self._lock:
            old_session, old_client = self._session, self._client
            self._session, self._client = session, client
            self._needed = False
            self.registrations += 1
            self._wake.notify_all()
        session.add_lost_listener(self._on_lost)
        if old_session is not None or self.registrations > 1 or self.failed_attempts:
            log.info("OrbitKV session of %s registered (instance %d) after %d failed attempts in all",
                     self.label, session.instance_id, self.failed_attempts)
        self._close_quietly(old_session, old_client)
        return True

    @staticmethod
    def _close_quietly(session: Optional[Session], client: Optional[OrbitKvClient]) -> None:
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _run(self) -> None:
        delay = self._backoff_initial
        while True:
            with self._lock:
                while not self._needed and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
            if self._register_once():
                delay = self._backoff_initial
                continue
            with self._lock:
                if self._closed:
                    return
                self._wake.wait(delay * random.uniform(0.5, 1.0))
            delay = min(self._backoff_max, delay * 2)

    def close(self) -> None:
        """Stops reconnecting, unregisters (best effort) and closes the client. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session, client = self._session, self._client
            self._session = self._client = None
            self._wake.notify_all()
        self._thread.join()
        # A view of the pool still alive (an exception's frame, say) keeps the mapping until it is dropped.
        self._close_quietly(session, client)

    def stats(self) -> dict:
        return {"registrations": self.registrations, "sessions_lost": self.sessions_lost,
                "failed_attempts": self.failed_attempts, "connected": self.session() is not None}
