"""The Task 2 commands: `reveriemem story`, `reveriemem judge` and `reveriemem scripts`.

Registered on the main group by one line at the bottom of `reveriemem_dagster/cli.py`.
The logic lives in `reveriemem.narrative` and `eval.narrative_runner`; these commands
only parse options and print.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from reveriemem.narrative.methods import method_names, tell
from reveriemem.narrative.scripts import dump_script, load_script

METHOD_HELP = "Story method: " + ", ".join(method_names()) + "."


@click.command("story")
@click.argument("book")
@click.option("--script", "script_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A script in our YAML format, or a BookWorld experiment preset (JSON).")
@click.option("--method", default="reveriemem", show_default=True, type=click.Choice(method_names()),
              help=METHOD_HELP)
@click.option("--lm", default="", help="Generator model (default: $REVERIEMEM_LM); `none` for the deterministic path.")
@click.option("--json", "as_json", is_flag=True, help="Print the story and its log as JSON.")
def story(book: str, script_path: Path, method: str, lm: str, as_json: bool) -> None:
    """Play a script with BOOK's characters and print the story and its log.

    Each ReverieMem character acts through its own agent, bounded at the script's point;
    the log shows every move's audience and the facts its agent used.
    """
    script = load_script(script_path)
    script.book = script.book or book
    if script.book != book:
        raise click.ClickException(f"The script is written for {script.book!r}, not {book!r}.")
    told = tell(script, method, lm)
    if as_json:
        click.echo(json.dumps(told.to_dict(), indent=1))
        return
    click.echo(f"# {script.title} ({method}, generator {told.model})\n")
    click.echo(told.text)
    click.echo("\n# Log\n")
    click.echo(told.render_log() or "(no moves: this method writes the story in one go)")
    click.echo(f"\nSteps: {', '.join(f'{k}={v}' for k, v in told.steps.items())}; {told.calls} model calls; "
               f"{told.seconds:.1f}s")


@click.command("judge")
@click.argument("book")
@click.option("--script", "scripts", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A script file (repeatable; default: the scripts shipped for BOOK).")
@click.option("--methods", default="", help="Comma-separated methods, the first compared with each other "
              "(default: reveriemem, direct, hollmwood, bookworld and the three ablations).")
@click.option("--lm", default="", help="Generator model for every method.")
@click.option("--judge-lm", default="", help="Judge model, configured apart from the generator (none: stories only).")
@click.option("--dimensions", default="", help="Comma-separated dimension names to judge (default: all five).")
@click.option("--limit", type=int, default=None, help="At most this many scripts.")
@click.option("--turns", type=int, default=None, help="Moves per character per stage for every script.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: $REVERIEMEM_HOME/narrative/BOOK); a rerun resumes it.")
def judge(book: str, scripts: tuple[Path, ...], methods: str, lm: str, judge_lm: str, dimensions: str,
          limit: int | None, turns: int | None, out: Path | None) -> None:
    """Run a Task 2 batch on BOOK: stories, pairwise judgements, summary.json and the report."""
    from eval.narrative_runner import DEFAULT_METHODS, NarrativeSpec, run_narrative
    from reveriemem.core.settings import data_home

    names = [m.strip() for m in methods.split(",") if m.strip()] or list(DEFAULT_METHODS)
    dims = [d.strip() for d in dimensions.split(",") if d.strip()]
    folder = out or data_home() / "narrative" / book
    spec = NarrativeSpec(book, folder, list(scripts), names, lm, judge_lm, dims, limit, turns)
    summary = run_narrative(spec, progress=lambda msg: click.echo(msg, err=True))
    click.echo(f"{len(summary['scripts'])} scripts x {len(names)} methods; {summary['judgements']} judgements "
               f"(generator {summary['model']}, judge {summary['judge_model'] or 'none'})")
    for row in summary["win_rates"]:
        click.echo(f"{row['first']} vs {row['second']} [{row['mode']}] {row['short']}: "
                   f"{100 * row['win_rate']:.1f}% ({row['wins']}/{row['ties']}/{row['losses']})")
    click.echo(f"Report: {folder / 'report.md'} and {folder / 'report.html'}")


@click.command("scripts")
@click.argument("book")
@click.option("--lm", default="", help="Model that drafts the stages (without one: each scene's opening).")
@click.option("--count", default=3, show_default=True, help="How many scripts to draft.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to write the scripts to (default: print them).")
def scripts_command(book: str, lm: str, count: int, out: Path | None) -> None:
    """Draft plot scripts for BOOK from its built scene memory (our YAML format)."""
    from reveriemem.models import open_model
    from reveriemem.narrative.drafting import draft_scripts

    drafted = draft_scripts(book, open_model(lm or None), count=count)
    if not drafted:
        raise click.ClickException(f"No run of scenes in {book} has two focus characters present to draft from.")
    for item in drafted:
        text = f"# drafted by {item.method}\n" + dump_script(item.script)
        if out is None:
            click.echo(text + "---")
        else:
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"{item.script.id}.yaml"
            path.write_text(text, encoding="utf-8")
            click.echo(str(path))


COMMANDS = (story, judge, scripts_command)
