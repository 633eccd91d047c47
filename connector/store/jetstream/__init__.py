"""The JetStream store: Tidemark's streams on a replicated NATS JetStream cluster.

- :mod:`.store`: :class:`JetStreamStore`, the store's front over :class:`JetStreamEngine`.
- :mod:`.publisher`: a server's writes, compare-and-sets on the log, decided again when they lose.
- :mod:`.naming` and :mod:`.messages`: where things live in JetStream, and what messages say.
- :mod:`.log`, :mod:`.segment`, :mod:`.follower`: a stream rebuilt from its messages on each server.
- :mod:`.catalog` and :mod:`.state`: scopes, stream names and reader-group state in buckets.
- :mod:`.engine`: the NATS connection and its errors in Tidemark's words.

Importing this package needs nothing beyond the core; :mod:`.store` needs
nats-py (``pip install "tidemark-store[jetstream]"``).
"""

from connector.store.jetstream.config import JetStreamConfig

__all__ = ["JetStreamConfig"]
