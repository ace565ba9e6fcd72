"""The base of the feature mixins: typed access to the :class:`engram.Engram` they are."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from engram.engine import Engram

__all__ = ["Facet"]


class Facet:
    """A group of :class:`engram.Engram` methods that delegate to a feature package.

    The feature functions take the engine; ``_engram`` is ``self`` typed as one.
    """

    __slots__ = ()

    @property
    def _engram(self) -> Engram:
        return cast("Engram", self)
