"""SDP's SQL dialect: the statements of a ``.sql`` library file as graph elements.

Supported: ``CREATE [OR REFRESH] STREAMING TABLE t [(schema)] [COMMENT '...']
[TBLPROPERTIES (...)] [PARTITIONED BY (...) | CLUSTER BY (...)] [AS query]`` (a query reading
``STREAM(x)`` or ``STREAM x``), ``CREATE [OR REFRESH] MATERIALIZED VIEW v ... AS query``,
``CREATE TEMPORARY VIEW v AS query``, ``CREATE FLOW f AS INSERT INTO [ONCE] t [BY NAME]
query`` (by name either way; SDP 4.2 refuses it without ``BY NAME``), ``CREATE FLOW f
AS AUTO CDC INTO t FROM STREAM(s) KEYS (...) ...`` (:func:`_auto_cdc`) and ``SET key =
value`` (a Spark setting for the statements after it in the file), several per file.
Anything else is an error naming the file and line. Parentheses, clause lists and AUTO
CDC's clauses are found among Spark SQL's tokens (sqlglot's tokenizer), so what a
string, a quoted name or a comment holds is never syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.pipelines.flow import Flow
from pyspark.pipelines.output import MaterializedView, Output, StreamingTable, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql import DataFrame
from sqlglot import Token, TokenType

from streamsmith.config import ExpectAction
from streamsmith.errors import UserError
from streamsmith.monitor.recorder import first_line
from streamsmith.sdp.expectations import Expecting
from streamsmith.sdp.lakeflow import AutoCdc, OnceFlow, auto_cdc

if TYPE_CHECKING:
    from streamsmith.sdp.session import PipelineSession

_NAME = r"([\w.`]+)"
_DATASET = re.compile(
    r"CREATE\s+(?:OR\s+REFRESH\s+)?(STREAMING\s+TABLE|MATERIALIZED\s+VIEW|TEMPORARY\s+VIEW)\s+"
    + _NAME,
    re.IGNORECASE,
)
_FLOW = re.compile(
    r"CREATE\s+FLOW\s+" + _NAME + r"(?:\s+COMMENT\s+'((?:[^']|'')*)')?\s+AS\s+INSERT\s+INTO\s+"
    r"(ONCE\s+)?" + _NAME + r"(?:\s+BY\s+NAME)?\s+(.+)",
    re.IGNORECASE | re.DOTALL,
)  # fmt: skip
_AUTO_CDC = re.compile(
    r"CREATE\s+FLOW\s+" + _NAME + r"(?:\s+COMMENT\s+'(?:[^']|'')*')?\s+AS\s+"
    r"(?:AUTO\s+CDC|APPLY\s+CHANGES)\s+INTO\s+" + _NAME + r"\s+FROM\s+(?:STREAM\s*\(\s*"
    + _NAME + r"\s*\)|STREAM\s+" + _NAME + r"|" + _NAME + r")\s+(.*)",
    re.IGNORECASE | re.DOTALL,
)  # fmt: skip
# AUTO CDC's clauses, by their words, in SDP's order
_CDC_CLAUSES: tuple[tuple[str, ...], ...] = (
    ("KEYS",),
    ("IGNORE", "NULL", "UPDATES"),
    ("APPLY", "AS", "DELETE", "WHEN"),
    ("APPLY", "AS", "TRUNCATE", "WHEN"),
    ("SEQUENCE", "BY"),
    ("COLUMNS",),
    ("STORED", "AS", "SCD", "TYPE"),
    ("TRACK", "HISTORY", "ON"),
)
_CONSTRAINT = re.compile(
    r"CONSTRAINT\s+(\w+)\s+EXPECT\s*\((.*)\)\s*(?:ON\s+VIOLATION\s+(DROP\s+ROW|FAIL\s+UPDATE))?",
    re.IGNORECASE | re.DOTALL,
)
_SET = re.compile(r"SET\s+([\w.]+)\s*=\s*(.*)", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"COMMENT\s+'((?:[^']|'')*)'", re.IGNORECASE)
_CLAUSE = re.compile(r"(TBLPROPERTIES|PARTITIONED\s+BY|CLUSTER\s+BY)\s*\(", re.IGNORECASE)
_AS = re.compile(r"AS\s+", re.IGNORECASE)


@dataclass(frozen=True)
class ExpectingTable(StreamingTable):
    """A SQL streaming table with the expectations its schema clause declares."""

    expectations: tuple[Expecting, ...] = ()


@dataclass(frozen=True)
class ExpectingView(MaterializedView):
    """A SQL materialized view with expectations (refused: a view is recomputed whole)."""

    expectations: tuple[Expecting, ...] = ()


@dataclass(frozen=True)
class Statement:
    text: str
    line: int  # of its first character, 1-indexed


def statements(text: str) -> list[Statement]:
    """The statements of ``text``, split at semicolons outside quotes, comments removed
    (``--`` to the end of a line, ``/* ... */``), each with its first line."""
    found: list[Statement] = []
    current: list[str] = []
    line, start = 1, None
    i, quote = 0, ""
    while i < len(text):
        char = text[i]
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = len(text) if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            current.append(" ")
            continue
        elif char == ";":
            if "".join(current).strip():
                found.append(Statement("".join(current).strip(), start or line))
            current, start = [], None
        else:
            if char in "'\"`":
                quote = char
            if start is None and not char.isspace():
                start = line
            current.append(char)
        line += char == "\n"
        i += 1
    if "".join(current).strip():
        found.append(Statement("".join(current).strip(), start or line))
    return found


def sql_elements(text: str, file: Path, session: PipelineSession) -> list[Output | Flow | AutoCdc]:
    """The datasets and flows ``text`` (the file ``file``) declares, in order, as
    ``pyspark.pipelines`` defines them; a flow's function runs its query through
    ``session``."""
    settings: dict[str, str] = {}
    found: list[Output | Flow | AutoCdc] = []

    def flow(
        name: str, target: str, query: str, location: SourceCodeLocation, once: bool = False
    ) -> Flow:
        def run_query() -> DataFrame:
            return session.sql(query)

        kind = OnceFlow if once else Flow
        return kind(name.strip("`"), target.strip("`"), dict(settings), location, run_query)

    for statement in statements(text):
        location = SourceCodeLocation(str(file), statement.line)
        where = f"{file}:{statement.line}"
        body = statement.text
        if match := _SET.fullmatch(body):
            settings[match.group(1)] = match.group(2).strip().strip("'\"")
            continue
        if match := _AUTO_CDC.fullmatch(body):
            found.append(_auto_cdc(match, location, where))
            continue
        if match := _FLOW.fullmatch(body):
            name, _comment, once, target, query = match.groups()
            found.append(flow(name, target, query, location, once=bool(once)))
            continue
        match = _DATASET.match(body)
        if match is None:
            raise UserError(f"{where}: unsupported SQL statement: {_first_words(body)}")
        kind, name = " ".join(match.group(1).upper().split()), match.group(2).strip("`")
        rest = body[match.end() :].strip()
        schema, comment, properties, partitions, clusters, query = _clauses(rest, where, body)
        schema, expectations = _expectations(schema, where)
        if kind == "TEMPORARY VIEW":
            if schema or properties or partitions or clusters:
                raise UserError(f"{where}: a temporary view takes only COMMENT and AS query")
            found.append(TemporaryView(name, comment, location))
        else:
            cls: type[ExpectingTable | ExpectingView] = (
                ExpectingTable if kind == "STREAMING TABLE" else ExpectingView
            )
            partitioned, clustered = partitions or None, clusters or None
            table = cls(name, comment, location, properties, partitioned, clustered, schema, None)
            found.append(replace(table, expectations=expectations))
        if query is None:
            if kind != "STREAMING TABLE":
                raise UserError(f"{where}: CREATE {kind} {name} needs AS SELECT ...")
            continue
        found.append(flow(name, name, query, location))
    return found


def _auto_cdc(match: re.Match[str], location: SourceCodeLocation, where: str) -> AutoCdc:
    """``CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(s) KEYS (k, ...) [IGNORE NULL
    UPDATES] [APPLY AS DELETE WHEN cond] [APPLY AS TRUNCATE WHEN cond] SEQUENCE BY expr
    [COLUMNS c, ... | COLUMNS * EXCEPT (c, ...)] [STORED AS SCD TYPE 1 | 2] [TRACK HISTORY
    ON c, ... | * EXCEPT (c, ...)]`` as an AUTO CDC flow."""
    name, target, *sources, rest = match.groups()
    source = next(s for s in sources if s)
    clauses = _cdc_clauses(rest, where)
    if clauses.get(_CDC_CLAUSES[1]):
        raise UserError(
            f"{where}: unsupported SQL after IGNORE NULL UPDATES: "
            f"{_first_words(clauses[_CDC_CLAUSES[1]])}"
        )
    for words in (_CDC_CLAUSES[0], _CDC_CLAUSES[4]):
        if not clauses.get(words):
            raise UserError(f"{where}: AUTO CDC needs {' '.join(words)} ...")
    columns = _column_choice(clauses.get(("COLUMNS",)), where)
    tracked = _column_choice(clauses.get(("TRACK", "HISTORY", "ON")), where)
    try:
        return auto_cdc(
            name.strip("`"), target.strip("`"), source.strip("`"),
            tuple(_names(_inside(clauses[("KEYS",)], where), where)), clauses[("SEQUENCE", "BY")],
            location, apply_as_deletes=clauses.get(("APPLY", "AS", "DELETE", "WHEN")),
            ignore_null_updates=_CDC_CLAUSES[1] in clauses,
            apply_as_truncates=clauses.get(("APPLY", "AS", "TRUNCATE", "WHEN")),
            column_list=columns[0], except_column_list=columns[1],
            scd_type=clauses.get(("STORED", "AS", "SCD", "TYPE"), "1"),
            track_history_column_list=tracked[0], track_history_except_column_list=tracked[1],
        )  # fmt: skip
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


def _cdc_clauses(text: str, where: str) -> dict[tuple[str, ...], str]:
    """AUTO CDC's clauses after ``FROM``: each one's words -> the text up to the next
    (found outside parentheses, strings and comments, by Spark SQL's tokens)."""
    tokens = _tokens(text, where)
    starts: list[tuple[tuple[str, ...], int, int]] = []  # (clause, its start, its body's)
    depth, i = 0, 0
    while i < len(tokens):
        token = tokens[i]
        depth += _depth(token)
        words = next(
            (
                w for w in _CDC_CLAUSES
                if depth == 0 and [t.text.upper() for t in tokens[i : i + len(w)]] == list(w)
                and all(t.token_type != TokenType.STRING for t in tokens[i : i + len(w)])
            ),
            None,
        )  # fmt: skip
        if words is None:
            if not starts:
                raise UserError(f"{where}: unsupported SQL in AUTO CDC: {_first_words(text)}")
            i += 1
            continue
        if any(found == words for found, _, _ in starts):
            raise UserError(f"{where}: AUTO CDC has {' '.join(words)} twice")
        starts.append((words, token.start, tokens[i + len(words) - 1].end + 1))
        i += len(words)
    ends = [start for _, start, _ in starts[1:]] + [len(text)]
    return {
        words: text[body:end].strip() for (words, _, body), end in zip(starts, ends, strict=True)
    }


def _column_choice(
    text: str | None, where: str
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """``c, ...`` or ``(c, ...)`` as (the columns, None); ``* EXCEPT (c, ...)`` as (None,
    the columns left out); no clause as (None, None)."""
    if text is None:
        return None, None
    if match := re.fullmatch(r"\*\s*EXCEPT\s*(\(.*\))", text, re.IGNORECASE | re.DOTALL):
        return None, tuple(_names(_inside(match.group(1), where), where))
    inner = _inside(text, where) if text.startswith("(") else text
    return tuple(_names(inner, where)), None


def _inside(text: str, where: str) -> str:
    inner, rest = _parenthesised(text, where)
    if rest:
        raise UserError(f"{where}: unsupported SQL after ({inner}): {_first_words(rest)}")
    return inner


def _names(text: str, where: str) -> list[str]:
    return [name.strip().strip("`") for name in _split_top(text, where)]


def _clauses(
    rest: str, where: str, body: str
) -> tuple[str | None, str | None, dict[str, str], list[str], list[str], str | None]:
    """(schema DDL, comment, table properties, partition columns, clustering columns,
    query) of what follows a dataset's name."""
    schema = comment = query = None
    properties: dict[str, str] = {}
    partitions: list[str] = []
    clusters: list[str] = []
    if rest.startswith("("):
        inner, rest = _parenthesised(rest, where)
        schema = inner
    while rest:
        if match := _COMMENT.match(rest):
            comment = match.group(1).replace("''", "'")
            rest = rest[match.end() :].lstrip()
        elif match := _CLAUSE.match(rest):
            inner, rest = _parenthesised(rest[match.end() - 1 :], where)
            clause = " ".join(match.group(1).upper().split())
            if clause == "TBLPROPERTIES":
                for pair in _split_top(inner, where):
                    key, _, value = pair.partition("=")
                    properties[key.strip().strip("'\"`")] = value.strip().strip("'\"")
            else:
                columns = [c.strip().strip("`") for c in _split_top(inner, where)]
                if clause == "PARTITIONED BY":
                    partitions = columns
                else:
                    clusters = columns
        elif match := _AS.match(rest):
            query = rest[match.end() :]
            rest = ""
        else:
            raise UserError(f"{where}: unsupported SQL here: {_first_words(rest)}")
    return schema, comment, properties, partitions, clusters, query


def _expectations(schema: str | None, where: str) -> tuple[str | None, tuple[Expecting, ...]]:
    """The schema clause's columns (None without any) and its ``CONSTRAINT``s."""
    if schema is None:
        return None, ()
    columns, rules = [], []
    for item in _split_top(schema, where):
        if not item.upper().startswith("CONSTRAINT"):
            columns.append(item)
            continue
        match = _CONSTRAINT.fullmatch(item)
        if match is None:
            raise UserError(
                f"{where}: write CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | "
                f"FAIL UPDATE], not {_first_words(item)}"
            )
        name, condition, violation = match.groups()
        actions: dict[str, ExpectAction] = {"DROP ROW": "drop", "FAIL UPDATE": "fail"}
        action = actions.get(" ".join((violation or "").upper().split()), "warn")
        rules.append(Expecting(name, condition.strip(), action))
    return (", ".join(columns) or None), tuple(rules)


def _tokens(text: str, where: str) -> list[Token]:
    """``text`` as Spark SQL's tokens (sqlglot's tokenizer: strings, quoted names and
    comments are single tokens, so nothing in them counts as syntax)."""
    from sqlglot.dialects.spark import Spark
    from sqlglot.errors import TokenError

    try:
        return list(Spark().tokenize(text))
    except TokenError as exc:
        raise UserError(f"{where}: {first_line(str(exc))} in {_first_words(text)}") from None


def _depth(token: Token) -> int:
    return {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)


def _parenthesised(text: str, where: str) -> tuple[str, str]:
    """The text inside the parentheses ``text`` starts with, and what follows them."""
    depth = 0
    for token in _tokens(text, where):
        depth += _depth(token)
        if depth == 0:
            if token.token_type != TokenType.R_PAREN:
                break
            return text[1 : token.start].strip(), text[token.end + 1 :].lstrip()
    raise UserError(f"{where}: unbalanced parentheses in {_first_words(text)}")


def _split_top(text: str, where: str) -> list[str]:
    """``text`` split at commas outside parentheses and a type's angle brackets
    (``MAP<STRING, INT>``: a ``<`` right after a name, outside parentheses; ``a < b`` and
    ``EXPECT (a<b)`` compare)."""
    parts: list[str] = []
    depth, angles, start, previous = 0, 0, 0, None
    for token in _tokens(text, where):
        depth += _depth(token)
        kind = token.token_type
        adjacent = previous is not None and previous.end + 1 == token.start
        if kind == TokenType.LT and depth == 0 and adjacent:
            angles += 1
        elif kind == TokenType.GT and angles:
            angles -= 1
        elif kind == TokenType.COMMA and depth == 0 and angles == 0:
            parts.append(text[start : token.start].strip())
            start = token.end + 1
        previous = token
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _first_words(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
