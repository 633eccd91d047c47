"""``python -m connector.cli``: the ``tidemarkctl`` command."""

from connector.cli.main import main

main()
