"""Spark Declarative Pipelines projects run by streamsmith: a ``spark-pipeline.yml`` and
the Python (``from pyspark import pipelines as dp``) and SQL files it names, turned into
streamsmith's plan (see ``docs/how-to/coming-from-sdp.md``)."""
