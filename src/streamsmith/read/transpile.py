"""Spark SQL to DuckDB SQL (sqlglot), or a reason to leave the query to Spark.

sqlglot transpiles the syntax; the semantics must be Spark's too, so a query goes to
DuckDB only when every part of it is known to give the same answer on both engines.
The rules, each checked by the corpus in ``tests/streaming/test_read_fast_path.py``
(the docs list them in ``docs/reference/query-engines.md``):

- only a query (SELECT, WITH, set operations) over lake views;
- only functions in :data:`TAKEN` (the corpus runs each on both engines);
- not ``round``/``bround`` (Spark rounds a double's decimal text half up, DuckDB the
  binary value), ``approx_count_distinct`` and ``percentile_approx`` (other
  algorithms), unordered ``collect_list``/``collect_set``, array subscripts (Spark's
  ANSI mode fails out of bounds, DuckDB gives NULL), ``substring`` from a position
  below 1, ``date_format`` patterns beyond ``y M d H m s``, ``to_date`` with a pattern;
- not a timestamp, double, binary or nested value turned into text (each engine writes
  its own text);
- not sums, averages or deviations over floating-point values (the last bits depend
  on the order of additions, which differs between the engines);
- not a division, an average or a deviation involving decimals (Spark keeps a decimal
  of its own scale, DuckDB a double);
- every unaliased output column must be one Spark and DuckDB name alike (a column, or
  ``count``/``sum``/``avg``/``min``/``max`` of a column); name the others with ``AS``.

Spark's ANSI mode (on by default) is kept: ``CAST`` fails on bad input instead of
giving NULL, and a division by zero fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from streamsmith.read.errors import NotOnFastPath, first_line
from streamsmith.read.tables import Field, SparkType
from streamsmith.read.time_travel import TableVersion

# The functions the fast path takes: each is run on both engines by the corpus.
TAKEN: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Abs,
        exp.And,
        exp.Exists,
        exp.Or,
        exp.ArrayContains,
        exp.ArraySize,
        exp.ArraySort,
        exp.Avg,
        exp.Between,
        exp.Case,
        exp.Cast,
        exp.Coalesce,
        exp.Concat,
        exp.ConcatWs,
        exp.Count,
        exp.CountIf,
        exp.DateDiff,
        exp.Day,
        exp.DayOfMonth,
        exp.DenseRank,
        exp.Greatest,
        exp.Hour,
        exp.If,
        exp.Lag,
        exp.Lead,
        exp.Least,
        exp.Length,
        exp.Lower,
        exp.Max,
        exp.Min,
        exp.Minute,
        exp.Month,
        exp.Nullif,
        exp.Pad,
        exp.Rank,
        exp.RegexpExtract,
        exp.RegexpLike,
        exp.RegexpReplace,
        exp.RowNumber,
        exp.Second,
        exp.StrPosition,
        exp.Substring,
        exp.Sum,
        exp.TimestampTrunc,
        exp.TimeToStr,
        exp.Trim,
        exp.TryCast,
        exp.TsOrDsToDate,
        exp.Upper,
        exp.Year,
    }
)
# collect_list/collect_set: their order is the engine's, unless sorted.
_SORTED_ONLY = (exp.ArrayAgg, exp.ArrayUniqueAgg)
_FLOAT_SENSITIVE = (
    exp.Sum,
    exp.Avg,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
)
_FLOAT_TYPES = {"double", "float"}
# Values whose text differs between the engines (a timestamp's offset, 1.0E10 against
# 10000000000.0, nested values): not cast to text, explicitly or by a string function.
_TEXT_DIFFERS = {"timestamp", "double", "float", "struct", "array", "map", "binary"}
_TEXTUAL = (
    exp.Concat,
    exp.ConcatWs,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Substring,
    exp.Trim,
    exp.Pad,
    exp.StrPosition,
    exp.RegexpExtract,
    exp.RegexpReplace,
    exp.RegexpLike,
    exp.Like,
    exp.ILike,
)
# date_format patterns of yyyy MM dd HH mm ss and separators (sqlglot holds them as strftime)
_DATE_PATTERN = re.compile(r"(%[YmdHMS](strict)?|[-:/ T.])+")
_NAMED_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


class SparkQuery:
    """A user's Spark SQL, parsed: the lake views it reads, and its DuckDB form."""

    def __init__(self, sql: str) -> None:
        quiet = logging.getLogger("sqlglot")  # it warns on stderr of what it cannot parse
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            statements = sqlglot.parse(sql, read="spark")
        except SqlglotError as exc:
            raise NotOnFastPath(f"sqlglot cannot read it ({first_line(exc)})") from None
        finally:
            quiet.setLevel(level)
        if len(statements) != 1 or not isinstance(statements[0], exp.Query):
            raise NotOnFastPath("not a single SELECT query")
        self.tree: exp.Query = statements[0]
        self.versions = _versioned_views(self.tree)
        self.tables = _read_tables(self.tree)

    def to_duckdb(self, columns: Mapping[str, Sequence[Field]], *, ansi: bool = True) -> str:
        """The DuckDB SQL giving Spark's answer; ``columns`` are the fields of each view
        the query reads (by lower-case view name)."""
        missing = sorted(table for table in self.tables if table not in columns)
        if missing:
            raise NotOnFastPath(f"table {missing[0]} is not a lake table")
        types = _column_types(columns[table] for table in self.tables)
        tree = self.tree.copy()
        _check(tree, types)
        _name_outputs(tree)
        _keep_spark_semantics(tree, ansi)
        try:
            return tree.sql(dialect="duckdb")
        except SqlglotError as exc:
            raise NotOnFastPath(f"sqlglot cannot write it for DuckDB ({first_line(exc)})") from None


def _versioned_views(tree: exp.Expr) -> dict[str, TableVersion]:
    """Each time-travelling table reference made a view of its own (``name@version=3``),
    aliased to the table's name so the rest of the query reads as written; the views by
    lower-case name."""
    views: dict[str, TableVersion] = {}
    for table in list(tree.find_all(exp.Table)):
        if table.args.get("version") is None:
            continue
        reference = TableVersion.of(table)
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(reference.view, quoted=True))
        table.set("version", None)
        views[reference.view.lower()] = reference
    return views


def _read_tables(tree: exp.Expr) -> frozenset[str]:
    """The views a query reads (references to a CTE in scope excluded), lower-case.

    Scopes as SQL has them: a name defined by a ``WITH`` deeper in the query, or later in
    the same ``WITH``, is no CTE where it is used, so it counts as a table here, as DuckDB
    would read it (a file path named like a CTE nested elsewhere was read as a file)."""
    names: set[str] = set()
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise NotOnFastPath(f"a table function ({table.sql(dialect='spark')})")
        if table.args.get("db") or table.args.get("catalog"):
            raise NotOnFastPath(f"a table in a database ({table.sql(dialect='spark')})")
        if not _names_a_cte(table):
            names.add(table.name.lower())
    return frozenset(names)


def _names_a_cte(table: exp.Table) -> bool:
    """Whether a CTE visible where ``table`` stands has its name: one of a ``WITH`` of an
    enclosing query, or an earlier one of the ``WITH`` whose CTE holds it (itself too if
    ``RECURSIVE``)."""
    name = table.name.lower()
    node: exp.Expr = table
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.With):  # node is one of its CTEs
            ctes = list(parent.expressions)
            seen = ctes[: ctes.index(node) + (1 if parent.args.get("recursive") else 0)]
            if name in {cte.alias_or_name.lower() for cte in seen}:
                return True
            node = parent.parent if parent.parent is not None else parent
            continue  # past the query that owns this WITH: its CTEs were just weighed
        with_ = parent.args.get("with_")
        if isinstance(with_, exp.With) and any(
            cte.alias_or_name.lower() == name for cte in with_.expressions
        ):
            return True
        node = parent
    return False


def _column_types(fields: Iterator[Sequence[Field]]) -> dict[str, set[str]]:
    """Every column name of the views read (nested field names included), lower-case,
    with the Spark type names it has anywhere."""
    types: dict[str, set[str]] = {}

    def add(name: str, spark_type: SparkType) -> None:
        if isinstance(spark_type, dict):
            types.setdefault(name.lower(), set()).add(str(spark_type.get("type")))
            for field in spark_type.get("fields", []):
                add(field["name"], field["type"])
            for key in ("elementType", "keyType", "valueType"):
                if key in spark_type:
                    add(name, spark_type[key])
        else:
            types.setdefault(name.lower(), set()).add(spark_type.split("(")[0])

    for view in fields:
        for field in view:
            add(field.name, field.type)
    return types


def _check(tree: exp.Expr, types: Mapping[str, set[str]]) -> None:
    """Raise NotOnFastPath at the first construct whose answer could differ."""
    for node in tree.walk():
        if isinstance(node, _SORTED_ONLY):
            if not isinstance(node.parent, exp.ArraySort):
                raise NotOnFastPath(f"{_spark(node)} without sort_array (its order is Spark's)")
        elif isinstance(node, exp.TimeStrToTime) and isinstance(node.parent, exp.TimeToStr):
            pass  # date_format's reading of its argument as a timestamp
        elif isinstance(node, exp.Func) and type(node) not in TAKEN:
            raise NotOnFastPath(f"function {_function_name(node)} (not on the fast path's list)")
        if isinstance(node, exp.Bracket) and not all(
            isinstance(key, exp.Literal) and key.is_string for key in node.expressions
        ):
            raise NotOnFastPath(f"an array subscript ({_spark(node)})")
        if isinstance(node, exp.Substring):
            start = node.args.get("start")
            if not (isinstance(start, exp.Literal) and start.is_int and int(start.this) >= 1):
                raise NotOnFastPath(f"{_spark(node)} from a position that is not a number >= 1")
        if isinstance(node, exp.TimeToStr):
            pattern = node.args.get("format")
            if not (isinstance(pattern, exp.Literal) and _DATE_PATTERN.fullmatch(pattern.this)):
                raise NotOnFastPath(f"{_spark(node)}: a pattern beyond y M d H m s")
        if isinstance(node, _FLOAT_SENSITIVE) and _may_be(node.this, types, _FLOAT_TYPES, True):
            raise NotOnFastPath(
                f"{_spark(node)} over floating-point values (the last bits depend on the order "
                "of additions)"
            )
        if (
            isinstance(node, _FLOAT_SENSITIVE)
            and not isinstance(node, exp.Sum)
            and _may_be(node.this, types, {"decimal"}, False)
        ):
            raise NotOnFastPath(f"{_spark(node)} over decimals (Spark keeps a decimal)")
        if _as_text(node) and any(
            _may_be(operand, types, _TEXT_DIFFERS, True) for operand in _operands(node)
        ):
            raise NotOnFastPath(f"{_spark(node)} turns a timestamp, double or nested value to text")
        if isinstance(node, exp.TsOrDsToDate) and node.args.get("format") is not None:
            raise NotOnFastPath(f"{_spark(node)} with a pattern")
        if isinstance(node, exp.Div | exp.IntDiv) and (
            _may_be(node.this, types, {"decimal"}, False)
            or _may_be(node.expression, types, {"decimal"}, False)
        ):
            raise NotOnFastPath(f"a division with decimals ({_spark(node)})")


def _as_text(node: exp.Expr) -> bool:
    """Whether ``node`` turns its operands into text."""
    if isinstance(node, exp.Cast | exp.TryCast):
        return node.to.is_type(*exp.DataType.TEXT_TYPES)
    return isinstance(node, _TEXTUAL)


def _operands(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Cast | exp.TryCast):
        return [node.this]
    return [value for value in node.iter_expressions() if not isinstance(value, exp.Literal)]


def _may_be(node: exp.Expr, types: Mapping[str, set[str]], kinds: set[str], div: bool) -> bool:
    """Whether ``node`` may hold values of the Spark types ``kinds`` (by its columns,
    casts and literals; ``div``: a division yields a double)."""
    decimal = "decimal" in kinds
    for inner in node.walk():
        if isinstance(inner, exp.Column) and types.get(inner.name.lower(), set()) & kinds:
            return True
        if isinstance(inner, exp.DataType):
            if decimal and inner.this == exp.DataType.Type.DECIMAL:
                return True
            if not decimal and inner.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
                return True
        if isinstance(inner, exp.Literal) and not inner.is_string and not inner.is_int:
            return True  # 1.5 is a decimal in Spark, 1e3 a double
        if div and isinstance(inner, exp.Div):
            return True
        if isinstance(inner, exp.Column) and inner.name.lower() not in types:
            return True  # an alias or a column we cannot type: assume the worst
    return False


def _name_outputs(tree: exp.Query) -> None:
    """Give DuckDB's output columns Spark's names, or refuse the query."""
    select: exp.Expr = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    if isinstance(select, exp.Subquery):
        select = select.unnest()
    if not isinstance(select, exp.Select):
        raise NotOnFastPath("a query whose output names are not a SELECT's")
    for index, item in enumerate(select.expressions):
        if isinstance(item, exp.Alias | exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            continue
        # A column keeps its name as the query spells it in Spark (DuckDB: the table's)
        name = item.name if isinstance(item, exp.Column) else _spark_name(item)
        if name is None:
            raise NotOnFastPath(f"an unnamed expression {_spark(item)} (name it with AS)")
        select.expressions[index] = exp.alias_(item, name, quoted=True)


def _spark_name(node: exp.Expr) -> str | None:
    """Spark's name of ``count(*)``, ``count(DISTINCT x)``, ``sum(x)`` and the like."""
    name = _NAMED_AGGREGATES.get(type(node))
    if name is None:
        return None
    argument = node.this
    if isinstance(node, exp.Count) and isinstance(argument, exp.Star):
        return "count(1)"
    if isinstance(node, exp.Count) and isinstance(argument, exp.Literal) and argument.is_int:
        return f"count({argument.this})"
    if isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
        inner = argument.expressions[0]
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            return f"{name}(DISTINCT {inner.name})"
        return None
    if isinstance(argument, exp.Column) and not isinstance(argument.this, exp.Star):
        return f"{name}({argument.name})"
    return None


def _keep_spark_semantics(tree: exp.Expr, ansi: bool) -> None:
    """What sqlglot writes in Spark's non-ANSI manner, rewritten as Spark 4 answers."""
    for node in reversed(list(tree.walk())):  # children first: parents copy them
        if isinstance(node, exp.Like | exp.ILike) and not isinstance(node.parent, exp.Escape):
            node.replace(exp.Escape(this=node.copy(), expression=exp.Literal.string("\\")))
        if not ansi:
            continue
        if isinstance(node, exp.TryCast) and not node.args.get("safe"):
            node.replace(exp.Cast(this=node.this, to=node.args["to"]))
        elif isinstance(node, exp.TsOrDsToDate):
            node.replace(exp.Cast(this=node.this, to=exp.DataType.build("DATE")))
        elif isinstance(node, exp.Div | exp.IntDiv | exp.Mod):
            divisor = node.expression
            failing = exp.Anonymous(
                this="error", expressions=[exp.Literal.string("[DIVIDE_BY_ZERO] Division by zero")]
            )
            guarded = exp.Case(
                ifs=[
                    exp.If(
                        this=exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0)),
                        true=failing,
                    )
                ],
                default=divisor.copy(),
            )
            node.set("expression", exp.Paren(this=guarded))
            if isinstance(node, exp.Div):
                node.set("safe", False)


def _spark(node: exp.Expr) -> str:
    return node.sql(dialect="spark")


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return _spark(node).split("(")[0].lower()
