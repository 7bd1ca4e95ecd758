"""Drafting plot scripts from a built book's scene memory (`reveriemem scripts BOOK`).

Consecutive scenes (`scenes_per_script` of them) with at least two focus characters
present make one script: its cast are those characters (present, not merely mentioned),
its point in the story is the end of the scene before them (each character is bounded to
what it could know before the scenes are played; the first scene of the book is its own cut), its locations are the scenes' locations.
With a model, `DraftScript` writes the title and stages from the scenes' settings and
openings; without one, each scene's opening sentence is a stage (labelled as such).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dspy_programs.narrative import draft_script_program
from reveriemem.core.errors import ReverieMemError
from reveriemem.core.registry import load_book
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.core.text import split_sentences
from reveriemem.models import ModelHandle, run_or_fallback, run_program
from reveriemem.narrative.scripts import Location, Script, Stage

PRESENT = ("present_active", "present_silent")


@dataclass
class Drafted:
    script: Script
    method: str


def _scene_line(row: dict[str, Any]) -> str:
    setting = ", ".join(x for x in (row.get("location") or "", row.get("time") or "") if x)
    opening = " ".join(str(row.get("opening") or "").split())[:300]
    return f"Scene {row['scene_id']} (chapter {row['chapter']}{'; ' + setting if setting else ''}): {opening}"


def draft_scripts(book_slug: str, handle: ModelHandle, *, count: int = 3, scenes_per_script: int = 2,
                  store: MemoryStore | None = None) -> list[Drafted]:
    """Up to `count` scripts drafted from the book's built scenes and rosters."""
    book = load_book(book_slug)
    store = store or MemoryStore.for_home()
    if store.manifest(book.slug) is None or not store.stored_rows("scenes", PartitionRef(book.slug)):
        raise ReverieMemError(f"{book.slug} has no built scene memory; run `reveriemem build {book.slug}` first.")
    scenes = store.read("scenes", PartitionRef(book.slug)).sort("scene_id").to_dicts()
    rosters = store.read("scene_rosters", PartitionRef(book.slug)).to_dicts()
    names = {c.slug: c.name for c in book.characters}
    present: dict[int, list[str]] = {}
    for row in rosters:
        if row["status"] in PRESENT and row["character"] in names:
            present.setdefault(int(row["scene_id"]), []).append(names[row["character"]])
    drafted: list[Drafted] = []
    for i in range(0, len(scenes) - scenes_per_script + 1, scenes_per_script):
        group = scenes[i:i + scenes_per_script]
        cast = [n for n in names.values() if any(n in present.get(int(s["scene_id"]), []) for s in group)]
        if len(cast) < 2:
            continue
        lines = [_scene_line(s) for s in group]
        fallback_stages = [(split_sentences(str(s.get("opening") or "")) or [f"Scene {s['scene_id']} plays out."])[0]
                           for s in group]

        def step(h: ModelHandle, cast: list[str] = cast, lines: list[str] = lines) -> tuple[str, list[str]]:
            pred = run_program(h, draft_script_program(), book=book.title, characters=cast, scenes=lines)
            stages = [str(s) for s in pred.stages or [] if str(s).strip()]
            return str(pred.title or "").strip(), stages

        def fallback(stages: list[str] = fallback_stages) -> tuple[str, list[str]]:
            return "", stages

        outcome = run_or_fallback(handle, step, fallback, fallback_method="heuristic:scene-openings")
        title, stages = outcome.value
        stages = stages or fallback_stages
        locations = sorted({str(s.get("location") or "") for s in group} - {""})
        script = Script(
            id=f"{book.slug}-drafted-{len(drafted) + 1:02d}", title=title or f"Scenes {group[0]['scene_id']}-"
            f"{group[-1]['scene_id']}", book=book.slug, cast=cast, as_of_scene=int(scenes[max(i - 1, 0)]["scene_id"]),
            world=book.title, locations=[Location(f"place{k + 1}", name) for k, name in enumerate(locations)],
            stages=[Stage(s) for s in stages], source=f"drafted from scenes {[s['scene_id'] for s in group]}")
        drafted.append(Drafted(script, outcome.method))
        if len(drafted) >= count:
            break
    return drafted
