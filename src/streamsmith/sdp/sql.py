"""SDP's SQL dialect: the statements of a ``.sql`` library file as graph elements.

Supported: ``CREATE [OR REFRESH] STREAMING TABLE t [(schema)] [COMMENT '...']
[TBLPROPERTIES (...)] [PARTITIONED BY (...)] [AS query]`` (a query reading
``STREAM(x)`` or ``STREAM x``), ``CREATE [OR REFRESH] MATERIALIZED VIEW v ... AS query``,
``CREATE TEMPORARY VIEW v AS query``, ``CREATE FLOW f AS INSERT INTO t BY NAME query``
and ``SET key = value`` (a Spark setting for the statements after it in the file),
several per file. Anything else is an error naming the file and line.
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

from streamsmith.config import ExpectAction
from streamsmith.errors import UserError

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
    + _NAME + r"\s+BY\s+NAME\s+(.+)",
    re.IGNORECASE | re.DOTALL,
)  # fmt: skip
_CONSTRAINT = re.compile(
    r"CONSTRAINT\s+(\w+)\s+EXPECT\s*\((.*)\)\s*(?:ON\s+VIOLATION\s+(DROP\s+ROW|FAIL\s+UPDATE))?",
    re.IGNORECASE | re.DOTALL,
)
_SET = re.compile(r"SET\s+([\w.]+)\s*=\s*(.*)", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"COMMENT\s+'((?:[^']|'')*)'", re.IGNORECASE)
_CLAUSE = re.compile(r"(TBLPROPERTIES|PARTITIONED\s+BY|CLUSTER\s+BY)\s*\(", re.IGNORECASE)
_AS = re.compile(r"AS\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Expecting:
    """Lakeflow's ``CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL
    UPDATE]`` of a SQL dataset: its rule, and ``warn``, ``drop`` or ``fail``."""

    name: str
    sql: str
    action: ExpectAction


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


def sql_elements(text: str, file: Path, session: PipelineSession) -> list[Output | Flow]:
    """The datasets and flows ``text`` (the file ``file``) declares, in order, as
    ``pyspark.pipelines`` defines them; a flow's function runs its query through
    ``session``."""
    settings: dict[str, str] = {}
    found: list[Output | Flow] = []

    def flow(name: str, target: str, query: str, location: SourceCodeLocation) -> Flow:
        def run_query() -> DataFrame:
            return session.sql(query)

        return Flow(name.strip("`"), target.strip("`"), dict(settings), location, run_query)

    for statement in statements(text):
        location = SourceCodeLocation(str(file), statement.line)
        where = f"{file}:{statement.line}"
        body = statement.text
        if match := _SET.fullmatch(body):
            settings[match.group(1)] = match.group(2).strip().strip("'\"")
            continue
        if match := _FLOW.fullmatch(body):
            name, _comment, target, query = match.groups()
            found.append(flow(name, target, query, location))
            continue
        match = _DATASET.match(body)
        if match is None:
            raise UserError(f"{where}: unsupported SQL statement: {_first_words(body)}")
        kind, name = " ".join(match.group(1).upper().split()), match.group(2).strip("`")
        rest = body[match.end() :].strip()
        schema, comment, properties, partitions, query = _clauses(rest, where, body)
        schema, expectations = _expectations(schema, where)
        if kind == "TEMPORARY VIEW":
            if schema or properties or partitions:
                raise UserError(f"{where}: a temporary view takes only COMMENT and AS query")
            found.append(TemporaryView(name, comment, location))
        else:
            cls: type[ExpectingTable | ExpectingView] = (
                ExpectingTable if kind == "STREAMING TABLE" else ExpectingView
            )
            partitioned = partitions or None
            table = cls(name, comment, location, properties, partitioned, None, schema, None)
            found.append(replace(table, expectations=expectations))
        if query is None:
            if kind != "STREAMING TABLE":
                raise UserError(f"{where}: CREATE {kind} {name} needs AS SELECT ...")
            continue
        found.append(flow(name, name, query, location))
    return found


def _clauses(
    rest: str, where: str, body: str
) -> tuple[str | None, str | None, dict[str, str], list[str], str | None]:
    """(schema DDL, comment, table properties, partition columns, query) of what follows
    a dataset's name."""
    schema = comment = query = None
    properties: dict[str, str] = {}
    partitions: list[str] = []
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
                for pair in _split_top(inner):
                    key, _, value = pair.partition("=")
                    properties[key.strip().strip("'\"`")] = value.strip().strip("'\"")
            elif clause == "PARTITIONED BY":
                partitions = [c.strip().strip("`") for c in _split_top(inner)]
            else:
                raise UserError(f"{where}: CLUSTER BY is not supported by streamsmith yet")
        elif match := _AS.match(rest):
            query = rest[match.end() :]
            rest = ""
        else:
            raise UserError(f"{where}: unsupported SQL here: {_first_words(rest)}")
    return schema, comment, properties, partitions, query


def _expectations(schema: str | None, where: str) -> tuple[str | None, tuple[Expecting, ...]]:
    """The schema clause's columns (None without any) and its ``CONSTRAINT``s."""
    if schema is None:
        return None, ()
    columns, rules = [], []
    for item in _split_top(schema):
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


def _parenthesised(text: str, where: str) -> tuple[str, str]:
    """The text inside the parentheses ``text`` starts with, and what follows them."""
    depth, quote = 0, ""
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[1:i].strip(), text[i + 1 :].lstrip()
    raise UserError(f"{where}: unbalanced parentheses in {_first_words(text)}")


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside parentheses, quotes and a type's angle brackets
    (``MAP<STRING, INT>``: a ``<`` right after a word; ``a < b`` compares)."""
    parts: list[str] = []
    current: list[str] = []
    depth, angles, quote = 0, 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "<" and current and current[-1].isalnum():
            angles += 1
        elif char == ">" and angles:
            angles -= 1
        elif char == "," and depth == 0 and angles == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _first_words(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
