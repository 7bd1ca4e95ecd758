"""Task 2 assets, per book: `scripts`, `stories` (one per script and method), `judgements`, `narrative_report`.

Each stage writes into the book's Task 2 folder, `$REVERIEMEM_HOME/narrative/<book>/`
(`eval.narrative_runner`): `scripts` the scripts as YAML (the hand-written ones shipped
for the book, else drafted from its built scene memory), `stories` every method's story
of every script under the configured generator, `judgements` the pairwise judgements
under a judge model named apart (`NarrativeConfig.judge_lm`), `narrative_report`
summary.json with the Markdown and HTML report. Each stage resumes what is stored.
"""

from pathlib import Path

import dagster as dg

from assets.context import CODE_VERSION, partition_of
from reveriemem.core.storage import MemoryStore
from reveriemem_dagster.partitions import book_of_pair, book_partitions
from reveriemem_dagster.resources import LanguageModel

GROUP = "narrative"


class NarrativeConfig(dg.Config):
    methods: list[str] = []  # empty: reveriemem, direct, hollmwood, bookworld and the three ablations
    judge_lm: str = ""  # the judge model (required by `judgements`)
    limit: int = 0  # 0: every script
    turns: int = 0  # 0: each script's own moves per character per stage


def _folder(book: str) -> Path:
    return MemoryStore.for_home().home / "narrative" / book


def _spec(book: str, config: NarrativeConfig, lm: LanguageModel, judge: bool):  # type: ignore[no-untyped-def]
    from eval.narrative_runner import DEFAULT_METHODS, NarrativeSpec

    folder = _folder(book)
    scripts = sorted((folder / "scripts").glob("*.yaml"))
    return NarrativeSpec(book, folder / "run", scripts, config.methods or list(DEFAULT_METHODS), lm.model,
                         config.judge_lm if judge else "", (), config.limit or None, config.turns or None)


@dg.asset(partitions_def=book_partitions, group_name=GROUP, code_version=CODE_VERSION,
          deps=["scenes", "scene_rosters", dg.AssetDep("episodes", partition_mapping=book_of_pair)])
def scripts(context: dg.AssetExecutionContext, lm: LanguageModel) -> dg.MaterializeResult:
    """The book's plot scripts: the hand-written ones shipped with the project, else drafted from its scenes."""
    from reveriemem.narrative.drafting import draft_scripts
    from reveriemem.narrative.scripts import dump_script, load_script, shipped_scripts

    book = partition_of(context).book
    out = _folder(book.slug) / "scripts"
    out.mkdir(parents=True, exist_ok=True)
    shipped = shipped_scripts(book.slug)
    if shipped:
        written = [load_script(p) for p in shipped]
        source = "hand-written"
    else:
        drafted = draft_scripts(book.slug, lm.handle())
        written = [d.script for d in drafted]
        source = ", ".join(sorted({d.method for d in drafted})) or "none"
    for script in written:
        (out / f"{script.id}.yaml").write_text(dump_script(script), encoding="utf-8")
    return dg.MaterializeResult(metadata={"scripts": len(written), "source": source, "folder": str(out)})


@dg.asset(partitions_def=book_partitions, group_name=GROUP, code_version=CODE_VERSION, deps=[scripts])
def stories(context: dg.AssetExecutionContext, config: NarrativeConfig, lm: LanguageModel) -> dg.MaterializeResult:
    """Every method's story of every script under the configured generator (stored, resumable)."""
    from eval.narrative_runner import run_narrative

    summary = run_narrative(_spec(partition_of(context).book.slug, config, lm, judge=False), context.log.info)
    return dg.MaterializeResult(metadata={
        "model": summary["model"], "scripts": len(summary["scripts"]),
        "per_method": dg.MetadataValue.json({m: {k: v[k] for k in ("stories", "moves", "calls", "stages_realised",
                                                                    "stages")} for m, v in summary["per_method"].items()})})


@dg.asset(partitions_def=book_partitions, group_name=GROUP, code_version=CODE_VERSION, deps=[stories])
def judgements(context: dg.AssetExecutionContext, config: NarrativeConfig, lm: LanguageModel) -> dg.MaterializeResult:
    """Pairwise judgements of reveriemem against every other method, both orders, under `judge_lm`."""
    from eval.narrative_runner import run_narrative

    if not config.judge_lm:
        raise dg.Failure("Name the judge model in the run config (judge_lm): it is configured apart from the generator.")
    summary = run_narrative(_spec(partition_of(context).book.slug, config, lm, judge=True), context.log.info)
    return dg.MaterializeResult(metadata={"judge_model": summary["judge_model"], "judgements": summary["judgements"]})


@dg.asset(partitions_def=book_partitions, group_name=GROUP, code_version=CODE_VERSION, deps=[judgements])
def narrative_report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """The Task 2 report of the book's batch (Markdown and self-contained HTML)."""
    from eval.narrative_report import write_report

    folder = _folder(partition_of(context).book.slug) / "run"
    if not (folder / "summary.json").is_file():
        raise dg.Failure(f"No Task 2 batch in {folder}: materialise stories and judgements first.")
    md, html = write_report(folder)
    return dg.MaterializeResult(metadata={"markdown": str(md), "html": str(html)})
