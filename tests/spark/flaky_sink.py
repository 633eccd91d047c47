"""The real ``tidemark`` sink with a simulated task failure, for the retry tests.

Format ``tidemark_flaky`` takes the sink's options plus:

- ``failAfter``: how many rows a failing task writes (durably, with the real
  sink code and the real writer id) before it raises;
- ``failOn``: ``first-attempt`` (the retry succeeds), ``every-attempt`` (the
  task, and so the job or micro-batch, fails), or ``never``;
- ``markerDir``: where each simulated failure leaves a file, so a test can
  show the failure really happened.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark import TaskContext
from pyspark.sql.types import StructType

from spark_adapter.options import SinkOptions
from spark_adapter.sink import TidemarkBatchWriter, TidemarkCommitMessage, TidemarkStreamWriter
from spark_adapter.source import TidemarkDataSource

__all__ = ["FlakyTidemarkDataSource"]

_TEST_OPTIONS = ("failafter", "failon", "markerdir")


class _Failure:
    def __init__(self, options: dict[str, str]):
        self.after = int(options.get("failafter", "0"))
        self.on = options.get("failon", "first-attempt")
        self.marker_dir = options.get("markerdir")

    def write(self, write: Any, iterator: Iterator[Any]) -> TidemarkCommitMessage:
        context = TaskContext.get()
        assert context is not None
        if self.on == "never" or (self.on == "first-attempt" and context.attemptNumber() > 0):
            return write(iterator)
        message = write(itertools.islice(iterator, self.after))
        if self.marker_dir:
            name = f"{message.writer_id}-attempt{context.attemptNumber()}-{uuid.uuid4().hex[:6]}"
            open(os.path.join(self.marker_dir, name), "w").close()
        msg = f"simulated task failure after {message.events} events of {message.writer_id}"
        raise RuntimeError(msg)


class _FlakyBatchWriter(TidemarkBatchWriter):
    def __init__(self, failure: _Failure, *args: Any):
        super().__init__(*args)
        self.failure = failure

    def write(self, iterator: Iterator[Any]) -> TidemarkCommitMessage:
        return self.failure.write(super().write, iterator)


class _FlakyStreamWriter(TidemarkStreamWriter):
    def __init__(self, failure: _Failure, *args: Any):
        super().__init__(*args)
        self.failure = failure

    def write(self, iterator: Iterator[Any]) -> TidemarkCommitMessage:
        return self.failure.write(super().write, iterator)


class FlakyTidemarkDataSource(TidemarkDataSource):
    """The ``tidemark`` sink whose tasks fail as the test options say."""

    @classmethod
    def name(cls) -> str:
        return "tidemark_flaky"

    def _split(self) -> tuple[_Failure, SinkOptions]:
        options = {k.lower(): v for k, v in self.options.items()}
        sink = {k: v for k, v in options.items() if k not in _TEST_OPTIONS}
        return _Failure(options), SinkOptions.parse(sink)

    def writer(self, schema: StructType, overwrite: bool) -> _FlakyBatchWriter:
        failure, options = self._split()
        return _FlakyBatchWriter(failure, options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> _FlakyStreamWriter:  # noqa: N802
        failure, options = self._split()
        return _FlakyStreamWriter(failure, options, schema, overwrite)
