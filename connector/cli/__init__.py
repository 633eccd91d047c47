"""The ``tidemarkctl`` command line: scopes, streams, reader groups and watermarks."""

import os

# Before gRPC is first imported: its C-core would log every failed TLS handshake to stderr
# (a dozen lines before one error); the command names the failure in its own one line.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from connector.cli.main import cli, main  # noqa: E402

__all__ = ["cli", "main"]
