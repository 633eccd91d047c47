"""``python -m connector.cli``: the ``tidemark`` command."""

from connector.cli.main import main

main()
