"""Memory management: importance, expiry, quotas and consolidation.

The rules are documented in ``docs/memory-management.md``; the engine exposes them as
methods (``mem.pin(...)``, ``mem.sweep_expired()``, ``mem.set_quota(...)``,
``mem.consolidate()``...).

This package's ``__init__`` only re-exports the pure rules and value types: the write
path (:mod:`mindfile.index.pipeline`) imports :mod:`mindfile.manage.importance`, so nothing
imported here may import the engine, storage or memory modules. The working modules
(:mod:`~mindfile.manage.marks`, :mod:`~mindfile.manage.expiry`, :mod:`~mindfile.manage.quota`,
:mod:`~mindfile.manage.consolidate`) are imported directly.
"""

from mindfile.manage.importance import (
    DEFAULT_IMPORTANCE,
    ROLE_IMPORTANCE,
    USE_BOOST,
    boosted,
    decayed,
    effective_importance,
    role_importance,
)
from mindfile.manage.types import (
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
