"""The project's IO manager: Parquet or LanceDB by asset, keyed by partition, in one `MemoryStore`.

Where data lives is decided only by `reveriemem.core.storage.MemoryStore.for_home`,
from this IO manager's `home` and `lancedb` (empty: the environment's data
home), the same function every reader uses. Which backend and Arrow schema an
asset uses is declared once, in `reveriemem.core.schemas`; a schema holding
vectors is built for the dimension of the frame's vectors. Every output
records its row count, location and backend as metadata. Storing an asset's
vectors records the book's build manifest (model, embedder, dimension, code
version), taken from the output's `model` and `embedder` metadata or, when
the asset gave none, from the run's tags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from reveriemem.core.built_from import book_version
from reveriemem.core.errors import ReverieMemError
from reveriemem.core.registry import load_book
from reveriemem.core.schemas import BY_ASSET, vector_dim
from reveriemem.core.storage import BuildManifest, MemoryStore, PartitionRef
from reveriemem_dagster.partitions import partition_ref

MODEL_TAG, EMBEDDER_TAG = "reveriemem/lm", "reveriemem/embedder"  # run tags naming what made a build's outputs


class MemoryIOManager(dg.ConfigurableIOManager):
    """Stores polars frames; re-materialising a partition replaces only its rows."""

    home: str = ""  # empty: REVERIEMEM_HOME or .reveriemem
    lancedb: str = ""  # empty: <home>/lancedb for an explicit home, else REVERIEMEM_LANCEDB_URI or <home>/lancedb

    def store(self) -> MemoryStore:
        return MemoryStore.for_home(self.home or None, self.lancedb or None)

    def _write(self, name: str, part: PartitionRef, frame: Any) -> dict[str, Any]:
        info = self.store().write(name, part, frame)
        return {"rows": info.rows, "uri": info.uri, "backend": BY_ASSET[name][0], "partition": part.label()}

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if not context.has_asset_partitions:
            raise dg.Failure(f"The asset {context.asset_key.to_user_string()} must be run for a partition.")
        name = context.asset_key.path[-1]
        part = partition_ref(context.asset_partition_key)
        metadata = self._write(name, part, obj)
        self._record_build(context, part, obj)
        context.add_output_metadata(
            {**metadata, "uri": dg.MetadataValue.path(metadata["uri"]), "rows": dg.MetadataValue.int(metadata["rows"])}
        )

    def _record_build(self, context: dg.OutputContext, part: PartitionRef, obj: Any) -> None:
        """Write the book's build manifest when this output stores vectors made by a named embedder."""
        dim = vector_dim(obj)
        if dim is None or (isinstance(obj, pl.DataFrame) and obj.is_empty()):
            return
        values = {key: getattr(value, "value", value) for key, value in (context.output_metadata or {}).items()}
        tags = _run_tags(context)
        embedder = values.get("embedder") or tags.get(EMBEDDER_TAG)
        if not isinstance(embedder, str) or not embedder:
            return
        model = values.get("model") or tags.get(MODEL_TAG) or "none"
        self.store().write_manifest(BuildManifest.now(part.book, str(model), embedder, dim, self._book_version(part)))

    def _book_version(self, part: PartitionRef) -> str:
        """The version of the registered book this build reads (`core.built_from`); "" when it is not registered."""
        try:
            return book_version(load_book(part.book, Path(self.home).expanduser() if self.home else None))
        except ReverieMemError:
            return ""

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        name = context.asset_key.path[-1]
        frame = self.store().read(name, partition_ref(context.asset_partition_key))
        return frame.drop("vector") if "vector" in frame.columns else frame


def _run_tags(context: dg.OutputContext) -> dict[str, str]:
    try:
        return dict(context.step_context.run_tags)
    except Exception:  # an output context built outside a run (tests) has no step context
        return {}
