"""Kafka's option names, answered with what the ``tidemark`` format takes instead.

A user coming from ``format("kafka")`` writes its options by habit; the
format refuses them, as every unknown option, but says what does the same
here (:func:`kafka_answer`) instead of the nearest spelling of a Tidemark
option. The README's "Coming from Kafka" table says the same at length.
"""

from __future__ import annotations

__all__ = ["kafka_answer"]

_CREDENTIALS = ("tlsCaFile", "tlsCertFile", "tlsKeyFile", "tokenFile")
_RETRIES = "the client retries its calls itself"
_PARTITIONS = (
    "a task reads a lineage chain of segments, cut into pieces of equal bytes for "
    "'minPartitions' tasks a batch"
)
_TRIGGERS = "every trigger reads what is there; set a trigger interval"

#: Kafka source options (lower case, as Spark passes them) -> (Kafka's spelling, the
#: tidemark option that does the same or None, what to know about it).
_SOURCE: dict[str, tuple[str, str | None, str]] = {
    name.lower(): (name, option, note)
    for name, option, note in (
        ("kafka.bootstrap.servers", "uri", "'tidemark://host:port'"),
        ("subscribe", "stream", "'scope/stream', comma-separated for several"),
        ("subscribePattern", "stream", "each 'scope/stream' by name, comma-separated"),
        ("assign", "stream", "every segment is read; 'startingStreamCut' picks offsets"),
        (
            "startingOffsets",
            "startingStreamCut",
            "'earliest', 'latest', or byte offsets per segment: '{\"scope/stream/0\": 1024}'",
        ),
        ("endingOffsets", "endingStreamCut", "batch reads"),
        ("startingOffsetsByTimestamp", "startingTimestamp", "one time for every segment"),
        ("endingOffsetsByTimestamp", "endingTimestamp", "one time for every segment"),
        (
            "startingOffsetsByTimestampStrategy",
            None,
            "'startingTimestamp' starts at the first event ingested then or later",
        ),
        ("maxOffsetsPerTrigger", "maxEventsPerTrigger", "or 'maxBytesPerTrigger'"),
        ("minOffsetsPerTrigger", None, _TRIGGERS),
        ("maxTriggerDelay", None, _TRIGGERS),
        ("maxRecordsPerPartition", "minPartitions", _PARTITIONS),
        (
            "failOnDataLoss",
            None,
            "a read never skips data; one whose position was truncated away fails, "
            "naming the segment",
        ),
        (
            "groupIdPrefix",
            "readerGroup",
            "publishes the query's position as a reader group, for its lag; positions "
            "live in the checkpoint, as Kafka's offsets do",
        ),
        ("kafka.group.id", "readerGroup", "publishes the query's position, for its lag"),
        ("includeHeaders", None, "an event has a routing key and a payload only"),
        ("kafkaConsumer.pollTimeoutMs", None, _RETRIES),
        ("fetchOffset.numRetries", None, _RETRIES),
        ("fetchOffset.retryIntervalMs", None, _RETRIES),
    )
}
#: Kafka sink options, likewise.
_SINK: dict[str, tuple[str, str | None, str]] = {
    "kafka.bootstrap.servers": _SOURCE["kafka.bootstrap.servers"],
    "topic": (
        "topic",
        "stream",
        "one 'scope/stream'; each row's routing key and event come from the columns "
        "'routingKeyColumn' and 'eventColumn' name ('routing_key' and 'event')",
    ),
}
_SECURITY_PREFIXES = ("kafka.security.", "kafka.ssl.", "kafka.sasl.")


def kafka_answer(name: str, sink: bool = False) -> str | None:
    """What the ``tidemark`` format takes for Kafka's option ``name``; None for no Kafka option.

    ``name`` in any case (Spark passes option names in lower case).
    """
    lower = name.lower()
    known = (_SINK if sink else _SOURCE).get(lower)
    if known is not None:
        kafka, option, note = known
        if option is None:
            return f"that is Kafka's {kafka!r}, which has no counterpart here: {note}"
        return f"that is Kafka's {kafka!r}; here it is {option!r} ({note})"
    if lower.startswith(_SECURITY_PREFIXES):
        return f"that is a Kafka security setting; here they are the files {list(_CREDENTIALS)!r}"
    if lower.startswith("kafka."):
        return (
            "that is a Kafka client setting, which has no counterpart here: the store is "
            f"'uri', reached with the files {list(_CREDENTIALS)!r}"
        )
    return None
