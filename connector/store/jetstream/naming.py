"""Where Tidemark's things live in JetStream: stream names, subjects, buckets and keys.

Everything of one store is under its *namespace* (``--nats-namespace``,
default ``tidemark``), so several stores (or the tests) share a cluster
without seeing each other:

- each Tidemark stream is one JetStream stream, ``{NS}_{UID}``, whose
  subjects are ``{NS}.{UID}.meta`` (the stream's own records: creation,
  scaling, sealing, truncation) and ``{NS}.{UID}.seg.{N}`` (segment N's
  appends, idle ticks and seal marker). The UID is made when the stream is
  created, so a name used again after a deletion gets a new JetStream
  stream;
- the catalog (scopes, and which UID a stream name has now) is the key-value
  bucket ``{NS}-catalog``; reader-group state is ``{NS}-state``.

Scope, stream and state names may hold characters JetStream keys do not
(``.`` separates tokens), so keys carry them hex-encoded.
"""

from __future__ import annotations

import re
from typing import Any

from connector.errors import InvalidArgumentError

__all__ = [
    "catalog_bucket",
    "check_namespace",
    "decode_name",
    "encode_name",
    "meta_subject",
    "scope_key",
    "segment_number_of",
    "segment_subject",
    "state_bucket",
    "state_key",
    "stream_key",
    "stream_key_prefix",
    "stream_config",
    "stream_name",
    "stream_subjects",
]

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", re.ASCII)


def check_namespace(namespace: str) -> str:
    """Returns ``namespace`` if it can prefix streams, subjects and buckets, else raises."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        msg = (
            f"invalid namespace {namespace!r}: use 1 to 32 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
        raise InvalidArgumentError(msg)
    return namespace


def encode_name(name: str) -> str:
    """``name`` as one token of a key: its UTF-8 bytes in lowercase hex."""
    return name.encode().hex()


def decode_name(token: str) -> str:
    """The name :func:`encode_name` encoded as ``token``."""
    return bytes.fromhex(token).decode()


def stream_name(namespace: str, uid: str) -> str:
    """The JetStream stream holding the Tidemark stream of ``uid``."""
    return f"{namespace}_{uid}"


def stream_subjects(namespace: str, uid: str) -> str:
    """The subjects of that JetStream stream (a wildcard)."""
    return f"{namespace}.{uid}.>"


def stream_config(namespace: str, uid: str, replicas: int) -> dict[str, Any]:
    """The JetStream stream of Tidemark stream ``uid``: its subjects, replicas and limits.

    File storage, no limits (a truncation purges), atomic batches allowed,
    deletes of single messages denied, direct gets from any replica.
    """
    return {
        "name": stream_name(namespace, uid),
        "subjects": [stream_subjects(namespace, uid)],
        "num_replicas": replicas,
        "storage": "file",
        "retention": "limits",
        "discard": "old",
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "allow_direct": True,
        "allow_atomic": True,
        "deny_delete": True,
        "deny_purge": False,
        "description": "a Tidemark stream",
    }


def meta_subject(namespace: str, uid: str) -> str:
    """The subject of the stream's own records."""
    return f"{namespace}.{uid}.meta"


def segment_subject(namespace: str, uid: str, number: int) -> str:
    """The subject of segment ``number``'s appends, ticks and seal."""
    return f"{namespace}.{uid}.seg.{number}"


def segment_number_of(subject: str) -> int | None:
    """The segment number of a segment subject; None for the meta subject."""
    head, _, number = subject.rpartition(".")
    if head.endswith(".seg") and number.isdigit():
        return int(number)
    return None


def catalog_bucket(namespace: str) -> str:
    """The key-value bucket of scopes and stream names."""
    return f"{namespace}-catalog"


def state_bucket(namespace: str) -> str:
    """The key-value bucket of state values (reader groups)."""
    return f"{namespace}-state"


def scope_key(scope: str) -> str:
    """The catalog key of ``scope``."""
    return f"scope.{encode_name(scope)}"


def stream_key(scope: str, stream: str) -> str:
    """The catalog key of stream ``scope/stream``."""
    return f"{stream_key_prefix(scope)}{encode_name(stream)}"


def stream_key_prefix(scope: str) -> str:
    """What every catalog key of a stream of ``scope`` starts with."""
    return f"stream.{encode_name(scope)}."


def state_key(key: str) -> str:
    """The state bucket's key of state key ``key``."""
    return f"s.{encode_name(key)}"
