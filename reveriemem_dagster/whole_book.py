"""The one job that builds a book's whole memory: `dagster job execute -j whole_book_memory`.

Dagster jobs cover one partitions definition each, and a book's memory spans
two (book, and book x character). This op job, partitioned by book, runs
`reveriemem_dagster.build.build_book`, which materialises the book-level
assets and then every focus character's partition in the same instance
(each as its own recorded run), skipping partitions already up to date.
(No `from __future__ import annotations` here: Dagster reads the annotations.)
"""

import dagster as dg

from reveriemem_dagster.partitions import book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel


@dg.op(description="Materialise a book's whole memory: its book-level assets, then every focus character's "
                   "partition, skipping partitions already up to date.")
def build_whole_book(context, lm: LanguageModel, embedder: EmbeddingModel) -> dict:
    from reveriemem_dagster.build import build_book  # build imports these definitions

    report = build_book(context.partition_key, lm=lm.model, embedder=embedder.model,
                        progress=lambda message: context.log.info(message))
    summary = {"book": report.book, "runs": report.runs, "seconds": round(report.seconds, 1)}
    context.add_output_metadata(summary)
    return summary


@dg.job(partitions_def=book_partitions, description="A book's whole memory: book-level layers and every character.")
def whole_book_memory() -> None:
    build_whole_book()

