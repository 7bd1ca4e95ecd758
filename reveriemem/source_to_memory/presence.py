"""Where a character is present: their presence spans per scene, read from the roster rows.

The one place the per-character layers learn presence (the episodic notes
are built only from text inside these spans, or the character's own lines).
Rosters decide presence; this module only reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl


@dataclass(frozen=True)
class ScenePresence:
    """One scene a character is present for, with the spans of their presence in it."""


    scene_id: int
    status: str
    scene_start: int
    scene_end: int
    source_start: int
    source_end: int
    location: str
    time: str
    atmosphere: str
    spans: tuple[tuple[int, int], ...] = ()  # the presence spans, in story order; source_start..source_end hull them


def presence_spans(rosters: pl.DataFrame, slug: str) -> dict[int, list[tuple[int, int]]]:
    """Where the character `slug` is present, per scene they are present for: scene id -> spans in story order.

    Read from the roster rows (`scene_rosters` or `character_scenes`) whose
    status starts with "present": a row's `presence_spans` column (every
    [start, end) of presence, so a character who leaves and returns has the
    gap left out) when it holds any; else, for older rows and tables without
    the column, its `present_start`..`present_end`; a present row without
    either stands for the whole scene (`scene_start`..`scene_end`). Several
    rows for one scene give all their spans, sorted with overlaps merged.
    """
    mine = rosters.filter((pl.col("character") == slug) & pl.col("status").str.starts_with("present"))
    spans: dict[int, list[tuple[int, int]]] = {}
    for row in mine.iter_rows(named=True):
        found = [(int(a), int(b)) for a, b in row.get("presence_spans") or [] if a is not None and b is not None
                 and b > a]
        if not found:
            found = [bounds for bounds in (_bounds(row, "present_start", "present_end"),
                                           _bounds(row, "scene_start", "scene_end")) if bounds][:1]
        if found:
            spans.setdefault(int(row["scene_id"]), []).extend(found)
    return {scene_id: _merged(found) for scene_id, found in sorted(spans.items())}


def _bounds(row: dict[str, Any], start_key: str, end_key: str) -> tuple[int, int] | None:
    start, end = row.get(start_key), row.get(end_key)
    return (int(start), int(end)) if start is not None and end is not None and end > start else None


def _merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []  # sorted, overlapping spans joined
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def present_scenes(scenes: pl.DataFrame, rosters: pl.DataFrame, slug: str) -> list[ScenePresence]:
    """The scenes a character is present for, in story order, with their presence spans in each."""
    mine = rosters.filter((pl.col("character") == slug) & pl.col("status").str.starts_with("present"))
    statuses = dict(zip(mine["scene_id"].to_list(), mine["status"].to_list()))
    settings = {row["scene_id"]: row for row in scenes.iter_rows(named=True)}
    out = []
    for scene_id, spans in presence_spans(rosters, slug).items():
        scene = settings.get(scene_id, {})
        scene_start = scene.get("start", spans[0][0])
        scene_end = scene.get("end", spans[-1][1])
        out.append(ScenePresence(
            scene_id=scene_id, status=statuses[scene_id], scene_start=int(scene_start),
            scene_end=int(scene_end), source_start=spans[0][0], source_end=spans[-1][1],
            location=scene.get("location") or "", time=scene.get("time") or "",
            atmosphere=scene.get("atmosphere") or "", spans=tuple(spans),
        ))
    return out
