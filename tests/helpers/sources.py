"""Reading Python source into an AST, for the tests that check the source: one ``parse`` for them all."""

from __future__ import annotations

import ast

#: The message of CPython 3.11's spurious ``SystemError`` (python/cpython#106905).
RECURSION_DEPTH_MISMATCH = "AST constructor recursion depth mismatch"


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, parsed once more if the first parse raised CPython 3.11's spurious
    ``SystemError: AST constructor recursion depth mismatch (before=.., after=..)`` (python/cpython#106905).

    The AST constructor's recursion counter is kept per interpreter, not per thread, so another thread converting
    an AST meanwhile (3.11's traceback formatting parses source for its carets, in any of the daemon threads the
    suite runs: fake API servers, log followers...) can throw the check off: the source is fine and a second parse
    succeeds. Only that error is retried, and only once; any other error (a ``SyntaxError``, another
    ``SystemError``, or the mismatch again) propagates.
    """
    try:
        return ast.parse(source, filename)
    except SystemError as error:
        if RECURSION_DEPTH_MISMATCH not in str(error):
            raise
    return ast.parse(source, filename)
