"""Rolling-summary state with an epoch compare-and-swap.

The state lives in ``session_state.state_json`` under ``summary_state`` as
``{"summary", "epoch", "upper_sequence", "updated_at"}``. A write names the epoch it
read; it applies only if that is still the stored epoch (a missing state is epoch 0)
and then stores ``expected_epoch + 1``. The check and the write are one conditional
``UPDATE`` inside a ``BEGIN IMMEDIATE`` transaction, so of any number of writers (threads
or processes) holding the same expected epoch exactly one applies; the others get
``applied=False`` and the current epoch, and should re-read before trying again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.pipeline import check_id, dump_json
from mindfile.memory._write import check_text
from mindfile.memory.types import SummaryState, SummaryWriteOutcome
from mindfile.storage.db import utcnow

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps

__all__ = ["MAX_SUMMARY_CHARS", "read_summary_state", "write_summary_state"]

MAX_SUMMARY_CHARS = 200_000
_MAX_EPOCH = 2**62


def read_summary_state(engine: StoreDeps, session_id: str) -> SummaryState | None:
    """The session's rolling summary, or None if none was ever written."""
    check_id(session_id, "session_id")
    data = engine.stores.session_state.read_summary(session_id)
    if data is None:
        return None
    return SummaryState(
        summary=str(data.get("summary", "")),
        upper_sequence=int(data.get("upper_sequence", -1)),
        epoch=int(data.get("epoch", 0)),
        updated_at=data.get("updated_at"),
    )


def write_summary_state(
    engine: StoreDeps, session_id: str, state: SummaryState, expected_epoch: int
) -> SummaryWriteOutcome:
    """Store ``state`` with epoch ``expected_epoch + 1`` if the stored epoch is expected.

    ``state.epoch`` and ``state.updated_at`` are ignored (Mindfile assigns both). With
    ``expected_epoch == 0`` a missing session is created.
    """
    check_id(session_id, "session_id")
    _check(state, expected_epoch)
    now = utcnow()
    blob = dump_json(
        {
            "summary": state.summary,
            "epoch": expected_epoch + 1,
            "upper_sequence": state.upper_sequence,
            "updated_at": now,
        },
        "summary state",
    )
    db, states = engine.db, engine.stores.session_state
    with db.atomic():
        if expected_epoch == 0:
            engine.stores.sessions.upsert(session_id, now, touch=False)
        applied = states.swap_summary(session_id, expected_epoch, blob, now)
        epoch = states.summary_epoch(session_id)
    return SummaryWriteOutcome(applied=applied, epoch=epoch)


def _check(state: Any, expected_epoch: Any) -> None:
    if not isinstance(state, SummaryState):
        raise InvalidInputError("state must be a SummaryState")
    if not isinstance(state.summary, str):
        raise InvalidInputError("summary must be a string")
    if len(state.summary) > MAX_SUMMARY_CHARS:
        raise LimitExceededError(f"a summary is at most {MAX_SUMMARY_CHARS} characters")
    check_text(state.summary, "summary")
    seq = state.upper_sequence
    if isinstance(seq, bool) or not isinstance(seq, int) or not -1 <= seq < 2**63:
        raise InvalidInputError("upper_sequence must be an integer >= -1")
    if (
        isinstance(expected_epoch, bool)
        or not isinstance(expected_epoch, int)
        or not 0 <= expected_epoch < _MAX_EPOCH
    ):
        raise InvalidInputError("expected_epoch must be a non-negative integer")
