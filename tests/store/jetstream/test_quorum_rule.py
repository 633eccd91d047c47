"""When a stream's cluster info shows a quorum: the rule behind NOT_SERVING, as plain values."""

from __future__ import annotations

import pytest

from connector.store.jetstream.monitor import has_quorum


def _peer(name: str, current: bool, offline: bool = False) -> dict[str, object]:
    return {"name": name, "current": current, "offline": offline}


@pytest.mark.parametrize(
    ("cluster", "quorum"),
    [
        (None, True),  # one replica: no cluster to ask
        ({"leader": "n1", "replicas": [_peer("n2", True), _peer("n3", True)]}, True),
        ({"leader": "n1", "replicas": [_peer("n2", True), _peer("n3", False)]}, True),
        ({"leader": "n1", "replicas": [_peer("n2", False), _peer("n3", False)]}, False),
        ({"leader": "n1", "replicas": [_peer("n2", True, True), _peer("n3", False)]}, False),
        ({"replicas": [_peer("n2", True), _peer("n3", True)]}, False),  # a replica answered
        ({"leader": "", "replicas": []}, False),
    ],
)
def test_a_leader_needs_a_quorum_of_current_replicas(cluster, quorum) -> None:
    assert has_quorum(cluster) is quorum
