"""The PyFlink adapter: a Tidemark source whose group watermarks become Flink's event time.

- :class:`FlinkTidemarkReader` and its builder (``FlinkTidemarkReader.builder()``);
- :class:`EventTimeOrderingFunction`: a keyed function that emits each key's
  events in event-time order and sends late ones to :data:`LATE_EVENTS`.

It plans and reads through the reader core (:mod:`connector.reader.planning`),
as the Spark adapter does. Import it only where PyFlink is installed
(``pip install ".[flink]"`` in a checkout).
"""

from connector.reader.events import TimeDomain
from connector.reader.planning import StartPosition
from flink_adapter.builder import FlinkTidemarkReader, FlinkTidemarkReaderBuilder
from flink_adapter.graph import OUTPUT_FIELDS
from flink_adapter.ordering import LATE_EVENTS, EventTimeOrderingFunction

__all__ = [
    "LATE_EVENTS",
    "OUTPUT_FIELDS",
    "EventTimeOrderingFunction",
    "FlinkTidemarkReader",
    "FlinkTidemarkReaderBuilder",
    "StartPosition",
    "TimeDomain",
]
