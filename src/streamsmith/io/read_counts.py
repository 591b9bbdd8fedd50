"""The observed metrics a stream of files of lines counts its reads by (``io.files``).

Spark's input rows of such a read are not its records: a file decoded whole (gzipped) is
one row, and makes as many records as it has lines (its blank ones none, for JSON
lines). The reader counts, per batch, the rows it reads (``FILES_READ``: Spark's input
rows, files or lines) and the records made of them (``LINES_READ``), each in a field
``READ_COUNT``; ``monitor.progress.records_read`` puts the records in the rows' place.
Each read of a source has its own number after the prefix: a metric's name is unique in
a query, which may read two such sources. ``REREAD`` counts the rows of a second scan of
an input another scan of the same query counts already (an SDP flow's rejects,
``sdp.rejects``), which Spark's input rows count twice. Names only, without Spark: the
monitor reads them from a progress report's JSON.
"""

from __future__ import annotations

FILES_READ = "streamsmith_files_read_"
LINES_READ = "streamsmith_lines_read_"
REREAD = "streamsmith_reread_"
READ_COUNT = "rows"
