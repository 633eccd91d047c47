"""Checking a read against its store once, when it is defined: fail in seconds, naming the option.

An engine defines a read long before it reads (Spark's ``load()``, Flink's
``build()``), and a read that cannot work should fail there, in one line
naming what is wrong, not at its first batch after the client's retry
budget inside an engine's trace. :func:`probe_store` asks the store once,
within :data:`PROBE_TIMEOUT_S`:

- the store answers at all (else :class:`StoreUnavailableError`, naming the
  URI and how long it was given);
- every stream read exists (else :class:`NotFoundError`, naming the stream);
- every segment an explicit start or end cut names is one of its stream's
  segments (else :class:`InvalidArgumentError`, naming the cut's option).

A token the store refuses fails here too, as the store says it.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from connector.client.connection import StoreClient, parse_uri
from connector.errors import (
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    StoreUnavailableError,
    TidemarkError,
    UnauthenticatedError,
)
from connector.model import StreamDescription
from connector.names import SegmentId, StreamId
from connector.reader.source.cuts import StreamCut
from connector.reader.source.spec import ReadSpec

__all__ = ["PROBE_BOUND_S", "PROBE_TIMEOUT_S", "probe_store"]

#: How long the probe gives the store, in seconds. Nothing listening at the address fails
#: at once (the connection is refused); a store that takes the connection and does not
#: answer (a stopped process, a store still starting) fails once this has passed.
PROBE_TIMEOUT_S = 5.0
#: The most a probe of a store that does not answer takes, in seconds: the timeout, then
#: the client's own look at why (whether the port speaks TLS or plaintext, and a TLS
#: handshake: a second each at most).
PROBE_BOUND_S = PROBE_TIMEOUT_S + 2.0


def probe_store(spec: ReadSpec, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Checks once that ``spec`` can be read: the store answers, its streams and cut segments exist.

    An address where nothing listens fails at once; one where something
    takes the connection and does not answer once ``timeout_s`` has passed
    (the client retries until then, so a store that is starting gets that
    long), and the client has looked at why (up to 2 s more: with the
    default, :data:`PROBE_BOUND_S` in all).

    Raises:
        StoreUnavailableError: the store did not answer in time; names the URI.
        NotFoundError: a stream does not exist; names the stream option and the stream.
        InvalidArgumentError: a cut names a segment its stream does not have; names the cut's
            option.
        UnauthenticatedError, PermissionDeniedError: the store refused the credentials.
    """
    names = spec.names
    refused = _refused(parse_uri(spec.uri), timeout_s)
    if refused is not None:
        msg = (
            f"{names.label('store')}: the store {spec.uri!r} cannot be reached ({refused}); "
            "is it running at that address?"
        )
        raise StoreUnavailableError(msg)
    try:
        # Something listens: the client retries within the bound (a store starting up
        # answers a moment later), then gives up.
        with StoreClient(spec.uri, retry_timeout_s=timeout_s, call_timeout_s=timeout_s) as client:
            descriptions = {name: _described(client, name, spec) for name in spec.stream_names}
    except (NotFoundError, UnauthenticatedError, PermissionDeniedError):
        raise
    except StoreUnavailableError as error:
        msg = f"{names.label('store')}: the store {spec.uri!r} cannot be reached ({error})"
        raise StoreUnavailableError(msg) from None
    except TidemarkError as error:  # the call's deadline passed: it took the call, no answer
        msg = (
            f"{names.label('store')}: the store {spec.uri!r} cannot be reached: no answer "
            f"within {timeout_s:g} s ({error})"
        )
        raise StoreUnavailableError(msg) from None
    for read in spec.streams:
        for field, cut in (("start", read.start), ("end", read.end)):
            if cut is not None:
                _check_cut(field, cut, descriptions, spec)


def _refused(address: str, timeout_s: float) -> str | None:
    """Why nothing takes a connection at ``address`` (``host:port``), or None when something does.

    A refused connection is an answer at once: nothing listens there now.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as error:
        return f"connecting to {address!r}: {error.strerror or error}"


def _described(client: StoreClient, name: str, spec: ReadSpec) -> StreamDescription:
    stream = StreamId.parse(name)
    try:
        return client.describe_stream(stream.scope, stream.stream)
    except NotFoundError:
        msg = f"{spec.names.label('streams')}: stream {name!r} does not exist in {spec.uri!r}"
        raise NotFoundError(msg) from None


def _check_cut(
    field: str, cut: StreamCut, descriptions: Mapping[str, StreamDescription], spec: ReadSpec
) -> None:
    for segment in cut.as_dict():
        stream = str(SegmentId.parse(segment).stream_id)
        description = descriptions.get(stream)
        if description is None:
            continue  # a segment of a stream not read: the spec refused that already
        known = [s.segment for s in description.segments]
        if segment not in known:
            shown = spec.names.shown(field, cut.to_json())
            msg = (
                f"{spec.names.label(field)} ({shown}) names segment {segment!r}, "
                f"which stream {stream!r} does not have: its segments are {known!r}"
            )
            raise InvalidArgumentError(msg)
