"""Integer arithmetic in job-file keywords (``$((4*1024))`` after ``${NAME}`` substitution),
evaluated as ``bc`` (scale=0) evaluates it for fio: ``*``, ``/`` and ``%`` at one level,
``^`` right-associative, unary minus; C's truncating division. The unit-aware expressions
of option values are units.py's, after fio's own grammar."""

from __future__ import annotations

import math
import re
from typing import Callable

from . import limits as L


def bc_integer(text: str) -> int:
    """Integer arithmetic the way ``bc`` (scale=0) evaluates fio's keyword values, within
    the expression limits of ``units`` (digits, bits, nesting)."""
    tokens = re.findall(r"\s*(\d+|[-+*/%^()])", text)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s", "", text):
        raise ValueError(f"'{text}' is not integer arithmetic")
    if len(tokens) > L.MAX_EXPR_TOKENS:
        raise ValueError(f"more than {L.MAX_EXPR_TOKENS} numbers and operators")
    pos = 0
    depth = 0

    def bounded(v: int) -> int:
        if v.bit_length() > L.MAX_EXPR_BITS:
            raise ValueError(f"value out of range (more than {L.MAX_EXPR_BITS} bits)")
        return v

    def nested(inner: Callable[[], int]) -> int:
        nonlocal depth
        depth += 1
        if depth > L.MAX_EXPR_DEPTH:
            raise ValueError(f"nested more than {L.MAX_EXPR_DEPTH} deep")
        try:
            return inner()
        finally:
            depth -= 1

    def peek() -> str:
        return tokens[pos].strip() if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    def expr() -> int:
        v = term()
        while peek() in ("+", "-"):
            op = take()
            r = term()
            v = bounded(v + r if op == "+" else v - r)
        return v

    def term() -> int:
        v = power()
        while peek() in ("*", "/", "%"):
            op = take()
            r = power()
            if op != "*" and r == 0:
                raise ValueError("divide by zero")
            if op == "*":
                v = bounded(v * r)
            elif op == "/":
                q = abs(v) // abs(r)
                v = q if (v >= 0) == (r >= 0) else -q
            else:
                v = v - r * (abs(v) // abs(r) * (1 if (v >= 0) == (r >= 0) else -1))
        return v

    def power() -> int:
        v = unary()
        if peek() == "^":
            take()
            e = power()
            if e < 0:
                raise ValueError("negative exponent")
            if abs(v) > 1 and e * math.log2(abs(v)) > L.MAX_EXPR_BITS + 1:
                raise ValueError(f"value out of range (more than {L.MAX_EXPR_BITS} bits)")
            v = v**e
        return v

    def parenthesised() -> int:
        v = expr()
        if take() != ")":
            raise ValueError("missing ')'")
        return v

    def unary() -> int:
        tok = take()
        if tok == "-":
            return -nested(unary)
        if tok == "(":
            return nested(parenthesised)
        if tok.isdigit():
            if len(tok) > L.MAX_NUMBER_CHARS:
                raise ValueError(f"number longer than {L.MAX_NUMBER_CHARS} characters")
            return int(tok)
        raise ValueError(f"unexpected '{tok}'")

    value = expr()
    if pos != len(tokens):
        raise ValueError(f"'{text}' is not integer arithmetic")
    return value
