"""Models trained on the lake and used by the streams (anomaly scores)."""
