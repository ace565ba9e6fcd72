"""The base of the feature mixins: typed access to the :class:`mindfile.Mindfile` they are."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from mindfile.engine import Mindfile

__all__ = ["Facet"]


class Facet:
    """A group of :class:`mindfile.Mindfile` methods that delegate to a feature package.

    The feature functions take the engine; ``_mindfile`` is ``self`` typed as one.
    """

    __slots__ = ()

    @property
    def _mindfile(self) -> Mindfile:
        return cast("Mindfile", self)
