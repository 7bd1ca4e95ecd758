"""Semantic-layer assets (paper: Source-to-Memory, "Knowledge graph extraction").

`scene_graphs` (book): the model's entities, relations and reported accounts per
passage of every scene (the only model step; failed passages are recorded and
retried alone on the next run); `entities` (book): canonical entities with
aliases unified across scenes; `memberships` (book): the character-organisation
membership graph; `facts` (book, LanceDB): deduplicated SPOCV facts with their
visibility set, routes, grants and source offsets, embedded for retrieval
bounded with `array_has_any(visibility, [character])`. Without a model, `facts`
holds visibility-tagged evidence units (source sentences) instead. A fact no
focus character could know (the narrator's exposition, a scene none of them
saw) is kept with an empty visibility set: no character's retrieval ever
returns it, but it is part of what the whole book says (what an agent's refusal
compares its memory with) and a fact the boundary did not grant is counted as
such when the boundary is measured.
"""


from typing import Any

import dagster as dg
import polars as pl

from assets.context import ASKS_MODEL, CODE_VERSION, ModelUsage, partition_of
from reveriemem.core import progress
from reveriemem.core.schemas import ENTITIES, MEMBERSHIPS, SCENE_GRAPHS, facts_schema
from reveriemem.core.storage import frame
from reveriemem.source_to_memory.entities import (
    OFFLINE_ENTITY_METHOD,
    canonical_entities,
    entity_rows,
    offline_entities,
)
from reveriemem.source_to_memory.entities import (
    memberships as membership_statements,
)
from reveriemem.source_to_memory.facts import (
    EVIDENCE_METHOD,
    accounts_of,
    assign_visibility,
    evidence_units,
    fact_rows,
    presences_from_rosters,
    relation_facts,
)
from reveriemem.source_to_memory.semantic import extract_scene_graphs, graph_rows, graphs_from_rows
from reveriemem.source_to_memory.visibility import Membership
from reveriemem_dagster.partitions import book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

GROUP = "semantic_layer"


def _scene_triples(scenes: pl.DataFrame) -> list[tuple[int, int, int]]:
    return [(int(r["scene_id"]), int(r["start"]), int(r["end"])) for r in scenes.sort("scene_id").iter_rows(named=True)]


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          kinds={"parquet", "dspy"}, op_tags=ASKS_MODEL,
          check_specs=[dg.AssetCheckSpec("scene_graphs_cover_scenes", asset="scene_graphs",
                                         description="Every scene has at least one passage row.")])
def scene_graphs(context: dg.AssetExecutionContext, lm: LanguageModel, scenes: pl.DataFrame):
    """Per passage of every scene: entities, relations (located in the source) and accounts read out."""
    book = partition_of(context).book
    triples = _scene_triples(scenes)
    handle = lm.handle()
    usage = ModelUsage(handle)
    if handle.lm is None:
        from reveriemem.source_to_memory.semantic import SceneGraph, scene_passages

        graphs = [SceneGraph(p.scene_id, p.index, p.start, p.end, method="heuristic:no-model")
                  for scene_id, start, end in triples for p in scene_passages(book.text, scene_id, start, end)]
    else:
        progress.step_started(book.slug, "scene_graphs", len(triples))
        graphs = extract_scene_graphs(book, triples, handle,
                                      on_scene_done=lambda _scene: progress.unit_done(book.slug, "scene_graphs"))
    for graph in graphs:
        if graph.failed:
            context.log.warning(f"Scene {graph.scene_id} passage {graph.passage}: {graph.error}")
    table = frame(graph_rows(book, graphs), SCENE_GRAPHS)
    failed_scenes = len({g.scene_id for g in graphs if g.failed})
    metadata = {"passages": table.height, "failed_passages": sum(g.failed for g in graphs),
                "failed_scenes": failed_scenes, "relations": int(table["relations"].sum() or 0), **usage.metadata()}
    yield dg.Output(table, metadata=metadata)
    covered = set(table["scene_id"].to_list())
    yield dg.AssetCheckResult(check_name="scene_graphs_cover_scenes",
                              passed=covered == {t[0] for t in triples} and bool(triples),
                              metadata={"scenes": len(triples), "covered": len(covered)})


def _tables(book, scene_graphs: pl.DataFrame, scenes: pl.DataFrame):
    graphs = graphs_from_rows(scene_graphs.to_dicts())
    if any(g.method.startswith("model:") for g in graphs):
        return graphs, canonical_entities(book, graphs), "model"
    return graphs, offline_entities(book, _scene_triples(scenes)), OFFLINE_ENTITY_METHOD


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          kinds={"parquet"})
def entities(context: dg.AssetExecutionContext, scene_graphs: pl.DataFrame, scenes: pl.DataFrame) -> pl.DataFrame:
    """Canonical entities of seven types, aliases unified across scenes."""
    book = partition_of(context).book
    graphs, table, method = _tables(book, scene_graphs, scenes)
    out = frame(entity_rows(book, table, method if method != "model" else _graph_method(graphs)), ENTITIES)
    counts = dict(out.group_by("type").len().iter_rows())
    context.add_output_metadata({"entities": out.height, **{f"type_{k}": int(v) for k, v in counts.items()}})
    return out


def _graph_method(graphs) -> str:
    methods = sorted({g.method for g in graphs if g.method.startswith("model:")})
    return methods[0] if methods else "heuristic"


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          kinds={"parquet"})
def memberships(context: dg.AssetExecutionContext, scene_graphs: pl.DataFrame, entities: pl.DataFrame) -> pl.DataFrame:
    """Who belongs to which organisation, and from when, as the scenes state it."""
    book = partition_of(context).book
    graphs = graphs_from_rows(scene_graphs.to_dicts())
    table = canonical_entities(book, graphs)
    names = dict(zip(entities["entity_id"].to_list(), entities["name"].to_list()))
    rows = [{"book": book.slug, "character": m.character, "organisation": m.organisation,
             "organisation_name": names.get(m.organisation, m.organisation), "scene_id": scene_id,
             "offset": m.offset, "member": m.member, "method": _graph_method(graphs)}
            for m, scene_id in membership_statements(table, graphs)]
    out = frame(rows, MEMBERSHIPS)
    context.add_output_metadata({"statements": out.height, "organisations": out["organisation"].n_unique()})
    return out


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          metadata={"backend": "lancedb"}, kinds={"lancedb"},
          check_specs=[dg.AssetCheckSpec("facts_are_bounded", asset="facts",
                                         description="Facts exist, some character can know some of them, every "
                                                     "visible character has a route, and entity ids resolve.")])
def facts(context: dg.AssetExecutionContext, embedder: EmbeddingModel, scene_graphs: pl.DataFrame,
          scene_rosters: pl.DataFrame, utterances: pl.DataFrame, scenes: pl.DataFrame, entities: pl.DataFrame,
          memberships: pl.DataFrame):
    """SPOCV facts (or offline evidence units) with visibility, embedded for bounded retrieval."""
    book = partition_of(context).book
    graphs, table, _ = _tables(book, scene_graphs, scenes)
    model_scenes = {g.scene_id for g in graphs if g.method.startswith("model:")}
    failed = {g.scene_id: g.error for g in graphs if g.failed}
    facts_list = relation_facts(book, table, graphs) if model_scenes else []
    # Scenes without a usable graph (no model, or the model failed) get evidence units.
    speakers = {int(r["start"]): r["speaker"] for r in utterances.iter_rows(named=True) if r["speaker"]}
    headings = partition_of(context).reading.heading_spans
    for scene_id, start, end in _scene_triples(scenes):
        if scene_id in failed or scene_id not in model_scenes:
            facts_list += evidence_units(book, [(scene_id, start, end)], speakers,
                                         error=failed.get(scene_id), headings=headings)
    member_rows = [Membership(r["character"], r["organisation"], int(r["offset"]), bool(r["member"]))
                   for r in memberships.iter_rows(named=True)]
    assign_visibility(facts_list, presences_from_rosters(scene_rosters), accounts_of(graphs), member_rows,
                      [c.slug for c in book.characters], deaths=partition_of(context).reading.deaths)
    rows = fact_rows(book, facts_list, table)
    if rows:
        for row, vector in zip(rows, embedder.embedder().embed([r["text"] for r in rows])):
            row["vector"] = vector.tolist()
    out = frame(rows, facts_schema(embedder.embedder().dim))
    routes = pl.Series(out["routes"].explode().drop_nulls()).value_counts() if out.height else None
    metadata: dict[str, Any] = {
        "facts": out.height,
        "known_to_nobody": int((out["visibility"].list.len() == 0).sum()) if out.height else 0,
        "evidence_units": int((out["method"] == EVIDENCE_METHOD).sum()) if out.height else 0,
        "failed_scenes": len(failed), "embedder": embedder.embedder().name,
        **({f"route_{k}": int(v) for k, v in routes.iter_rows()} if routes is not None else {}),
    }
    yield dg.Output(out, metadata=metadata)
    yield facts_bounded_check(out, entities)


def facts_bounded_check(out: pl.DataFrame, entities: pl.DataFrame) -> dg.AssetCheckResult:
    known = set(entities["entity_id"].to_list())
    ids = [i for col in ("subject_entity", "object_entity") for i in out[col].drop_nulls().to_list()]
    dangling = sorted({i for i in ids if i not in known})
    empty = int((out["visibility"].list.len() == 0).sum()) if out.height else 0
    misaligned = int((out["visibility"].list.len() != out["routes"].list.len()).sum()) if out.height else 0
    return dg.AssetCheckResult(
        check_name="facts_are_bounded", passed=out.height > empty and not dangling and not misaligned,
        metadata={"facts": out.height, "dangling_entity_ids": len(dangling), "known_to_nobody": empty,
                  "misaligned_routes": misaligned, "examples": ", ".join(dangling[:5])},
    )
