"""`known_multiple`: what an index expression is a multiple of, whatever its variables hold."""

from __future__ import annotations

import random

from tilefoundry.ir.dtypes import boolean
from tilefoundry.ir.tile.expr import (
    Bin,
    Const,
    Expr,
    Select,
    Var,
    add,
    floordiv,
    known_multiple,
    mod,
    mul,
    sub,
)

NAMES = ("a", "b", "c")


def _value(e: Expr, env: dict[str, int]) -> int:
    """The expression's value, as C++ computes it for non-negative operands."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Select):
        return _value(e.a if _value(e.cond, env) else e.b, env)
    assert isinstance(e, Bin)
    a, b = _value(e.a, env), _value(e.b, env)
    ops = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__, "floordiv": int.__floordiv__}
    ops.update(mod=int.__mod__, lt=lambda x, y: int(x < y))
    return ops[e.op](a, b)


def _random_expr(rng: random.Random, depth: int) -> Expr:
    """Sums, differences, products, exact and inexact divisions, remainders and selects of the
    variables and small constants; divisors are positive constants, as in index arithmetic."""
    if depth == 0 or rng.random() < 0.2:
        return Var(rng.choice(NAMES)) if rng.random() < 0.5 else Const(rng.choice((0, 1, 2, 3, 6, 8, 16, 32)))
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    pick = rng.randrange(6)
    if pick == 0:
        return add(a, b)
    if pick == 1:
        return mul(a, b)
    if pick == 2:
        return sub(mul(a, 2), a)  # a, never negative
    if pick == 3:
        return floordiv(a, rng.choice((1, 2, 4, 3, 8)))
    if pick == 4:
        return mod(a, rng.choice((2, 4, 6, 32)))
    return Select(Bin("lt", Var(rng.choice(NAMES)), Const(5), boolean), a, b)


def test_every_value_is_a_multiple_of_what_it_reports() -> None:
    rng = random.Random()
    for _ in range(400):
        e = _random_expr(rng, 4)
        m = known_multiple(e)
        for _ in range(8):
            env = {n: rng.randrange(0, 50) for n in NAMES}
            v = _value(e, env)
            assert (v == 0) if m == 0 else (v % m == 0), (e, env, v, m)


def test_the_factors_it_can_see() -> None:
    t, h = Var("d_tokens"), Var("h")
    assert known_multiple(mul(mul(4, t), 8)) == 32  # four heads of eight packs a token
    assert known_multiple(mul(2, t)) == 2
    assert known_multiple(Const(16777216)) == 16777216
    assert known_multiple(Const(0)) == 0
    assert known_multiple(add(mul(t, 48), 32)) == 16
    assert known_multiple(floordiv(mul(t, 128), 8)) == 16
    assert known_multiple(floordiv(mul(t, 12), 8)) == 1  # inexact: nothing known
    assert known_multiple(mod(mul(t, 12), 32)) == 4
    assert known_multiple(Select(Bin("lt", h, Const(3), boolean), mul(t, 64), Const(96))) == 32
    assert known_multiple(mul(t, h)) == 1
