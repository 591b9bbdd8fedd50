"""Errors a user can fix; the CLI prints them as one line and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input, spec or environment, phrased as what to fix.

    Raised before any data is touched whenever possible, so a bad command never
    leaves half-written output behind.
    """


# How a batch holding a field its schema lacks stops its query on purpose (a Spark job
# failing with this text: ``streamsmith.transforms.events``); the JVM's log of that
# failure is no error to the user (``streamsmith.spark.session``).
NEW_FIELDS_MARK = "streamsmith: new fields "
