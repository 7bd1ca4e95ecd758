"""KBF-QA assets (paper: "Knowledge Boundary Benchmark").

`kbf_items` (book x character): the character's generated KBF-QA items, one row
per item holding its JSONL record (`eval.generate`: cloze items offline, model
drafts from SPOCV facts with a model). `kbf_report` (book): every method on the
book's items under the configured model (`eval.runner`), written with its report
into `$REVERIEMEM_HOME/eval/<book>/<model>/`. `reader_calibration` (book x character): the
offline reasoner's readings of the character's generated train items, made when the memory is
built (`eval.methods.reveriemem.read_train_items`); an agent chooses its floors over the readings
of all the book's characters (`reveriemem.inference.calibration.load_calibration`).
"""

import json
import tempfile
from pathlib import Path

import dagster as dg
import polars as pl

from assets.context import CODE_VERSION, partition_of
from eval.generate import generate_items
from eval.methods.reveriemem import calibration_agent, read_train_items
from reveriemem.core.schemas import KBF_ITEMS, READER_CALIBRATION
from reveriemem.core.storage import MemoryStore, PartitionRef, frame
from reveriemem.inference.calibration import READER_VERSION, calibration_of
from reveriemem.inference.memory_reader import MemoryReader
from reveriemem_dagster.partitions import book_character_partitions, book_of_pair, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

GROUP = "evaluation"


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=CODE_VERSION, ins={"facts": dg.AssetIn(partition_mapping=book_of_pair),
               "entities": dg.AssetIn(partition_mapping=book_of_pair)},
          kinds={"parquet"},
          check_specs=[dg.AssetCheckSpec("items_well_formed", asset="kbf_items",
                                         description="Every item has five distinct options and a gold that fits "
                                                     "its split; KRf items ask about facts the character sees.")])
def kbf_items(context: dg.AssetExecutionContext, lm: LanguageModel, facts: pl.DataFrame, entities: pl.DataFrame):
    """KBF-QA items put to one character: KRf from facts in F_c, KR from facts outside it."""
    part = partition_of(context)
    book, slug = part.book, part.slug
    if part.outside_book(context):
        yield dg.Output(frame([], KBF_ITEMS), metadata={"in_book": False, "items": 0})
        yield dg.AssetCheckResult(check_name="items_well_formed", passed=True)
        return
    character = part.character
    fact_rows = facts.drop("vector").to_dicts() if "vector" in facts.columns else facts.to_dicts()
    items = generate_items(book, character, fact_rows, entities.to_dicts(), handle=lm.handle())
    rows = [{"book": book.slug, "character": slug, "item_id": i.id, "split": i.split,
             "part": str(i.provenance.get("part") or ""), "method": i.method, "fact_id": i.fact or "",
             "record": json.dumps(i.to_record(), ensure_ascii=False)} for i in items]
    table = frame(rows, KBF_ITEMS)
    visible = {str(r["fact_id"]) for r in fact_rows if slug in (r.get("visibility") or [])}
    wrong_split = [i.id for i in items if (i.fact in visible) != (i.split == "KRf")]
    splits = {str(k): int(v) for k, v in table.group_by("split").len().iter_rows()} if rows else {}
    yield dg.Output(table, metadata={"in_book": True, "items": table.height, "splits": dg.MetadataValue.json(splits)})
    yield dg.AssetCheckResult(check_name="items_well_formed", passed=not wrong_split,
                              metadata={"wrong_split": dg.MetadataValue.json(wrong_split[:20])})


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=f"{CODE_VERSION}+{READER_VERSION}", ins={"facts": dg.AssetIn(partition_mapping=book_of_pair),
               "entities": dg.AssetIn(partition_mapping=book_of_pair)},
          deps=["episodes", "emotion_transitions", "personality_patterns"], kinds={"parquet"})
def reader_calibration(context: dg.AssetExecutionContext, embedder: EmbeddingModel, facts: pl.DataFrame,
                       entities: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """The offline reasoner's readings of one character's generated train items; the floors are chosen over
    the readings of all the book's characters when an agent opens (`reveriemem.inference.calibration`)."""
    part = partition_of(context)
    if part.outside_book(context):
        return dg.Output(frame([], READER_CALIBRATION), metadata={"in_book": False})
    book, character = part.book, part.character
    fact_rows = facts.drop("vector").to_dicts() if "vector" in facts.columns else facts.to_dicts()
    items = [i for i in generate_items(book, character, fact_rows, entities.to_dicts())
             if i.provenance.get("part") == "train"]
    store = MemoryStore.for_home()
    reader = MemoryReader(book.slug, character.slug, embedder.embedder(), store.uri)
    source = f"generated items of {book.slug} for {character.name}, train part"
    read = read_train_items(calibration_agent(reader, character), items, progress=context.log.info)
    rows = [reading.to_row(book.slug, character.slug, item.id, source) for item, reading in read]
    mine = calibration_of([reading for _, reading in read], source)
    return dg.Output(frame(rows, READER_CALIBRATION), metadata={
        "in_book": True, "n_train": len(rows), "reader": READER_VERSION,
        "floors_of_this_character_alone": dg.MetadataValue.json(
            {k: mine.to_dict()[k] for k in ("option_floor", "ratio_floor", "question_floor", "kbf_train")})})


class EvaluationConfig(dg.Config):
    methods: list[str] = []  # empty: every method
    part: str = ""  # "train" or "held-out": only that part of the generated items
    limit: int = 0  # 0: every item


@dg.asset(partitions_def=book_partitions, group_name=GROUP, kinds={"parquet"}, code_version=CODE_VERSION,
          deps=[dg.AssetDep("kbf_items", partition_mapping=book_of_pair)])
def kbf_report(context: dg.AssetExecutionContext, config: EvaluationConfig, lm: LanguageModel,
               embedder: EmbeddingModel) -> dg.MaterializeResult:
    """Every KBF-QA method on the book's items under one model: results, summary.json and the report."""
    from eval.runner import RunSpec, run_evaluation  # the methods load only when an evaluation runs

    book = partition_of(context).book
    store = MemoryStore.for_home()
    records = []
    for character in book.characters:
        records += store.read("kbf_items", PartitionRef(book.slug, character.slug))["record"].to_list()
    handle = lm.handle()
    model = "none" if handle.lm is None else handle.name
    out = store.home / "eval" / book.slug / model.replace("/", "_").replace(":", "_")
    with tempfile.TemporaryDirectory() as scratch:
        items_path = Path(scratch) / "items.jsonl"
        items_path.write_text("\n".join(records) + "\n", encoding="utf-8")
        spec = RunSpec(book=book.slug, out=out, items=items_path, methods=config.methods,
                       part=config.part or None, limit=config.limit or None)
        outcome = run_evaluation(spec, progress=context.log.info, handle=handle, embedder=embedder.embedder())
    table = {name: {k: entry.get(k) for k in ("krf_acc", "kr_acc", "kbf", "n_krf", "n_kr")}
             for name, entry in outcome.summary["methods"].items()}
    return dg.MaterializeResult(metadata={
        "model": model, "items": outcome.summary["items"]["n"], "report": str(outcome.report[1] if outcome.report else ""),
        "summary": dg.MetadataValue.json(table), "answered": outcome.answered, "resumed": outcome.resumed,
    })

