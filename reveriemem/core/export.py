"""A book's stored memory rows as a user can audit them: who knows what, by which route, from which offset.

`layer_rows` reads one layer of a built book through `MemoryStore` (never a
path of its own), drops the vector column and sorts rows in story order, so
two exports of the same build are identical. `for_character` keeps the rows
that concern one focus character:

- facts: rows whose `visibility` holds the character, with `visibility`,
  `routes` and `visible_from` cut to the character's own entry and `grants`
  to the character's own grants (the parallel lists stay aligned);
- rosters, episodes, patterns: the character's own rows;
- scenes: the scenes the character's roster row marks other than `absent`,
  with that row's `status`, `present_start` and `present_end` beside them.

Nothing here writes to the store; rows leave unchanged apart from the cuts above.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import polars as pl

from reveriemem.core.errors import StorageError
from reveriemem.core.storage import MemoryStore, PartitionRef

LAYERS: dict[str, str] = {  # the export's layer name -> the stored asset (schemas.BY_ASSET)
    "scenes": "scenes",
    "rosters": "scene_rosters",
    "facts": "facts",
    "episodes": "episodes",
    "patterns": "personality_patterns",
}

_ORDER: dict[str, list[str]] = {
    "scenes": ["scene_id"],
    "rosters": ["scene_id", "character"],
    "facts": ["source_start", "fact_id"],
    "episodes": ["character", "scene_id"],
    "patterns": ["character", "pattern_id"],
}

FORMATS = ("jsonl", "parquet")


def ensure_built(store: MemoryStore, book: str, layer: str) -> None:
    """Raise a `StorageError` naming `reveriemem build` when `book`'s `layer` was never stored."""
    asset = _asset(layer)
    if store.manifest(book) is None or store.stored_rows(asset, PartitionRef(book)) is None:
        raise StorageError(f"The memory of {book!r} has not been built; run `reveriemem build {book}` first.")


def layer_rows(store: MemoryStore, book: str, layer: str) -> pl.DataFrame:
    """Every stored row of `layer` for `book`, without vectors, in story order."""
    ensure_built(store, book, layer)
    rows = store.read(_asset(layer), PartitionRef(book))
    return rows.drop([c for c in ("vector", "_distance", "_score") if c in rows.columns]).sort(_ORDER[layer])


def for_character(layer: str, rows: pl.DataFrame, slug: str, rosters: pl.DataFrame | None = None) -> pl.DataFrame:
    """The rows of `layer` that concern the character `slug` (scenes need the book's `rosters`)."""
    if layer == "facts":
        return facts_seen_by(rows, slug)
    if layer == "scenes":
        if rosters is None:
            raise ValueError("Scenes are kept for a character by their rosters; pass the book's rosters.")
        mine = rosters.filter((pl.col("character") == slug) & (pl.col("status") != "absent"))
        return rows.join(mine.select("scene_id", "status", "present_start", "present_end"), on="scene_id",
                         how="inner").sort("scene_id")
    _asset(layer)
    return rows.filter(pl.col("character") == slug)


def facts_seen_by(facts: pl.DataFrame, slug: str) -> pl.DataFrame:
    """Facts whose visibility holds `slug`, each cut to that character's visibility entry, route and grants."""
    kept = facts.filter(pl.col("visibility").list.contains(slug))
    if kept.is_empty():
        return kept
    position = pl.col("visibility").list.eval(pl.element() == slug).list.arg_max()
    return kept.with_columns(
        pl.concat_list(pl.col("routes").list.get(position)).alias("routes"),
        pl.concat_list(pl.col("visible_from").list.get(position)).alias("visible_from"),
        pl.col("grants").list.eval(pl.element().filter(pl.element().struct.field("character") == slug)),
        pl.concat_list(pl.lit(slug)).alias("visibility"),
    )


def write_jsonl(rows: pl.DataFrame, out: TextIO) -> None:
    """One JSON object per row, nested lists and structs kept."""
    if rows.height:
        out.write(rows.write_ndjson())


def write_parquet(rows: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows.write_parquet(path)


def _asset(layer: str) -> str:
    if layer not in LAYERS:
        raise StorageError(f"{layer!r} is not a layer that can be exported (layers: {', '.join(LAYERS)}).")
    return LAYERS[layer]
