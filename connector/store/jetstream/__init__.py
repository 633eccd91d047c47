"""The JetStream store: Tidemark's streams on a replicated NATS JetStream cluster.

:mod:`.local_cluster` starts a local 3-node cluster for development and tests.
"""
