"""Kafka without the JVM: a Spark Python Data Source and sink on confluent-kafka."""
