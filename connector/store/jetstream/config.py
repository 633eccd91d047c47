"""The JetStream store's settings."""

from __future__ import annotations

from dataclasses import dataclass

from connector.errors import InvalidArgumentError
from connector.store.config import StorageConfig
from connector.store.jetstream.naming import check_namespace

__all__ = ["JETSTREAM_MAX_SEGMENTS_PER_STREAM", "JetStreamConfig"]

#: The most open segments a stream may have on JetStream: a seal, and a writer's assertion,
#: is one atomic batch of a message per open segment and the stream's record, and the
#: cluster takes at most 1,000 messages in a batch (nats-server's jetstream.limits.batch.max_msgs
#: default).
JETSTREAM_MAX_SEGMENTS_PER_STREAM = 999


@dataclass(frozen=True)
class JetStreamConfig(StorageConfig):
    """How a JetStream store behaves: :class:`StorageConfig` and its cluster.

    Attributes:
        servers: the cluster's client URLs (``nats://host:4222``; ``tls://``
            for TLS; ``nats://user:password@host:4222`` carries credentials).
            The client connects to one and moves to another when it goes.
        namespace: what every stream, subject and bucket of this store starts
            with (:mod:`.naming`); stores of other namespaces share the
            cluster without seeing each other.
        replicas: JetStream's replication factor for every stream and bucket
            the store makes (3 on a 3-node cluster: an acknowledgement then
            means a quorum of 2 stored it).
        user: the user to connect as, with ``password_file`` (a password
            in the URLs works too, but shows in a process list).
        password_file: a file holding the user's password (its first line).
        creds_file: a NATS credentials file (JWT and NKey seed), if the
            cluster uses decentralised authentication.
        tls_ca_file: the CA that signed the cluster's certificates (for
            ``tls://`` URLs with a private CA).
        unavailable_retry_s: how long a call retries, backing off, while the
            cluster cannot answer (a leader election takes 4.5 to 7.8 s; a
            cluster without a quorum answers nothing); then it fails with
            UNAVAILABLE, and a client that retries tries again.
        request_timeout_s: how long one request to the cluster may take.
        read_cache_bytes: how many bytes of fetched and published messages a
            server keeps for reads (least recently used go first).
        max_segments_per_stream: as on every storage, but at most
            :data:`JETSTREAM_MAX_SEGMENTS_PER_STREAM` (999), and that by
            default: a seal or an assertion is one atomic batch with a message
            per open segment, and a batch holds at most 1,000 messages.
    """

    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    namespace: str = "tidemark"
    replicas: int = 3
    user: str | None = None
    password_file: str | None = None
    creds_file: str | None = None
    tls_ca_file: str | None = None
    unavailable_retry_s: float = 10.0
    request_timeout_s: float = 2.0
    read_cache_bytes: int = 64 * 1024 * 1024
    max_segments_per_stream: int = JETSTREAM_MAX_SEGMENTS_PER_STREAM

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.servers, str) or not self.servers:
            msg = f"servers must be a sequence of one or more URLs, got {self.servers!r}"
            raise InvalidArgumentError(msg)
        object.__setattr__(self, "servers", tuple(self.servers))
        for url in self.servers:
            if not isinstance(url, str) or "://" not in url:
                msg = f"a NATS server URL is like nats://host:4222, got {url!r}"
                raise InvalidArgumentError(msg)
        check_namespace(self.namespace)
        if not isinstance(self.replicas, int) or not 1 <= self.replicas <= 5:
            msg = f"replicas must be 1 to 5 (JetStream's limit), got {self.replicas!r}"
            raise InvalidArgumentError(msg)
        for name in ("unavailable_retry_s", "request_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                msg = f"{name} must be > 0, got {value!r}"
                raise InvalidArgumentError(msg)
        if (self.user is None) != (self.password_file is None):
            msg = "user and password_file go together"
            raise InvalidArgumentError(msg)
        most = JETSTREAM_MAX_SEGMENTS_PER_STREAM
        if self.max_segments_per_stream > most:
            msg = (
                f"max_segments_per_stream must be at most {most} on JetStream (a seal or an "
                "assertion is one atomic batch of a message per open segment, and a batch "
                f"holds at most 1,000 messages), got {self.max_segments_per_stream!r}"
            )
            raise InvalidArgumentError(msg)
        if not isinstance(self.read_cache_bytes, int) or self.read_cache_bytes < 0:
            msg = f"read_cache_bytes must be >= 0, got {self.read_cache_bytes!r}"
            raise InvalidArgumentError(msg)

    def redacted_servers(self) -> str:
        """The server URLs for logs and messages, passwords left out."""
        shown = []
        for url in self.servers:
            scheme, _, rest = url.partition("://")
            credentials, at, host = rest.rpartition("@")
            if at:
                user = credentials.partition(":")[0]
                rest = f"{user}:***@{host}" if ":" in credentials else f"***@{host}"
            shown.append(f"{scheme}://{rest}")
        return ",".join(shown)
