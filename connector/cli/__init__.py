"""The ``tidemarkctl`` command line: scopes, streams, reader groups and watermarks."""

from connector.cli.main import cli, main

__all__ = ["cli", "main"]
