"""Tools for developing Tidemark, apart from what a store runs.

- :mod:`.local_cluster`: a local 3-node NATS JetStream cluster on loopback
  (``make cluster-up``), for the JetStream store's development and tests.
"""
