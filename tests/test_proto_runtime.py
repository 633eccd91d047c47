"""The committed stubs run on the gRPC and protobuf of the environment this suite runs in.

The stubs in ``connector/_proto`` are generated once, by grpcio-tools 1.65.5
(protobuf gencode 5.26.1). The package declares grpcio and protobuf ranges
from there up to today's releases; ``make test`` runs this module in the
Flink environment (apache-flink 2.3 holds grpcio 1.65 and protobuf 5) and in
the Spark environment (the newest grpcio and protobuf), so both ends of the
ranges are exercised, each against a real server over gRPC.
"""

from __future__ import annotations

import warnings
from importlib import metadata

import grpc
import pytest
from google.protobuf import __version__ as protobuf_version
from packaging.requirements import Requirement

from connector._proto import store_pb2, store_pb2_grpc


def _declared(name: str) -> Requirement:
    """The core dependency ``name`` as the installed package declares it."""
    for line in metadata.requires("tidemark-store") or []:
        requirement = Requirement(line)
        if requirement.name == name and requirement.marker is None:
            return requirement
    msg = f"tidemark-store declares no core dependency on {name!r}"
    raise AssertionError(msg)


@pytest.mark.parametrize(
    ("name", "installed"), [("grpcio", grpc.__version__), ("protobuf", protobuf_version)]
)
def test_the_installed_version_is_inside_the_declared_range(name: str, installed: str) -> None:
    requirement = _declared(name)
    assert requirement.specifier.contains(installed), (
        f"{name} {installed} is outside tidemark's declared range {requirement.specifier}"
    )


def test_the_stubs_load_without_a_version_warning() -> None:
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(store_pb2)
        importlib.reload(store_pb2_grpc)


def test_a_round_trip_through_the_generated_stub_reaches_the_store(
    store_stub: store_pb2_grpc.SegmentStoreStub,
) -> None:
    store_stub.CreateScope(store_pb2.CreateScopeRequest(scope="stubs"))
    created = store_stub.CreateStream(
        store_pb2.CreateStreamRequest(scope="stubs", stream="s", segment_count=2)
    )
    described = store_stub.DescribeStream(
        store_pb2.DescribeStreamRequest(scope="stubs", stream="s")
    )

    assert described == created
    assert len(described.segments) == 2
    wire = described.SerializeToString()
    assert store_pb2.StreamDescription.FromString(wire) == described
