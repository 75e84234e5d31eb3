#!/usr/bin/env python3
"""Generate tests/data/calculator_cases.tsv: expressions and what Python says.

The expected values come from Python itself (the reference implementation
evaluated with Python's ast + operator), with the calculator's documented
bounds applied: a value that does not fit a float is "too large" (Python
would build a huge int or an inf), a negative base to a fractional power
has "no real result" (Python would return a complex number), and only
numbers, + - * / ** % and parentheses are evaluated (booleans, names,
calls, // and ^ are "invalid").

Columns: expression, kind, expected
  kind = exact  -> the tool prints exactly `expected` (Python's repr)
  kind = approx -> Python's exact big-int arithmetic was involved; the
                   tool's float result must match to 1e-9 relative
  kind = error  -> expected is the error class: zero | large | complex | invalid

Run: python3 tests/data/gen_calculator_cases.py > tests/data/calculator_cases.tsv
"""
import ast
import math
import operator
import random
import sys

FMAX = sys.float_info.max
I128 = 2**127 - 1


class Big(Exception):
    pass


class Complex(Exception):
    pass


class Invalid(Exception):
    pass


approx = False


def check(v):
    global approx
    if isinstance(v, bool):
        raise Invalid()
    if isinstance(v, complex):
        raise Complex()
    if isinstance(v, int):
        if abs(v) > FMAX:
            raise Big()
        if abs(v) > I128:
            approx = True
    elif isinstance(v, float) and math.isinf(v):
        raise Big()
    return v


def power(a, b):
    if isinstance(a, int) and isinstance(b, int) and b >= 0 and abs(a) >= 2:
        if b * math.log2(abs(a)) > 1030:
            raise Big()
    if isinstance(a, (int, float)) and a < 0 and isinstance(b, float) and not b.is_integer():
        raise Complex()
    try:
        return operator.pow(a, b)
    except OverflowError:
        raise Big()


def truediv(a, b):
    global approx
    if isinstance(a, int) and isinstance(b, int) and b != 0 and a % b != 0:
        if abs(a) > 2**53 or abs(b) > 2**53:
            approx = True
    try:
        return operator.truediv(a, b)
    except OverflowError:
        raise Big()


OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: truediv,
    ast.Pow: power,
    ast.Mod: operator.mod,
}
UN = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def ev(node):
    if isinstance(node, ast.Expression):
        return ev(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return check(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return check(OPS[type(node.op)](ev(node.left), ev(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UN:
        return check(UN[type(node.op)](ev(node.operand)))
    raise Invalid()


def expected(expr):
    global approx
    approx = False
    if len(expr) > 1000:
        return "error", "invalid"
    try:
        # Surrounding spaces are ignored, as Python's eval() does.
        tree = ast.parse(expr.strip(), mode="eval")
        v = ev(tree)
    except (SyntaxError, Invalid, ValueError, RecursionError, MemoryError):
        return "error", "invalid"
    except ZeroDivisionError:
        return "error", "zero"
    except (Big, OverflowError):
        return "error", "large"
    except Complex:
        return "error", "complex"
    return ("approx" if approx else "exact"), repr(v)


HAND = [
    "2**10", "1+2*3", "(1+2)*3", "7/2", "6/3", "-2**2", "2**-1", "2**3**2", "(-2)**2",
    "-7 % 3", "7 % -3", "-7 % -3", "7.5 % -2", "-7.5 % 2", "0 % 5", "-0.0 % 5",
    "5 % 2.5", "1e300 % 7", "--5", "+-+5", "- - -5", "2*-3", "2 ** -2 ** 2",
    "-(2**2)", "(-2)**3", "-2**-2", "2**0.5", "(-8)**(1/3)", "(-8)**2.0", "(-8.0)**3",
    "0**0", "0.0**0", "0**5", "1**1000000", "(-1)**1000001", "(-1)**10**20",
    "0.1+0.2", "1/3", "2/3", "10/4", "1e20", "1e16", "1e15", "123456789.123456789",
    "1e-7", "0.0001", "0.00001", "1.5e-10*2", "100000000000000000000", "2**64",
    "2**100", "2**126", "2**127", "-2**127", "2**127-1", "2**128", "3**100",
    "10**30/10**15", "10**20/3", "2**200", "2**200-2**200", "10**308", "10**309",
    "2**1023", "2**1024", "2**1023*2", "9**9**9", "10**10000", "2**10**100",
    "1e308*10", "-1e308*10", "1e400", "1e308+1e308", "1e-400", "10**-400", "2**-1074",
    "1/0", "1/0.0", "5 % 0", "5.5 % 0", "5 % -0.0", "0**-1", "0.0**-1", "0**-1.5",
    "(1-1)**-2", "1/(2-2)", "7/(3%3)",
    "2 // 3", "2 ^ 3", "abs(-2)", "__import__('os')", "x + 1", "True + 1", "None",
    "'a'", "1j", "2 +", "(2", "2)", "()", "(1, 2)", "[1]", "1 if 2 else 3", "1 < 2",
    "~1", "not 1", "2 5", "", "   ", "012", "00", "0.5", ".5", "5.", "1_000 * 2",
    "1__0", "0x10 + 1", "0o17", "0b101", "1e3", "1E-3", "2e", "1.2.3", "..5",
    "2 ** 3 ** 0", "(((((((((1+1)))))))))", "(" * 50 + "7" + ")" * 50,
    "(" * 300 + "7" + ")" * 300, "1+" * 600 + "1", "2.5*4", "3.0", "-0.0", "0.0*-1",
    "1e-320*1e-5", "1.7976931348623157e308", "1.7976931348623157e308*1.0000001",
    "123456789*987654321", "99999999999*99999999999", "12345678901234567890*98765432109876543210",
    "(2**62)*(2**62)", "2**63+2**63", "-(2**127)-1", "(2**127-1)+1", "(-2**127)*-1",
    "(2**60+1)/(2**0)", "(2**60+1)/3", "4.0 ** 0.5", "8 ** (1/3)", "100 ** -0.5",
    "10 % 3 ** 2", "-10 % 3 * 2", "2 * 3 % 4", "17 % 5 % 3", "2 - 3 - 4", "64 / 4 / 2",
    "1 - -1", "1 + +1", "3 * (4 + 5) - 6 / (1 + 1)", "((2))", "  42  ", " 2+2 ",
]


def rnum(r):
    c = r.random()
    if c < 0.45:
        return str(r.randint(0, 20))
    if c < 0.6:
        return str(r.randint(21, 100000))
    if c < 0.8:
        return repr(round(r.uniform(0, 100), r.randint(0, 4)))
    if c < 0.85:
        return "0"
    if c < 0.9:
        return repr(r.choice([0.5, 0.25, 1.5, 2.5, 0.1]))
    return str(r.randint(10**9, 10**12))


def rexpr(r, depth):
    if depth == 0 or r.random() < 0.25:
        n = rnum(r)
        return ("-" + n) if r.random() < 0.15 else n
    op = r.choice(["+", "-", "*", "/", "%", "**", "+", "-", "*", "/"])
    a = rexpr(r, depth - 1)
    b = rexpr(r, depth - 1) if op != "**" else str(r.choice([0, 1, 2, 3, -1, -2, 0.5, 10, 40]))
    e = f"{a} {op} {b}" if r.random() < 0.7 else f"{a}{op}{b}"
    return f"({e})" if r.random() < 0.35 else e


def main():
    r = random.Random(20261130)
    cases = list(HAND)
    seen = set(cases)
    while len(cases) < len(HAND) + 260:
        e = rexpr(r, r.randint(1, 4))
        if e not in seen:
            seen.add(e)
            cases.append(e)
    print("# expression\tkind\texpected  (generated by gen_calculator_cases.py from Python %s)" % sys.version.split()[0])
    for e in cases:
        kind, exp = expected(e)
        assert "\t" not in e.strip("\t") or e.startswith("\t"), e
        print(f"{e}\t{kind}\t{exp}")


if __name__ == "__main__":
    main()
