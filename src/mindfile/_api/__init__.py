"""The :class:`mindfile.Mindfile` methods of each feature, as mixins (thin delegations)."""
