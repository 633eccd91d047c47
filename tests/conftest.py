"""Shared fixtures: real store servers on port 0, a synthetic clock, bounded polling.

Every store a test talks to is the real one behind a real gRPC server: either
:class:`connector.server.StoreServer` in this process (with a
:class:`ManualClock`, so time moves only when the test says so) or
``python -m connector.server`` in a subprocess (for kill -9 and the CLI).
Nothing waits by sleeping for a fixed time: :func:`wait_until` polls a
condition and fails with a message when it does not hold in time.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
import pytest

from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.server import StoreServer
from connector.store import StorageConfig, StoreConfig
from connector.store.front import StoreFront
from connector.store.jetstream import JetStreamConfig
from connector.store.published import PublishedSegment

from .nats_namespaces import drop_namespace

#: Where every test's synthetic clock starts: 2023-11-14T22:13:20Z.
CLOCK_START_MS = 1_700_000_000_000

_stream_numbers = itertools.count()

_T = TypeVar("_T")


def _stopped_from_outside(signum: int, frame: object) -> None:
    msg = f"stopped by signal {signal.Signals(signum).name}"
    raise KeyboardInterrupt(msg)


def pytest_configure(config: pytest.Config) -> None:
    """A run stopped with SIGTERM (``timeout``, a cancelled CI job) ends as Ctrl-C ends it.

    pytest then tears every fixture down, so the servers and nats-server
    processes the tests started are stopped; by default SIGTERM ends the
    process on the spot and leaves them running.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stopped_from_outside)


def wait_until(
    predicate: Callable[[], _T], timeout: float = 5.0, interval: float = 0.005, what: str = ""
) -> _T:
    """Polls ``predicate`` until it returns something truthy, and returns that.

    Raises:
        AssertionError: when ``timeout`` seconds pass first; names ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout} s waiting for {what or predicate!r}"
            raise AssertionError(message)
        time.sleep(interval)


def new_stream_in(client: StoreClient, segments: int = 1, scope: str | None = None) -> str:
    """Creates a stream of a test's own and returns its name, ``scope/stream-N``.

    In ``scope`` (created when missing), or by default in a scope of its own,
    so tests that share a store never see each other's events.
    """
    scope = scope or f"s{uuid.uuid4().hex[:12]}"
    manager = StreamManager(client)
    manager.create_scope(scope, exist_ok=True)
    name = f"stream-{next(_stream_numbers)}"
    manager.create_stream(scope, name, segments)
    return f"{scope}/{name}"


def segment_inside(server: StoreServer, name: str) -> PublishedSegment:
    """The store's own object of segment ``name``, on either storage (tests that look inside)."""
    store = server.store
    assert isinstance(store, StoreFront), f"not a store's front: {store!r}"
    return store.engine.segment(name)


@pytest.fixture(name="wait_until")
def _wait_until_fixture() -> Callable[..., Any]:
    """:func:`wait_until`, for test modules that cannot import this conftest."""
    return wait_until


@pytest.fixture
def clock() -> ManualClock:
    """A synthetic ingestion clock; it moves only when the test moves it."""
    return ManualClock(CLOCK_START_MS)


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """The store's data directory for this test (created by the store)."""
    return tmp_path / "data"


#: The storages a store under test can use.
STORAGES = ("file", "jetstream")
#: Settings only the file store has; a JetStream store under test ignores them.
_FILE_ONLY = ("max_open_files", "compact_after_records")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs the Flink tests last and, before and among them, the files marked ``long`` first.

    On a local mini-cluster PyFlink runs a job's Python in this process, and
    a cancelled job's bundle in flight can outlast its test (a call to the
    test's stopped store retrying, then logging its failure). Last, no other
    test shares the process with that: a CLI test once counted such a log
    line as its own output.

    A file with a test marked ``long`` (the file takes about a minute or
    more) moves ahead of the unmarked ones, as a whole: ``make test`` hands
    files to its pytest-xdist workers in this order
    (``--no-loadscope-reorder``), so the long files start first and the
    short ones fill the end, and no worker is left alone with a long file at
    the end while the other idles. Otherwise collection order is kept,
    within a file too (its module fixtures are made once).

    A test marked for storages none of which runs here (JetStream alone, in
    the Flink environment: see :func:`pytest_generate_tests`) is deselected,
    not reported skipped.
    """
    unrun = [item for item in items if _storages_here(item) == ()]
    if unrun:
        config.hook.pytest_deselected(items=unrun)
        items[:] = [item for item in items if item not in unrun]
    flink = pathlib.Path(__file__).parent / "flink"
    long_files = {item.path for item in items if item.get_closest_marker("long") is not None}
    items.sort(key=lambda item: (flink in item.path.parents, item.path not in long_files))


def _storages_here(item: pytest.Item) -> tuple[str, ...] | None:
    """The storages a marked test runs on in this environment; None: unmarked.

    With ``TIDEMARK_JETSTREAM_TESTS=engine`` only the engines' tests run on
    JetStream (``make test`` runs the others' JetStream runs once, in the
    Spark environment).
    """
    marker = item.get_closest_marker("storages")
    if marker is None:
        return None
    engine_folders = (
        pathlib.Path(__file__).parent / "flink",
        pathlib.Path(__file__).parent / "spark",
    )
    in_engine_folder = any(item.path.is_relative_to(f) for f in engine_folders)
    if os.environ.get("TIDEMARK_JETSTREAM_TESTS") == "engine" and not in_engine_folder:
        return tuple(kind for kind in marker.args if kind != "jetstream")
    return marker.args


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs a test marked ``@pytest.mark.storages("file", "jetstream")`` once per storage.

    Unmarked tests run on the file store, or on the storage the environment
    variable ``TIDEMARK_TEST_STORAGE`` names (to try every test on it). Of
    the storages marked, those this environment runs (:func:`_storages_here`).
    """
    kinds = _storages_here(metafunc.definition)
    marker = metafunc.definition.get_closest_marker("storages")
    if kinds is None or marker is None or "storage" not in metafunc.fixturenames:
        return
    # None of them here: parametrized as marked, then deselected (not an empty set, skipped).
    metafunc.parametrize("storage", kinds or marker.args, indirect=True)


@pytest.fixture
def storage(request: pytest.FixtureRequest) -> str:
    """The storage this test's stores use: ``file`` or ``jetstream``."""
    kind = getattr(request, "param", os.environ.get("TIDEMARK_TEST_STORAGE", "file"))
    assert kind in STORAGES, f"unknown storage {kind!r}"
    return kind


class JetStreamPlaces:
    """Where a test's JetStream stores live: a namespace of the shared cluster per data dir.

    A test that names the same data dir twice gets the same store back, as a
    file store restarted on its dir does; the namespaces are removed after
    the test.
    """

    def __init__(self, request: pytest.FixtureRequest):
        self._request = request
        self._namespaces: dict[str, str] = {}

    @property
    def cluster(self) -> LocalCluster:
        """The shared 3-node cluster (started on first use)."""
        return self._request.getfixturevalue("nats_cluster")

    def namespace(self, folder: str | pathlib.Path) -> str:
        """The namespace standing for data dir ``folder``."""
        return self._namespaces.setdefault(str(folder), f"t{uuid.uuid4().hex[:12]}")

    def drop(self) -> None:
        """Removes every namespace handed out."""
        for namespace in self._namespaces.values():
            drop_namespace(self.cluster.urls, namespace)


@pytest.fixture
def jetstream_places(request: pytest.FixtureRequest) -> Iterator[JetStreamPlaces]:
    """The namespaces this test's JetStream stores live in (see :class:`JetStreamPlaces`)."""
    places = JetStreamPlaces(request)
    yield places
    places.drop()


@pytest.fixture
def storage_config(
    storage: str, data_dir: pathlib.Path, clock: ManualClock, jetstream_places: JetStreamPlaces
) -> Callable[..., StorageConfig]:
    """Makes the configuration of a store of this test: ``storage_config(**fields)``.

    By default the store uses this test's ``data_dir`` and ``clock`` and has
    no idle advancer (``polling_period_ms=None``). On JetStream it is a
    :class:`JetStreamConfig` on the shared 3-node cluster (:func:`nats_cluster`)
    in the namespace standing for its data dir; file-only fields are ignored.
    """

    def make(**overrides: Any) -> StorageConfig:
        settings: dict[str, Any] = {"clock": clock, "polling_period_ms": None}
        if storage == "file":
            settings["data_dir"] = str(data_dir)
            settings.update(overrides)
            return StoreConfig(**settings)
        folder = overrides.pop("data_dir", data_dir)
        for name in _FILE_ONLY:
            overrides.pop(name, None)
        settings.update(
            servers=tuple(jetstream_places.cluster.urls),
            namespace=jetstream_places.namespace(folder),
        )
        settings.update(overrides)
        return JetStreamConfig(**settings)

    return make


@pytest.fixture
def start_store(
    storage_config: Callable[..., StorageConfig],
) -> Iterator[Callable[..., StoreServer]]:
    """Starts in-process store servers on 127.0.0.1 port 0; stops them after the test.

    ``start_store(**config)`` takes :class:`StoreConfig` fields (see
    :func:`storage_config`): without an idle advancer, idle ticks happen only
    when a test calls ``server.store.advance_idle_segments()``. ``listen``
    picks the address (to restart a server where its clients expect it).
    """
    servers: list[StoreServer] = []

    def start(*, listen: str = "127.0.0.1:0", **overrides: Any) -> StoreServer:
        server = StoreServer(storage_config(**overrides), listen=listen).start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop(grace_s=0.5)


@pytest.fixture
def store_server(start_store: Callable[..., StoreServer]) -> StoreServer:
    """One in-process store server with the default test settings."""
    return start_store()


#: The segments of :func:`wide`'s stream: many, as a user with thousands of segments has.
WIDE = 1_024


@pytest.fixture
def wide(start_store: Callable[..., StoreServer]) -> Iterator[tuple[StoreServer, StoreClient, str]]:
    """A server with one idle stream of :data:`WIDE` segments, and a client of it."""
    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        yield server, client, new_stream_in(client, WIDE)


@pytest.fixture
def store_client(store_server: StoreServer) -> Iterator[StoreClient]:
    """A client of ``store_server``; it gives up on an unreachable server after 2 s."""
    client = StoreClient(store_server.uri, retry_timeout_s=2.0, call_timeout_s=30.0)
    yield client
    client.close()


@pytest.fixture
def store_stub(store_server: StoreServer) -> Iterator[store_pb2_grpc.SegmentStoreStub]:
    """The raw generated stub over a plain channel to ``store_server``."""
    channel = grpc.insecure_channel(store_server.address, options=GRPC_OPTIONS)
    yield store_pb2_grpc.SegmentStoreStub(channel)
    channel.close()


class ServerProcess:
    """A ``python -m connector.server`` subprocess and where it listens."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, log_path: pathlib.Path):
        self.process = process
        self.address = address
        self.uri = f"tidemark://{address}"
        self.log_path = log_path

    def log(self) -> str:
        """What the server has written to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def __repr__(self) -> str:
        return f"ServerProcess(pid={self.process.pid}, address={self.address!r})"


def _read_listening_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    """Returns ``HOST:PORT`` from the server's ``listening on HOST:PORT`` line."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                message = f"server pid {process.pid} printed no listening line in {timeout} s"
                raise AssertionError(message)
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                message = f"server pid {process.pid} exited with {process.wait()} before listening"
                raise AssertionError(message)
            buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    assert line.startswith("listening on "), f"unexpected first line {line!r}"
    return line.removeprefix("listening on ")


@pytest.fixture
def spawn_server(
    tmp_path: pathlib.Path, storage: str, jetstream_places: JetStreamPlaces
) -> Iterator[Callable[..., ServerProcess]]:
    """Starts store server subprocesses; kills any still running after the test.

    ``spawn_server(data_dir, *extra_args)`` runs ``python -m connector.server
    --data-dir DATA_DIR --listen 127.0.0.1:0 EXTRA_ARGS`` and returns once it
    has printed where it listens. ``open_files_limit=N`` starts the server
    (only it, never the test process) under a descriptor limit of N. On
    JetStream the server gets ``--storage jetstream`` on the shared cluster
    in the namespace standing for DATA_DIR instead: a server started again
    on the same dir finds the same streams.
    With DATA_DIR None, EXTRA_ARGS alone say where the store is.
    """
    processes: list[subprocess.Popen[bytes]] = []

    def spawn(
        server_data_dir: pathlib.Path | None, *extra_args: str, open_files_limit: int | None = None
    ) -> ServerProcess:
        log_path = tmp_path / f"server-{len(processes)}.log"
        where = ["--data-dir", str(server_data_dir)]
        if server_data_dir is None:  # the extra arguments say where the store is
            where = []
        elif storage == "jetstream":
            where = [
                "--storage",
                "jetstream",
                "--nats-url",
                ",".join(jetstream_places.cluster.urls),
                "--nats-namespace",
                jetstream_places.namespace(server_data_dir),
            ]
        limit = []
        if open_files_limit is not None:
            limit = ["prlimit", f"--nofile={open_files_limit}", "--"]
        command = [
            *limit,
            sys.executable,
            "-m",
            "connector.server",
            *where,
            "--listen",
            "127.0.0.1:0",
            *extra_args,
        ]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
        processes.append(process)
        return ServerProcess(process, _read_listening_line(process, timeout=30.0), log_path)

    yield spawn
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _tmpfs(mount_point: pathlib.Path, options: str) -> Iterator[pathlib.Path]:
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)], check=True)
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 4 MiB tmpfs mounted for this test (tests run as root): a disk that fills up."""
    yield from _tmpfs(tmp_path / "disk", "size=4m")


@pytest.fixture
def read_only_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A read-only tmpfs mounted for this test (tests run as root)."""
    yield from _tmpfs(tmp_path / "ro", "ro,size=1m")


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-node JetStream cluster (real nats-server processes on loopback) the tests share.

    Started on first use. Tests that use it keep to a namespace of their own,
    so they never see each other's streams; tests that stop or kill nodes
    start a cluster of their own with :func:`start_nats_cluster`.
    """
    cluster = LocalCluster(str(tmp_path_factory.mktemp("nats-cluster")))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def start_nats_cluster(tmp_path: pathlib.Path) -> Iterator[Callable[..., LocalCluster]]:
    """Starts JetStream clusters of this test's own (to stop or kill nodes); stops them after.

    ``start_nats_cluster(**options)`` takes :class:`LocalCluster` options.
    """
    clusters: list[LocalCluster] = []

    def start(**options: Any) -> LocalCluster:
        cluster = LocalCluster(str(tmp_path / f"nats-{len(clusters)}"), **options)
        clusters.append(cluster)
        return cluster.start()

    yield start
    for cluster in clusters:
        cluster.stop()
