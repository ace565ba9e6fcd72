"""The working-memory cache: the latest events of each active session, in process.

Building context for an active session should not read its history from disk on every
turn. :class:`WorkingMemory` keeps, per session, a deque of the newest events (50 by
default; the least recently used sessions are evicted beyond ``max_sessions``). It is
filled on read (the tail is loaded once) and on write (events this process stores are
appended after their transaction commits).

Staying correct when someone else writes the same file:

- Every read first asks SQLite for a *stamp*: ``total_changes()`` (rows this connection
  changed) and ``PRAGMA data_version`` (bumped when another connection commits). If it
  equals the stamp the entry was last checked at, nothing anywhere has changed and the
  entry is served with no further query.
- Otherwise one aggregate query reads the session's *signature*: event count, highest
  sequence, a checksum of the sequences (their sum modulo a prime) and the newest
  event's ``created_at``. Equal signature: the entry is still right.
  Otherwise the events above the cached highest sequence are fetched; if they account
  for the whole difference in count they are appended, else the tail is reloaded. Rows
  and the signature stored with them come from one statement (one snapshot).
  Appends, deletes (notes, ``forget``, expiry), an append and a delete that cancel out
  in the count (the checksum moves) and a deleted-then-rewritten last event (new
  ``created_at``) all change the signature.

Events are an append-only log; code that rewrites a stored payload in place must call
:meth:`WorkingMemory.invalidate`.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindfile.context.types import CacheStats
from mindfile.errors import ConfigError
from mindfile.index.pipeline import PreparedEvent
from mindfile.storage.db import Database
from mindfile.storage.events import CHECKSUM_PRIME, EventSignature, SqliteEventStore
from mindfile.types import MemoryRecord

if TYPE_CHECKING:
    from mindfile.storage.events import EventStore

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_MAX_SESSIONS", "WorkingMemory"]

DEFAULT_CAPACITY = 50
DEFAULT_MAX_SESSIONS = 256

Stamp = tuple[int, int]
Signature = EventSignature

_PRIME = CHECKSUM_PRIME


@dataclass(slots=True)
class _Entry:
    records: deque[MemoryRecord]
    signature: Signature
    stamp: Stamp | None


class WorkingMemory:
    """Per-session deques of the most recent events; thread-safe.

    The lock guards only in-memory work and is never held while waiting for SQLite, so
    a thread inside a transaction (holding the database's lock) can always write
    through :meth:`note_write` while another thread reads.
    """

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, *, max_sessions: int = DEFAULT_MAX_SESSIONS
    ) -> None:
        for value, what in ((capacity, "capacity"), (max_sessions, "max_sessions")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"working memory {what} must be a positive integer")
        self.capacity = capacity
        self.max_sessions = max_sessions
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._validated = self._refreshed = self._loads = self._bypassed = 0

    # -- reading ------------------------------------------------------------------------

    def recent(self, events: EventStore | Database, session_id: str, n: int) -> list[MemoryRecord]:
        """The session's last ``n`` events, oldest first (fewer if it has fewer).

        ``events`` is the event store (``engine.stores.events``); a database is taken
        as its SQLite one.
        """
        if n <= 0:
            return []
        if isinstance(events, Database):
            events = SqliteEventStore(events)
        if n > self.capacity:
            with self._lock:
                self._bypassed += 1
            return events.tail(session_id, n)
        # Taken first: anything committed after this point changes the stamp, so an
        # entry stored with it is re-checked on the next read (conservative).
        stamp = events.change_stamp()
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None and entry.stamp == stamp:
                self._hits += 1
                return self._serve(session_id, entry, n)
        signature = events.signature(session_id)
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None and entry.signature == signature:
                entry.stamp = stamp
                self._validated += 1
                return self._serve(session_id, entry, n)
            base = None if entry is None else entry.signature
        if base is not None and base[1] is not None and signature[0] > 0:
            fresh, rows = events.newest(session_id, base[1], self.capacity + 1)
            with self._lock:
                entry = self._entries.get(session_id)
                if (
                    entry is not None
                    and entry.signature == base
                    and rows
                    and base[0] + len(rows) == fresh[0]
                ):
                    entry.records.extend(rows)
                    entry.signature, entry.stamp = fresh, stamp
                    self._refreshed += 1
                    return self._serve(session_id, entry, n)
        fresh, rows = events.newest(session_id, -1, self.capacity)
        with self._lock:
            entry = _Entry(deque(rows, maxlen=self.capacity), fresh, stamp)
            self._entries[session_id] = entry
            self._loads += 1
            while len(self._entries) > self.max_sessions:
                self._entries.popitem(last=False)
            return self._serve(session_id, entry, n)

    def _serve(self, session_id: str, entry: _Entry, n: int) -> list[MemoryRecord]:
        if session_id in self._entries:
            self._entries.move_to_end(session_id)
        return list(entry.records)[-n:]

    # -- writing ------------------------------------------------------------------------

    def note_write(self, events: Iterable[PreparedEvent], created_at: str) -> None:
        """Append events this process just committed to the sessions already cached.

        Only the signature is advanced, not the stamp: the next read re-checks the
        signature (one aggregate query), so a write by another process that slipped in
        between is still noticed.
        """
        with self._lock:
            for event in events:
                entry = self._entries.get(event.session_id)
                if entry is None:
                    continue
                count, last, checksum, _ = entry.signature
                if last is not None and event.sequence <= last:
                    # A concurrent read already loaded it from disk (or the log was
                    # rewritten): keep the entry, but make the next read re-check it.
                    entry.stamp = None
                    continue
                record = MemoryRecord(
                    event.session_id, event.sequence, json.loads(event.payload_json), created_at
                )
                entry.records.append(record)
                checksum = (checksum + event.sequence % _PRIME) % _PRIME
                entry.signature = (count + 1, event.sequence, checksum, created_at)
                entry.stamp = None

    def invalidate(self, session_id: str | None = None) -> None:
        """Forget one session's entry (or all): the next read reloads it."""
        with self._lock:
            if session_id is None:
                self._entries.clear()
            else:
                self._entries.pop(session_id, None)

    def stats(self) -> CacheStats:
        """Hit and refresh counters and the number of cached sessions."""
        with self._lock:
            return CacheStats(
                hits=self._hits,
                validated=self._validated,
                refreshed=self._refreshed,
                loads=self._loads,
                bypassed=self._bypassed,
                sessions=len(self._entries),
                capacity=self.capacity,
            )
