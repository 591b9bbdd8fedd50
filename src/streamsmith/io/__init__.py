"""Sources and sinks: files, the Parquet lake."""
