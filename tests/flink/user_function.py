"""A user's own keyed function, as a job beside the Tidemark source would hold it.

It calls every method PyFlink documents on ``RuntimeContext`` in ``open``,
keeps each kind of keyed state, sets an event-time timer per row and, when a
timer fires, emits what it saw as JSON. It imports nothing of Tidemark's:
shipped by value (as a job script's classes are), it is the user's code alone.
"""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Types
from pyflink.datastream.functions import AggregateFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

#: The global job parameter the function reads, and its value.
PARAMETER, PARAMETER_VALUE = "user.threshold", "42"


class _Largest(AggregateFunction):
    def create_accumulator(self) -> int:
        return -1

    def add(self, value: int, accumulator: int) -> int:
        return max(value, accumulator)

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return max(a, b)


class EveryContextMethod(KeyedProcessFunction):
    """Per key: counts, lists, maps, sums and the largest of the events' ``n``; a timer per row."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        metrics = runtime_context.get_metrics_group().add_group("user")
        self.rows = metrics.counter("rows")
        self.context = {
            "class": f"{type(runtime_context).__module__}.{type(runtime_context).__name__}",
            "task_name": runtime_context.get_task_name(),
            "parallelism": runtime_context.get_number_of_parallel_subtasks(),
            "max_parallelism": runtime_context.get_max_number_of_parallel_subtasks(),
            "index": runtime_context.get_index_of_this_subtask(),
            "attempt": runtime_context.get_attempt_number(),
            "task_name_with_subtasks": runtime_context.get_task_name_with_subtasks(),
            "parameter": runtime_context.get_job_parameter(PARAMETER, "unset"),
            "absent_parameter": runtime_context.get_job_parameter("user.absent", "default"),
        }
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.LONG()))
        self.times = runtime_context.get_map_state(
            MapStateDescriptor("times", Types.LONG(), Types.LONG())
        )
        self.total = runtime_context.get_reducing_state(
            ReducingStateDescriptor("total", lambda a, b: a + b, Types.LONG())
        )
        self.largest = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("largest", _Largest(), Types.LONG())
        )

    def process_element(self, value: Any, ctx: Any) -> Any:  # noqa: D102
        n = json.loads(value[1])["n"]
        self.rows.inc()
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(n)
        self.times.put(n, ctx.timestamp())
        self.total.add(n)
        self.largest.add(n)
        ctx.timer_service().register_event_time_timer(ctx.timestamp())
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Any:  # noqa: D102
        yield json.dumps(
            {
                "key": ctx.get_current_key(),
                "timer": timestamp,
                "context": self.context,
                "count": self.count.value(),
                "seen": sorted(self.seen.get()),
                "times": {str(n): t for n, t in self.times.items()},
                "total": self.total.get(),
                "largest": self.largest.get(),
            }
        )


class EveryContextMethodInThreadMode(EveryContextMethod):
    """The same, as docs/flink.md says for thread mode: ``import flink_adapter`` first."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        import flink_adapter  # noqa: F401, PLC0415 - PyFlink's RuntimeContext made whole here

        super().open(runtime_context)
