"""PostgreSQL serving: an embedded server for demos and tests, and the exactly-once sink."""
