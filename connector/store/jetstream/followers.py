"""Which streams a server follows: every stream the catalog names, each kept in step.

At start a server reads the catalog's stream names and follows each stream,
rebuilding it from its messages (:class:`~.follower.Follower`); then it
watches the catalog, following a stream as soon as another server creates
it and dropping it once deleted. A catch-up round every second checks every
followed stream against its last sequence (pulling what pushes missed), and
drops a stream whose deletion the watch missed. Everything here runs on the
engine's loop; lookups are thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

from connector.store.jetstream.cache import PayloadCache
from connector.store.jetstream.catalog import CatalogBucket, StreamRef
from connector.store.jetstream.engine import Backoff, Engine, EngineUnavailable, StreamMissing
from connector.store.jetstream.follower import Follower

__all__ = ["Followers"]

_log = logging.getLogger(__name__)

#: How long pushes may deliver nothing to a follower that is behind before a pull (s).
PUSH_GRACE_S = 0.1
#: The same, while a stream is rebuilt from its first message (s).
REBUILD_GRACE_S = 1.0


class Followers:
    """The followed streams of one server, by name; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        cache: PayloadCache,
        catalog: CatalogBucket,
        namespace: str,
        retry_s: float,
    ):
        self._engine = engine
        self._cache = cache
        self._catalog = catalog
        self._namespace = namespace
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._followers: dict[tuple[str, str], Follower] = {}
        self._loading: dict[tuple[str, str], asyncio.Future[Follower]] = {}
        # The sync under way of each stream: when it asked, and its task.
        self._syncing: dict[str, tuple[float, asyncio.Future[None]]] = {}
        self._watcher: Any = None
        self._watching: asyncio.Task[None] | None = None

    # --- lookups (any thread) ----------------------------------------------------------

    def get(self, scope: str, stream: str) -> Follower | None:
        """The follower of ``scope/stream``, if followed."""
        with self._lock:
            return self._followers.get((scope, stream))

    def all(self) -> list[Follower]:
        """Every follower, by stream name."""
        with self._lock:
            return [self._followers[key] for key in sorted(self._followers)]

    def names(self) -> list[tuple[str, str]]:
        """Every followed stream's (scope, stream), sorted."""
        with self._lock:
            return sorted(self._followers)

    def segment_count(self) -> int:
        """How many segments the followed streams have."""
        return sum(len(f.log.entry.segments) for f in self.all())

    # --- following (the loop) ---------------------------------------------------------

    async def start(self, timeout_s: float) -> None:
        """Follows every stream the catalog names, then watches it for changes."""
        watcher = await self._engine.kv_watch(self._catalog.bucket, "stream.>")
        refs: list[StreamRef] = []
        while (entry := await watcher.updates(timeout=timeout_s)) is not None:
            ref = _ref_of(entry)
            if ref is not None:
                refs.append(ref)
        self._watcher = watcher
        self._watching = asyncio.ensure_future(self._watch(watcher))
        await asyncio.gather(*(self.follow(ref) for ref in refs))

    async def _watch(self, watcher: Any) -> None:
        async for entry in watcher:
            names = None if entry is None else CatalogBucket.parse_stream_key(entry.key)
            if names is None:
                continue
            try:
                ref = _ref_of(entry)
                if ref is None:
                    await self.unfollow(names)
                else:
                    await self.follow(ref)
            except Exception as error:  # the next catch-up round looks again
                _log.warning("following the catalog's change of %s/%s: %s", *names, error)

    async def follow(self, ref: StreamRef) -> Follower:
        """The follower of ``ref``'s stream, started and caught up; one per name at a time."""
        key = (ref.scope, ref.stream)
        current = self.get(*key)
        if current is not None and current.uid == ref.uid:
            return current
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        future: asyncio.Future[Follower] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            follower = Follower(
                self._engine, self._cache, ref.scope, ref.stream, self._namespace, ref.uid
            )
            await follower.start()
            await self.caught_up(follower, await follower.last_seq(), REBUILD_GRACE_S)
            with self._lock:
                previous = self._followers.get(key)
                self._followers[key] = follower
            if previous is not None:
                await self._stopped(previous)
            future.set_result(follower)
            return follower
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: a failure nobody awaited is not reported again
            raise
        finally:
            del self._loading[key]

    async def unfollow(self, names: tuple[str, str]) -> None:
        """Stops following ``scope/stream`` (deleted); its waiting reads end."""
        with self._lock:
            follower = self._followers.pop(names, None)
        if follower is not None:
            await self._stopped(follower)

    async def _stopped(self, follower: Follower) -> None:
        await follower.stop()
        self._cache.forget_stream(follower.stream_name)

    async def caught_up(self, follower: Follower, target: int, grace_s: float) -> None:
        """Waits until ``follower`` applied up to ``target``, pulling when pushes stall."""
        backoff = Backoff(self._retry_s)
        last, since = follower.log.applied, time.monotonic()
        while follower.log.applied < target:
            if time.monotonic() - since > grace_s:
                try:
                    await follower.catch_up(target)
                except EngineUnavailable as error:
                    await backoff.after(error)
                continue
            await asyncio.sleep(0.002)
            if follower.log.applied != last:
                last, since = follower.log.applied, time.monotonic()

    async def sync(self, follower: Follower) -> None:
        """Brings ``follower`` up to everything its stream held when this was called.

        Calls that arrive while a sync they can share is under way (one that
        asked the stream after they arrived) wait for it instead of asking
        again, so many readers asking at once cost one question. A caller
        that stops waiting (cancelled) leaves the sync running for the others.
        """
        arrived = time.monotonic()
        shared = self._syncing.get(follower.stream_name)
        if shared is not None and shared[0] >= arrived:
            await asyncio.shield(shared[1])
            return
        task = asyncio.ensure_future(self._sync_now(follower))
        # Its failure is retrieved even when every caller has stopped waiting (a call's budget).
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._syncing[follower.stream_name] = (time.monotonic(), task)
        try:
            await asyncio.shield(task)
        finally:
            if self._syncing.get(follower.stream_name, (0, None))[1] is task:
                del self._syncing[follower.stream_name]

    async def _sync_now(self, follower: Follower) -> None:
        backoff = Backoff(self._retry_s)
        while True:
            try:
                target = await follower.last_seq()
                break
            except EngineUnavailable as error:
                await backoff.after(error)
            except StreamMissing:
                return  # deleted: what follows finds it gone
        await self.caught_up(follower, target, PUSH_GRACE_S)

    async def catch_up_round(self) -> None:
        """Pulls what pushes missed; drops streams deleted behind the watch's back."""
        infos = await self._engine.stream_infos(f"{self._namespace}.>")
        last_seqs = {info["config"]["name"]: int(info["state"]["last_seq"]) for info in infos}
        for follower in self.all():
            target = last_seqs.get(follower.stream_name)
            if target is not None:
                await self.caught_up(follower, target, grace_s=0.5)
                continue
            ref = await self._catalog.stream(*follower.log.entry_names)
            if ref is None or ref.uid != follower.uid:
                await self.unfollow(follower.log.entry_names)
        if self._watching is not None and self._watching.done():
            _log.warning("the catalog watch ended; watching it again")
            await self._restart_watch()

    async def _restart_watch(self) -> None:
        watcher = await self._engine.kv_watch(self._catalog.bucket, "stream.>")
        self._watcher = watcher
        self._watching = asyncio.ensure_future(self._watch(watcher))

    async def stop(self) -> None:
        """Stops watching the catalog and every follower."""
        if self._watching is not None:
            self._watching.cancel()
        if self._watcher is not None:
            try:
                await self._watcher.stop()
            except Exception as error:  # the connection is going too
                _log.debug("stopping the catalog watch: %s", error)
        with self._lock:
            followers, self._followers = list(self._followers.values()), {}
        self._watcher = self._watching = None
        for follower in followers:
            await follower.stop()


def _ref_of(entry: Any) -> StreamRef | None:
    """The stream a catalog watch's entry names; None for a deletion or another key."""
    names = CatalogBucket.parse_stream_key(entry.key)
    if names is None or entry.operation in ("DEL", "PURGE"):
        return None
    return StreamRef(names[0], names[1], json.loads(entry.value)["uid"], entry.revision)
