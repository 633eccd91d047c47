"""The NATS connection and the JetStream calls the store makes, with errors in Tidemark's words.

:class:`Engine` owns one nats-py connection on an asyncio event loop running
in a thread of its own; the store's blocking methods hand it coroutines
(:meth:`Engine.run`). Every call maps what can go wrong to one of a few
errors, so no engine error ever reaches a client as a wrong status:

- :class:`EngineUnavailable` (a :class:`~connector.errors.StoreUnavailableError`,
  so UNAVAILABLE): no server answered (503 "no responders", which is what a
  cluster without a quorum or a stream without a leader gives, and which
  nats-py reports like a missing stream), a request timed out (its outcome is
  unknown), the connection is down. Never NOT_FOUND;
- :class:`WrongLastSequence`: a publish's expected last sequence did not hold
  (JetStream error 10071): someone else wrote first. Only 10071 says so;
- :class:`SubjectBusy` (an :class:`EngineUnavailable`): JetStream error
  10164, another conditional publish on the same subject is not committed
  yet. This publish was not stored, but whether its expectation holds is
  unknown: the one in flight (an earlier try of this very write, whose
  answer timed out while the cluster had no quorum) may still be stored
  once a quorum is back. So it is never a refusal: a caller that cannot
  take "not stored, try again" retries with backoff and ends UNAVAILABLE;
- :class:`StreamMissing` and :class:`NoMessage`: JetStream said the stream,
  or the message, does not exist (a proper answer, codes 10059 and 10037);
- :class:`EngineRefused`: any other refusal, with JetStream's description.

:class:`Backoff` is the retry rule across unavailability: waits from 50 ms
doubling to 1 s, with jitter, for at most ``unavailable_retry_s`` in all.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import ssl
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from connector.errors import InvalidArgumentError, StoreUnavailableError, TidemarkError
from connector.store.jetstream.config import JetStreamConfig

__all__ = [
    "Backoff",
    "Engine",
    "EngineRefused",
    "EngineUnavailable",
    "Fetched",
    "NoMessage",
    "StreamMissing",
    "SubjectBusy",
    "WrongLastSequence",
]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

_API = "$JS.API"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_KV_OPERATION = "KV-Operation"
_WRONG_LAST_SEQUENCE = 10071
#: JetStream's "wrong last sequence" without a sequence: another conditional publish on the
#: subject is in flight (not committed yet). Not a refusal: see SubjectBusy.
_SUBJECT_BUSY = 10164
_STREAM_NOT_FOUND = 10059
_NO_MESSAGE = 10037
_CLUSTER_UNAVAILABLE = frozenset({10008, 10074, 10075})
#: "No suitable peers for placement": a lasting refusal (more replicas than nodes, no room), or
#: a passing one while a node is offline (restarting, or not yet heard from after a start).
_NO_PEERS = 10005
_PEER_OFFLINE = "peer offline"
#: The shortest timeout a request is given when a call's budget is nearly spent.
_LEAST_TIMEOUT_S = 0.01


class EngineUnavailable(StoreUnavailableError):
    """The JetStream cluster could not answer (no quorum, no leader, timed out, disconnected)."""


class SubjectBusy(EngineUnavailable):
    """Another conditional publish on the subject is not committed yet (JetStream error 10164).

    This publish was not stored; whether its expected sequence holds is
    unknown until the one in flight is committed or dropped.
    """


class WrongLastSequence(TidemarkError):
    """A publish or key update expected a last sequence that no longer holds (error 10071)."""


class StreamMissing(TidemarkError):
    """JetStream answered that the stream (or bucket) does not exist."""


class NoMessage(TidemarkError):
    """JetStream answered that the message (or key) does not exist."""


class EngineRefused(TidemarkError):
    """JetStream refused a request for another reason (its description says why)."""


@dataclass(frozen=True)
class Fetched:
    """A stored message: its stream sequence, subject, headers and payload."""

    seq: int
    subject: str
    headers: Mapping[str, str]
    data: bytes


def _refusal(error: Mapping[str, Any], what: str) -> TidemarkError:
    """The error a JetStream API error object stands for."""
    code = error.get("err_code")
    description = error.get("description", "")
    if code == _WRONG_LAST_SEQUENCE:
        return WrongLastSequence(f"{what}: {description}")
    if code == _SUBJECT_BUSY:
        return SubjectBusy(
            f"{what}: another write to the same key or segment is not committed yet "
            f"(the JetStream cluster may have lost its quorum; {description})"
        )
    if code == _STREAM_NOT_FOUND:
        return StreamMissing(f"{what}: {description}")
    if code == _NO_MESSAGE:
        return NoMessage(f"{what}: {description}")
    passing = code == _NO_PEERS and _PEER_OFFLINE in description
    if code in _CLUSTER_UNAVAILABLE or passing or error.get("code") == 503:
        return EngineUnavailable(f"{what}: the JetStream cluster is unavailable ({description})")
    return EngineRefused(f"{what}: JetStream refused it (error {code}: {description})")


def translated(error: BaseException, what: str) -> BaseException:
    """The Tidemark error standing for a nats-py error raised while doing ``what``."""
    if isinstance(error, TidemarkError):
        return error
    if isinstance(error, nats.js.errors.KeyWrongLastSequenceError):
        return WrongLastSequence(f"{what}: {error.description}")
    if isinstance(error, nats.js.errors.APIError):
        return _refusal(
            {"code": error.code, "err_code": error.err_code, "description": error.description},
            what,
        )
    if isinstance(error, nats.errors.NoRespondersError | nats.js.errors.NoStreamResponseError):
        return EngineUnavailable(
            f"{what}: no JetStream server answered (no quorum, no leader for the stream yet, "
            "or its nodes' storage is full)"
        )
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return EngineUnavailable(f"{what}: the JetStream cluster did not answer in time")
    if isinstance(error, nats.errors.Error | ConnectionError | OSError):
        return EngineUnavailable(
            f"{what}: the connection to the JetStream cluster failed ({error})"
        )
    return error


class Backoff:
    """Waits between retries of a call across unavailability, for at most ``budget_s`` in all.

    The waits grow exponentially, from ``first_s`` doubling up to ``most_s``,
    each drawn at random from the upper half of its step (jitter), so calls
    that failed together do not all try again together. One backoff is one
    call's budget: what the call does between its tries (a request, bringing
    a view up to date) is bounded by :meth:`left_s` too, so the call ends
    within ``budget_s``.
    """

    def __init__(self, budget_s: float, first_s: float = 0.05, most_s: float = 1.0):
        self._deadline = time.monotonic() + budget_s
        self._budget_s = budget_s
        self._wait_s = first_s
        self._most_s = most_s

    def left_s(self) -> float:
        """The seconds left of the budget (0 once it is spent)."""
        return max(self._deadline - time.monotonic(), 0.0)

    def bounded(self, timeout_s: float) -> float:
        """``timeout_s``, or less: what is left of the budget (a request's own timeout)."""
        return max(min(timeout_s, self.left_s()), _LEAST_TIMEOUT_S)

    async def within(self, work: Awaitable[_T], what: str) -> _T:
        """Awaits ``work`` for at most what is left of the budget (``what`` names it).

        Raises:
            EngineUnavailable: ``work`` did not end in time; it is cancelled,
                its outcome unknown.
        """
        try:
            return await asyncio.wait_for(work, self.bounded(self._budget_s))
        except TimeoutError:
            msg = f"{what}: the JetStream cluster did not answer in time"
            raise EngineUnavailable(msg) from None

    async def after(self, error: EngineUnavailable) -> None:
        """Waits before the next try; raises ``error`` once the budget is spent."""
        left = self.left_s()
        if left <= 0:
            msg = f"{error} (retried for {self._budget_s:g} s)"
            raise EngineUnavailable(msg) from None
        wait_s = random.uniform(self._wait_s / 2, self._wait_s)  # noqa: S311 (jitter)
        await asyncio.sleep(min(wait_s, left))
        self._wait_s = min(self._wait_s * 2, self._most_s)


def _first_line(path: str) -> str:
    """The first line of the file at ``path`` (a password), without its line end."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.readline().rstrip("\r\n")
    except OSError as error:
        msg = f"the NATS password file {path!r} cannot be read: {error.strerror}"
        raise InvalidArgumentError(msg) from None


def _headers_of(msg: Msg) -> dict[str, str]:
    return dict(msg.headers or {})


class Engine:
    """One connection to a JetStream cluster, on an event loop of its own; see the module docstring.

    Events the server wants to hear of (the connection going and coming
    back) go to ``on_connection``, called on the loop with True or False.
    """

    def __init__(
        self, config: JetStreamConfig, on_connection: Callable[[bool], None] | None = None
    ):
        self.config = config
        self._on_connection = on_connection or (lambda _up: None)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="tidemark-jetstream", daemon=True
        )
        self._thread.start()
        self._nc: NatsClient | None = None
        self._closed = False

    # --- the loop -------------------------------------------------------------------

    def run(self, work: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        """Runs ``work`` on the engine's loop and waits for its result (from another thread)."""
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            msg = "the JetStream cluster did not answer in time"
            raise EngineUnavailable(msg) from None

    def spawn(self, work: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Starts ``work`` on the engine's loop without waiting for it."""
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    @property
    def on_loop(self) -> bool:
        """Whether the calling thread is the engine's loop."""
        return threading.current_thread() is self._thread

    # --- the connection ---------------------------------------------------------------

    def connect(self) -> None:
        """Connects to the cluster (blocking, bounded by the request timeout a few times over).

        Raises:
            EngineUnavailable: no server of the cluster could be reached.
        """
        self.run(self._connect())

    async def _connect(self) -> None:
        config = self.config
        options: dict[str, Any] = {
            "servers": list(config.servers),
            "name": "tidemark-server",
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.25,
            "connect_timeout": max(1, round(config.request_timeout_s)),
            "ping_interval": 2,
            "max_outstanding_pings": 2,
            "error_cb": self._error,
            "disconnected_cb": self._disconnected,
            "reconnected_cb": self._reconnected,
        }
        if config.creds_file:
            options["user_credentials"] = config.creds_file
        if config.user is not None:
            options["user"] = config.user
        if config.tls_ca_file:
            options["tls"] = ssl.create_default_context(cafile=config.tls_ca_file)
        if config.user is not None and config.password_file is not None:
            options["password"] = _first_line(config.password_file)  # a bad file: said at once
        try:
            # With reconnects unbounded nats-py would try the first connection for ever too.
            self._nc = await asyncio.wait_for(nats.connect(**options), config.unavailable_retry_s)
        except Exception as error:
            what = f"connecting to {config.redacted_servers()}"
            if isinstance(error, asyncio.TimeoutError):
                msg = f"{what}: no NATS server answered within {config.unavailable_retry_s:g} s"
                raise EngineUnavailable(msg) from None
            if isinstance(error, nats.errors.NoServersError | OSError):
                msg = f"{what}: no NATS server could be reached ({error})"
                raise EngineUnavailable(msg) from None
            msg = f"{what} failed: {error}"
            raise EngineUnavailable(msg) from None

    async def _error(self, error: Exception) -> None:
        if not isinstance(error, nats.errors.SlowConsumerError):
            _log.debug("NATS connection: %s", error)

    async def _disconnected(self) -> None:
        if not self._closed:
            _log.warning("disconnected from the JetStream cluster; reconnecting")
        self._on_connection(False)

    async def _reconnected(self) -> None:
        url = self._nc.connected_url.netloc if self._nc and self._nc.connected_url else "?"
        _log.info("reconnected to the JetStream cluster at %s", url.rpartition("@")[2])
        self._on_connection(True)

    @property
    def nc(self) -> NatsClient:
        """The connection (once connected)."""
        if self._nc is None:
            msg = "not connected to the JetStream cluster"
            raise EngineUnavailable(msg)
        return self._nc

    @property
    def connected(self) -> bool:
        """Whether the connection is up now."""
        return self._nc is not None and self._nc.is_connected

    @property
    def max_payload(self) -> int:
        """The largest message the cluster accepts, headers included."""
        return self.nc.max_payload

    def close(self) -> None:
        """Closes the connection and stops the loop; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        if self._nc is not None:
            try:
                self.run(self._nc.close(), timeout_s=5)
            except Exception as error:  # closing must not fail the server's stop
                _log.debug("closing the NATS connection: %s", error)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()  # its selector and self-pipe: three descriptors otherwise left open

    # --- requests ------------------------------------------------------------------

    async def _request(
        self,
        subject: str,
        payload: bytes,
        what: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Msg:
        try:
            return await self.nc.request(
                subject,
                payload,
                timeout=timeout_s or self.config.request_timeout_s,
                headers=dict(headers) if headers else None,
            )
        except Exception as error:
            raise translated(error, what) from None

    async def api(
        self, endpoint: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Calls ``$JS.API.{endpoint}`` and returns its answer; refusals raise (see module)."""
        what = f"JetStream {endpoint.split('.', 2)[0].lower()} {endpoint.partition('.')[2]}"
        payload = json.dumps(body).encode() if body is not None else b""
        msg = await self._request(f"{_API}.{endpoint}", payload, what, timeout_s=timeout_s)
        try:
            answer = json.loads(msg.data)
        except ValueError:
            msg_text = f"{what}: an answer that is not JSON: {msg.data[:100]!r}"
            raise EngineRefused(msg_text) from None
        if "error" in answer:
            raise _refusal(answer["error"], what)
        return answer

    async def publish(
        self,
        subject: str,
        payload: bytes,
        headers: Mapping[str, str],
        expected_last_subject_seq: int | None = None,
        timeout_s: float | None = None,
    ) -> int:
        """Publishes one message and returns its stream sequence once a quorum stored it.

        Raises:
            WrongLastSequence: the subject's last sequence was not
                ``expected_last_subject_seq``; nothing was stored.
            EngineUnavailable: no answer; the message may or may not be stored.
        """
        headers = dict(headers)
        if expected_last_subject_seq is not None:
            headers[_EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
        msg = await self._request(subject, payload, f"a publish to {subject}", headers, timeout_s)
        return self._acknowledged(msg, subject)

    async def publish_atomic(
        self,
        messages: Sequence[tuple[str, bytes, Mapping[str, str]]],
        timeout_s: float | None = None,
    ) -> int:
        """Publishes ``messages`` as one atomic batch, all stored or none; returns the last seq.

        Each message's headers may carry its own expected last subject
        sequence; the batch fails whole when any does not hold. The answer
        is waited for ``timeout_s`` (by default the request timeout).

        Raises:
            WrongLastSequence: an expectation did not hold; nothing was stored.
            EngineUnavailable: no answer; the batch may or may not be stored.
        """
        if len(messages) == 1:
            subject, payload, headers = messages[0]
            return await self.publish(subject, payload, headers, timeout_s=timeout_s)
        batch = uuid.uuid4().hex
        last = len(messages)
        try:
            for number, (subject, payload, headers) in enumerate(messages[:-1], 1):
                marked = {**headers, "Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(number)}
                await self.nc.publish(subject, payload, headers=marked)
        except Exception as error:
            raise translated(error, "an atomic batch") from None
        subject, payload, headers = messages[-1]
        committing = {
            **headers,
            "Nats-Batch-Id": batch,
            "Nats-Batch-Sequence": str(last),
            "Nats-Batch-Commit": "1",
        }
        what = f"an atomic batch to {subject}"
        msg = await self._request(subject, payload, what, committing, timeout_s)
        return self._acknowledged(msg, subject)

    @staticmethod
    def _acknowledged(msg: Msg, subject: str) -> int:
        try:
            answer = json.loads(msg.data)
        except ValueError:
            text = f"a publish to {subject} got an answer that is not JSON: {msg.data[:100]!r}"
            raise EngineRefused(text) from None
        if "error" in answer:
            raise _refusal(answer["error"], f"a publish to {subject}")
        return int(answer["seq"])

    # --- fetching messages -------------------------------------------------------------

    async def fetch_batch(
        self,
        stream: str,
        start_seq: int,
        batch: int,
        max_bytes: int,
        subject: str | None = None,
    ) -> tuple[list[Fetched], int]:
        """Up to ``batch`` messages from ``start_seq`` on (of ``subject`` only, if given).

        One direct-get request, answered by any replica: a replica behind
        the leader answers with fewer messages, so callers that need given
        sequences check and ask again. Returns the messages and how many
        more the answering replica holds after them.
        """
        body: dict[str, Any] = {"seq": max(start_seq, 1), "batch": batch, "max_bytes": max_bytes}
        if subject is not None:
            body["next_by_subj"] = subject
        what = f"reading {stream}"
        inbox = self.nc.new_inbox()
        replies: asyncio.Queue[Msg] = asyncio.Queue()

        async def collect(msg: Msg) -> None:
            await replies.put(msg)

        try:
            subscription = await self.nc.subscribe(inbox, cb=collect)
        except Exception as error:
            raise translated(error, what) from None
        fetched: list[Fetched] = []
        pending = 0
        try:
            await self.nc.publish(
                f"{_API}.DIRECT.GET.{stream}", json.dumps(body).encode(), reply=inbox
            )
            while True:
                msg = await asyncio.wait_for(replies.get(), self.config.request_timeout_s)
                headers = _headers_of(msg)
                status = headers.get("Status")
                if status:
                    pending = int(headers.get("Nats-Num-Pending", "0") or 0)
                    if status in ("204", "404", "408"):
                        return fetched, pending
                    if status == "503":
                        text = f"{what}: no JetStream server answered"
                        raise EngineUnavailable(text)
                    text = f"{what}: JetStream answered {status} {headers.get('Description', '')}"
                    raise EngineRefused(text)
                fetched.append(
                    Fetched(
                        int(headers["Nats-Sequence"]), headers["Nats-Subject"], headers, msg.data
                    )
                )
                pending = int(headers.get("Nats-Num-Pending", "0") or 0)
        except TidemarkError:
            raise
        except Exception as error:
            raise translated(error, what) from None
        finally:
            try:
                await subscription.unsubscribe()
            except Exception as error:  # the connection went: nothing to unsubscribe from
                _log.debug("unsubscribing a read's inbox: %s", error)

    async def get_message(self, stream: str, seq: int) -> Fetched:
        """The message at ``seq``, answered by the stream's leader.

        Raises:
            NoMessage: there is none (deleted or purged).
        """
        answer = await self.api(f"STREAM.MSG.GET.{stream}", {"seq": seq})
        return self._raw_message(answer["message"])

    async def last_message(self, stream: str, subject: str) -> Fetched | None:
        """The last message of ``subject``, answered by the leader; None when there is none."""
        try:
            answer = await self.api(f"STREAM.MSG.GET.{stream}", {"last_by_subj": subject})
        except NoMessage:
            return None
        return self._raw_message(answer["message"])

    async def next_message(self, stream: str, seq: int, subjects: str) -> Fetched:
        """The first message at or after ``seq`` of ``subjects``, answered by the leader."""
        answer = await self.api(f"STREAM.MSG.GET.{stream}", {"seq": seq, "next_by_subj": subjects})
        return self._raw_message(answer["message"])

    @staticmethod
    def _raw_message(message: Mapping[str, Any]) -> Fetched:
        headers: dict[str, str] = {}
        raw = message.get("hdrs")
        if raw:
            lines = base64.b64decode(raw).decode().split("\r\n")[1:]
            for line in lines:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip()] = value.strip()
        data = base64.b64decode(message["data"]) if message.get("data") else b""
        return Fetched(int(message["seq"]), message["subject"], headers, data)

    # --- streams ------------------------------------------------------------------------

    async def create_stream(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Creates a stream (JetStream answers an identical existing one as created)."""
        return await self.api(f"STREAM.CREATE.{config['name']}", config)

    async def delete_stream(self, stream: str) -> None:
        """Deletes a stream; one that is gone already is fine."""
        try:
            await self.api(f"STREAM.DELETE.{stream}")
        except StreamMissing:
            return

    async def purge_subject(self, stream: str, subject: str, keep: int) -> None:
        """Removes ``subject``'s messages but its last ``keep``."""
        await self.api(f"STREAM.PURGE.{stream}", {"filter": subject, "keep": keep})

    async def stream_info(self, stream: str, timeout_s: float | None = None) -> dict[str, Any]:
        """The stream's configuration, state and cluster (answered by its leader)."""
        return await self.api(f"STREAM.INFO.{stream}", timeout_s=timeout_s)

    async def stream_infos(self, subject: str) -> list[dict[str, Any]]:
        """The infos of every stream holding subjects under ``subject`` (a wildcard)."""
        infos: list[dict[str, Any]] = []
        while True:
            answer = await self.api("STREAM.LIST", {"offset": len(infos), "subject": subject})
            page = answer.get("streams") or []
            infos.extend(page)
            if not page or len(infos) >= answer.get("total", 0):
                return infos

    async def follow(
        self,
        stream: str,
        subject: str,
        start_seq: int,
        on_message: Callable[[Msg], Awaitable[None]],
    ) -> Any:
        """Delivers ``subject``'s messages from ``start_seq`` on, headers only, in order.

        An ordered push consumer (nats-py recreates it from the last
        sequence delivered when it misses heartbeats or a message), so
        deliveries survive the loss of the node serving it.
        """
        config = ConsumerConfig(
            headers_only=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=max(start_seq, 1),
            inactive_threshold=30.0,
        )
        try:
            return await self.nc.jetstream().subscribe(
                subject,
                stream=stream,
                cb=on_message,
                ordered_consumer=True,
                idle_heartbeat=1.0,
                config=config,
            )
        except Exception as error:
            raise translated(error, f"following {stream}") from None

    async def subscribe(self, subject: str, on_message: Callable[[Msg], Awaitable[None]]) -> Any:
        """A plain subscription to ``subject`` (advisories)."""
        try:
            return await self.nc.subscribe(subject, cb=on_message)
        except Exception as error:
            raise translated(error, f"subscribing to {subject}") from None

    # --- key-value buckets ------------------------------------------------------------

    async def ensure_bucket(self, bucket: str, replicas: int) -> None:
        """Makes the key-value bucket unless it exists; reads of it are answered by its leader."""
        config = {
            "name": f"KV_{bucket}",
            "subjects": [f"$KV.{bucket}.>"],
            "num_replicas": replicas,
            "max_msgs_per_subject": 1,
            "discard": "new",
            "allow_rollup_hdrs": True,
            "deny_delete": True,
            "allow_direct": False,
            "storage": "file",
            "retention": "limits",
            "max_consumers": -1,
            "max_msgs": -1,
            "max_bytes": -1,
            "max_age": 0,
            "duplicate_window": 120_000_000_000,
        }
        try:
            await self.create_stream(config)
        except EngineRefused as error:
            if "already in use" not in str(error):
                raise
            _log.info("bucket %s exists with another configuration; using it", bucket)

    async def kv_entry(self, bucket: str, key: str) -> Fetched | None:
        """The last message of ``key`` (a deletion's marker too), asked of the leader."""
        try:
            return await self.last_message(f"KV_{bucket}", f"$KV.{bucket}.{key}")
        except StreamMissing as error:
            msg = f"{error}: the bucket {bucket!r} is missing"
            raise EngineUnavailable(msg) from None

    @staticmethod
    def is_deletion(message: Fetched) -> bool:
        """Whether a key's message is the marker of its deletion."""
        return message.headers.get(_KV_OPERATION) in ("DEL", "PURGE")

    async def kv_get(self, bucket: str, key: str) -> tuple[bytes, int] | None:
        """The value and revision of ``key``; None when it has none (never set, or deleted)."""
        message = await self.kv_entry(bucket, key)
        if message is None or self.is_deletion(message):
            return None
        return message.data, message.seq

    async def kv_create(self, bucket: str, key: str, value: bytes, last: int = 0) -> int:
        """Sets ``key`` if it has no value; returns the revision.

        ``last`` is the revision of its deletion's marker, if it had a value
        once (0: look it up when need be).

        Raises:
            WrongLastSequence: ``key`` has a value.
        """
        subject = f"$KV.{bucket}.{key}"
        try:
            return await self.publish(subject, value, {}, expected_last_subject_seq=last)
        except WrongLastSequence:
            marker = await self.kv_entry(bucket, key)
            if marker is None or not self.is_deletion(marker) or marker.seq == last:
                raise
            return await self.publish(subject, value, {}, expected_last_subject_seq=marker.seq)

    async def kv_update(self, bucket: str, key: str, value: bytes, last: int) -> int:
        """Sets ``key`` if its revision is still ``last``; returns the new revision."""
        subject = f"$KV.{bucket}.{key}"
        return await self.publish(subject, value, {}, expected_last_subject_seq=last)

    async def kv_delete(self, bucket: str, key: str, last: int, marker: bytes = b"") -> int:
        """Deletes ``key`` if its revision is still ``last``; returns the marker's revision.

        The marker (which watchers see) carries ``marker`` as its payload.
        """
        subject = f"$KV.{bucket}.{key}"
        headers = {_KV_OPERATION: "DEL"}
        return await self.publish(subject, marker, headers, expected_last_subject_seq=last)

    async def kv_watch(self, bucket: str, keys: str = ">", meta_only: bool = False) -> Any:
        """A nats-py watcher of ``keys`` (initial values, then a None, then updates)."""
        try:
            store = await self.nc.jetstream().key_value(bucket)
            return await store.watch(keys, meta_only=meta_only, inactive_threshold=30.0)
        except Exception as error:
            raise translated(error, f"watching bucket {bucket}") from None

    async def kv_keys(self, bucket: str, keys: str) -> list[str]:
        """The keys matching ``keys`` that have a value now."""
        watcher = await self.kv_watch(bucket, keys, meta_only=True)
        found: list[str] = []
        try:
            while True:
                entry = await watcher.updates(timeout=self.config.request_timeout_s)
                if entry is None:
                    return found
                if entry.operation not in ("DEL", "PURGE"):
                    found.append(entry.key)
                elif entry.key in found:
                    found.remove(entry.key)
        except Exception as error:
            raise translated(error, f"listing bucket {bucket}") from None
        finally:
            try:
                await watcher.stop()
            except Exception as error:
                _log.debug("stopping a listing of %s: %s", bucket, error)

    def __repr__(self) -> str:
        return f"Engine({self.config.redacted_servers()!r}, connected={self.connected})"
