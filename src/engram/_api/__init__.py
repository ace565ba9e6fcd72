"""The :class:`engram.Engram` methods of each feature, as mixins (thin delegations)."""
