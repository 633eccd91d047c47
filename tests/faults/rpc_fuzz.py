"""A seeded fuzz of every RPC of the segment store, over gRPC, against a real server.

:class:`RpcFuzzer` sends requests whose fields are drawn from random and
adversarial values (huge and negative numbers, empty, non-ASCII, overlong
and alias-like names such as ``"+1"``, ``"1_0"`` or ``"٣"``, offsets inside
events, oversized batches, random bytes as events, unknown segments), mixed
with valid calls on streams it creates, so that the server's deeper paths
(reads of real data at non-boundary offsets, scales of written segments,
compare-and-set on stored values) are reached too. One call in twenty sends
bytes that do not decode as the RPC's request (random, truncated, corrupted,
nested past protobuf's limit) instead of a message. Every answer is checked
by :meth:`RpcFuzzer.check_answer`: no status is ``UNKNOWN`` or ``INTERNAL``,
and an error's message is one line, short, without the server's data dir
and without any long field value quoted whole.

The same seed gives the same calls: a failure names its seed and call number.
Only the scopes the fuzzer creates are changed; :data:`KEPT_SCOPE` is only
read, so the data stored there before the fuzz must stay byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS, MAX_EVENTS_PER_APPEND, MAX_ITEMS_PER_CALL
from connector.security import token_entry
from connector.security.credentials import TOKEN_METADATA_KEY

__all__ = [
    "ADMIN_TOKEN",
    "KEPT_SCOPE",
    "READER_TOKEN",
    "RPCS",
    "FuzzFailure",
    "FuzzReport",
    "FuzzStats",
    "FuzzTarget",
    "RpcFuzzer",
    "fuzz_server",
]

#: The scope whose data the fuzz only reads.
KEPT_SCOPE = "kept"
#: Bearer tokens of a :class:`FuzzTarget` with tokens: every right everywhere, and read on
#: :data:`KEPT_SCOPE` only.
ADMIN_TOKEN = "fuzz-admin-" + "a" * 40
READER_TOKEN = "fuzz-reader-" + "r" * 40
_OTHER_TOKENS = (
    ((TOKEN_METADATA_KEY, f"Bearer {READER_TOKEN}"),),
    ((TOKEN_METADATA_KEY, f"Bearer {READER_TOKEN}"),),
    ((TOKEN_METADATA_KEY, "Bearer not-a-token"),),
    ((TOKEN_METADATA_KEY, "Basic " + "x" * 200),),
    ((TOKEN_METADATA_KEY, "Bearer " + "x" * 20_000),),
    (("x-fuzz", "no token at all"),),
)
#: The request of issue 21's finding 3: a string field of bytes that are not UTF-8, then a
#: truncated tag.
UNDECODABLE = b"\x0a\x02\xff\xfe\xff"

_SERVICE = pb.DESCRIPTOR.services_by_name["SegmentStore"]
#: Every RPC of the SegmentStore service: the fuzz calls them all. Those without a request
#: maker of their own here (RPCs added since) get requests built from their fields' types.
RPCS = tuple(method.name for method in _SERVICE.methods)

_FORBIDDEN_CODES = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
#: What bytes that do not decode may get: refused as such, or for want of a valid token first.
_UNDECODABLE_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED)
#: The longest status message the server may send (it cuts at 1,000 characters).
_MAX_DETAILS = 1_100
#: A field value this long must never appear whole in a message.
_LONG_VALUE = 300

_I64_MAX = 2**63 - 1
_I64 = (0, 1, -1, _I64_MAX, -(2**63), 2**31, -(2**31) - 1, 2**53 + 1)
_I32 = (0, 1, -1, 2**31 - 1, -(2**31), 2, 64, 65, 1_000_000)
_ALIAS_NUMBERS = ("+1", "1_0", "٣", "²", "007", "-0", "-1", " 1", "1 ", "1e3", "0x1", "１")
_BAD_NAMES = (
    "",
    " ",
    ".",
    "..",
    "-a",
    "_a",
    "a/b",
    "a\x00b",
    "a\nb",
    "é",
    "名前",
    "٣",
    "+1",
    "1_0",
    "😀" * 30,
    "a" * 101,
    "../../etc",
    "/abs",
    "a" * 10_000,
    "x" * 100_000,
)


class FuzzFailure(AssertionError):
    """An answer broke a rule; names the seed, the call and the request."""


@dataclass
class FuzzStats:
    """What a fuzz run sent and what came back."""

    calls: int = 0
    #: Calls whose bytes did not decode as their request.
    undecodable: int = 0
    by_rpc: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)

    def merge(self, other: FuzzStats) -> None:
        """Adds ``other``'s counts to these."""
        self.calls += other.calls
        self.undecodable += other.undecodable
        self.by_rpc.update(other.by_rpc)
        self.by_code.update(other.by_code)


@dataclass
class _Known:
    """What the fuzzer knows of the store, to make valid calls too."""

    scopes: list[str] = field(default_factory=list)
    streams: list[tuple[str, str]] = field(default_factory=list)
    segments: list[str] = field(default_factory=list)
    offsets: dict[str, list[int]] = field(default_factory=dict)
    next_event: dict[tuple[str, str], int] = field(default_factory=dict)
    revisions: dict[str, int] = field(default_factory=dict)
    #: Each stream's last tails answer: (incarnation, version).
    tails: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    #: The last fetch session answered: (id, epoch).
    session: tuple[int, int] | None = None


class RpcFuzzer:
    """Sends seeded random and adversarial calls of every RPC through ``stub``.

    With a ``channel``, one call in twenty sends bytes that do not decode instead.

    ``forbidden`` are strings no error message may contain (the server's data
    dir). ``kept_segments`` may be read but are never written to, scaled,
    sealed or deleted by a valid call.
    """

    def __init__(
        self,
        stub: store_pb2_grpc.SegmentStoreStub,
        seed: int,
        channel: grpc.Channel | None = None,
        forbidden: Sequence[str] = (),
        kept_segments: Sequence[str] = (),
        timeout_s: float = 30.0,
        other_tokens: bool = False,
    ):
        self.stub = stub
        #: Where bytes that do not decode are sent (None: never).
        self.channel = channel
        self.seed = seed
        self.rng = random.Random(seed)
        self.forbidden = tuple(forbidden)
        self.timeout_s = timeout_s
        self.stats = FuzzStats()
        self.known = _Known(scopes=[f"fz{seed}"])
        self.kept_segments = list(kept_segments)
        self._tag = 0
        self._sent = 0
        # With tokens, one call in four carries a token without the right, or a wrong one.
        self._other_tokens = other_tokens
        #: Every answer that broke a rule, described (the fuzz goes on after one).
        self.failures: list[str] = []

    # --- running --------------------------------------------------------------

    def setup(self) -> None:
        """Creates the fuzzer's own scope (so valid calls have somewhere to go)."""
        self._send("CreateScope", pb.CreateScopeRequest(scope=self.known.scopes[0]))

    def burst(self, calls: int) -> FuzzStats:
        """Sends ``calls`` calls, each of a random RPC; returns their counts.

        An answer that breaks a rule is added to :attr:`failures`.
        """
        stats = FuzzStats()
        for _ in range(calls):
            rpc = self.rng.choice(RPCS)
            make = getattr(self, "_" + rpc, None)
            request = make() if make is not None else self._request_by_type(rpc)
            if self.channel is not None and self._chance(0.05):
                request = self._undecodable(request)
            try:
                code = self._send(rpc, request)
            except FuzzFailure as failure:
                self.failures.append(str(failure))
                code = "BROKE A RULE"
            stats.calls += 1
            stats.undecodable += isinstance(request, bytes)
            stats.by_rpc[rpc] += 1
            stats.by_code[code] += 1
        self.stats.merge(stats)
        return stats

    def _send(self, rpc: str, request: Any) -> str:
        self._sent += 1
        call_number = self._sent
        try:
            metadata = self._metadata_for_call()
            if isinstance(request, bytes):
                return self._send_undecodable(rpc, request, metadata, call_number)
            response = getattr(self.stub, rpc)(request, timeout=self.timeout_s, metadata=metadata)
        except grpc.RpcError as error:
            self.check_answer(rpc, request, error.code(), error.details() or "", call_number)
            return error.code().name
        self._learn(rpc, request, response)
        return "OK"

    def _send_undecodable(self, rpc: str, request: bytes, metadata: Any, call_number: int) -> str:
        """Sends bytes that do not decode: refused INVALID_ARGUMENT (UNAUTHENTICATED first)."""
        assert self.channel is not None
        path = f"/{_SERVICE.full_name}/{rpc}"
        try:
            self.channel.unary_unary(path)(request, timeout=self.timeout_s, metadata=metadata)
        except grpc.RpcError as error:
            self.check_answer(rpc, request, error.code(), error.details() or "", call_number)
            if error.code() in _UNDECODABLE_CODES:
                return error.code().name
            code = error.code().name
        else:
            code = "OK"
        msg = f"seed {self.seed}, call {call_number}: {rpc} answered undecodable bytes {code}"
        raise FuzzFailure(msg)

    def _undecodable(self, request: Any) -> bytes:
        """Bytes that do not decode as ``request``'s type."""
        valid = request.SerializeToString()
        roll = self.rng.random()
        if roll < 0.3 or not valid:
            return UNDECODABLE
        if roll < 0.5:  # a length-delimited field running past the end
            return valid + b"\x0a" + bytes([self.rng.randrange(5, 120)]) + b"x"
        if roll < 0.7:  # a truncated varint
            return valid + b"\x08" + b"\xff" * self.rng.randrange(1, 9)
        if roll < 0.85:  # groups nested past protobuf's recursion limit
            return b"\x0b" * self.rng.choice((101, 1_000, 100_000))
        return b"\x0f" + self.rng.randbytes(self.rng.choice((1, 10, 200)))  # an end-group tag

    def _metadata_for_call(self) -> Any:
        if not self._other_tokens or self._chance(0.75):
            return None
        return self.rng.choice(_OTHER_TOKENS)

    def check_answer(
        self, rpc: str, request: Any, code: grpc.StatusCode, details: str, call_number: int = -1
    ) -> None:
        """Raises :class:`FuzzFailure` if an error answer breaks a rule."""
        problems = []
        if code in _FORBIDDEN_CODES:
            problems.append(f"status {code.name}")
        if "metadata size exceeds" in details:
            problems.append("an answer too large for gRPC's metadata (the client got no message)")
        if "\n" in details or "\r" in details:
            problems.append("a message of more than one line")
        if len(details) > _MAX_DETAILS:
            problems.append(f"a message of {len(details)} characters")
        if "Traceback" in details or 'File "' in details:
            problems.append("a traceback in the message")
        problems += [
            f"the path {path!r} in the message" for path in self.forbidden if path in details
        ]
        problems += [
            f"a {len(value)}-character field value quoted whole"
            for value in _long_values(request)
            if value in details or repr(value)[1:-1] in details
        ]
        if problems:
            shown = str(request)
            shown = shown if len(shown) < 500 else shown[:500] + "..."
            msg = (
                f"seed {self.seed}, call {call_number}: {rpc} answered {code.name} "
                f"{details[:300]!r}: {', '.join(problems)}; request: {shown}"
            )
            raise FuzzFailure(msg)

    def _learn(self, rpc: str, request: Any, response: Any) -> None:
        known = self.known
        if rpc == "CreateScope" and request.scope not in known.scopes:
            known.scopes.append(request.scope)
        elif rpc in ("CreateStream", "ScaleStream", "DescribeStream") and response.scope:
            pair = (response.scope, response.stream)
            if pair not in known.streams and response.scope != _KEPT:
                known.streams.append(pair)
            for segment in response.segments:
                if segment.segment not in known.segments and response.scope != _KEPT:
                    known.segments.append(segment.segment)
        elif rpc == "DeleteStream":
            pair = (request.scope, request.stream)
            if pair in known.streams:
                known.streams.remove(pair)
            prefix = f"{request.scope}/{request.stream}/"
            known.segments = [s for s in known.segments if not s.startswith(prefix)]
            for gone in [s for s in known.offsets if s.startswith(prefix)]:
                del known.offsets[gone]
        elif rpc == "AppendEvents" and response.appended:
            key = (request.segment, request.writer_id)
            known.next_event[key] = request.first_event_number + len(request.events)
            known.offsets.setdefault(request.segment, [0]).append(response.write_offset)
        elif rpc in ("ReadSegment", "GetSegmentInfo", "PlanRead"):
            offsets = known.offsets.setdefault(request.segment, [0])
            info = rpc == "GetSegmentInfo"
            offsets.append(response.write_offset if info else response.next_offset)
            del offsets[:-64]
        elif rpc == "CompareAndSetState":
            known.revisions[request.key] = response.current.revision
        elif rpc == "DescribeTails":
            for tails in response.streams:
                if not tails.HasField("error"):
                    known.tails[(tails.scope, tails.stream)] = (tails.incarnation, tails.version)
        elif rpc == "ReadSegments" and response.session_id:
            known.session = (response.session_id, response.session_epoch)
            for read in response.reads:
                offsets = known.offsets.setdefault(read.segment, [0])
                offsets.append(read.next_offset)
                del offsets[:-64]

    # --- values ---------------------------------------------------------------

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def _name(self, valid: Sequence[str]) -> str:
        roll = self.rng.random()
        if valid and roll < 0.5:
            return self.rng.choice(valid)
        if roll < 0.8:
            return self.rng.choice(_BAD_NAMES)
        if roll < 0.9:
            return self._fresh_name()
        return self._random_text(self.rng.choice((1, 5, 120, 5_000)))

    def _fresh_name(self) -> str:
        self._tag += 1
        return f"n{self.seed}-{self._tag}"

    def _random_text(self, length: int) -> str:
        alphabet = self.rng.choice(
            (
                "abcXYZ019_.-",
                'abc/\\:*?"<>|\t ',
                "éüß名前٣²１😀\u200b\u202e",
                "".join(chr(c) for c in range(0x20, 0x7F)),
            )
        )
        return "".join(self.rng.choice(alphabet) for _ in range(length))

    def _scope_stream(self) -> tuple[str, str]:
        if self.known.streams and self._chance(0.5):
            scope, stream = self.rng.choice(self.known.streams)
            if self._chance(0.8):
                return scope, stream
            return scope, self._name(())
        return self._name(self.known.scopes), self._name(())

    def _segment(self, writable: bool = False) -> str:
        roll = self.rng.random()
        kept = () if writable else self.kept_segments
        valid = self.known.segments + list(kept)
        written = [
            s
            for s, offsets in self.known.offsets.items()
            if max(offsets) > 0 and not (writable and s in self.kept_segments)
        ]
        if written and roll < 0.25:  # where there is data to read or to append after
            return self.rng.choice(written)
        if valid and roll < 0.55:
            return self.rng.choice(valid)
        if valid and roll < 0.75:
            base = self.rng.choice(valid).rsplit("/", 1)[0]
            return f"{base}/{self.rng.choice(_ALIAS_NUMBERS + ('999', '9' * 20, '9' * 4300))}"
        if roll < 0.9:
            scope, stream = self._scope_stream()
            return f"{scope}/{stream}/{self.rng.choice(('0', *_ALIAS_NUMBERS))}"
        return self._random_text(self.rng.choice((0, 3, 12, 200, 20_000)))

    def _offset(self, segment: str) -> int:
        offsets = self.known.offsets.get(segment)
        roll = self.rng.random()
        if offsets and roll < 0.4:
            base = self.rng.choice(offsets)
            return base + self.rng.choice((0, 0, 1, -1, 2, 7, 16, 17, 100, -100))
        if offsets and roll < 0.6:  # anywhere in the data: mostly inside an event
            return self.rng.randrange(0, max(offsets) + 1)
        if roll < 0.8:
            return self.rng.choice(_I64)
        return self.rng.randrange(0, 1 << 20)

    def _events(self) -> list[bytes]:
        roll = self.rng.random()
        if roll < 0.05:
            return []
        if roll < 0.08:
            return [b"x"] * (MAX_EVENTS_PER_APPEND + 1)
        if roll < 0.11:
            return [self.rng.randbytes(1024 * 1024 + self.rng.choice((0, 1)))]
        if roll < 0.15:
            return [b""] * self.rng.randrange(1, 10)
        count = self.rng.choice((1, 2, 5, 50, 1_000))
        return [self.rng.randbytes(self.rng.choice((1, 10, 200))) for _ in range(count)]

    def _routing_keys(self, count: int) -> list[str]:
        roll = self.rng.random()
        if roll < 0.6:
            return []
        if roll < 0.8:
            return [self.rng.choice(("k", "", "名前", "٣", "😀")) for _ in range(count)]
        if roll < 0.9:
            return ["k"] * self.rng.choice((1, count + 1, max(0, count - 1)))
        return ["x" * self.rng.choice((65_535, 65_536, 200_000))] * min(count, 2)

    def _state_key(self) -> str:
        keys = list(self.known.revisions)
        roll = self.rng.random()
        if keys and roll < 0.4:
            return self.rng.choice(keys)
        if roll < 0.6:
            return f"fz{self.seed}-key-{self.rng.randrange(8)}"
        return self.rng.choice(("", "x" * 512, "x" * 513, "x" * 100_000, "名前", "a/b", "\x00"))

    # --- requests from field types (RPCs without a maker of their own) --------

    def _request_by_type(self, rpc: str) -> Any:
        request = getattr(pb, _SERVICE.methods_by_name[rpc].input_type.name)()
        self._fill(request, depth=0)
        return request

    def _fill(self, message: Any, depth: int) -> None:
        for descriptor in message.DESCRIPTOR.fields:
            repeated = getattr(descriptor, "is_repeated", None)
            if repeated is None:
                repeated = descriptor.label == descriptor.LABEL_REPEATED
            count = self.rng.choice((0, 1, 1, 2, 5)) if repeated else 1
            container = getattr(message, descriptor.name)
            entry = descriptor.message_type
            if entry is not None and entry.GetOptions().map_entry:
                key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
                for _ in range(count):
                    container[self._value_of(key)] = self._value_of(value)
                continue
            for _ in range(count):
                if descriptor.type == descriptor.TYPE_MESSAGE:
                    if depth < 3:
                        child = container.add() if repeated else container
                        self._fill(child, depth + 1)
                    continue
                value = self._value_of(descriptor)
                if repeated:
                    container.append(value)
                else:
                    setattr(message, descriptor.name, value)

    def _value_of(self, descriptor: Any) -> Any:
        name = descriptor.name
        if descriptor.type == descriptor.TYPE_STRING:
            if "segment" in name:
                return self._segment()
            if name in ("scope", "stream") or name.endswith(("_scope", "_stream")):
                return self._scope_stream()[0 if "scope" in name else 1]
            if "key" in name:
                return self._state_key()
            return self._name(self.known.scopes)
        if descriptor.type == descriptor.TYPE_BYTES:
            return self.rng.randbytes(self.rng.choice((0, 1, 100, 5_000)))
        if descriptor.type == descriptor.TYPE_BOOL:
            return self._chance(0.5)
        if descriptor.type in (descriptor.TYPE_DOUBLE, descriptor.TYPE_FLOAT):
            return self.rng.choice((0.0, 0.5, 1.0, -1.0, 1e308, float("inf"), float("nan")))
        if descriptor.type == descriptor.TYPE_ENUM:
            return self.rng.choice([v.number for v in descriptor.enum_type.values] + [999])
        if descriptor.type in (
            descriptor.TYPE_INT32,
            descriptor.TYPE_SINT32,
            descriptor.TYPE_SFIXED32,
        ):
            return self.rng.choice((*_I32, self.rng.randrange(0, 100)))
        if descriptor.type in (descriptor.TYPE_UINT32, descriptor.TYPE_FIXED32):
            return self.rng.choice((0, 1, 2**32 - 1, self.rng.randrange(0, 100)))
        if descriptor.type in (descriptor.TYPE_UINT64, descriptor.TYPE_FIXED64):
            return self.rng.choice((0, 1, 2**64 - 1, self.rng.randrange(0, 100)))
        return self.rng.choice((*_I64, self.rng.randrange(0, 1 << 20)))

    # --- one request per RPC --------------------------------------------------

    def _CreateScope(self) -> Any:
        return pb.CreateScopeRequest(scope=self._name(self.known.scopes + [self._fresh_name()]))

    def _CreateStream(self) -> Any:
        scope = self._name(self.known.scopes)
        stream = self._fresh_name() if self._chance(0.6) else self._name(())
        count = self.rng.choice((*_I32, 1, 2, 3, 4))
        return pb.CreateStreamRequest(scope=scope, stream=stream, segment_count=count)

    def _DescribeStream(self) -> Any:
        scope, stream = self._scope_stream()
        if self._chance(0.1):
            scope, stream = _KEPT, "k"
        return pb.DescribeStreamRequest(scope=scope, stream=stream)

    def _ScaleStream(self) -> Any:
        scope, stream = self._scope_stream()
        numbers = [
            int(s.rsplit("/", 1)[1])
            for s in self.known.segments
            if s.startswith(f"{scope}/{stream}/")
        ]
        roll = self.rng.random()
        if numbers and roll < 0.5:
            sealed = self.rng.sample(numbers, min(len(numbers), self.rng.choice((1, 1, 2, 3))))
        elif roll < 0.8:
            sealed = [self.rng.choice(_I64) for _ in range(self.rng.choice((0, 1, 2, 5)))]
        else:
            sealed = [0] * self.rng.choice((2, 100, 10_000))
        split = self.rng.choice((0, 0, 2, 3, *_I32))
        return pb.ScaleStreamRequest(
            scope=scope, stream=stream, sealed_segments=sealed, split_count=split
        )

    def _SealStream(self) -> Any:
        scope, stream = self._scope_stream()
        return pb.SealStreamRequest(scope=scope, stream=stream)

    def _DeleteStream(self) -> Any:
        scope, stream = self._scope_stream()
        return pb.DeleteStreamRequest(scope=scope, stream=stream)

    def _TruncateStream(self) -> Any:
        scope, stream = self._scope_stream()
        prefix = f"{scope}/{stream}/"
        ours = [s for s in self.known.segments if s.startswith(prefix)]
        cut: dict[int, int] = {}
        for segment in self.rng.sample(ours, min(len(ours), self.rng.choice((0, 1, 2, 3)))):
            cut[int(segment.rsplit("/", 1)[1])] = self._offset(segment)
        for _ in range(self.rng.choice((0, 0, 1, 3))):
            cut[self.rng.choice(_I32)] = self.rng.choice(_I64)
        return pb.TruncateStreamRequest(scope=scope, stream=stream, cut=cut)

    def _AppendEvents(self) -> Any:
        segment = self._segment(writable=True)
        writer = self.rng.choice(("w", "w2") * 4 + ("", "名前", "x" * 257, "x" * 100_000))
        expected = self.known.next_event.get((segment, writer), 0)
        first = (
            expected if self._chance(0.6) else self.rng.choice((*_I64, expected + 1, expected - 1))
        )
        events = self._events()
        keys = self._routing_keys(len(events))
        roll = self.rng.random()
        discarded_from = (
            None
            if roll < 0.7
            else min(
                self.rng.choice((expected, 0, first, first + 1, expected - 1, *_I64)), _I64_MAX
            )
        )
        assertion = (
            None
            if self._chance(0.8)
            else pb.AppendAssertion(
                number=self.rng.choice((0, 1, 2, 3, *_I64)),
                event_time=None if self._chance(0.2) else self.rng.choice((0, 1_000, *_I64)),
            )
        )
        return pb.AppendRequest(
            segment=segment,
            writer_id=writer,
            first_event_number=first,
            events=events,
            routing_keys=keys,
            discarded_from=discarded_from,
            assertion=assertion,
        )

    def _AssertWatermark(self) -> Any:
        scope, stream = self._scope_stream()
        writer = self.rng.choice(("w", "w2") * 4 + ("", "名前", "x" * 257))
        fences = [
            pb.WriterFence(
                segment=self._segment(writable=True),
                discarded_from=self.rng.choice((0, 1, *_I64)),
                next_event_number=self.rng.choice((0, 2, *_I64)),
            )
            for _ in range(self.rng.choice((0, 0, 0, 1, 2)))
        ]
        return pb.AssertWatermarkRequest(
            scope=scope,
            stream=stream,
            writer_id=writer,
            number=self.rng.choice((0, 1, 2, 3, *_I64)),
            event_time=None if self._chance(0.2) else self.rng.choice((0, 1_000, *_I64)),
            fences=fences,
        )

    def _ReadSegment(self) -> Any:
        segment = self._segment()
        has_known = self._chance(0.3)
        return pb.ReadRequest(
            segment=segment,
            offset=self._offset(segment),
            max_bytes=self.rng.choice((*_I32, 1, 17, 1 << 20, 1 << 26)),
            # A wait is short: a tail read parks a server thread for as long as it waits.
            wait_ms=self.rng.choice((0, 0, 0, 1, 20, -1, -(2**31))),
            known_watermark=self.rng.choice(_I64) if has_known else 0,
            has_known_watermark=has_known,
        )

    def _PlanRead(self) -> Any:
        segment = self._segment()
        return pb.PlanReadRequest(
            segment=segment,
            offset=self._offset(segment),
            max_events=self.rng.choice(_I64),
            max_bytes=self.rng.choice((*_I64, 17, 1 << 20)),
        )

    def _PlanReads(self) -> Any:
        if self._chance(0.02):  # over the limit of items per call
            return pb.PlanReadsRequest(plans=[self._PlanRead()] * (MAX_ITEMS_PER_CALL + 1))
        count = self.rng.choice((0, 1, 2, 5, 20))
        return pb.PlanReadsRequest(plans=[self._PlanRead() for _ in range(count)])

    def _DescribeTails(self) -> Any:
        streams = []
        for _ in range(self.rng.choice((0, 1, 1, 2, 5))):
            scope, stream = self._scope_stream()
            known = self.known.tails.get((scope, stream))
            if known is not None and self._chance(0.6):
                incarnation, version = known
            else:
                incarnation = self.rng.choice((0, 0, 1, 2**64 - 1))
                version = self.rng.choice(_I64)
            streams.append(
                pb.KnownTails(scope=scope, stream=stream, incarnation=incarnation, version=version)
            )
        if self._chance(0.02):  # over the limit of items per call
            streams = streams[:1] * (MAX_ITEMS_PER_CALL + 1)
        # A wait is short: the fuzz goes on once it ends (the server waits at most 30 s).
        wait_ms = self.rng.choice((0, 0, 0, 1, 20, -1, -(2**31)))
        return pb.DescribeTailsRequest(streams=streams, wait_ms=wait_ms)

    def _ReadSegments(self) -> Any:
        roll = self.rng.random()
        if self.known.session is not None and roll < 0.6:
            session_id, epoch = self.known.session
            if self._chance(0.1):  # a lost answer: the epoch before
                epoch -= 1
        elif roll < 0.85:
            session_id, epoch = 0, self.rng.choice((0, 0, 1, *_I64))
        else:
            session_id, epoch = self.rng.choice(_I64), self.rng.choice(_I64)
        cursors = []
        for _ in range(self.rng.choice((0, 0, 1, 2, 5))):
            segment = self._segment()
            known = self._chance(0.3)
            cursors.append(
                pb.Cursor(
                    segment=segment,
                    offset=None if self._chance(0.2) else self._offset(segment),
                    known_watermark=self.rng.choice(_I64) if known else None,
                    known_event_time_watermark=self.rng.choice(_I64) if known else None,
                )
            )
        if cursors and self._chance(0.05):
            cursors.append(cursors[0])  # named twice
        released = [self._segment() for _ in range(self.rng.choice((0, 0, 0, 1, 3)))]
        return pb.ReadSegmentsRequest(
            session_id=session_id,
            session_epoch=epoch,
            cursors=cursors,
            released=released,
            max_bytes=self.rng.choice((0, 0, 1, 17, 1 << 20, *_I32)),
            max_bytes_per_segment=self.rng.choice((0, 0, 1, 17, *_I32)),
            wait_ms=self.rng.choice((0, 0, 0, 1, 20, -1, -(2**31))),
            close=self._chance(0.05),
        )

    def _GetSegmentInfo(self) -> Any:
        return pb.SegmentInfoRequest(segment=self._segment())

    def _GetState(self) -> Any:
        return pb.GetStateRequest(key=self._state_key())

    def _CompareAndSetState(self) -> Any:
        key = self._state_key()
        current = self.known.revisions.get(key, 0)
        expected = current if self._chance(0.6) else self.rng.choice((*_I64, current + 1))
        size = self.rng.choice((0, 1, 100, 10_000))
        return pb.CompareAndSetStateRequest(
            key=key, expected_revision=expected, value=self.rng.randbytes(size)
        )


_KEPT = KEPT_SCOPE


def _long_values(request: Any) -> list[str]:
    """The string fields of ``request`` (repeated ones too) longer than :data:`_LONG_VALUE`."""
    values: list[str] = []
    if isinstance(request, bytes):
        return values
    for _, value in request.ListFields():
        items = [value] if isinstance(value, str) else value if isinstance(value, Sequence) else ()
        values += [v for v in items if isinstance(v, str) and len(v) > _LONG_VALUE]
    return values


#: Every file a store may hold in its data dir.
_DATA_FILE = re.compile(
    r"\.lock|journal\.log(\.[A-Za-z0-9_.-]+)?"
    r"|segments/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/(0|[1-9][0-9]*)\.events",
    re.ASCII,
)


class _DefaultToken(grpc.UnaryUnaryClientInterceptor):
    """Gives a call without metadata the bearer ``token``."""

    def __init__(self, token: str):
        self.metadata = ((TOKEN_METADATA_KEY, f"Bearer {token}"),)

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:  # noqa: D102
        if not details.metadata:
            details = details._replace(metadata=self.metadata)
        return continuation(details, request)


class FuzzTarget:
    """A ``python -m connector.server`` subprocess to fuzz, in a folder of its own.

    ``work`` holds ``data`` (the data dir), ``cwd`` (the server's working
    directory, empty), ``server.log`` and, with ``tokens``, ``tokens.toml``
    (:data:`ADMIN_TOKEN` may do anything, :data:`READER_TOKEN` only read
    :data:`KEPT_SCOPE`; calls carry the admin token unless they give
    another); :meth:`stray_files` names any file
    the server wrote anywhere else in ``work`` or in ``data`` outside the
    store's own layout.
    """

    def __init__(
        self, work: pathlib.Path, tokens: bool = False, store_args: list[str] | None = None
    ):
        self.work = work
        self.data_dir = work / "data"
        #: Where the store is, when not in ``data`` (a JetStream store's flags).
        self.store_args = store_args
        self.cwd = work / "cwd"
        self.log_path = work / "server.log"
        self.token_file = work / "tokens.toml" if tokens else None
        self.cwd.mkdir(parents=True, exist_ok=True)
        if self.token_file is not None:
            self.token_file.write_text(
                token_entry("admin", ADMIN_TOKEN, {"*": ["read", "write", "manage"]})
                + token_entry("reader", READER_TOKEN, {KEPT_SCOPE: ["read"]})
            )
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.channel: grpc.Channel | None = None
        self.stub: store_pb2_grpc.SegmentStoreStub | None = None

    def start(self) -> FuzzTarget:
        """Starts the server on 127.0.0.1:0 and opens a channel to it."""
        where = self.store_args or ["--data-dir", str(self.data_dir)]
        command = [sys.executable, "-m", "connector.server", *where, "--listen", "127.0.0.1:0"]
        if self.token_file is not None:
            command += ["--token-file", str(self.token_file)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log, cwd=self.cwd, env=env
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line.startswith("listening on "):
            msg = f"the server did not start: {line!r}; its log: {self.log()[-2000:]}"
            raise AssertionError(msg)
        self.address = line.removeprefix("listening on ")
        self.channel = grpc.insecure_channel(self.address, options=GRPC_OPTIONS)
        if self.token_file is not None:
            self.channel = grpc.intercept_channel(self.channel, _DefaultToken(ADMIN_TOKEN))
        self.stub = store_pb2_grpc.SegmentStoreStub(self.channel)
        return self

    def alive(self) -> bool:
        """Whether the server process is still running."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """Kills the server with SIGKILL and closes the channel."""
        if self.channel is not None:
            self.channel.close()
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=30)
            if self.process.stdout is not None:
                self.process.stdout.close()

    def log(self) -> str:
        """What the server wrote to stderr, every start of it."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stray_files(self) -> list[str]:
        """Files outside the data dir's layout (relative to ``work``)."""
        stray = []
        for path in sorted(self.work.rglob("*")):
            if path.is_dir() or path in (self.log_path, self.token_file):
                continue
            relative = path.relative_to(self.work).as_posix()
            inside = relative.removeprefix("data/")
            if relative == inside or not _DATA_FILE.fullmatch(inside):
                stray.append(relative)
        return stray


@dataclass
class FuzzReport:
    """What one :func:`fuzz_server` run found: ``problems`` is empty when every rule held."""

    seed: int
    stats: FuzzStats
    problems: list[str]
    seconds: float = 0.0


def fuzz_server(
    work: pathlib.Path,
    seed: int,
    bursts: int,
    calls_per_burst: int,
    tokens: bool = False,
    store_args: list[str] | None = None,
) -> FuzzReport:
    """Fuzzes a fresh server process in ``work`` with ``bursts`` bursts of calls.

    Before the fuzz, data is stored in :data:`KEPT_SCOPE`. After each burst
    the server must be running and describe the kept stream. After the fuzz
    the kept data must read back byte-identical (and its files be unchanged),
    then again after a kill -9 and a restart on the same data dir (so the
    journal the fuzz left replays); no file may have been written outside the
    data dir's layout and the server's log must hold no traceback. With
    ``tokens`` the server checks bearer tokens and one call in four carries a
    token without the right it needs, or a wrong one. ``store_args`` put the
    store elsewhere (``--storage jetstream ...``): then its data files are
    the cluster's, and a restart rebuilds the store from it.
    """
    started = time.monotonic()
    target = FuzzTarget(work, tokens, store_args).start()
    problems: list[str] = []
    fuzzer: RpcFuzzer | None = None
    try:
        kept_segments = _store_kept_data(target)
        kept = _kept_bytes(target, kept_segments)
        assert target.stub is not None
        fuzzer = RpcFuzzer(
            target.stub,
            seed,
            channel=target.channel,
            forbidden=[str(target.data_dir), str(work)],
            kept_segments=kept_segments,
            other_tokens=tokens,
        )
        fuzzer.setup()
        for burst in range(bursts):
            fuzzer.burst(calls_per_burst)
            if not target.alive():
                problems.append(f"the server died in burst {burst}: {target.log()[-2000:]}")
                break
            described = _describe_kept(target)
            if described != kept_segments:
                problems.append(f"after burst {burst} the kept stream has {described}")
        problems += fuzzer.failures[:20]
        if not problems:
            if _kept_bytes(target, kept_segments) != kept:
                problems.append("the kept data changed during the fuzz")
            target.kill()
            target.start()
            if _kept_bytes(target, kept_segments) != kept:
                problems.append("the kept data changed across a restart after the fuzz")
        problems += [f"a file outside the data dir: {path}" for path in target.stray_files()]
        if "Traceback" in target.log():
            problems.append(f"a traceback in the server's log: {target.log()[-2000:]}")
    except grpc.RpcError as error:
        problems.append(f"a check call failed: {error.code()} {error.details()!r}")
    finally:
        target.kill()
    stats = fuzzer.stats if fuzzer is not None else FuzzStats()
    return FuzzReport(seed, stats, problems, time.monotonic() - started)


def _store_kept_data(target: FuzzTarget) -> list[str]:
    """Stores the data the fuzz must leave alone; returns its segments."""
    stub = target.stub
    assert stub is not None
    stub.CreateScope(pb.CreateScopeRequest(scope=KEPT_SCOPE), timeout=10)
    stream = stub.CreateStream(
        pb.CreateStreamRequest(scope=KEPT_SCOPE, stream="k", segment_count=2), timeout=10
    )
    segments = [s.segment for s in stream.segments]
    for number in range(20):
        for segment in segments:
            events = [f"{segment}#{number}.{i}".encode() * (i + 1) for i in range(number + 1)]
            request = pb.AppendRequest(
                segment=segment,
                writer_id="keeper",
                first_event_number=number * (number + 1) // 2,
                events=events,
                routing_keys=[f"key-{i}" for i in range(len(events))],
            )
            stub.AppendEvents(request, timeout=10)
    value = pb.CompareAndSetStateRequest(key="kept-state", expected_revision=0, value=b"\0kept")
    stub.CompareAndSetState(value, timeout=10)
    return segments


def _describe_kept(target: FuzzTarget) -> list[str]:
    assert target.stub is not None
    request = pb.DescribeStreamRequest(scope=KEPT_SCOPE, stream="k")
    return [s.segment for s in target.stub.DescribeStream(request, timeout=10).segments]


def _kept_bytes(target: FuzzTarget, segments: list[str]) -> dict[str, bytes]:
    """Each kept segment's data as a read returns it and its file's digest; the kept state."""
    stub = target.stub
    assert stub is not None
    found: dict[str, bytes] = {}
    for segment in segments:
        end = stub.GetSegmentInfo(pb.SegmentInfoRequest(segment=segment), timeout=10).write_offset
        read = stub.ReadSegment(
            pb.ReadRequest(segment=segment, offset=0, max_bytes=end), timeout=10
        )
        found[segment] = read.data
        if target.store_args is None:
            data_file = target.data_dir / "segments" / f"{segment}.events"
            found[f"{segment} file"] = hashlib.sha256(data_file.read_bytes()).digest()
    state = stub.GetState(pb.GetStateRequest(key="kept-state"), timeout=10)
    found["state"] = state.value + state.revision.to_bytes(8, "big")
    return found
