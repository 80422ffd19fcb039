"""Who reviews: the reviewer tokens (``RAG_MONITOR_REVIEW_TOKENS``) and their check.

Tokens are ``name:token`` pairs; a request's token is compared with every known
token in constant time, and the matching name is recorded as the reviewer. An
address that is not loopback is only served with tokens (`ReviewApp.start`).
Nothing here logs or returns a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Mapping

_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


class TokenError(ValueError):
    """RAG_MONITOR_REVIEW_TOKENS is malformed (the message never holds a token)."""


def parse_tokens(text: str | None) -> dict[str, str]:
    """``name:token`` pairs (comma or whitespace separated) → {token: name}."""
    tokens: dict[str, str] = {}
    for n, pair in enumerate(re.split(r"[,\s]+", (text or "").strip()), start=1):
        if not pair:
            continue
        name, sep, token = pair.partition(":")
        if not sep or not _NAME.fullmatch(name):
            raise TokenError(f"RAG_MONITOR_REVIEW_TOKENS pair {n}: expected name:token")
        if len(token) < 16:
            raise TokenError(
                f"RAG_MONITOR_REVIEW_TOKENS pair {n} ({name}): the token needs 16+ characters"
            )
        if token in tokens:
            raise TokenError(f"RAG_MONITOR_REVIEW_TOKENS pair {n} ({name}): a repeated token")
        tokens[token] = name
    return tokens


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_access(host: str, tokens: Mapping[str, str]) -> None:
    """TokenError unless ``host`` is loopback or there are tokens: no address other than
    loopback is served without them."""
    if not tokens and not is_loopback(host):
        raise TokenError(
            f"refusing to listen on {host} without RAG_MONITOR_REVIEW_TOKENS"
            " (only a loopback address may go without tokens)"
        )


def reviewer_of(tokens: Mapping[str, str], supplied: str) -> str | None:
    """The name whose token is ``supplied`` (None: no such token); compares with every token."""
    found = None
    for token, name in tokens.items():  # compare with every token, in constant time
        if hmac.compare_digest(token.encode("utf-8"), supplied.encode("utf-8")):
            found = name
    return found
