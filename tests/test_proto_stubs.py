"""The committed gRPC stubs are exactly what proto/generate.py produces from store.proto."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMITTED = REPO_ROOT / "connector" / "_proto"


def _load_generator() -> ModuleType:
    path = REPO_ROOT / "proto" / "generate.py"
    spec = importlib.util.spec_from_file_location("proto_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regenerated_stubs_are_byte_identical_to_the_committed_ones(tmp_path: pathlib.Path) -> None:
    written = _load_generator().generate(tmp_path)

    names = sorted(path.name for path in written)
    assert names == ["store_pb2.py", "store_pb2.pyi", "store_pb2_grpc.py"]
    assert names == sorted(path.name for path in COMMITTED.glob("*_pb2*.py*"))
    for path in written:
        committed = COMMITTED / path.name
        assert path.read_bytes() == committed.read_bytes(), (
            f"{committed.relative_to(REPO_ROOT)} is stale: run `make proto` and commit the result"
        )
