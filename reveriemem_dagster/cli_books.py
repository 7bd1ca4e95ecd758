"""`reveriemem books` (what is built, per book) and `reveriemem estimate` (calls, tokens, dollars, time)."""

from __future__ import annotations

import click

from reveriemem.core.registry import list_books, load_book
from reveriemem.core.settings import data_home


@click.command("books")
@click.argument("book", required=False)
def books_command(book: str | None) -> None:
    """List the registered books with what is built: rows per layer, and the model and embedder that built it."""
    from reveriemem_dagster.status import book_status

    slugs = [load_book(book).slug] if book else list_books()
    if not slugs:
        click.echo(f"No books registered in {data_home()}.")
    for slug in slugs:
        click.echo("\n".join(book_status(slug).lines()))


@click.command("estimate")
@click.argument("book")
@click.option("--lm", default="", help="The model the build would use (default: $REVERIEMEM_LM, else none).")
@click.option("--latency", type=float, default=None,
              help="Seconds per model call to assume (default: 2 for a hosted model, 3 for the bundled one).")
def estimate_command(book: str, lm: str, latency: float | None) -> None:
    """Print the model calls, tokens, dollars and wall time a build of BOOK would need, before any model call.

    Dry-runs the whole build in a scratch data home with a recording stand-in
    model (the named model is never called) and counts every prompt with the
    cl100k tokenizer; completion sizes are assumptions, listed in the output.
    Dollars come from LiteLLM's price table; wall time assumes
    $REVERIEMEM_MAX_CONCURRENCY calls at a time (default 8) of --latency seconds.
    """
    from reveriemem.models.backends import resolve_spec
    from reveriemem.source_to_memory.cost import build_cost
    from reveriemem.source_to_memory.estimate import dry_run, format_estimate
    from reveriemem_dagster.build import build_book

    load_book(book)
    spec = resolve_spec(lm or None)
    figures = dry_run(book, build_book)
    click.echo(format_estimate(figures, spec.name))
    priced = spec.target if spec.kind == "litellm" and spec.target else spec.name
    for line in build_cost(figures, priced, spec.kind, latency).lines(figures):
        click.echo(line)
    if spec.kind == "none":
        click.echo("With no model (the default) a build makes none of these calls; name one with --lm to price it.")
