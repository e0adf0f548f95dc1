"""The model-change rule: one collection, one model.

A command that embeds into an existing collection with another model than the one its
vectors came from is refused (exit 2, nothing fetched or written), `--full` or not: a
pass would leave the collection answering searches with two models' vectors (or, every
page re-embedded, with another model than the one the applications embed their queries
with), which no count or audit notices when the vector size is the same. The way to
change models is `pagesync reindex --embedder NEW` (a new collection, switched to whole
when verified). A collection that holds no points decides nothing (the caller asks).

Pure: what the collection holds is looked up by the caller (`sync.edges.stored_model`).
"""

from __future__ import annotations

__all__ = ["model_change_refusal"]


def model_change_refusal(
    collection: str,
    *,
    was: str | None,
    was_size: int | None,
    model_id: str,
    dimension: int,
    name: str,
    was_name: str | None = None,
) -> str | None:
    """The one-line refusal when embedding into `collection` with `model_id` (`dimension`-d,
    given as `--embedder name`) would mix or switch models, else None.

    `was`: the model the collection's vectors came from (None: not known); `was_size`:
    their size (None: no collection, or not known); `was_name`: the `--embedder` name of
    `was`, when pagesync has it."""
    other_size = was_size is not None and was_size != dimension
    other_model = was is not None and was != model_id
    if not (other_size or other_model):
        return None
    if other_size:
        of = f" (of {was!r})" if was else ""
        line = (
            f"collection {collection!r} holds {was_size}-dimensional vectors{of} but --embedder {name} makes "
            f"{dimension}-dimensional ones ({model_id!r})"
        )
    else:
        line = (
            f"collection {collection!r} holds vectors of {was!r}, this would embed with {model_id!r} "
            f"(--embedder {name}) and the collection would mix both models"
        )
    line += f": switch models with `pagesync reindex --embedder {name}` (a new collection, switched to when verified)"
    if was_name:
        line += f", or keep the model with --embedder {was_name} (or leave --embedder out)"
    return line
