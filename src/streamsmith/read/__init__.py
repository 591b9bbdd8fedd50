"""The read side: the lake answered in-process, without a JVM.

``streamsmith query`` reads the lake tables, their quarantine and late tables and the
event log through DuckDB over exactly the files Spark would read (the committed files of
each table's file-sink log, :mod:`streamsmith.read.tables`), with the user's Spark SQL
transpiled by sqlglot (:mod:`streamsmith.read.transpile`). What the fast path cannot
answer the way Spark would raises :class:`~streamsmith.read.transpile.NotOnFastPath`,
and the caller runs the query on Spark. Nothing here imports PySpark.
"""
