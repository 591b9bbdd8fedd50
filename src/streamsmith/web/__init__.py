"""The monitoring dashboard: a web page over the event log, served on loopback."""
