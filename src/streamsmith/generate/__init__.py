"""Reproducible synthetic input data, so pipelines can be tested and benchmarked at scale
with exactly known counts of good and bad records."""
