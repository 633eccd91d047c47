"""The source: what is read, how time is kept, and a read's lifecycle, once for every host.

Both engine adapters stand on this package, and the standalone reader
groups share its cuts and time rules:

- :class:`StreamCut`: where a read starts and where a bounded read ends;
- :class:`ReadSpec`: one frozen value for what is read (streams with their
  cuts, store and credentials, the time keeping, the deserializer, the
  budget of a batch, the size of a task); each adapter maps its options to
  it, with its own option names for the errors (:class:`OptionNames`);
- :class:`TimeKeeping` (:class:`ProcessingTime`, :class:`IngestionTime`,
  :class:`EventTime`):
  the time domain as a value; with :func:`rose` and :func:`is_late`, every
  time rule of the core, once;
- :class:`Frontier`: how far a read has planned, the value hosts checkpoint;
- :class:`SourcePlanner`: ``start``, ``next`` (to the tail or within a
  budget), ``end`` and ``tasks``;
- :class:`ReadTask` and :func:`read_columns`: what one worker reads, and
  the one read path from byte ranges to columns of events;
- :func:`probe_store`: a read checked against its store once, when an
  engine defines it (the store answers, its streams and cut segments exist).
"""

from connector.reader.source.columns import (
    EventColumns,
    EventTimes,
    columns_of,
    read_columns,
    text_of,
)
from connector.reader.source.cuts import StreamCut, start_state
from connector.reader.source.frontier import Frontier, FrontierForms
from connector.reader.source.limits import Budget
from connector.reader.source.planner import SourcePlanner, Step
from connector.reader.source.probe import PROBE_BOUND_S, PROBE_TIMEOUT_S, probe_store
from connector.reader.source.ranges import READ_CHUNK_BYTES, SegmentRange, read_range
from connector.reader.source.spec import OptionNames, ReadSpec, StreamRead
from connector.reader.source.tasks import ReadTask
from connector.reader.source.timekeeping import (
    EventTime,
    IngestionTime,
    ProcessingTime,
    TimeKeeping,
    is_late,
    rose,
)

__all__ = [
    "PROBE_BOUND_S",
    "PROBE_TIMEOUT_S",
    "READ_CHUNK_BYTES",
    "Budget",
    "EventColumns",
    "EventTime",
    "EventTimes",
    "Frontier",
    "FrontierForms",
    "IngestionTime",
    "OptionNames",
    "ProcessingTime",
    "ReadSpec",
    "ReadTask",
    "SegmentRange",
    "SourcePlanner",
    "Step",
    "StreamCut",
    "StreamRead",
    "TimeKeeping",
    "columns_of",
    "is_late",
    "probe_store",
    "read_columns",
    "read_range",
    "rose",
    "start_state",
    "text_of",
]
