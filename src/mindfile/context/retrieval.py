"""The memory legs of the context builder: scope, salience, relevance (and lexical).

**Scope.** Memories come from

- the current session (minus its recent window, which is in the context verbatim),
- with ``cross_session``, the other sessions with the same ``agent_identity`` as the
  current one (or the one passed in); a session without an identity has no
  cross-session recall, so nothing leaks between unlabelled owners,
- with ``user_id``, that user's notes (``memory:{user_id}``) and facts
  (``facts:{user_id}``).

Conversation chunks must be newer than the lookback cutoff (chunk ``created_at``); with
a ``channel``, chunks of *other* sessions must carry ``metadata["channel"] == channel``.
Notes and facts are durable knowledge: neither the lookback nor the channel applies to
them. Expired chunks (``expires_at <= now`` and not pinned, the rule of
:mod:`mindfile.manage.expiry`) are never recalled.

**Importance** is the *effective* importance of :mod:`mindfile.manage.importance`: 1.0
when pinned, else the stored importance, decayed from the last recorded use (or
creation) when the store has a decay policy.

**Legs.** *Salience*: pinned chunks and chunks whose effective importance is at or above
the threshold, in scope (the lookback does not apply: a pinned memory does not age out).
*Relevance*: the vector index's nearest chunks in scope with cosine at or above the
threshold. *Lexical* (optional): the top BM25 hits in scope, whatever their cosine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from mindfile.context.rerank import Candidate, Leg
from mindfile.embed.base import Vector
from mindfile.manage.expiry import get_decay_policy
from mindfile.manage.importance import effective_importance
from mindfile.memory.facts import facts_session
from mindfile.memory.notes import notes_session
from mindfile.retrieve.fts import COLUMN_WEIGHTS, fts_query
from mindfile.storage.db import Database
from mindfile.vector.base import VectorFilter, VectorIndex

if TYPE_CHECKING:
    from mindfile.retrieve.lexical import Bm25Index

__all__ = ["Scope", "gather_candidates", "resolve_scope"]

AGENT_OF = "SELECT agent_identity FROM sessions WHERE session_id = ?"

CHUNKS = """
SELECT c.id, c.chunk_id, c.session_id, c.chunk_text, c.sequence_end, c.metadata_json,
       c.created_at, c.content_hash, c.importance, c.pinned, v.embedding_blob,
       coalesce(c.last_accessed_at, c.created_at)
FROM chunks AS c LEFT JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.id IN (SELECT value FROM json_each(?))
"""


@dataclass(frozen=True, slots=True)
class Scope:
    """Which chunks a context may recall (see the module docstring)."""

    session_id: str
    agent_identity: str | None
    namespaces: tuple[str, ...]
    channel: str | None
    cutoff: str | None
    now: str
    recent_from: int | None

    def where(self, *, lookback: bool = True) -> tuple[str, list[Any]]:
        """A SQL condition on ``chunks AS c`` and its parameters."""
        cutoff = self.cutoff if lookback else None
        current = "c.session_id = ?"
        params: list[Any] = [self.now, self.session_id]
        if self.recent_from is not None:
            current += " AND c.sequence_end < ?"
            params.append(self.recent_from)
        if cutoff is not None:
            current += " AND c.created_at >= ?"
            params.append(cutoff)
        parts = [f"({current})"]
        if self.agent_identity is not None:
            other = (
                "c.session_id IN (SELECT session_id FROM sessions "
                "WHERE agent_identity = ? AND session_id != ?)"
            )
            params += [self.agent_identity, self.session_id]
            if cutoff is not None:
                other += " AND c.created_at >= ?"
                params.append(cutoff)
            if self.channel is not None:
                other += " AND json_extract(c.metadata_json, '$.channel') = ?"
                params.append(self.channel)
            parts.append(f"({other})")
        if self.namespaces:
            parts.append(f"c.session_id IN ({','.join('?' * len(self.namespaces))})")
            params += list(self.namespaces)
        alive = "(c.expires_at IS NULL OR c.expires_at > ? OR c.pinned = 1)"
        sql = f"{alive} AND ({' OR '.join(parts)})"
        return sql, params


def resolve_scope(
    db: Database,
    session_id: str,
    *,
    user_id: str | None,
    agent_identity: str | None,
    channel: str | None,
    cross_session: bool,
    cutoff: datetime | None,
    now: datetime,
    recent_from: int | None,
) -> Scope:
    """The scope for a context of ``session_id`` (the agent is looked up if not given)."""
    agent = agent_identity
    if agent is None and cross_session:
        found = db.scalar(AGENT_OF, (session_id,))
        agent = None if found is None else str(found)
    namespaces = (notes_session(user_id), facts_session(user_id)) if user_id else ()
    return Scope(
        session_id=session_id,
        agent_identity=agent if cross_session else None,
        namespaces=namespaces,
        channel=channel,
        cutoff=None if cutoff is None else _iso(cutoff),
        now=_iso(now),
        recent_from=recent_from,
    )


def gather_candidates(
    db: Database,
    index: VectorIndex,
    scope: Scope,
    query: str,
    query_vec: Vector | None,
    *,
    relevance_threshold: float,
    salience_threshold: float,
    candidate_pool: int,
    salient_pool: int,
    lexical_k: int,
    lexical: Bm25Index | None = None,
) -> list[Candidate]:
    """Candidates from every leg, one per chunk, with the legs that found it.

    The lexical leg ranks on the in-memory BM25 index when given, else on FTS5.
    """
    legs: dict[int, set[Leg]] = {}
    scores: dict[int, float] = {}
    sql, params = scope.where(lookback=False)
    # Stored importance bounds the effective (decayed) one from above, so this is a
    # superset; the exact test runs on the loaded candidates.
    salient = db.query(
        f"SELECT c.id FROM chunks AS c WHERE {sql} AND (c.pinned = 1 OR c.importance >= ?) "
        "ORDER BY c.pinned DESC, c.importance DESC, c.created_at DESC, c.id DESC LIMIT ?",
        [*params, salience_threshold, salient_pool],
    )
    for (rowid,) in salient:
        legs.setdefault(int(rowid), set()).add("salience")
    if lexical is not None and not lexical.usable():
        lexical.warm()  # still building: rank the lexical leg with FTS5 meanwhile
        lexical = None
    sql, params = scope.where()
    where: VectorFilter | None = None
    if (query_vec is not None and candidate_pool > 0) or (lexical is not None and lexical_k > 0):
        allowed = db.query(f"SELECT c.id FROM chunks AS c WHERE {sql}", params)
        where = VectorFilter(rowids=np.array([r[0] for r in allowed], dtype=np.int64))
    allowed_any = where is not None and where.rowids is not None and len(where.rowids) > 0
    if query_vec is not None and candidate_pool > 0 and allowed_any:
        for rowid, sim in index.search(query_vec, candidate_pool, where=where):
            if sim >= relevance_threshold:
                legs.setdefault(rowid, set()).add("relevance")
                scores[rowid] = sim
    if lexical is not None and lexical_k > 0 and allowed_any:
        for rowid, _ in lexical.search(query, lexical_k, where=where):
            legs.setdefault(rowid, set()).add("lexical")
    match = fts_query(query) if lexical_k > 0 and lexical is None else None
    if match is not None:
        bm25 = "bm25(chunks_fts, ?, ?, ?)"
        rows = db.query(
            f"SELECT c.id FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ? AND {sql} ORDER BY {bm25} LIMIT ?",
            [match, *params, *COLUMN_WEIGHTS, lexical_k],
        )
        for (rowid,) in rows:
            legs.setdefault(int(rowid), set()).add("lexical")
    if not legs:
        return []
    half_life = get_decay_policy(db).half_life_seconds
    out = []
    for cand in _load(db, legs, scores, query_vec, scope.now, half_life):
        if "salience" in cand.legs and not (cand.pinned or cand.importance >= salience_threshold):
            rest = cand.legs - {"salience"}
            if not rest:
                continue  # decayed below the threshold since it was stored
            cand = replace(cand, legs=rest)
        out.append(cand)
    return out


def _load(
    db: Database,
    legs: dict[int, set[Leg]],
    scores: dict[int, float],
    query_vec: Vector | None,
    now: str,
    half_life: float | None,
) -> list[Candidate]:
    out = []
    for row in db.query(CHUNKS, (json.dumps(sorted(legs)),)):
        rowid, chunk_id, session_id, text, seq_end, meta, created = row[:7]
        chash, stored_importance, pinned, blob, last_used = row[7:]
        vector = _vector(blob)
        sim = scores.get(int(rowid))
        if sim is None:
            sim = 0.0 if vector is None or query_vec is None else float(np.dot(vector, query_vec))
        importance = effective_importance(
            float(stored_importance),
            pinned=bool(pinned),
            last_used=str(last_used),
            now=now,
            half_life_seconds=half_life,
        )
        out.append(
            Candidate(
                chunk_id=str(chunk_id),
                session_id=str(session_id),
                text=str(text),
                similarity=sim,
                created_at=parse_time(str(created)),
                importance=importance,
                pinned=bool(pinned),
                content_hash=str(chash),
                legs=frozenset(legs[int(rowid)]),
                sequence_end=int(seq_end),
                metadata=json.loads(meta),
                vector=vector,
            )
        )
    return out


def _vector(blob: bytes | None) -> npt.NDArray[np.float32] | None:
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def parse_time(text: str) -> datetime:
    """An Mindfile timestamp as an aware datetime (naive ones are taken as UTC)."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")
