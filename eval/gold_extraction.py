"""The demo gold annotation as a perfect extractor, and scoring visibility against it.

`gold_graph_handler` answers the knowledge-graph extraction program the way a
perfect reader would: for a passage, the gold facts stated in it (at their
first statement or a restatement), the entities they name, the organisations
people belong to, and the earlier accounts read out in it. Running the real
pipeline with it isolates the deterministic part: with a perfect extraction,
visibility must match the gold sets and routes exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dspy_programs.knowledge import ExtractSceneGraph
from dspy_programs.scenes import SceneContinuity, SceneRoster
from eval.rosters import gold_scene_spans
from reveriemem.core.registry import Book
from reveriemem.core.text import fold_small_caps
from reveriemem.models import FakeModel
from reveriemem.source_to_memory.entities import canonical_entities, memberships
from reveriemem.source_to_memory.facts import accounts_of, assign_visibility, presences_from_rosters, relation_facts
from reveriemem.source_to_memory.preparation import roster_rows
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.semantic import extract_scene_graphs


def _normal(text: str) -> str:
    """Words copied from the book file, as the book's text reads them (`fold_small_caps`: "WE rode" is "We rode")."""
    return " ".join(fold_small_caps(text).replace("’", "'").split())


def gold_graph_handler(book: Book, gold: dict[str, Any]):
    """A FakeModel handler answering ExtractSceneGraph (and scene boundaries) from the gold annotation.

    Scene boundaries follow the gold scenes where the candidate spans allow;
    roster judgements defer to the deterministic evidence.
    """
    names = {c.name for c in book.characters}
    orgs = gold.get("organisations", [])

    def person(name: str) -> dict[str, Any]:
        return {"name": name, "type": "person", "aliases": [],
                "affiliations": [o["name"] for o in orgs if name in o["members"]],
                "former_affiliations": [o["name"] for o in orgs if name in o.get("former_members", [])]}

    markers = [_normal(scene["start_marker"])[:40] for scene in gold["scenes"]]

    def handler(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        if signature is SceneContinuity:  # the gold scene boundaries
            return {"new_scene": any(m in _normal(inputs["passage_after"])[:300] for m in markers)}
        if signature is SceneRoster:  # defer to the evidence floor: never raise a status
            return {"roster": [{"character": c.split(" (")[0], "status": "absent"} for c in inputs["characters"]]}
        if signature is not ExtractSceneGraph:
            return {}
        passage = _normal(inputs["passage"])
        relations, entities = [], {}
        for fact in gold["facts"]:
            statements = [fact["evidence"]] + [r["evidence"] for r in fact.get("restated", [])]
            for evidence in statements:
                if _normal(evidence) not in passage:
                    continue
                relations.append({
                    "subject": fact["subject"], "predicate": fact["predicate"], "object": fact["object"],
                    "cause": fact["cause"] or "", "evidence": evidence,
                    "participants": fact.get("participants", []), "witnesses": fact.get("witnesses", []),
                    "shared_with": fact.get("shared_with", []), "common": fact["common"], "private": False,
                })
                for phrase in (fact["subject"], fact["object"]):
                    if phrase in names:
                        entities[phrase] = person(phrase)
        for name in names:
            if any(_normal(form) in passage for form in [name, *book.character(name).aliases]):
                entities[name] = person(name)
        for org in orgs:
            if any(_normal(a).lower() in passage.lower() for a in org["aliases"]):
                entities[org["name"]] = {"name": org["name"], "type": "organisation", "aliases": org["aliases"]}
        accounts = [{"source_opening": a["source_opening"], "source_closing": a.get("source_closing", ""),
                     "evidence": a["evidence"]} for a in gold.get("accounts", []) if _normal(a["evidence"]) in passage]
        return {"entities": list(entities.values()), "relations": relations, "accounts": accounts}

    return handler


@dataclass
class VisibilityScore:
    facts: int = 0
    exact: int = 0  # same characters with the same routes
    same_sets: int = 0  # same characters, routes aside
    missing: list[str] = field(default_factory=list)  # gold facts the pipeline did not produce
    errors: list[str] = field(default_factory=list)


def gold_rosters(reading: BookReading, gold: dict[str, Any]) -> pl.DataFrame:
    """Roster rows on the gold scenes with the gold statuses and deterministic presence intervals."""
    spans = gold_scene_spans(reading, gold)
    evidence = reading.roster_evidence(spans)
    slug = {c.name: c.slug for c in reading.book.characters}
    judged = [{slug[name]: (status, status) for name, status in scene["roster"].items()} for scene in gold["scenes"]]
    return pl.DataFrame(roster_rows(reading, spans, evidence, judged, "gold"))


def score_gold_visibility(book: Book, gold: dict[str, Any]) -> VisibilityScore:
    """Run extraction with the gold extractor and compare every gold fact's visibility."""
    reading = BookReading(book)
    rosters = gold_rosters(reading, gold)
    scenes = [(int(r["scene_id"]), int(r["scene_start"]), int(r["scene_end"]))
              for r in rosters.unique("scene_id").sort("scene_id").iter_rows(named=True)]
    fake = FakeModel(gold_graph_handler(book, gold), name="gold-extraction")
    graphs = extract_scene_graphs(book, scenes, fake.handle())
    table = canonical_entities(book, graphs)
    facts = relation_facts(book, table, graphs)
    assign_visibility(facts, presences_from_rosters(rosters), accounts_of(graphs),
                      [m for m, _ in memberships(table, graphs)], [c.slug for c in book.characters])
    from reveriemem.source_to_memory.visibility import strongest

    name = {c.slug: c.name for c in book.characters}
    by_key = {(f.subject, f.predicate, f.object): f for f in facts}
    score = VisibilityScore()
    for gold_fact in gold["facts"]:
        score.facts += 1
        fact = by_key.get((gold_fact["subject"], gold_fact["predicate"], gold_fact["object"]))
        if fact is None:
            score.missing.append(gold_fact["id"])
            continue
        predicted = {name[c]: g.route for c, g in strongest(fact.grants).items()}
        expected = gold_fact["visibility"]
        if predicted == expected:
            score.exact += 1
        else:
            score.errors.append(f"{gold_fact['id']}: expected {expected}, got {predicted}")
        if set(predicted) == set(expected):
            score.same_sets += 1
    return score
