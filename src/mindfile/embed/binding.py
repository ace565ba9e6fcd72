"""A store's embedding model: recorded by the first engine that opens the store, and
every later one must use the same (docs/embeddings.md; ``Mindfile.reembed`` moves a
store to another model)."""

from __future__ import annotations

from mindfile.embed import Embedder, embedder_for_model_id, resolve_embedder
from mindfile.errors import ConfigError
from mindfile.storage.meta import DIMS_KEY, MODEL_KEY, MetaStore

__all__ = ["bind_embedder"]


def bind_embedder(meta: MetaStore, spec: str | Embedder | None, *, read_only: bool) -> Embedder:
    """The embedder for a store: ``spec``'s, or (None) the one the store was made with.
    Records the model on first open (not when ``read_only``); a :class:`ConfigError`
    when it differs from the store's."""
    stored = meta.get_many((MODEL_KEY, DIMS_KEY))
    model_id, dims = stored.get(MODEL_KEY), stored.get(DIMS_KEY)
    if spec is None and model_id is not None:
        found = embedder_for_model_id(model_id)
        if found is None:
            raise ConfigError(
                f"this store's vectors were made with {model_id!r}; pass that embedder "
                "to mindfile.open(..., embedder=...)",
                embedding_model=model_id,
            )
        embedder = found
    else:
        embedder = resolve_embedder(spec)
    if model_id is None and read_only:
        return embedder  # nothing stored yet, and nothing may be recorded
    if model_id is None:
        meta.set_default({MODEL_KEY: embedder.model_id, DIMS_KEY: str(embedder.dimensions)})
        stored = meta.get_many((MODEL_KEY, DIMS_KEY))
        model_id, dims = stored[MODEL_KEY], stored[DIMS_KEY]
    if model_id != embedder.model_id or int(dims or 0) != embedder.dimensions:
        raise ConfigError(
            f"this store's vectors were made with {model_id!r} ({dims} dims), not "
            f"{embedder.model_id!r} ({embedder.dimensions} dims); open it with the same "
            "embedder, or move the store to the new one with Mindfile.reembed() "
            "(CLI: mindfile reembed --embedder SPEC)",
            embedding_model=model_id,
        )
    return embedder
