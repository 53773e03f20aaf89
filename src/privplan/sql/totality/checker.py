"""The totality checker: walks an expression over private rows and admits, wraps or refuses each
node.

Each node is typed by the engine (once, in a batch), checked against the allow-list
(:mod:`privplan.sql.totality.allow_list`), and either admitted as is, marked to run inside
``TRY`` or read through ``TRY_CAST``, or refused with what, why and the fix; every constant and
every conversion of a constant is evaluated now, before the charge. Privacy: a node that could
raise on some row would reveal that such a row exists, so nothing leaves here that can fail at
run time.
"""

from __future__ import annotations

from sqlglot import exp

from privplan.analysis.literal_lists import ListFallback, LiteralList, literal_list
from privplan.analysis.node_text import snippet as _snippet
from privplan.errors import UnsupportedQueryError
from privplan.sql.locate import with_location
from privplan.sql.long_lists import engine_list_sql
from privplan.sql.totality.allow_list import (
    _ANONYMOUS,
    _ARITH,
    _COMPARE,
    _CONDITIONAL,
    _FLOAT_TESTS,
    _LEAVES,
    _LOGIC,
    _NOT_VALUES,
    _NUMERIC,
    _NUMERIC_FUNCS,
    _PATTERN,
    _POSITIONAL,
    _STRING,
    _TEMPORAL,
    _TEMPORAL_FUNCS,
    _cast_is_total,
    _escape_problem,
)
from privplan.sql.totality.engine_types import Family, _decimal_scale, _number_type, family
from privplan.sql.totality.interface import ExpressionJudge, JudgeError, TotalExpression
from privplan.sql.totality.nodes import (
    _ancestors,
    _constant_nodes,
    _fname,
    _operands,
    _plain,
    _skeleton,
)


class _Checker:
    def __init__(self, column_types: dict[str, str], judge: ExpressionJudge, sql: str,
                 clause: str) -> None:
        self.columns = column_types
        self.judge = judge
        self.sql = sql
        self.clause = clause
        self.types: dict[int, str] = {}
        self.wrap: set[int] = set()
        self.casts: dict[int, str] = {}
        self.constant_checks: list[tuple[str, exp.Expr, str]] = []
        self.compact: dict[int, str] = {}  # IN nodes -> their list as the engine reads it

    # -- the pipeline ------------------------------------------------------------------------
    def run(self, expr: exp.Expression, condition: bool) -> TotalExpression:
        expr = expr.copy()
        self.const = _constant_nodes(expr)
        self._type_all(expr)
        top = self.type_of(expr)
        if condition and family(top) not in ("bool", "null"):
            self.refuse(expr, f"{self.clause} condition `{_snippet(expr)}` is a {top}, not a "
                        "condition", "the engine would convert every value to a boolean, "
                        "which fails on some values.",
                        "Compare it with something, e.g. `x = 1` or `x IS NOT NULL`.")
        for node in expr.walk():
            if id(node) in self.const or isinstance(node, _NOT_VALUES):
                continue
            self.check(node)
        self._check_constants(expr)
        for node in expr.find_all(exp.In):
            if id(node) in self.compact:
                node.args["field"].set("this", self.compact[id(node)])
        total = self._wrapped(expr)
        assert isinstance(total, exp.Expression)  # expr itself, or a TRY / TRY_CAST around it
        return TotalExpression(total, top)

    def _type_all(self, expr: exp.Expr) -> None:
        """Ask the engine for the type of every value node (columns as typed NULLs).

        Columns take their type from the view, literals are typed here as DuckDB types them,
        and predicates (comparisons, AND/OR/NOT, IN, LIKE, ...) are BOOLEAN; only the other
        nodes (functions, arithmetic, CASE, casts, typed constants) are sent to the engine, in
        one batch, so long chains of predicates cost no more than their leaves."""
        asked: list[exp.Expr] = []
        for n in expr.walk():
            if isinstance(n, exp.Collate):
                self.refuse(n, "COLLATE refused", "the analysis compares strings in binary "
                            "(code point) order; another collation would make regions it "
                            "proves disjoint overlap.", "Remove the COLLATE clause.")
            if isinstance(n, (*_NOT_VALUES, exp.Paren)) or (
                    isinstance(n, exp.If) and isinstance(n.parent, exp.Case)):
                continue
            known = self._known_type(n)
            if known is not None:
                self.types[id(n)] = known
            else:
                asked.append(n)
        texts = [_skeleton(n, self.columns).sql(dialect="duckdb") for n in asked]
        try:
            types = self.judge.types(texts)
        except JudgeError as err:  # the engine cannot bind it (no data involved)
            node = asked[err.index] if err.index is not None else expr
            message = err.message
            if id(node) in self.const:
                self.refuse(node, f"`{_snippet(node)}` cannot be computed ({message})",
                            "a constant that fails would fail at run time only when a row "
                            "reaches it.", "Fix or remove it.")
            self.refuse(node, f"`{_snippet(node)}` refused",
                        f"the engine cannot type it ({message}).",
                        "Check the column types in the policy against the values compared.")
        self.types.update({id(n): t for n, t in zip(asked, types)})

    def _known_type(self, node: exp.Expr) -> str | None:
        """The type of columns, literals and predicates without asking the engine."""
        if isinstance(node, exp.Column):
            t = self.columns.get(node.name.lower())
            if t is None:
                raise UnsupportedQueryError(with_location(
                    f"unknown column '{node.name}' in {self.clause}", self.sql, node))
            return t
        if isinstance(node, (*_LOGIC, *_COMPARE, exp.Between, exp.In, exp.Is, *_PATTERN,
                             exp.Escape, exp.Boolean)):
            return "BOOLEAN"
        if isinstance(node, exp.Null):
            return '"NULL"'
        if isinstance(node, exp.Literal):
            return "VARCHAR" if node.is_string else _number_type(str(node.this))
        return None

    def type_of(self, node: exp.Expr) -> str:
        while isinstance(node, exp.Paren):
            node = node.this
        if id(node) in self.types:
            return self.types[id(node)]
        return self.types.get(id(node.parent), "other") if node.parent else "other"

    def fam(self, node: exp.Expr) -> Family:
        return family(self.type_of(node))

    def is_const(self, node: exp.Expr) -> bool:
        return id(node) in self.const

    # -- per construct -----------------------------------------------------------------------
    def check(self, node: exp.Expr) -> None:
        if isinstance(node, (*_LEAVES, exp.Paren)):
            if isinstance(node, exp.Column) and family(self.type_of(node)) == "other":
                self.refuse(node, f"column {node.name} refused",
                            f"its type {self.type_of(node)} is not supported in expressions "
                            "over private rows.", "Use int, float, str, bool, date or "
                            "timestamp columns.")
            return
        if isinstance(node, _LOGIC):
            for arg in _operands(node):
                if self.fam(arg) not in ("bool", "null"):
                    self.refuse(arg, f"`{_snippet(arg)}` in {node.key.upper()} refused",
                                f"it is a {self.type_of(arg)}, not a condition; the engine "
                                "would convert its values to booleans, which fails on some.",
                                "Write a comparison, e.g. `x = 1`.")
        elif isinstance(node, _COMPARE):
            self.compared(node, [node.this, node.expression])
        elif isinstance(node, exp.Between):
            self.compared(node, [node.this, node.args["low"], node.args["high"]])
        elif isinstance(node, exp.In):
            listed = literal_list(node)
            if listed is None:
                self.compared(node, [node.this, *node.expressions])
            else:
                self.literal_list(node, listed)
        elif isinstance(node, exp.Is):
            # IS [NOT] NULL holds for any value; IS [NOT] TRUE / FALSE converts its operand to
            # BOOLEAN, which fails on a string 'x', a date, a timestamp
            if not isinstance(node.expression, exp.Null) and self.fam(node.this) not in (
                    "bool", "null"):
                self.refuse(node, f"`{_snippet(node)}` refused",
                            f"{_snippet(node.this)} is a {self.type_of(node.this)}, not a "
                            "condition; IS TRUE / IS FALSE would convert its values to "
                            "booleans, which fails on some.",
                            "Write a comparison, e.g. `s = 'true'`, or TRY_CAST(s AS BOOLEAN) "
                            "IS TRUE.")
        elif isinstance(node, (*_PATTERN, exp.Escape)):
            self.pattern(node)
        elif isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
            pass  # a CASE branch: the CASE checks its parts
        elif isinstance(node, _CONDITIONAL):
            self.conditional(node)
        elif isinstance(node, _ARITH):
            self.arithmetic(node)
        elif isinstance(node, exp.TryCast):
            if self.fam(node) == "other":
                self.refuse(node, f"TRY_CAST to {node.to.sql(dialect='duckdb')} refused",
                            "the target type is not supported.", "Cast to a number, "
                            "VARCHAR, BOOLEAN, DATE or TIMESTAMP.")
        elif isinstance(node, exp.Cast):
            self.cast(node)
        elif isinstance(node, exp.Try):
            self.inside_try(node)
        elif type(node) in _STRING:
            positional = isinstance(node, _POSITIONAL)
            self.function(node, _STRING[type(node)], wrap=positional, allowed=("str", "null"),
                          any_family=isinstance(node, (exp.Concat, exp.DPipe)),
                          validate=positional)
        elif type(node) in _NUMERIC_FUNCS:
            self.function(node, _NUMERIC_FUNCS[type(node)], wrap=True,
                          allowed=("int", "float", "decimal", "null"))
        elif isinstance(node, _FLOAT_TESTS):
            self.function(node, (), wrap=False, allowed=("int", "float", "decimal", "null"))
        elif type(node) in _TEMPORAL_FUNCS:
            self.function(node, _TEMPORAL_FUNCS[type(node)], wrap=True,
                          allowed=("date", "timestamp", "null"), validate=True)
        elif isinstance(node, exp.Anonymous) and node.name.lower() in _ANONYMOUS:
            self.anonymous(node)
        else:
            self.unsupported(node)

    def compared(self, node: exp.Expr, operands: list[exp.Expr]) -> None:
        """``operands`` are compared with each other (=, <, IN, BETWEEN, a simple CASE): the
        engine converts them to one type first, and that conversion must not fail on a value.

        * Same family, or floating point involved (everything converts to DOUBLE): nothing to do.
        * Integers with DECIMALs: compared exactly as ``DECIMAL(38, s)`` (s the largest scale);
          a column is read through ``TRY_CAST`` (an integer with too many digits becomes NULL,
          which compares as unknown), and each constant's conversion is checked now.
        * DATE with TIMESTAMP: compared as TIMESTAMP, columns through ``TRY_CAST`` (a DATE past
          year 294247 has no TIMESTAMP).
        * A string constant compared with another type is converted to it (checked now); a
          string *column* compared with another type is refused (every value would be
          converted, and some fail).

        Explicit ``TRY_CAST``s, not a ``TRY`` around the comparison: DuckDB may rewrite an IN
        list into a join and move the conversion out of the ``TRY``.
        """
        for x in operands:
            if self.is_const(x) and self.fam(x) == "other":
                self.refuse(x, f"constant `{_snippet(x)}` refused",
                            f"its type is {self.type_of(x)}, which the engine cannot compare "
                            "with every value.", "Use numbers that fit in 128 bits, strings, "
                            "booleans, dates or timestamps.")
        adaptable = [x for x in operands if self.is_const(x) and self.fam(x) == "str"]
        by_identity = {id(x) for x in adaptable}  # (sqlglot's == compares whole trees)
        typed = [x for x in operands if id(x) not in by_identity and self.fam(x) != "null"]
        fams = {self.fam(x) for x in typed}
        if not typed:
            return
        if "str" in fams and len(fams) > 1:
            column = next(x for x in typed if self.fam(x) == "str")
            other = next(x for x in typed if self.fam(x) != "str")
            self.refuse(node, f"`{_snippet(node)}` refused",
                        f"it compares {self.type_of(column)} with {self.type_of(other)}; the "
                        f"engine would convert the values of `{_snippet(column)}` and fail on "
                        "those that do not convert, which depends on the data.",
                        "Compare values of one type (e.g. a str column with a quoted string), or "
                        "convert explicitly with TRY_CAST(x AS type), which gives NULL instead "
                        "of failing.")
        target = self._common_type(node, typed, fams)
        for x in typed:
            self.convert(node, x, target)
        as_type = target or self.type_of(typed[0])
        for x in adaptable:
            if family(as_type) != "str":
                what = (f"the engine converts {_snippet(x)} to {as_type} to compare it with "
                        f"`{_snippet(typed[0])}`")
                self.constant_checks.append((f"CAST(({_plain(x)}) AS {as_type})", x, what))

    def literal_list(self, node: exp.In, values: LiteralList) -> None:
        """A list read as a whole (plain integers, or plain strings): :meth:`compared` needs
        no conversion for integers against a number, nor for strings against a string; any
        other subject is checked item by item (the query is planned again with the list as
        literal nodes). In WHERE, the engine reads a list it can compare exactly as one
        constant (see :func:`engine_list_sql`)."""
        allowed = ("int", "float", "null") if values.kind == "int" else ("str", "null")
        if self.fam(node.this) not in allowed:
            raise ListFallback
        if self.clause == "WHERE":
            compact = engine_list_sql(values, self.type_of(node.this))
            if compact is not None:
                self.compact[id(node)] = compact

    def _common_type(self, node: exp.Expr, typed: list[exp.Expr],
                     fams: set[Family]) -> str | None:
        """The type the operands are compared as, when a conversion could fail (else None)."""
        if len(fams) == 1 and fams != {"decimal"}:
            return None
        if fams <= _NUMERIC:
            if "float" in fams or fams == {"int"}:
                return None
            scale = max(_decimal_scale(self.type_of(x)) for x in typed)
            return f"DECIMAL(38,{scale})"
        if fams <= _TEMPORAL:
            return "TIMESTAMP" if fams == _TEMPORAL else None
        a, b = typed[0], next(x for x in typed if self.fam(x) != self.fam(typed[0]))
        self.refuse(node, f"`{_snippet(node)}` refused",
                    f"it compares {self.type_of(a)} with {self.type_of(b)}.",
                    "Compare values of one type, or convert one side with TRY_CAST.")
        return None

    def convert(self, node: exp.Expr, value: exp.Expr, target: str | None) -> None:
        """``value`` is converted to ``target`` by the engine: check a constant now, read a
        column through ``TRY_CAST`` when the conversion can fail."""
        if target is None or self.type_of(value).upper() == target.upper():
            return
        source = self.type_of(value)
        if family(target) == "str" or _cast_is_total(source, target):
            return
        if self.is_const(value):
            self.constant_checks.append(
                (f"CAST(({_plain(value)}) AS {target})", value,
                 f"the engine converts {_snippet(value)} to {target} in `{_snippet(node)}`"))
        else:
            self.casts[id(value)] = target

    def convertible(self, node: exp.Expr, value: exp.Expr, target: str) -> None:
        """``value`` becomes a ``target``: a branch of CASE, COALESCE, GREATEST ..."""
        fv, ft = self.fam(value), family(target)
        if fv == "null":
            return
        if fv == "str" and ft != "str" and not self.is_const(value):
            self.refuse(node, f"`{_snippet(node)}` refused",
                        f"its branches have different types: `{_snippet(value)}` is a "
                        f"{self.type_of(value)} but the result is a {target}; the engine would "
                        "convert the values and fail on those that do not convert.",
                        "Give every branch the same type (e.g. all quoted strings), or use "
                        "TRY_CAST.")
        compatible = (fv == ft or ft == "str" or fv in _NUMERIC and ft in _NUMERIC
                      or fv in _TEMPORAL and ft in _TEMPORAL or self.is_const(value))
        if not compatible:
            self.refuse(node, f"`{_snippet(node)}` refused",
                        f"its branches have different types: `{_snippet(value)}` is a "
                        f"{self.type_of(value)} but the result is a {target}.",
                        "Give every branch the same type, or use TRY_CAST.")
        self.convert(node, value, target)

    def conditional(self, node: exp.Expr) -> None:
        target = self.type_of(node)
        if isinstance(node, exp.Case):
            subject = node.this
            if subject is not None:
                self.compared(node, [subject, *(b.this for b in node.args.get("ifs", []))])
            for branch in node.args.get("ifs", []):
                cond = branch.this
                if subject is None and self.fam(cond) not in ("bool", "null"):
                    self.refuse(cond, f"CASE WHEN `{_snippet(cond)}` refused",
                                f"it is a {self.type_of(cond)}, not a condition.",
                                "Write a comparison.")
                self.convertible(node, branch.args["true"], target)
            if node.args.get("default") is not None:
                self.convertible(node, node.args["default"], target)
            return
        if isinstance(node, exp.If):
            if self.fam(node.this) not in ("bool", "null"):
                self.refuse(node.this, f"IF(`{_snippet(node.this)}`, ...) refused",
                            "its first argument is not a condition.", "Write a comparison.")
            for key in ("true", "false"):
                if node.args.get(key) is not None:
                    self.convertible(node, node.args[key], target)
            return
        if isinstance(node, exp.Nullif):
            self.compared(node, [node.this, node.expression])
            return
        for value in _operands(node):
            self.convertible(node, value, target)

    def pattern(self, node: exp.Expr) -> None:
        if isinstance(node, exp.Escape):
            # DuckDB checks a LIKE pattern against its ESCAPE character lazily, when a row's
            # value reaches the end of the pattern: so the check is made here, on the text
            inner, escape = node.this, node.expression
            literals = [x for x in (inner.expression, escape)
                        if isinstance(x, exp.Literal) and x.is_string]
            if len(literals) != 2:
                self.refuse(node, "LIKE ... ESCAPE refused", "with ESCAPE, the pattern and the "
                            "escape character must be quoted strings (they are checked now).",
                            "Write e.g. s LIKE 'a!%' ESCAPE '!'.")
            problem = _escape_problem(inner.expression.this, escape.this)
            if problem is not None:
                self.refuse(node, f"`{_snippet(node)}` refused", f"{problem}; the engine "
                            "would fail only when a row's value reaches that point, which "
                            "depends on the data.", "Fix the pattern or the ESCAPE character.")
            return
        subject, pattern = node.this, node.expression
        if self.fam(subject) not in ("str", "null"):
            self.refuse(node, f"{node.key.upper()} on `{_snippet(subject)}` refused",
                        f"it is a {self.type_of(subject)}; patterns match strings.",
                        "Match a str column, or CAST(x AS VARCHAR) first.")
        extra = [v for k, v in node.args.items() if k not in ("this", "expression")
                 and isinstance(v, exp.Expr)]
        for arg in [pattern, *extra]:
            if not self.is_const(arg):
                self.refuse(arg, f"{node.key.upper()} pattern refused",
                            "a pattern computed from the data could be invalid for some "
                            "rows only (an error that reveals them).",
                            "Write the pattern as a quoted string.")
        if not isinstance(node.parent, exp.Escape):
            self.validate(node)

    def arithmetic(self, node: exp.Expr) -> None:
        operands = _operands(node)
        for arg in operands:
            if self.fam(arg) not in ("int", "float", "decimal", "date", "timestamp",
                                     "interval", "null"):
                self.refuse(node, f"`{_snippet(node)}` refused",
                            f"arithmetic on a {self.type_of(arg)} (`{_snippet(arg)}`).",
                            "Use numbers, dates or intervals.")
        # + - * computed in floating point (a DOUBLE operand makes the engine convert the
        # others, which cannot fail) cannot fail: an overflow is ±inf. Integer, decimal and date
        # arithmetic can overflow; a division can fail on 0 whatever the types (on a connection
        # with ieee_floating_point_ops off or integer_division on, too)
        floating = (self.fam(node) == "float" and any(self.fam(a) == "float" for a in operands)
                    and all(self.fam(a) in ("float", "int", "decimal", "null") for a in operands))
        if not floating or isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
            self.wrap.add(id(node))

    def cast(self, node: exp.Cast) -> None:
        source, target = self.type_of(node.this), self.type_of(node)
        if self.is_const(node.this):
            return  # evaluated with the constants
        if _cast_is_total(source, target):
            return
        self.refuse(node, f"`{_snippet(node)}` refused",
                    f"CAST from {source} to {target} fails on some values (e.g. text that is "
                    "not a number, a number out of range, NaN), and a failure reveals that such "
                    "a row exists.",
                    f"Write TRY_CAST({_snippet(node.this)} AS {target}): a value that does not "
                    "convert becomes NULL.")

    def inside_try(self, node: exp.Try) -> None:
        """A user's TRY: its contents are still checked against the list (a TRY cannot make
        ``error()`` or ``repeat()`` safe), but need no TRY of their own."""
        return

    def function(self, node: exp.Expr, constant_args: tuple[str, ...], *, wrap: bool,
                 allowed: tuple[str, ...], any_family: bool = False,
                 validate: bool = False) -> None:
        for key in constant_args:
            arg = node.args.get(key)
            if isinstance(arg, exp.Expr) and not isinstance(arg, _NOT_VALUES) \
                    and not self.is_const(arg):
                self.refuse(arg, f"{_fname(node)} refused",
                            f"its argument `{_snippet(arg)}` must be a constant (a value "
                            "computed from the data could be invalid for some rows).",
                            "Write it as a literal.")
        for arg in _operands(node):
            if self.is_const(arg) or isinstance(arg, _NOT_VALUES):
                continue
            fam = self.fam(arg)
            if any_family and fam != "other" or fam in allowed:
                continue
            self.refuse(node, f"`{_snippet(node)}` refused",
                        f"`{_snippet(arg)}` is a {self.type_of(arg)}; the engine would convert "
                        "its values, which can fail.", "Pass a value of the expected type.")
        if wrap:
            self.wrap.add(id(node))
        if validate:
            self.validate(node)

    def anonymous(self, node: exp.Anonymous) -> None:
        consts = _ANONYMOUS[node.name.lower()]
        for i, arg in enumerate(node.expressions):
            if i in consts and not self.is_const(arg):
                self.refuse(arg, f"{_fname(node)} refused",
                            f"argument {i + 1} must be a constant.", "Write it as a literal.")
        self.wrap.add(id(node))
        if consts:
            self.validate(node)

    def validate(self, node: exp.Expr) -> None:
        """Constant arguments (patterns, units, formats) must be valid: evaluate the node once
        with a sample value for each column, now."""
        sample = _skeleton(node, self.columns, sample=True).sql(dialect="duckdb")
        self.constant_checks.append(
            (sample, node, (f"`{_snippet(node)}` fails on a sample value; its constant "
                            "arguments (pattern, unit or format) are probably invalid")))

    def unsupported(self, node: exp.Expr) -> None:
        self.refuse(node, f"`{_snippet(node)}` refused in {self.clause}",
                    "privplan runs over private rows only expressions that cannot fail on any "
                    "value (a failure would reveal an un-noised bit about the data) and whose "
                    "cost does not grow with a value.",
                    "Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, CASE, COALESCE, "
                    "arithmetic, TRY_CAST, string functions (lower, upper, length, trim, "
                    "substring, replace, concat, starts_with, contains) or date parts (year, "
                    "month, day, extract, date_trunc, date_diff, strftime).")

    # -- constants -----------------------------------------------------------------------------
    def _check_constants(self, expr: exp.Expr) -> None:
        """Evaluate every constant that is more than a literal, and every conversion of a
        constant, in one batch: a failure here does not depend on the data."""
        checks: list[tuple[str, exp.Expr, str]] = []
        for node in expr.walk():
            if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
                continue  # a CASE branch is not an expression; its parts are checked
            parent = node.parent
            if isinstance(parent, exp.If) and isinstance(parent.parent, exp.Case):
                parent = parent.parent
            if id(node) not in self.const:
                continue
            root = parent is None or id(parent) not in self.const
            if root and family(self.type_of(node)) == "other" and not isinstance(
                    node, (*_NOT_VALUES, exp.Interval)):
                self.refuse(node, f"constant `{_snippet(node)}` refused",
                            f"its type is {self.type_of(node)}.",
                            "Use numbers that fit in 128 bits, strings, booleans, dates "
                            "or timestamps.")
            # every constant part on its own, not only the whole: the engine need not evaluate
            # them in the order a check would (DATE '2020-01-01' IN (DATE '2020-01-01',
            # DATE '2020-02-30') stops at the first match when evaluated whole)
            if not isinstance(node, (*_LEAVES, *_NOT_VALUES, exp.Paren)):
                checks.append((_plain(node), node, f"`{_snippet(node)}` cannot be computed"))
        checks += self.constant_checks
        if not checks:
            return
        try:
            self.judge.evaluate([c[0] for c in checks])
        except JudgeError as err:  # a constant fails, whatever the data
            _, node, what = checks[err.index] if err.index is not None else checks[0]
            self.refuse(node, f"{what}: {err.message}",
                        "the engine would fail on it at run time, and only when a row reaches "
                        "it.", "Fix the constant (or use TRY_CAST).")

    def _wrapped(self, expr: exp.Expr) -> exp.Expr:
        """``expr`` with each node that may fail inside ``TRY`` and each conversion that may
        fail made a ``TRY_CAST``. Deepest nodes first, wrapping the nodes themselves (never
        copies), so a node wrapped inside another keeps its own ``TRY``."""
        if not self.wrap and not self.casts:
            return expr
        root = expr
        for node in reversed(list(expr.walk())):  # breadth-first, reversed: children first
            try_it = id(node) in self.wrap and not any(
                isinstance(a, exp.Try) or id(a) in self.wrap for a in _ancestors(node))
            cast = self.casts.get(id(node))
            if not try_it and cast is None:
                continue
            parent, key, index = node.parent, node.arg_key, node.index
            new: exp.Expr = node
            if try_it:
                new = exp.Try(this=new)
            if cast is not None:
                new = exp.TryCast(this=new, to=exp.DataType.build(cast, dialect="duckdb"))
            if parent is None:
                root = new
            else:
                assert key is not None  # a node with a parent is held under a key
                parent.set(key, new, index)
        return root

    def refuse(self, node: exp.Expr, what: str, why: str, fix: str) -> None:
        raise UnsupportedQueryError(with_location(f"{what}: {why} {fix}", self.sql, node))
