"""Reading SQL at the token level, where privplan must see text sqlglot cannot parse (BigQuery's
DP clause) or must keep byte-exact (a subquery's text)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlglot.tokens import Token, TokenType

__all__ = ["matching_paren", "with_depth"]


def matching_paren(tokens: Sequence[Token], open_index: int) -> int | None:
    """The index of the ``)`` that closes the ``(`` at ``open_index``, or None if none does."""
    depth = 0
    for j in range(open_index, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    return None


def with_depth(tokens: Sequence[Token]) -> Iterator[tuple[int, Token]]:
    """Each token with the number of parentheses open around it (a parenthesis itself counts
    at the depth outside it)."""
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.R_PAREN:
            depth -= 1
        yield depth, tok
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
