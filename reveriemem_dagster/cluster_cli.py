"""`reveriemem cluster-build`: a book's memory built by the workers of a Dask cluster (docs/deploy.md)."""

from __future__ import annotations

import os

import click

from reveriemem.core.registry import load_book


@click.command("cluster-build")
@click.argument("book")
@click.option("--scheduler", default=lambda: os.environ.get("REVERIEMEM_DASK_SCHEDULER", ""),
              help="The Dask scheduler's address, e.g. tcp://10.0.0.5:8786 (default: $REVERIEMEM_DASK_SCHEDULER).")
@click.option("--lm", default="", help="Model for this build (overrides $REVERIEMEM_LM on the workers).")
@click.option("--embedder", default="", help="Embedding model (overrides $REVERIEMEM_EMBEDDER on the workers).")
@click.option("--parallel", default=4, show_default=True, type=click.IntRange(1, 256),
              help="Character partitions run at once (each step on any free worker).")
@click.option("--force", is_flag=True, help="Rebuild every partition, even those already up to date.")
def cluster_build(book: str, scheduler: str, lm: str, embedder: str, parallel: int, force: bool) -> None:
    """Materialise a book's memory with every step on a Dask cluster.

    The Dagster instance ($DAGSTER_HOME/dagster.yaml, PostgreSQL for several
    machines) and the store ($REVERIEMEM_STORE, e.g. s3://bucket/reveriemem)
    must be the ones the workers use. Partitions already up to date are
    skipped, as with `reveriemem build`; building again after a failure takes
    up only what is left.
    """
    from reveriemem_dagster.cluster import build_book_on_cluster

    if not scheduler:
        raise click.ClickException("Name the Dask scheduler with --scheduler or $REVERIEMEM_DASK_SCHEDULER.")
    load_book(book)
    report = build_book_on_cluster(book, scheduler, lm, embedder, click.echo, parallel=parallel, force=force)
    click.echo(f"{book}: {report.runs} runs on the cluster in {report.seconds:.1f}s; {len(report.ran)} partitions "
               f"materialised, {len(report.skipped)} up to date and skipped.")
