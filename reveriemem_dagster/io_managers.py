"""The project's IO manager: Parquet or LanceDB by asset, keyed by partition.

Which backend and Arrow schema an asset uses is declared once, in
`reveriemem.core.schemas.BY_ASSET`. Every output records its row count, location
and backend as metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from reveriemem.core.schemas import BY_ASSET
from reveriemem.core.settings import data_home, lancedb_uri
from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef
from reveriemem_dagster.partitions import partition_ref


class MemoryIOManager(dg.ConfigurableIOManager):
    """Stores polars frames; re-materialising a partition replaces only its rows."""

    home: str = ""  # empty: REVERIEMEM_HOME or .reveriemem
    lancedb: str = ""  # empty: REVERIEMEM_LANCEDB_URI or <home>/lancedb

    def _parquet(self) -> ParquetStore:
        return ParquetStore(Path(self.home or data_home()) / "parquet")

    def _lance(self) -> LanceStore:
        return LanceStore(self.lancedb or (str(Path(self.home) / "lancedb") if self.home else lancedb_uri()))

    def _write(self, name: str, part: PartitionRef, frame: Any) -> dict[str, Any]:
        backend, schema = BY_ASSET[name]
        store = self._lance() if backend == "lancedb" else self._parquet()
        info = store.write(name, part, frame, schema)
        return {"rows": info.rows, "uri": info.uri, "backend": backend, "partition": part.label()}

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if not context.has_asset_partitions:
            raise dg.Failure(f"The asset {context.asset_key.to_user_string()} must be run for a partition.")
        name = context.asset_key.path[-1]
        metadata = self._write(name, partition_ref(context.asset_partition_key), obj)
        context.add_output_metadata(
            {**metadata, "uri": dg.MetadataValue.path(metadata["uri"]), "rows": dg.MetadataValue.int(metadata["rows"])}
        )

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        name = context.asset_key.path[-1]
        part = partition_ref(context.asset_partition_key)
        backend, _ = BY_ASSET[name]
        frame = self._lance().read(name, part) if backend == "lancedb" else self._parquet().read(name, part)
        return frame.drop("vector") if "vector" in frame.columns else frame
