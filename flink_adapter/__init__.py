"""The PyFlink adapter: a Tidemark source whose group watermarks become Flink's event time.

- :class:`FlinkTidemarkReader` and its builder (``FlinkTidemarkReader.builder()``);
- :class:`EventTimeOrderingFunction`: a keyed function that emits each key's
  events in event-time order and sends late ones to :data:`LATE_EVENTS`;
- :class:`FlinkTidemarkWriter` and its builder: a sink that appends a
  DataStream's rows to a stream and can assert the job's watermark there.

It stands on the reader core's source (:mod:`connector.reader.source`), as
the Spark adapter does: the builder maps its options to the core's read
specification, the coordinator plans with the core's planner, the readers
read with its one read path. Import it only where PyFlink is installed
(``pip install tidemark-store[flink]``).

Importing it in a TaskManager's thread-mode interpreter makes PyFlink's
``RuntimeContext`` methods for the task (``get_index_of_this_subtask`` and
its kin) work there, for every function of the job
(:mod:`flink_adapter.runtime_context`).
"""

from connector.reader.events import TimeDomain
from connector.reader.source import StreamCut
from flink_adapter import runtime_context as _runtime_context
from flink_adapter.builder import FlinkTidemarkReader, FlinkTidemarkReaderBuilder
from flink_adapter.ordering import LATE_EVENTS, EventTimeOrderingFunction, late_events
from flink_adapter.rows import OUTPUT_FIELDS
from flink_adapter.sink import FlinkTidemarkWriter, FlinkTidemarkWriterBuilder

__all__ = [
    "LATE_EVENTS",
    "OUTPUT_FIELDS",
    "EventTimeOrderingFunction",
    "FlinkTidemarkReader",
    "FlinkTidemarkReaderBuilder",
    "FlinkTidemarkWriter",
    "FlinkTidemarkWriterBuilder",
    "StreamCut",
    "TimeDomain",
    "late_events",
]

_runtime_context.install()
