"""The ``tidemark`` data source: one class Spark instantiates for every read and write.

Options are checked as early as Spark lets a Python data source check them:

- reads: every option that does not depend on batch or streaming is checked by
  ``schema()``, which Spark calls in ``load()``, and so is the store, once
  (:func:`~connector.reader.source.probe_store`): it must answer within 5 s,
  every stream read must exist and every segment a cut names must be its
  stream's; the rest (``endingStreamCut``
  on a streaming read, per-trigger limits on a batch read) by ``reader()``,
  which Spark calls when it plans a batch read, or ``streamReader()``, which
  Spark calls when a started query initializes its source, before any batch.
- writes: ``writer()`` runs when ``save()`` plans the write; ``streamWriter()``
  when a started query plans its first micro-batch, before any task runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from connector.errors import InvalidArgumentError
from connector.reader.source import probe_store
from spark_adapter.options import (
    SinkOptions,
    for_batch,
    for_stream,
    idle_wait_ms,
    idle_watermark_step_ms,
    min_partitions,
    read_spec,
    reader_group,
    stall_log_after_ms,
)
from spark_adapter.reading import TidemarkBatchReader, TidemarkStreamReader
from spark_adapter.schema import tidemark_schema
from spark_adapter.sink import TidemarkBatchWriter, TidemarkStreamWriter

__all__ = ["TidemarkDataSource"]


class TidemarkDataSource(DataSource):
    """Reads streams of a Tidemark store (batch and streaming) and writes events to one.

    Register it with :func:`spark_adapter.register`; then use the format
    ``tidemark``. Every error about an option is an
    :class:`~connector.errors.InvalidArgumentError` naming the option.
    """

    @classmethod
    def name(cls) -> str:
        """The format's name: ``tidemark``."""
        return "tidemark"

    def schema(self) -> StructType:
        """The columns of a read (see :func:`spark_adapter.schema.tidemark_schema`).

        Raises:
            InvalidArgumentError: naming a bad option, or a segment a cut names that its
                stream does not have.
            StoreUnavailableError: naming the store's URI, when it did not answer within 5 s.
            NotFoundError: naming a stream the store does not have.
        """
        spec = read_spec(self.options)
        min_partitions(self.options)  # checked before the query starts
        probe_store(spec)
        return tidemark_schema(spec.deserializer, spec.time)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A bounded reader from ``startingStreamCut`` to ``endingStreamCut`` (or ``latest``)."""
        spec = for_batch(read_spec(self.options))
        group = reader_group(self.options)
        if group is not None:
            msg = (
                f"option 'readerGroup' ({group[1]!r}) applies to streaming reads only: "
                "a batch read commits no position"
            )
            raise InvalidArgumentError(msg)
        return TidemarkBatchReader(spec, schema, min_partitions(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """An unbounded reader from ``startingStreamCut``; ``readerGroup`` publishes positions."""
        spec = for_stream(read_spec(self.options))
        return TidemarkStreamReader(
            spec,
            schema,
            reader_group(self.options),
            stall_log_after_ms(self.options),
            min_partitions(self.options),
            idle_wait_ms(self.options),
            idle_watermark_step_ms(self.options),
        )

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """A batch writer; refuses ``overwrite`` (a stream only grows)."""
        return TidemarkBatchWriter(SinkOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        """A micro-batch writer; refuses ``overwrite`` (complete output mode)."""
        return TidemarkStreamWriter(SinkOptions.parse(self.options), schema, overwrite)
