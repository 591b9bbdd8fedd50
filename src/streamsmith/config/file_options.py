"""The reader options a file source takes under ``sources.<name>.options``, per format.

One table describes them: the plan rejects an option not in it for the source's format
(a misspelt ``timestampFormt`` would otherwise be handed to Spark and silently ignored),
``dry-run`` shows the options given, the JSON ones reach every parser of the records
(Spark's JSON reader, or ``from_json`` where streamsmith parses the lines itself) and the
reference page is generated from it (``docs/gen_reference.py``). Names are Spark's and,
as Spark's, matched without case. The options streamsmith sets itself (``mode``,
``columnNameOfCorruptRecord``, ``recursiveFileLookup``, ``pathGlobFilter``,
``maxFilesPerTrigger``, ``latestFirst``) are not among them: the spec has keys for those
that users choose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class FileOption:
    """One reader option: its name as Spark spells it, the formats taking it, its
    default as Spark has it (empty: none) and what it does."""

    name: str
    formats: tuple[str, ...]
    default: str
    meaning: str


_BOTH = ("jsonl", "csv")
FILE_OPTIONS = (
    FileOption(
        "timestampFormat",
        _BOTH,
        "ISO 8601 (yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX])",
        "How timestamp fields are written, as a Spark datetime pattern: `yyyy/MM/dd HH:mm` "
        "reads `2001/01/06 15:01`. A value that does not match is quarantined, naming the "
        "field.",
    ),
    FileOption(
        "timestampNTZFormat",
        _BOTH,
        "yyyy-MM-dd'T'HH:mm:ss[.SSS]",
        "The same for `timestamp_ntz` fields (no time zone).",
    ),
    FileOption(
        "dateFormat",
        _BOTH,
        "yyyy-MM-dd",
        "How date fields are written, as a Spark datetime pattern, e.g. `dd.MM.yyyy`.",
    ),
    FileOption(
        "locale",
        _BOTH,
        "en-US",
        "The locale (IETF language tag) of month and day names in dates and timestamps.",
    ),
    FileOption(
        "allowComments",
        ("jsonl",),
        "false",
        "Accept Java and C++ comments in the JSON text.",
    ),
    FileOption(
        "allowUnquotedFieldNames",
        ("jsonl",),
        "false",
        "Accept field names without quotes (`{id: 1}`).",
    ),
    FileOption(
        "allowSingleQuotes",
        ("jsonl",),
        "true",
        "Accept single quotes around names and strings.",
    ),
    FileOption(
        "allowNumericLeadingZeros",
        ("jsonl",),
        "false",
        "Accept numbers with leading zeros (`007`).",
    ),
    FileOption(
        "allowBackslashEscapingAnyCharacter",
        ("jsonl",),
        "false",
        "Accept a backslash before any character.",
    ),
    FileOption(
        "allowNonNumericNumbers",
        ("jsonl",),
        "true",
        "Accept `NaN`, `Infinity` and `-Infinity` as numbers.",
    ),
    FileOption(
        "allowUnquotedControlChars",
        ("jsonl",),
        "false",
        "Accept control characters (tabs, ...) unescaped inside strings.",
    ),
    FileOption(
        "sep",
        ("csv",),
        ",",
        "The field separator (one or more characters).",
    ),
    FileOption(
        "header",
        ("csv",),
        "false",
        "The first line of each file names the columns and is not a record.",
    ),
    FileOption("quote", ("csv",), '"', "The quote character."),
    FileOption("escape", ("csv",), "\\", "The escape character inside quoted values."),
    FileOption("comment", ("csv",), "", "Lines starting with this character are skipped."),
    FileOption("nullValue", ("csv",), "", "The text of a null value."),
    FileOption("emptyValue", ("csv",), "", "The text of an empty string."),
    FileOption("nanValue", ("csv",), "NaN", "The text of a not-a-number value."),
    FileOption(
        "encoding",
        ("csv",),
        "UTF-8",
        "The files' character set, e.g. `ISO-8859-1` (JSON lines are read as UTF-8: a line "
        "that is not is quarantined).",
    ),
    FileOption(
        "multiLine",
        ("csv",),
        "false",
        "Quoted values may span lines (the file is then read whole, not split).",
    ),
    FileOption("ignoreLeadingWhiteSpace", ("csv",), "false", "Trim white space before each value."),
    FileOption("ignoreTrailingWhiteSpace", ("csv",), "false", "Trim white space after each value."),
    FileOption(
        "unescapedQuoteHandling",
        ("csv",),
        "STOP_AT_DELIMITER",
        "What to do with a quote inside an unquoted value (Spark's choices).",
    ),
)


def file_options(fmt: str) -> tuple[FileOption, ...]:
    """The options a ``fmt`` file source takes (none for ``json`` documents, which
    streamsmith decodes, ``text`` and ``parquet``)."""
    return tuple(option for option in FILE_OPTIONS if fmt in option.formats)


def unknown_file_options(fmt: str, given: Mapping[str, object]) -> str | None:
    """What is wrong with ``given`` for a ``fmt`` file source, in one line; None when
    every option is one it takes (compared without case)."""
    known = {option.name.lower() for option in file_options(fmt)}
    unknown = sorted(name for name in given if name.lower() not in known)
    if not unknown:
        return None
    allowed = ", ".join(option.name for option in file_options(fmt)) or "none"
    return f"a {fmt} source has no option(s) {', '.join(unknown)} (its options: {allowed})"


def json_parse_options(given: Mapping[str, object]) -> dict[str, str]:
    """The options of ``given`` that steer how JSON records are parsed, as Spark's JSON
    reader and ``from_json`` take them (booleans as ``true``/``false``)."""
    names = {option.name.lower(): option.name for option in file_options("jsonl")}
    return {
        names[key.lower()]: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in given.items()
        if key.lower() in names
    }
