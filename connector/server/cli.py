"""``tidemark-server``: the store served over gRPC from the command line.

    python -m connector.server --data-dir DIR --listen 127.0.0.1:PORT
    tidemark-server --data-dir DIR --listen 127.0.0.1:0
    tidemark-server --storage jetstream --nats-url nats://n1:4222,nats://n2:4222,nats://n3:4222

SIGTERM and SIGINT stop it cleanly: reads waiting at a tail are answered,
in-flight calls finish, then the store closes its files. SIGHUP reloads the
token file. ``--pid-file`` names a file that holds the server's process id
while it serves (``kill -HUP $(cat FILE)``).

A bad command line (an unknown flag, a value of the wrong type) gets
argparse's usage; a value the server refuses at start (a flag that needs
another, an address in use, a bad token file) gets one line naming it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from connector.clock import Clock, SystemClock
from connector.errors import (
    DataDirDamagedError,
    DataDirLockedError,
    InvalidArgumentError,
    StoreUnavailableError,
)
from connector.security import ServerTls, TokenTable
from connector.server.fetch_sessions import FetchLimits
from connector.server.parked_reads import DEFAULT_PARKED_READS_PER_CONNECTION
from connector.server.store_server import StoreServer
from connector.store import StorageConfig, StoreConfig
from connector.store.jetstream import JetStreamConfig

__all__ = ["main"]

_log = logging.getLogger("connector.server")


#: The fetch session limits (FetchLimits' fields, flags --max-fetch-...), and what each bounds.
_FETCH_FLAGS = {
    "sessions": "ReadSegments fetch sessions open on the server",
    "sessions_per_connection": "fetch sessions of one connection",
    "session_segments": "segments one fetch session follows",
    "cursors": "segments followed over every fetch session, about a kilobyte of memory each",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark-server", description="Serve a Tidemark store.")
    parser.add_argument(
        "--storage",
        choices=["file", "jetstream"],
        default="file",
        help="file: a data dir on this machine (the default); jetstream: a NATS JetStream cluster",
    )
    parser.add_argument("--data-dir", help="with --storage file: where the store keeps its files")
    parser.add_argument("--listen", default="127.0.0.1:7070", help="host:port (port 0: any free)")
    parser.add_argument(
        "--idle-tick-after-ms",
        type=int,
        default=None,
        help=(
            "a segment with no write for this long gets an idle tick that advances its "
            "watermark; not the readers' max_event_time_lag (default 10000)"
        ),
    )
    parser.add_argument(
        "--max-watermark-lag-ms",
        type=int,
        default=None,
        help="the former name of --idle-tick-after-ms (deprecated)",
    )
    parser.add_argument(
        "--polling-period-ms",
        type=int,
        default=1_000,
        help="how often idle segments are looked for (default 1000)",
    )
    parser.add_argument(
        "--writer-idle-timeout-ms",
        type=int,
        default=60_000,
        help=(
            "a writer that asserted event time and then neither writes nor asserts this long "
            "is marked idle, so it stops holding the event-time watermark back; 0: never "
            "(default 60000)"
        ),
    )
    parser.add_argument(
        "--max-event-size", type=int, default=1024 * 1024, help="bytes (default 1 MiB)"
    )
    parser.add_argument(
        "--max-parked-reads-per-connection",
        type=int,
        default=DEFAULT_PARKED_READS_PER_CONNECTION,
        help=(
            "reads one connection may have waiting at segment tails; one more is refused "
            f"with RESOURCE_EXHAUSTED (default {DEFAULT_PARKED_READS_PER_CONNECTION})"
        ),
    )
    limits = parser.add_argument_group("limits")
    limits.add_argument(
        "--max-segments",
        type=int,
        default=100_000,
        help="segments the store holds at most, sealed ones too (default 100000)",
    )
    limits.add_argument(
        "--max-segments-per-stream",
        type=int,
        help=(
            "open segments one stream may have: a creation or a scale past it is refused "
            "(default 16384; 999, the most, on JetStream)"
        ),
    )
    fetch = FetchLimits()
    for name, what in _FETCH_FLAGS.items():
        default = getattr(fetch, name)
        limits.add_argument(
            f"--max-fetch-{name.replace('_', '-')}",
            type=int,
            default=default,
            help=f"{what} (default {default})",
        )
    parser.add_argument(
        "--pid-file",
        metavar="FILE",
        help="write the server's process id here once it serves; removed when it stops",
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help=(
            "serve Prometheus metrics at /metrics and health at /healthz over HTTP there, "
            "without a token: its labels name every tenant's streams, so keep it where only "
            "monitoring reaches (default: none)"
        ),
    )
    jetstream = parser.add_argument_group("jetstream (with --storage jetstream)")
    jetstream.add_argument(
        "--nats-url",
        action="append",
        metavar="URLS",
        help=(
            "the cluster's client URLs, comma-separated or repeated (nats://host:4222; tls:// for "
            "TLS; nats://user:password@host:4222 with credentials)"
        ),
    )
    jetstream.add_argument("--nats-user", metavar="NAME", help="the user to connect as")
    jetstream.add_argument(
        "--nats-password-file", metavar="FILE", help="a file holding --nats-user's password"
    )
    jetstream.add_argument("--nats-creds", metavar="FILE", help="a NATS credentials file (JWT)")
    jetstream.add_argument("--nats-tls-ca", metavar="FILE", help="PEM CA of the cluster's TLS")
    jetstream.add_argument(
        "--nats-namespace",
        default="tidemark",
        help="what the store's streams and buckets are named after (default tidemark)",
    )
    jetstream.add_argument(
        "--nats-replicas",
        type=int,
        default=3,
        help="replicas of every stream and bucket the store makes (default 3)",
    )
    jetstream.add_argument(
        "--nats-retry-s",
        type=float,
        default=10.0,
        help="how long a call retries while the cluster cannot answer (default 10)",
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


#: The exit code of a start refused because another store holds the data dir.
DATA_DIR_LOCKED_EXIT = 3


def _refuse(message: str, exit_code: int = 2) -> NoReturn:
    """Ends a start the server refuses: one line naming the value (no usage block)."""
    print(f"tidemark-server: error: {message}", file=sys.stderr, flush=True)
    sys.exit(exit_code)


def _idle_tick_after_ms(args: argparse.Namespace) -> int:
    """``--idle-tick-after-ms``, or its former name with a warning naming the new one."""
    old, new = args.max_watermark_lag_ms, args.idle_tick_after_ms
    if old is None:
        return 10_000 if new is None else new
    if new is not None:
        _refuse("--max-watermark-lag-ms is the former name of --idle-tick-after-ms: give one")
    print(
        "tidemark-server: warning: --max-watermark-lag-ms is deprecated: use "
        f"--idle-tick-after-ms {old}",
        file=sys.stderr,
        flush=True,
    )
    return old


def _server(args: argparse.Namespace, clock: Clock) -> StoreServer:
    """The server the arguments describe; a value it refuses ends the start, naming the flag."""
    values = {
        "max_watermark_lag_ms": _idle_tick_after_ms(args),
        "polling_period_ms": args.polling_period_ms,
        "max_event_size": args.max_event_size,
        "writer_idle_timeout_ms": args.writer_idle_timeout_ms,
        "max_segments": args.max_segments,
    }
    if args.max_segments_per_stream is not None:
        values["max_segments_per_stream"] = args.max_segments_per_stream
    if (args.tls_cert is None) != (args.tls_key is None):
        _refuse("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        _refuse("--tls-client-ca needs --tls-cert and --tls-key")
    try:
        fetch_limits = FetchLimits(**{n: getattr(args, f"max_fetch_{n}") for n in _FETCH_FLAGS})
        tls = ServerTls(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
        tokens = TokenTable(args.token_file) if args.token_file else None
        return StoreServer(
            _storage_config(args, clock, values),
            args.listen,
            tls=tls,
            tokens=tokens,
            allow_unauthenticated=args.allow_unauthenticated,
            metrics_listen=args.metrics_listen,
            max_parked_reads_per_connection=args.max_parked_reads_per_connection,
            fetch_limits=fetch_limits,
        )
    except DataDirLockedError as error:
        _refuse(str(error), DATA_DIR_LOCKED_EXIT)
    except DataDirDamagedError as error:
        _refuse(str(error), DATA_DIR_DAMAGED_EXIT)
    except InvalidArgumentError as error:
        message = str(error)
        # The store and the server name their fields: say the flags instead.
        fetch_flags = [f"max_fetch_{n}" for n in _FETCH_FLAGS]
        names = [*values, "max_parked_reads_per_connection", *fetch_flags]
        # The idle tick's field is named by the flag given: the new name unless the former.
        given = {"max_watermark_lag_ms": "--max-watermark-lag-ms"}
        if args.max_watermark_lag_ms is None:
            given["max_watermark_lag_ms"] = "--idle-tick-after-ms"
        for name in sorted(names, key=len, reverse=True):  # a name inside a longer one last
            message = message.replace(name, given.get(name, "--" + name.replace("_", "-")))
        for name, flag in _JETSTREAM_FLAGS.items():
            message = message.replace(name, flag)
        _refuse(message)
    except StoreUnavailableError as error:
        _refuse(str(error), CLUSTER_UNAVAILABLE_EXIT)


#: The exit code of a start refused because the JetStream cluster cannot be reached.
CLUSTER_UNAVAILABLE_EXIT = 4

#: The exit code of a start refused because the data dir is damaged beyond a torn tail.
DATA_DIR_DAMAGED_EXIT = 5

#: The JetStream store's settings by the flags that set them.
_JETSTREAM_FLAGS = {
    "user and password_file": "--nats-user and --nats-password-file",
    "unavailable_retry_s": "--nats-retry-s",
    "replicas": "--nats-replicas",
    "namespace": "--nats-namespace",
    "servers": "--nats-url",
}


def _storage_config(
    args: argparse.Namespace, clock: Clock, values: dict[str, Any]
) -> StorageConfig:
    """The storage the arguments name, with the settings every storage shares."""
    if args.storage == "file":
        if args.data_dir is None:
            _refuse("--storage file needs --data-dir")
        return StoreConfig(data_dir=args.data_dir, clock=clock, **values)
    if args.data_dir is not None:
        _refuse("--data-dir is for --storage file: the JetStream cluster keeps the data")
    if not args.nats_url:
        _refuse("--storage jetstream needs --nats-url")
    servers = tuple(u.strip() for urls in args.nats_url for u in urls.split(",") if u.strip())
    return JetStreamConfig(
        clock=clock,
        servers=servers,
        namespace=args.nats_namespace,
        replicas=args.nats_replicas,
        user=args.nats_user,
        password_file=args.nats_password_file,
        creds_file=args.nats_creds,
        tls_ca_file=args.nats_tls_ca,
        unavailable_retry_s=args.nats_retry_s,
        **values,
    )


def _write_pid_file(path: str) -> None:
    """Writes this process's id to ``path``, whole (by a rename), replacing a stale one."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        partial.write_text(f"{os.getpid()}\n")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def _remove_pid_file(path: str) -> None:
    """Removes ``path`` if it still holds this process's id (another server may own it now)."""
    target = Path(path)
    try:
        if target.read_text().strip() == str(os.getpid()):
            target.unlink()
    except OSError as error:
        _log.warning("pid file %s left in place: %s", path, error.strerror)


def main(argv: list[str] | None = None, clock: Clock | None = None) -> None:
    """Runs the server until SIGTERM or SIGINT.

    Exits with 2 on a bad argument, 3 when another store holds the data dir, 4 when
    the JetStream cluster cannot be reached, 5 when the data dir is damaged (the
    message names the file and the offset; nothing was cut).
    """
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args = _parser().parse_args(argv)
    server = _server(args, clock or SystemClock())
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
        _refuse(str(error))
    if args.pid_file is not None:
        try:
            _write_pid_file(args.pid_file)
        except OSError as error:
            server.stop()
            _refuse(f"cannot write --pid-file {args.pid_file!r}: {error.strerror}")
    print(f"listening on {server.address}", flush=True)
    # Wake up now and then: a signal that lands as this thread goes to sleep (or on another
    # thread) does not interrupt an untimed wait, and its handler runs only once we wake.
    while not stop.wait(timeout=0.2):
        pass
    server.stop()
    if args.pid_file is not None:
        _remove_pid_file(args.pid_file)
    sys.exit(0)
