"""Memory management: importance, expiry, quotas and consolidation.

The rules are documented in ``docs/memory-management.md``; the engine exposes them as
methods (``mem.pin(...)``, ``mem.sweep_expired()``, ``mem.set_quota(...)``,
``mem.consolidate()``...).

This package's ``__init__`` only re-exports the pure rules and value types: the write
path (:mod:`engram.index.pipeline`) imports :mod:`engram.manage.importance`, so nothing
imported here may import the engine, storage or memory modules. The working modules
(:mod:`~engram.manage.marks`, :mod:`~engram.manage.expiry`, :mod:`~engram.manage.quota`,
:mod:`~engram.manage.consolidate`) are imported directly.
"""

from engram.manage.importance import (
    DEFAULT_IMPORTANCE,
    ROLE_IMPORTANCE,
    USE_BOOST,
    boosted,
    decayed,
    effective_importance,
    role_importance,
)
from engram.manage.types import (
    ConsolidationRecord,
    ConsolidationReport,
    DecayPolicy,
    Quota,
    QuotaPolicy,
    QuotaUsage,
    SweepResult,
)

__all__ = [
    "DEFAULT_IMPORTANCE",
    "ROLE_IMPORTANCE",
    "USE_BOOST",
    "ConsolidationRecord",
    "ConsolidationReport",
    "DecayPolicy",
    "Quota",
    "QuotaPolicy",
    "QuotaUsage",
    "SweepResult",
    "boosted",
    "decayed",
    "effective_importance",
    "role_importance",
]
