"""An append as messages: Tidemark's frames, split where a message would overflow.

One append is one message when it fits the cluster's messages (with the
local cluster's 8 MiB, a default writer batch does); a larger one is split
at event boundaries into messages of at most ``room`` bytes, published as
one atomic batch. Each message is a temporal operation of its own, stamped
one millisecond after the one before, and says where its events start, how
many there are and the writer's last event number among them.
"""

from __future__ import annotations

from collections.abc import Sequence

from connector.framing import HEADER, encode_frames
from connector.store.boundaries import checkpoints
from connector.store.jetstream.messages import Appended

__all__ = ["split_append"]

#: A frame's bytes beyond its payload and routing key: its header and the key's length.
_FRAME_OVERHEAD = HEADER.size + 2


def split_append(
    events: Sequence[bytes],
    keys: Sequence[str] | None,
    room: int,
    first_event_number: int,
    start: int,
    time_ms: int,
    writer_id: str,
    token: str,
) -> list[tuple[bytes, Appended]]:
    """The messages of an append of ``events`` (numbered from ``first_event_number``).

    ``start`` is the segment offset the first frame lands at, ``time_ms`` the
    first message's ingestion time, ``room`` the most frame bytes a message
    holds (an event larger than that is a message of its own: the store
    refuses events that could not fit). Returns each message's frames and
    what its headers say.
    """
    key_sizes = [len(key.encode()) for key in keys] if keys else None
    whole = sum(map(len, events)) + _FRAME_OVERHEAD * len(events) + sum(key_sizes or ())
    if whole <= room:  # the usual case: one message, sized without a walk over the events
        return [
            _message(
                events, keys, 0, len(events), first_event_number, start, time_ms, writer_id, token
            )
        ]
    messages: list[tuple[bytes, Appended]] = []
    begin, size = 0, 0
    for i, event in enumerate(events):
        frame = _FRAME_OVERHEAD + len(event) + (key_sizes[i] if key_sizes else 0)
        if size + frame > room and i > begin:
            messages.append(
                _message(
                    events, keys, begin, i, first_event_number, start, time_ms, writer_id, token
                )
            )
            start, time_ms = messages[-1][1].end, time_ms + 1
            begin, size = i, 0
        size += frame
    messages.append(
        _message(
            events, keys, begin, len(events), first_event_number, start, time_ms, writer_id, token
        )
    )
    return messages


def _message(
    events: Sequence[bytes],
    keys: Sequence[str] | None,
    begin: int,
    stop: int,
    first_event_number: int,
    start: int,
    time_ms: int,
    writer_id: str,
    token: str,
) -> tuple[bytes, Appended]:
    payloads = events[begin:stop]
    message_keys = keys[begin:stop] if keys else None
    frames = encode_frames(payloads, time_ms, message_keys)
    return frames, Appended(
        time_ms=time_ms,
        start=start,
        end=start + len(frames),
        events=stop - begin,
        writer_id=writer_id,
        last_event_number=first_event_number + stop - 1,
        token=token,
        checkpoints=tuple(checkpoints(start, payloads, message_keys)),
    )
