"""What every model of the spec shares: strict, frozen models, and the string types
checked on load but kept as written (durations, triggers, cron expressions)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from streamsmith.config.durations import check_schedule, parse_duration, parse_trigger

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _duration(text: str) -> str:
    parse_duration(text)
    return text


def _trigger(text: str) -> str:
    parse_trigger(text)
    return text


# Kept as written (what the spec says is what dry-run and errors show), checked on load.
Duration = Annotated[str, AfterValidator(_duration)]
TriggerText = Annotated[str, AfterValidator(_trigger)]
Cron = Annotated[str, AfterValidator(check_schedule)]


class StrictModel(BaseModel):
    """Frozen and closed: unknown keys are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=True, populate_by_name=True
    )


ConfValue = str | int | float | bool
