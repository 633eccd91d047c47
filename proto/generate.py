"""Generates the Python stubs of proto/*.proto into connector/_proto.

    python proto/generate.py            # rewrite the committed stubs
    python proto/generate.py --out DIR  # write them under DIR instead

The stubs are committed; tests/test_proto_stubs.py regenerates them into a
temporary directory and fails when they differ from the committed ones.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from grpc_tools import protoc

PROTO_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = PROTO_DIR.parent
PACKAGE_PATH = "connector/_proto"


def generate(out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Writes the stubs under ``out_dir/connector/_proto`` and returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    protos = sorted(PROTO_DIR.glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PACKAGE_PATH}={PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(f"{PACKAGE_PATH}/{proto.name}" for proto in protos),
    ]
    if protoc.main(args) != 0:
        msg = f"protoc failed on {[p.name for p in protos]!r}"
        raise SystemExit(msg)
    return sorted((out_dir / PACKAGE_PATH).glob("*_pb2*.py*"))


def main(argv: list[str] | None = None) -> None:
    """Regenerates the stubs into ``--out`` (default: the repository)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT)
    written = generate(parser.parse_args(argv).out)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
