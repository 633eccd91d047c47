"""Makes a token and its token-file entry.

    python -m connector.security NAME --grant SCOPE=RIGHTS --token-out FILE

Prints the entry (append it to the server's token file, then send the server
SIGHUP) and writes the token itself to ``--token-out`` (mode 0600), the file a
client names with ``token_file``. The token is shown nowhere else.
"""

from __future__ import annotations

import argparse
import os
import sys

from connector.security.rights import Right
from connector.security.tokens import new_token, token_entry


def _grant(text: str) -> tuple[str, list[str]]:
    scope, _, rights = text.partition("=")
    names = [r.strip() for r in rights.split(",") if r.strip()]
    known = {r.value for r in Right}
    if not scope or not names or not set(names) <= known:
        msg = f"expected SCOPE=RIGHT[,RIGHT...] with rights among {sorted(known)}, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return scope, names


def main(argv: list[str] | None = None) -> None:
    """Writes a new token to ``--token-out`` and prints its token-file entry."""
    parser = argparse.ArgumentParser(prog="python -m connector.security", description=__doc__)
    parser.add_argument("name", help="who holds the token (shown in the server's logs)")
    parser.add_argument(
        "--grant",
        type=_grant,
        action="append",
        required=True,
        help="SCOPE=RIGHTS, e.g. iot=read,write or '*=manage'; repeatable",
    )
    parser.add_argument("--token-out", required=True, help="file to write the token to (0600)")
    args = parser.parse_args(argv)
    token = new_token()
    descriptor = os.open(args.token_out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(token + "\n")
    sys.stdout.write(token_entry(args.name, token, dict(args.grant)))


if __name__ == "__main__":
    main()
