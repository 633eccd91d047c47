"""The store served over gRPC: a thin servicer over :class:`SegmentStore`.

    python -m connector.server --data-dir DIR --listen 127.0.0.1:PORT
    tidemark-server --data-dir DIR --listen 127.0.0.1:0

The servicer converts messages to domain calls and domain errors to status
codes; it holds no state of its own. SIGTERM and SIGINT stop it cleanly:
in-flight calls finish, then the store closes its files.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any, TypeVar

import grpc

from connector._proto import store_pb2 as _pb
from connector._proto import store_pb2_grpc as _pb_grpc
from connector._wire import (
    ERROR_KIND_KEY,
    FIRST_OFFSET_KEY,
    GRPC_OPTIONS,
    MAX_READ_BYTES,
    SEALED_SEGMENT_KEY,
    SUCCESSORS_KEY,
)
from connector.clock import Clock, SystemClock
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
    TruncatedError,
)
from connector.model import SegmentDescription, StateValue, StreamDescription
from connector.ops import HealthReporter, StoreMetrics, add_reflection
from connector.security import ServerTls, TokenInterceptor, TokenTable
from connector.store import SegmentStore, StoreConfig

__all__ = ["SegmentStoreServicer", "StoreServer", "is_loopback", "main", "status_of"]

_log = logging.getLogger("connector.server")

_STATUS_OF_ERROR: list[tuple[type[TidemarkError], grpc.StatusCode]] = [
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StoreUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (TruncatedError, grpc.StatusCode.OUT_OF_RANGE),
]

_Response = TypeVar("_Response")


def status_of(error: TidemarkError) -> grpc.StatusCode:
    """The gRPC status code a domain error is reported with."""
    for error_type, code in _STATUS_OF_ERROR:
        if isinstance(error, error_type):
            return code
    return grpc.StatusCode.INTERNAL


# A SegmentSealedError also sends its segment and successors (comma-separated).


def _error_metadata(error: TidemarkError) -> tuple[tuple[str, str], ...]:
    metadata = ((ERROR_KIND_KEY, type(error).__name__),)
    if isinstance(error, SegmentSealedError):
        metadata += (
            (SEALED_SEGMENT_KEY, error.segment),
            (SUCCESSORS_KEY, ",".join(error.successors)),
        )
    if isinstance(error, TruncatedError):
        metadata += (
            (SEALED_SEGMENT_KEY, error.segment),
            (FIRST_OFFSET_KEY, str(error.first_offset)),
        )
    return metadata


#: The longest message a status carries: gRPC sends it in the trailers, whose size is limited.
_MAX_MESSAGE_CHARS = 1_000


def _shortened(message: str) -> str:
    if len(message) <= _MAX_MESSAGE_CHARS:
        return message
    return f"{message[:_MAX_MESSAGE_CHARS]}... ({len(message)} characters in all)"


def _call(context: grpc.ServicerContext, work: Callable[[], _Response]) -> _Response:
    try:
        return work()
    except TidemarkError as error:
        context.set_trailing_metadata(_error_metadata(error))
        context.abort(status_of(error), _shortened(str(error)))
        raise  # unreachable: abort raises


def _stream_message(description: StreamDescription) -> _pb.StreamDescription:
    return _pb.StreamDescription(
        scope=description.scope,
        stream=description.stream,
        epoch=description.epoch,
        sealed=description.sealed,
        segments=[_segment_message(s) for s in description.segments],
    )


def _segment_message(description: SegmentDescription) -> _pb.SegmentDescription:
    return _pb.SegmentDescription(
        segment=description.segment,
        key_low=description.key_low,
        key_high=description.key_high,
        epoch=description.epoch,
        sealed=description.sealed,
        creation_time=description.creation_time,
        predecessors=description.predecessors,
        successors=description.successors,
    )


def _state_message(value: StateValue) -> _pb.StateValue:
    return _pb.StateValue(
        key=value.key, value=value.value, revision=value.revision, server_time=value.server_time
    )


class SegmentStoreServicer(_pb_grpc.SegmentStoreServicer):
    """Answers the SegmentStore service from a :class:`SegmentStore`, counting in ``metrics``."""

    def __init__(self, store: SegmentStore, metrics: StoreMetrics):
        self._store = store
        self._metrics = metrics

    def CreateScope(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        _call(context, lambda: self._store.create_scope(request.scope))
        return _pb.CreateScopeResponse(scope=request.scope)

    def CreateStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _stream_message(
            _call(
                context,
                lambda: self._store.create_stream(
                    request.scope, request.stream, request.segment_count
                ),
            )
        )

    def DescribeStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _stream_message(
            _call(context, lambda: self._store.describe_stream(request.scope, request.stream))
        )

    def ScaleStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _stream_message(
            _call(
                context,
                lambda: self._store.scale_stream(
                    request.scope,
                    request.stream,
                    list(request.sealed_segments),
                    request.split_count,
                ),
            )
        )

    def SealStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _stream_message(
            _call(context, lambda: self._store.seal_stream(request.scope, request.stream))
        )

    def DeleteStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        _call(context, lambda: self._store.delete_stream(request.scope, request.stream))
        return _pb.DeleteStreamResponse()

    def AppendEvents(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        with self._metrics.timing(self._metrics.append_seconds):
            result = _call(
                context,
                lambda: self._store.append(
                    request.segment,
                    request.writer_id,
                    request.first_event_number,
                    request.events,
                    request.routing_keys,
                ),
            )
        self._metrics.appended(request.segment, request.events[result.duplicates :])
        return _pb.AppendResponse(
            write_offset=result.write_offset,
            ingestion_time=result.ingestion_time,
            appended=result.appended,
            duplicates=result.duplicates,
        )

    def ReadSegment(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        known = request.known_watermark if request.has_known_watermark else None
        with self._metrics.timing(self._metrics.read_seconds):
            result = _call(
                context,
                lambda: self._store.read(
                    request.segment,
                    request.offset,
                    # Larger answers would not fit a message; the reader asks again from
                    # next_offset.
                    min(request.max_bytes, MAX_READ_BYTES),
                    request.wait_ms,
                    known,
                ),
            )
        return _pb.ReadResponse(
            segment=result.segment,
            offset=result.offset,
            next_offset=result.next_offset,
            data=result.data,
            watermark=result.watermark,
            end_of_segment=result.end_of_segment,
            successors=result.successors,
        )

    def PlanRead(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        plan = _call(
            context,
            lambda: self._store.plan_read(
                request.segment,
                request.offset,
                request.max_events or None,
                request.max_bytes or None,
            ),
        )
        return _pb.PlanReadResponse(
            segment=plan.segment,
            offset=plan.offset,
            next_offset=plan.next_offset,
            events=plan.events,
            watermark=plan.watermark,
            end_of_segment=plan.end_of_segment,
            at_tail=plan.at_tail,
            successors=plan.successors,
        )

    def TruncateStream(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        result = _call(
            context,
            lambda: self._store.truncate_stream(request.scope, request.stream, dict(request.cut)),
        )
        return _pb.TruncateStreamResponse(
            removed_segments=result.removed_segments, bytes_freed=result.bytes_freed
        )

    def ListScopes(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _pb.ListScopesResponse(scopes=_call(context, self._store.scopes))

    def ListStreams(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        streams = _call(context, lambda: self._store.list_streams(request.scope))
        return _pb.ListStreamsResponse(streams=streams)

    def ListStateKeys(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        keys = _call(context, lambda: self._store.state_keys(request.prefix))
        return _pb.ListStateKeysResponse(keys=keys)

    def GetSegmentInfo(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        info = _call(context, lambda: self._store.segment_info(request.segment))
        return _pb.SegmentInfo(
            segment=info.segment,
            creation_time=info.creation_time,
            last_write_time=info.last_write_time,
            write_offset=info.write_offset,
            sealed=info.sealed,
            watermark=info.watermark,
            key_low=info.key_low,
            key_high=info.key_high,
        )

    def GetState(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        return _state_message(_call(context, lambda: self._store.get_state(request.key)))

    def CompareAndSetState(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: D102
        written, current = _call(
            context,
            lambda: self._store.compare_and_set_state(
                request.key, request.expected_revision, request.value
            ),
        )
        return _pb.CompareAndSetStateResponse(written=written, current=_state_message(current))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 possibly in brackets) is this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StoreServer:
    """A store and the gRPC server answering for it; a context manager.

    ``uri`` (``tidemark://host:port``) is valid once the server has started.
    Stopping lets in-flight calls finish (up to ``grace_s``) before the store
    closes; stopping twice is harmless.

    Security: with ``tls`` the port speaks TLS only (plaintext clients are
    refused at the handshake); with ``tokens`` every call of the store's
    service needs a bearer token holding the right on the scope it touches
    (:mod:`connector.security`). Without ``tokens`` anyone who reaches the port
    may do anything, so the server then listens on a loopback address only,
    unless ``allow_unauthenticated`` says it may listen elsewhere.

    Operations: the port also answers the standard gRPC health service
    (SERVING while the store takes writes) and server reflection, which need no
    token; ``metrics_listen`` (``host:port``) serves Prometheus metrics over
    HTTP at ``/metrics`` (``metrics_address`` says where, once started).
    """

    def __init__(
        self,
        config: StoreConfig,
        listen: str = "127.0.0.1:0",
        max_workers: int = 32,
        tls: ServerTls | None = None,
        tokens: TokenTable | None = None,
        allow_unauthenticated: bool = False,
        metrics_listen: str | None = None,
    ):
        if config.max_event_size > MAX_READ_BYTES:
            msg = (
                f"max_event_size must be <= {MAX_READ_BYTES} for the store to be served, "
                f"got {config.max_event_size!r}"
            )
            raise InvalidArgumentError(msg)
        host = listen.rsplit(":", 1)[0]
        if tokens is None and not allow_unauthenticated and not is_loopback(host):
            msg = (
                f"refusing to listen on {listen!r} without authentication: give a token file, "
                "listen on a loopback address, or allow unauthenticated access explicitly"
            )
            raise InvalidArgumentError(msg)
        credentials = tls.credentials() if tls is not None else None
        self.tokens = tokens
        self.tls = tls
        self.store = SegmentStore(config)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tidemark-rpc"),
            interceptors=[TokenInterceptor(tokens)] if tokens is not None else [],
            # No SO_REUSEPORT: a second server on a port in use must fail, not share it.
            options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)],
        )
        self.metrics = StoreMetrics(self.store)
        self._metrics_listen = metrics_listen
        self.metrics_address: str | None = None
        self.health = HealthReporter(self.store)
        _pb_grpc.add_SegmentStoreServicer_to_server(
            SegmentStoreServicer(self.store, self.metrics), self._server
        )
        self.health.add_to(self._server)
        add_reflection(self._server)
        try:
            port = (
                self._server.add_secure_port(listen, credentials)
                if credentials is not None
                else self._server.add_insecure_port(listen)
            )
        except RuntimeError:  # grpcio reports a failed bind by raising (older: port 0)
            port = 0
        if port == 0:
            self.store.close()
            msg = f"cannot listen on {listen!r}: the address is invalid or in use"
            raise InvalidArgumentError(msg)
        self.address = f"{host}:{port}"
        self.uri = f"tidemark://{self.address}"
        self._stopped = False

    def start(self) -> StoreServer:
        """Starts answering calls; returns self."""
        if self._metrics_listen is not None:
            try:
                port = self.metrics.serve(self._metrics_listen)
            except (OSError, ValueError) as error:
                self.store.close()
                msg = f"cannot serve metrics on {self._metrics_listen!r}: {error}"
                raise InvalidArgumentError(msg) from None
            self.metrics_address = f"{self._metrics_listen.rpartition(':')[0]}:{port}"
            _log.info("metrics at http://%s/metrics", self.metrics_address)
        self._server.start()
        self.health.start()
        _log.info(
            "serving %s from %s (%s, %s)",
            self.uri,
            self.store.config.data_dir,
            "TLS" if self.tls else "plaintext",
            f"{len(self.tokens)} token(s)" if self.tokens is not None else "no authentication",
        )
        if self.tokens is None:
            _log.warning(
                "no token file: every caller that reaches %s may read, write and manage "
                "every scope",
                self.address,
            )
        return self

    def stop(self, grace_s: float = 2.0) -> None:
        """Stops serving and closes the store."""
        if self._stopped:
            return
        self._stopped = True
        self.health.stop()
        self._server.stop(grace_s).wait()
        self.store.close()
        self.metrics.close()
        _log.info("stopped %s", self.uri)

    def wait(self) -> None:
        """Blocks until the server stops."""
        self._server.wait_for_termination()

    def __enter__(self) -> StoreServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"StoreServer(uri={self.uri!r})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark-server", description="Serve a Tidemark store.")
    parser.add_argument("--data-dir", required=True, help="where the store keeps its files")
    parser.add_argument("--listen", default="127.0.0.1:7070", help="host:port (port 0: any free)")
    parser.add_argument(
        "--max-watermark-lag-ms",
        type=int,
        default=10_000,
        help=(
            "a segment idle this long gets a tick that advances its watermark; not the "
            "readers' max_event_time_lag (default 10000)"
        ),
    )
    parser.add_argument(
        "--polling-period-ms",
        type=int,
        default=1_000,
        help="how often idle segments are looked for (default 1000)",
    )
    parser.add_argument(
        "--max-event-size", type=int, default=1024 * 1024, help="bytes (default 1 MiB)"
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics over HTTP at /metrics there (default: none)",
    )
    security = parser.add_argument_group("security")
    security.add_argument("--tls-cert", help="PEM certificate chain: the port speaks TLS only")
    security.add_argument("--tls-key", help="PEM private key of --tls-cert")
    security.add_argument(
        "--tls-client-ca", help="PEM CA: clients must present a certificate it signed (mTLS)"
    )
    security.add_argument(
        "--token-file",
        help="TOML file of hashed bearer tokens and their rights per scope; reloaded on SIGHUP",
    )
    security.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="without --token-file, listen on a non-loopback address all the same",
    )
    return parser


def _server(parser: argparse.ArgumentParser, args: argparse.Namespace, clock: Clock) -> StoreServer:
    """The server the arguments describe; a value it refuses is a usage error naming the flag."""
    values = {
        "max_watermark_lag_ms": args.max_watermark_lag_ms,
        "polling_period_ms": args.polling_period_ms,
        "max_event_size": args.max_event_size,
    }
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        parser.error("--tls-client-ca needs --tls-cert and --tls-key")
    try:
        tls = ServerTls(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
        tokens = TokenTable(args.token_file) if args.token_file else None
        return StoreServer(
            StoreConfig(data_dir=args.data_dir, clock=clock, **values),
            args.listen,
            tls=tls,
            tokens=tokens,
            allow_unauthenticated=args.allow_unauthenticated,
            metrics_listen=args.metrics_listen,
        )
    except InvalidArgumentError as error:
        message = str(error)
        for name in values:  # the store names its fields: say the flags instead
            message = message.replace(name, "--" + name.replace("_", "-"))
        parser.error(message)


def main(argv: list[str] | None = None, clock: Clock | None = None) -> None:
    """Runs the server until SIGTERM or SIGINT; exits with 2 on a bad argument."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    parser = _parser()
    server = _server(parser, parser.parse_args(argv), clock or SystemClock())
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        _log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    def on_reload(_signum: int, _frame: object) -> None:
        if server.tokens is None:
            _log.info("received SIGHUP; no token file to reload")
            return
        try:
            server.tokens.reload()
        except InvalidArgumentError as error:
            _log.error("token file not reloaded, keeping the previous tokens: %s", error)

    # Before announcing the address: a signal sent as soon as it is printed must stop cleanly.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_reload)
    try:
        server.start()
    except InvalidArgumentError as error:
        parser.error(str(error))
    print(f"listening on {server.address}", flush=True)
    # Wake up now and then: a signal that lands as this thread goes to sleep (or on another
    # thread) does not interrupt an untimed wait, and its handler runs only once we wake.
    while not stop.wait(timeout=0.2):
        pass
    server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
