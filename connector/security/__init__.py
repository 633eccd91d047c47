"""Security: TLS on both ends, bearer tokens hashed at rest, rights per scope.

- :class:`ClientCredentials` (and :func:`split_uri`): what a client presents;
- :class:`ServerTls`, :class:`TokenTable`, :class:`TokenInterceptor`: what a
  server checks;
- :func:`need_of`, :func:`needs_of` and :class:`Right`: which right each call needs on
  which scope; :func:`caller`: who the call being answered is from.
"""

from connector.security.credentials import TOKEN_METADATA_KEY, ClientCredentials, split_uri
from connector.security.interceptor import TokenInterceptor, caller, check_call
from connector.security.rights import (
    ANY_SCOPE,
    Need,
    Right,
    need_of,
    needs_of,
    parse_grant,
    scope_of_state_key,
)
from connector.security.tls import ServerTls
from connector.security.tokens import Principal, TokenTable, hash_token, new_token, token_entry

__all__ = [
    "ANY_SCOPE",
    "TOKEN_METADATA_KEY",
    "ClientCredentials",
    "Need",
    "Principal",
    "Right",
    "ServerTls",
    "TokenInterceptor",
    "TokenTable",
    "caller",
    "check_call",
    "hash_token",
    "need_of",
    "needs_of",
    "new_token",
    "parse_grant",
    "scope_of_state_key",
    "split_uri",
    "token_entry",
]
