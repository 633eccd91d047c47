"""``python -m connector.server``: see :mod:`connector.server.cli`."""

from connector.server.cli import main

main()
