"""The Kafka connector's option tables: what each option means and its default.

The tables are the one description of the options: the source and sink check given
options against them (a misspelt option is an error, not silently ignored) and the docs'
option reference is generated from them (``docs/gen_reference.py``). Names follow
Spark's Kafka integration where Spark has the option; Spark hands a Python data source
its options lower-cased, so they are matched without case.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KafkaOption:
    """One option: its name as users write it, its default (empty: none) and meaning."""

    name: str
    default: str
    meaning: str


# Options Spark itself may hand a data source along with the user's.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")


def unknown_options(given: Iterable[str], table: Iterable[KafkaOption]) -> list[str]:
    """The given option names that are neither in ``table`` nor Spark's own, nor a
    ``kafka.*`` setting for librdkafka (compared without case)."""
    known = {option.name.lower() for option in table} | {n.lower() for n in SPARK_OPTIONS}
    return sorted(
        name
        for name in given
        if name.lower() not in known and not name.lower().startswith("kafka.")
    )
