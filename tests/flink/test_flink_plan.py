"""The job graph the source relies on, so a Flink upgrade that changes it fails here, loudly.

The readers' rows must reach the Table watermark assigner over FORWARD edges
at the readers' parallelism (each assigner sees one reader subtask's rows,
watermark rows included), and the filter that drops the watermark rows must
stay above the assigner.
"""

from __future__ import annotations

import json

from flink_adapter import FlinkTidemarkReader, TimeDomain


def _plan(flink_env, parallelism: int) -> dict[int, dict]:
    reader = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://127.0.0.1:1")  # never called: only the graph is built
        .for_stream("a/b")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_parallelism(parallelism)
        .build(check_store=False)
    )
    reader.create_stream(flink_env).print()
    return {node["id"]: node for node in json.loads(flink_env.get_execution_plan())["nodes"]}


def _chain_after(nodes: dict[int, dict], first: int) -> list[dict]:
    """The nodes after ``first``, each the only successor of the one before."""
    chain, current = [], first
    while True:
        following = [
            n for n in nodes.values() if any(p["id"] == current for p in n.get("predecessors", []))
        ]
        if len(following) != 1:
            return chain
        chain.append(following[0])
        current = following[0]["id"]


def test_readers_feed_the_watermark_assigner_forward_at_their_parallelism(flink_env):
    nodes = _plan(flink_env, parallelism=3)
    coordinator = next(n for n in nodes.values() if n["type"] == "Tidemark coordinator: a/b")
    reader = next(n for n in nodes.values() if n["type"] == "Tidemark source: a/b")
    assert coordinator["parallelism"] == 1
    assert reader["parallelism"] == 3
    assert [p["ship_strategy"] for p in reader["predecessors"]] == ["BROADCAST"]
    chain = _chain_after(nodes, reader["id"])
    names = [n["contents"] for n in chain]
    assigner = next(i for i, name in enumerate(names) if "WatermarkAssigner" in name)
    dropping = next(i for i, name in enumerate(names) if "where=[wm IS NULL]" in name)
    assert assigner < dropping, names
    for node in chain[: dropping + 1]:
        assert node["parallelism"] == 3, node["contents"]
        assert [p["ship_strategy"] for p in node["predecessors"]] == ["FORWARD"], node["contents"]
