"""The allow-list: which constructs, functions and casts cannot fail on any value of their types.

This is the totality claim itself, and so a privacy claim (DESIGN.md invariant 7): every
construct named here either cannot raise on any row (comparisons, logic, patterns with
constant arguments, string functions), or is run inside ``TRY`` (arithmetic, numeric functions,
date parts, positional string functions); a ``CAST`` is admitted only if it holds every value of
its source type, and a ``LIKE ... ESCAPE`` only if DuckDB would accept its pattern on every
string. Anything not listed is refused before the charge.
"""

from __future__ import annotations

from sqlglot import exp

from privplan.sql.totality.engine_types import _INT_RANK, family

_NUMERIC = frozenset({"int", "float", "decimal"})
_TEMPORAL = frozenset({"date", "timestamp"})
_LOGIC = (exp.And, exp.Or, exp.Not)
_COMPARE = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg)
_PATTERN = (exp.Like, exp.ILike, exp.Glob, exp.SimilarTo, exp.RegexpLike)
_CONDITIONAL = (exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least)
# string functions that cannot fail: (class, names of arguments that must be constants)
_STRING: dict[type[exp.Expr], tuple[str, ...]] = {
    exp.Lower: (), exp.Upper: (), exp.Length: (), exp.Reverse: (),
    exp.Trim: ("expression",), exp.Substring: ("start", "length"),
    exp.Left: ("expression",), exp.Right: ("expression",), exp.StartsWith: (),
    exp.EndsWith: (), exp.Contains: (), exp.StrPosition: ("position",),
    exp.Replace: ("expression", "replacement"), exp.Concat: (), exp.DPipe: (),
    exp.SplitPart: ("delimiter", "part_index"),
}
# string functions with positions or counts: DuckDB rejects some positions (an offset beyond
# its supported range) only when a value reaches them, so these run inside TRY (and their
# constants are tried on a sample string now, to refuse what fails on every string)
_POSITIONAL = (exp.Substring, exp.Left, exp.Right, exp.SplitPart, exp.StrPosition)
# numeric functions: run inside TRY (integer overflow, ln(0), sqrt(-1) raise on some engines)
_NUMERIC_FUNCS: dict[type[exp.Expr], tuple[str, ...]] = {
    exp.Abs: (), exp.Floor: ("decimals",), exp.Ceil: ("decimals",), exp.Round: ("decimals",),
    exp.Trunc: ("decimals",), exp.Sign: (), exp.Sqrt: (), exp.Ln: (), exp.Log: (), exp.Exp: (),
    exp.Pow: (),
}
_FLOAT_TESTS = (exp.IsNan, exp.IsInf)
# date parts: run inside TRY (infinite or extreme dates); units and formats must be constants
_TEMPORAL_FUNCS: dict[type[exp.Expr], tuple[str, ...]] = {
    exp.Year: (), exp.Month: (), exp.Day: (), exp.Quarter: (), exp.Week: (),
    exp.DayOfWeek: (), exp.DayOfWeekIso: (), exp.DayOfYear: (), exp.Hour: (), exp.Minute: (),
    exp.Second: (), exp.Extract: ("this",), exp.TimestampTrunc: ("unit",),
    exp.DateTrunc: ("unit",), exp.LastDay: (), exp.Monthname: (), exp.Dayname: (),
    exp.TimeToStr: ("format",), exp.DateDiff: ("unit",), exp.TimeToUnix: (),
}
_ANONYMOUS = {"date_part": (0,), "datepart": (0,), "isfinite": (), "prefix": (), "suffix": ()}
_LEAVES = (exp.Column, exp.Literal, exp.Null, exp.Boolean)
_NOT_VALUES = (exp.DataType, exp.DataTypeParam, exp.Var, exp.Identifier)


def _cast_is_total(source: str, target: str) -> bool:
    """Whether ``CAST`` from ``source`` to ``target`` (DuckDB type names) holds every value."""
    s, t = source.upper(), target.upper()
    fs, ft = family(s), family(t)
    if s == t or fs == "null" or ft == "str":
        return fs != "other"
    if fs == "int" and ft == "int":
        signed_target = not t.startswith("U")
        if s.startswith("U"):
            return _INT_RANK[t] > _INT_RANK[s] if signed_target else _INT_RANK[t] >= _INT_RANK[s]
        return signed_target and _INT_RANK[t] >= _INT_RANK[s]
    if fs in ("int", "decimal", "float") and t == "DOUBLE":
        return True
    if fs in ("int", "bool") and ft in ("int", "bool"):
        return ft == "bool" or _INT_RANK.get(t, 0) >= 1
    return fs == "timestamp" and ft == "date"  # DATE -> TIMESTAMP fails past year 294247


def _escape_problem(pattern: str, escape: str) -> str | None:
    """Why DuckDB would reject ``LIKE pattern ESCAPE escape`` (None if it would not)."""
    if len(escape) > 1:
        return "the ESCAPE string must be empty or one character"
    if not escape:
        return None
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                return "the pattern ends with its escape character"
            i += 2
        else:
            i += 1
    return None
