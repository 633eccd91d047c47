"""What a job records when it starts: which streams feed which writer (a stage of a pipeline).

A pipeline of jobs chained through Tidemark streams is a chain of stages
(seed 001): each stage's *input watermark* is the event time its reader
group has reached, its *output watermark* what its writer asserts on the
stream it writes. The store knows both, but not which belongs to which: a
job says so when it starts, with a :class:`StageLink` kept in the store's
state under ``stage/<scope of the output stream>/<stage name>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from connector.errors import InvalidArgumentError
from connector.names import StreamId

__all__ = ["STAGE_KEY_PREFIX", "StageLink", "stage_key"]

#: Where stages keep their links: ``stage/scope/name``.
STAGE_KEY_PREFIX = "stage/"


def stage_key(scope: str, name: str) -> str:
    """The state key of stage ``name`` of ``scope`` (``name`` empty: the scope's prefix)."""
    return f"{STAGE_KEY_PREFIX}{scope}/{name}"


@dataclass(frozen=True)
class StageLink:
    """One stage: what it reads, the stream it writes and whose assertions are its output.

    Attributes:
        name: the stage (a Spark query: ``spark-<query id>``; a Flink job:
            its sink's writer id prefix).
        engine: what runs it (``spark``, ``flink``).
        inputs: the streams it reads (``scope/stream``); may be empty when
            the job did not say.
        output: the stream it writes (``scope/stream``).
        writer: the writer id whose assertions are the output watermark,
            or with ``writer_is_prefix`` the prefix of several (a Flink
            sink's subtasks, ``<prefix>-<index>``).
        group: the reader group (``scope/group``) whose position the store
            keeps for it, if any: its event time is the input watermark;
            None: the input streams' asserted event time stands in.
    """

    name: str
    engine: str
    inputs: tuple[str, ...]
    output: str
    writer: str
    writer_is_prefix: bool = False
    group: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            msg = f"a stage needs a name, got {self.name!r}"
            raise InvalidArgumentError(msg)
        for stream in (*self.inputs, self.output):
            StreamId.parse(stream)  # raises naming a bad stream name
        object.__setattr__(self, "inputs", tuple(self.inputs))

    @property
    def scope(self) -> str:
        """The scope the link is kept in: its output stream's."""
        return StreamId.parse(self.output).scope

    @property
    def key(self) -> str:
        """The state key the link is kept under."""
        return stage_key(self.scope, self.name)

    def writes_as(self, writer_id: str) -> bool:
        """Whether ``writer_id`` is (one of) the stage's writers."""
        if self.writer_is_prefix:
            return writer_id.startswith(f"{self.writer}-")
        return writer_id == self.writer

    def to_json(self) -> bytes:
        """The link as stored (JSON, keys sorted: the same link is the same bytes)."""
        value: dict[str, Any] = {
            "name": self.name,
            "engine": self.engine,
            "inputs": list(self.inputs),
            "output": self.output,
            "writer": self.writer,
            "writer_is_prefix": self.writer_is_prefix,
            "group": self.group,
        }
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> StageLink:
        """Reads :meth:`to_json`'s output; InvalidArgumentError naming a value that is not one."""
        try:
            value = json.loads(data)
            return cls(
                name=str(value["name"]),
                engine=str(value["engine"]),
                inputs=tuple(str(s) for s in value["inputs"]),
                output=str(value["output"]),
                writer=str(value["writer"]),
                writer_is_prefix=bool(value.get("writer_is_prefix", False)),
                group=None if value.get("group") is None else str(value["group"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            msg = f"invalid stage link {data!r:.200}: {error!r}"
            raise InvalidArgumentError(msg) from None
