"""The `reveriemem` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path
from reveriemem.core.registry import books_root, list_books, load_book, remove_book
from reveriemem_dagster.cli_books import books_command, estimate_command
from reveriemem_dagster.cli_narrative import COMMANDS as NARRATIVE_COMMANDS
from reveriemem_dagster.cli_runtime import (
    dagster_console_level,
    model_notice,
    output_file,
    prepare_terminal,
    report_failure,
    verbose_requested,
)
from reveriemem_dagster.cli_serve import serve

if TYPE_CHECKING:
    from reveriemem_dagster.build import BuildReport


class ReverieGroup(click.Group):
    """Tells a failure or an interrupt in one or two sentences (the traceback with --verbose), exit code non-zero."""

    argv: list[str] = []

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        verbose, argv = verbose_requested(list(sys.argv[1:] if args is None else args))
        prepare_terminal(verbose)
        self.argv = argv
        return super().main(argv, *rest, **kwargs)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit,
                GeneratorExit):
            raise
        except BrokenPipeError:  # the reader of the output left (`| head`): stop quietly, as a Unix tool does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
            raise click.exceptions.Exit(1) from None
        except BaseException as exc:  # KeyboardInterrupt and Dagster's interrupt error too
            command = next((a for a in self.argv if not a.startswith("-")), "reveriemem")
            raise click.exceptions.Exit(report_failure(exc, command, self.argv)) from exc


@click.group(cls=ReverieGroup)
@click.version_option(package_name="reveriemem")
@click.option("--verbose", is_flag=True, help="Tracebacks, library warnings and loading bars (also after the command).")
def main(verbose: bool) -> None:
    """ReverieMem: perspective-bounded memory for characters of a book.

    Data lives in $REVERIEMEM_HOME (default ./.reveriemem); the model is chosen
    by $REVERIEMEM_LM or --lm (a LiteLLM model string, gguf:/path/model.gguf,
    `bundled` for the tiny offline SmolLM2-135M, or `none`). With no model
    configured, commands use the offline rules (deterministic, no model).
    """


def _notice(lm: str) -> None:
    """Say once which kind of model a command runs on, when it is no model or the tiny bundled one."""
    notice = model_notice(lm)
    if notice:
        click.echo(f"note: {notice}", err=True)


def _register(path: Path, characters: Path | None, name: str | None) -> None:
    from reveriemem_dagster.instance import add_book as register

    book, warnings = register(path, characters, name)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    folder = books_root() / book.slug
    spans = sum(len(c.narrator_spans) for c in book.characters)
    layout = {"one to a line": "each line is read as a paragraph",
              "indented first lines": "a paragraph opens at each indented line"}.get(book.info.get("paragraphs", ""))
    if layout:
        click.echo(f"note: hardly any blank line parts its paragraphs; {layout}.", err=True)
    if book.info.get("speech_marks") == "single":
        click.echo("note: its speech is in single quotation marks; they are read (and quoted back) as double ones.",
                   err=True)
    click.echo(
        f"Registered {book.slug!r}: {book.info['body_words']} words, {len(book.characters)} focus characters "
        f"({', '.join(c.name for c in book.characters)}), {spans} narrator spans, in {folder}."
    )


@main.command("add-book")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--characters", "characters", type=click.Path(path_type=Path),
              help="YAML character file; defaults to the one shipped for the six benchmark novels.")
@click.option("--name", help="The book's name (slug); defaults to the file name without extension.")
def add_book(path: Path, characters: Path | None, name: str | None) -> None:
    """Register a book (plain text) with its focus characters."""
    _register(path, characters, name)


@main.command("remove-book")
@click.argument("book")
def remove_book_command(book: str) -> None:
    """Forget a registered book (its stored memory rows stay until rebuilt)."""
    from reveriemem_dagster.instance import get_instance, unregister_partitions

    record = load_book(book)
    book = record.slug  # as registered, however it was written
    still_used = {c.slug for other in list_books() if other != book for c in load_book(other).characters}
    remove_book(book)
    unregister_partitions(get_instance(), record, still_used)
    click.echo(f"Removed {book!r}.")


def _summarise(report: BuildReport) -> None:
    meta = report.metadata
    scenes = meta.get("scenes", {})
    rosters = meta.get("scene_rosters", {})
    statuses = {k.removeprefix("status_"): v for k, v in rosters.items() if k.startswith("status_")}
    calls = int(report.usage.get("calls", 0))
    cached = int(report.usage.get("cached_calls", 0))
    click.echo(
        f"{report.book}: {scenes.get('scenes', '?')} scenes ({scenes.get('method', '?')}), "
        f"rosters {json.dumps(statuses)}, model calls {calls}" + (f" (+{cached} cached)" if cached else "")
        + f", {report.runs} runs in {report.seconds:.1f}s."
    )
    if report.skipped:
        counts: dict[str, int] = {}
        for status in report.skipped:
            counts[status.asset] = counts.get(status.asset, 0) + 1
        listing = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())
        click.echo(f"Up to date, skipped: {listing} (--force rebuilds them).")
    failed = report.failed
    if failed:
        scenes_failed = sum(s.failed_scenes for s in failed)
        click.echo(f"{scenes_failed} scenes failed in {len(failed)} partitions; `reveriemem build {report.book} "
                   f"--retry-failed` tries them again.")


def _build(book: str, lm: str, embedder: str = "", *, force: bool = False, retry_failed: bool = False,
           quiet: bool = False) -> BuildReport:
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.progress_display import ProgressDisplay

    _notice(lm)
    if quiet:
        return build_book(book, lm=lm, embedder=embedder, force=force, retry_failed=retry_failed,
                          dagster_log_level="CRITICAL")
    with ProgressDisplay() as display:
        return build_book(book, lm=lm, embedder=embedder, progress=display.message, force=force,
                          retry_failed=retry_failed, dagster_log_level=dagster_console_level())


@main.command("build")
@click.argument("book")
@click.option("--lm", default="", help="Model for this build (overrides $REVERIEMEM_LM).")
@click.option("--embedder", default="", help="Embedding model (overrides $REVERIEMEM_EMBEDDER).")
@click.option("--force", is_flag=True, help="Rebuild every partition, even those already up to date.")
@click.option("--retry-failed", is_flag=True,
              help="Also rebuild the partitions that recorded failed scenes (cached answers are reused).")
@click.option("--quiet", "-q", is_flag=True, help="No progress display; only the summary and errors.")
def build(book: str, lm: str, embedder: str, force: bool, retry_failed: bool, quiet: bool) -> None:
    """Materialise a book's memory in the project's Dagster instance.

    Partitions already materialised since the book was registered are skipped,
    and model answers already given are reused from the model cache
    ($REVERIEMEM_MODEL_CACHE=0 turns it off), so an interrupted build resumes.
    """
    book = load_book(book).slug  # as registered, however it was written
    _summarise(_build(book, lm, embedder, force=force, retry_failed=retry_failed, quiet=quiet))


def _as_of_options(command: Any) -> Any:
    command = click.option("--as-of", "as_of", type=int, default=None,
                           help="Bound the character to what they had lived by the end of this scene.")(command)
    return click.option("--as-of-chapter", type=int, default=None,
                        help="Bound the character to what they had lived by the end of this chapter.")(command)


@main.command("ask")
@click.argument("book")
@click.argument("character")
@click.argument("question")
@click.option("--json", "as_json", is_flag=True, help="Print the reply with its whole trace as JSON.")
@click.option("--lm", default="", help="Model for the agent (overrides $REVERIEMEM_LM).")
@click.option("--embedder", default="", help="Embedding model (default: the one the memory was built with).")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="At most this many Self-Probe rounds.")
@_as_of_options
def ask(book: str, character: str, question: str, as_json: bool, lm: str, embedder: str, rounds: int,
        as_of: int | None, as_of_chapter: int | None) -> None:
    """Ask CHARACTER (any alias) of BOOK a question; the reply rests only on what they could know."""
    book, character, question = _typed(book), _typed(character), _typed(question)
    if not question.strip():
        raise click.ClickException("The question is empty; ask CHARACTER something, e.g. \"Where were you that night?\"")
    _notice(lm)
    from reveriemem.inference.session import open_session
    from reveriemem_dagster.conversation import render_turn, turn_json

    session = open_session(book, character, lm=lm, embedder=embedder, as_of_scene=as_of,
                           as_of_chapter=as_of_chapter, rounds=rounds)
    turn = session.agent.respond(question, as_of=session.as_of)
    if as_json:
        click.echo(json.dumps(turn_json(session, turn), ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(render_turn(session, turn))


@main.command("chat")
@click.argument("book")
@click.argument("character")
@click.option("--lm", default="", help="Model for the agent (overrides $REVERIEMEM_LM).")
@click.option("--embedder", default="", help="Embedding model (default: the one the memory was built with).")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="At most this many Self-Probe rounds.")
@_as_of_options
def chat(book: str, character: str, lm: str, embedder: str, rounds: int, as_of: int | None,
         as_of_chapter: int | None) -> None:
    """Talk with CHARACTER of BOOK; history and emotional state carry over turns (/trace, /quit, Ctrl-C)."""
    book, character = _typed(book), _typed(character)
    _notice(lm)
    from reveriemem.inference.session import open_session
    from reveriemem_dagster.conversation import chat_loop

    session = open_session(book, character, lm=lm, embedder=embedder, as_of_scene=as_of,
                           as_of_chapter=as_of_chapter, rounds=rounds)
    chat_loop(session, _read_line, click.echo)


def _typed(text: str) -> str:
    """What the user typed, its bytes that are not UTF-8 (surrogate-escaped by Python) as U+FFFD."""
    from reveriemem.core.user_text import well_formed

    return well_formed(text)


def _read_line(prompt: str) -> str:
    """A line from standard input after a prompt on standard output (EOFError at the end of input).

    Bytes that do not decode arrive surrogate-escaped (chat_loop replaces them) rather than ending the chat.
    """
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdin, "errors", "") != "surrogateescape":
        reconfigure(errors="surrogateescape")
    click.echo(prompt, nl=False)
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


@main.command("export")
@click.argument("book")
@click.option("--layer", required=True, type=click.Choice(["scenes", "rosters", "facts", "episodes", "patterns"]),
              help="Which stored rows to write.")
@click.option("--character", default=None,
              help="Only rows about this character (any alias); facts: those visible to them, with their route.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default="jsonl", show_default=True)
@click.option("--out", "out_name", default=None, metavar="FILE",
              help="File to write (default: standard output; parquet needs a file).")
def export(book: str, layer: str, character: str | None, fmt: str, out_name: str | None) -> None:
    """Write the stored rows of one memory layer of BOOK, to check who knows what.

    Rows keep their visibility, routes, grants and source offsets; vectors are
    left out. With --character, facts keep only that character's visibility
    entry, route and grants; scenes keep those the character is present in or
    referenced by, with their roster status.
    """
    from reveriemem.core.export import for_character, layer_rows, write_jsonl, write_parquet
    from reveriemem.core.storage import MemoryStore

    registered = load_book(book)
    focus = registered.character(character) if character is not None else None
    out = output_file(out_name, example=f"{layer}.{fmt}", makes_folder=fmt == "parquet")
    if fmt == "parquet" and out is None:
        raise click.UsageError("--format parquet writes a file; give it with --out FILE.")
    store = MemoryStore.for_home()
    rows = layer_rows(store, registered.slug, layer)
    if focus is not None:
        rosters = layer_rows(store, registered.slug, "rosters") if layer == "scenes" else None
        rows = for_character(layer, rows, focus.slug, rosters)
    if out is not None:
        try:
            if fmt == "parquet":
                write_parquet(rows, out)
            else:
                with open(out, "w", encoding="utf-8") as handle:
                    write_jsonl(rows, handle)
        except OSError as error:
            raise click.ClickException(f"Cannot write {out}: {error.strerror or error}.") from None
    else:
        write_jsonl(rows, sys.stdout)
    if out is not None:
        click.echo(f"{rows.height} {layer} rows -> {out}", err=True)


@main.command("chapters")
@click.argument("book")
def chapters(book: str) -> None:
    """List BOOK's chapters with the numbers --as-of-chapter takes, their offsets and scenes.

    Columns: number, start and end offsets of the chapter's prose, the offset
    --as-of-chapter cuts memory at, the scene ids it holds, and its heading.
    Before a build, chapters come from the text and have no scenes or cut.
    """
    from reveriemem_dagster.audit import format_chapters, list_chapters, missing_numbers

    registered = load_book(book)
    listed = list_chapters(registered)
    for line in format_chapters(listed):
        click.echo(line)
    skipped = missing_numbers(listed)
    if skipped:
        click.echo(f"Chapter number(s) {', '.join(map(str, skipped))} have a heading and almost no prose (front matter, "
                   f"contents or a part title), so they are skipped; --as-of-chapter takes the numbers listed.", err=True)
    if not any(c.scene_ids for c in listed):
        click.echo(f"Not built yet: run `reveriemem build {registered.slug}` before using --as-of-chapter.", err=True)


def _built_embedder(book: str, embedder: str) -> str | None:
    """The name of the embedder that built BOOK (from its build manifest); another one is refused."""
    from reveriemem.core.embeddings import embedder_for_book

    return embedder_for_book(book, embedder).name


@main.command("eval")
@click.argument("book")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Folder for results and report.")
@click.option("--items", "items", type=click.Path(path_type=Path), default=None,
              help="A KBF-QA item file (JSONL); default: items generated from the built memory.")
@click.option("--methods", default="", help="Comma-separated methods (default: all); see --list-methods.")
@click.option("--part", type=click.Choice(["train", "held-out"]), default=None,
              help="Keep only generated items of this part.")
@click.option("--limit", type=int, default=None, help="At most this many items (spread over both splits).")
@click.option("--lm", default="", help="Model every method uses (overrides $REVERIEMEM_LM).")
@click.option("--embedder", default="", help="Embedding model (default: the one the memory was built with).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def evaluate(book: str, out: Path, items: Path | None, methods: str, part: str | None, limit: int | None, lm: str,
             embedder: str, quiet: bool) -> None:
    """Run KBF-QA on BOOK: every method on the same items under the same model, with a report.

    Writes per-item results (results.parquet), summary.json and report.md /
    report.html into OUT. Running again with the same OUT resumes where it stopped.
    """
    from eval.runner import RunSpec, run_evaluation

    book = load_book(book).slug  # as registered, however it was written
    _notice(lm)
    spec = RunSpec(book=book, out=out, items=items, methods=[m.strip() for m in methods.split(",") if m.strip()],
                   lm=lm or None, embedder=_built_embedder(book, embedder), part=part, limit=limit)
    outcome = run_evaluation(spec, progress=None if quiet else (lambda line: click.echo(line, err=True)))
    model = outcome.summary["model"]
    click.echo(f"{'method':<26} {'KRf':>6} {'KR':>6} {'KBF':>6}  n (KRf:KR)  model")
    for name, entry in outcome.summary["methods"].items():
        cells = [f"{100 * entry[k]:6.1f}" if entry.get(k) is not None else "     -" for k in ("krf_acc", "kr_acc", "kbf")]
        click.echo(f"{name:<26} {' '.join(cells)}  {entry['n_krf']}:{entry['n_kr']}  {entry.get('model', model)}")
    if outcome.report:
        click.echo(f"Report: {outcome.report[1]}")
    for error in outcome.errors[:5]:
        click.echo(f"warning: {error}", err=True)


@main.command("items")
@click.argument("book")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="JSONL file to write.")
@click.option("--per-split", type=int, default=60, show_default=True, help="Items per character and split.")
@click.option("--lm", default="none", show_default=True,
              help="Model drafting in-world questions from SPOCV facts ('none': cloze items only).")
def items_command(book: str, out: Path, per_split: int, lm: str) -> None:
    """Generate KBF-QA items for BOOK from its built memory and write them as JSONL."""
    from eval.generate import generate_items
    from eval.items import write_items
    from eval.memory import load_book_memory
    from reveriemem.models import open_model

    registered = load_book(book)
    memory = load_book_memory(registered.slug)
    generated = []
    with open_model(lm or None) as handle:
        for character in registered.characters:
            generated += generate_items(registered, character, memory.facts, memory.entities, per_split=per_split,
                                        handle=handle)
    n = write_items(out, generated)
    krf = sum(1 for i in generated if i.split == "KRf")
    click.echo(f"{n} items ({krf} KRf, {n - krf} KR) for {len(registered.characters)} characters -> {out}")


@main.command("compile")
@click.argument("book")
@click.option("--lm", default="", help="Model the programs are compiled for (overrides $REVERIEMEM_LM).")
@click.option("--optimizer", type=click.Choice(["bootstrap", "mipro"]), default="bootstrap", show_default=True,
              help="BootstrapFewShot (demos), or MIPROv2 (instructions and demos; needs optuna).")
@click.option("--train", "train", type=int, default=20, show_default=True,
              help="Generated train-part items to compile on.")
@click.option("--heldout", "heldout", type=int, default=30, show_default=True,
              help="Generated held-out items scored before and after.")
@click.option("--max-demos", type=int, default=2, show_default=True, help="At most this many demos per prompt.")
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="Where to save the compiled program (default: dspy_programs/compiled/inference.json, "
                   "which every agent then loads).")
@click.option("--embedder", default="", help="Embedding model (default: the one the memory was built with).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def compile_command(book: str, lm: str, optimizer: str, train: int, heldout: int, max_demos: int, out: Path | None,
                    embedder: str, quiet: bool) -> None:
    """Compile the agent's prompts (Self-Probe, Pattern, Memory-Fusion) on KBF-QA items of BOOK.

    Items are generated from the built memory: the train part compiles, the
    held-out part is scored before and after. The program is saved as JSON;
    agents load dspy_programs/compiled/inference.json when it exists, or the
    file named by $REVERIEMEM_COMPILED ('none': no compiled program).
    """
    from eval.compile import DEFAULT_COMPILED, compile_inference
    from eval.runner import RunSpec, load_items, select_items

    registered = load_book(book)
    built = _built_embedder(registered.slug, embedder)
    items = load_items(registered, RunSpec(book=registered.slug, out=Path(".")))
    train_items = select_items(items, "train", train)
    heldout_items = select_items(items, "held-out", heldout)
    target = out if out is not None else DEFAULT_COMPILED
    outcome = compile_inference(registered, lm or None, train_items=train_items, heldout_items=heldout_items,
                                optimizer=optimizer, max_demos=max_demos, out=target, embedder=built,
                                progress=None if quiet else (lambda line: click.echo(line, err=True)))
    block = outcome.block
    click.echo(f"{block['optimizer']} on {block['train']} train items; {block['split']} items: {block['heldout']}; "
               f"model {block['model']}")
    click.echo(f"{'':<8} {'KRf':>6} {'KR':>6} {'KBF':>6}  n (KRf:KR)")
    for when in ("before", "after"):
        entry = block[when]["reveriemem"]
        cells = [f"{100 * entry[k]:6.1f}" if entry.get(k) is not None else "     -" for k in ("krf_acc", "kr_acc", "kbf")]
        click.echo(f"{when:<8} {' '.join(cells)}  {entry['n_krf']}:{entry['n_kr']}")
    click.echo(f"Demos per prompt: {', '.join(f'{k} {v}' for k, v in block['demos'].items())}")
    if block.get("calls"):
        click.echo("Model calls: " + ", ".join(f"{phase} {used['calls']}" for phase, used in block["calls"].items()))
    if block.get("note"):
        click.echo(f"Note: {block['note']}")
    click.echo(f"Saved {outcome.program} (summary: {outcome.summary})")


@main.command("demo")
@click.option("--lm", default="", help="Model for the demo (default: $REVERIEMEM_LM, else the offline rules).")
def demo(lm: str) -> None:
    """Register the embedded demo story (once), build its memory, and ask one character one question."""
    from reveriemem_dagster.conversation import demo_question

    if DEMO_SLUG not in list_books():
        _register(demo_book_path(), demo_characters_path(), DEMO_SLUG)
    _summarise(_build(DEMO_SLUG, lm))
    click.echo("")
    click.echo(demo_question(lm))


main.add_command(books_command)
main.add_command(estimate_command)
main.add_command(serve)
for _command in NARRATIVE_COMMANDS:  # Task 2: story, judge, scripts
    main.add_command(_command)

from reveriemem_dagster.cluster_cli import cluster_build  # noqa: E402

main.add_command(cluster_build)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
