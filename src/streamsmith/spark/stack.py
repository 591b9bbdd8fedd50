"""The one version set streamsmith runs on: Spark, its connectors, Delta Lake and Kafka.

Every JVM part is pinned here; ``pyproject.toml`` pins the Python side to the same
PySpark and delta-spark (``tests/unit/test_stack.py`` holds the two together). Why these:
Spark's own connectors (``spark-sql-kafka-0-10``, ``spark-avro``)
and Delta Lake must be built for the Spark the driver runs. PyPI serves PySpark 4.3, but
Maven Central has no Spark 4.3 connectors and no Delta release for it; delta-spark 4.4.0
supports PySpark 4.0.1-4.2.0 and publishes ``delta-spark_4.2_2.13``, so Spark is 4.2.0.
``docs/development.md`` records the probe.

``streamsmith jvm fetch`` (run by ``make setup``) resolves each group once, with Maven,
into a folder of streamsmith's own (``streamsmith.spark.jars``); no Spark start ever
downloads anything.
"""

from __future__ import annotations

from dataclasses import dataclass

SCALA = "2.13"
SPARK = "4.2.0"
DELTA = "4.4.0"
# The broker streamsmith starts (`streamsmith broker start`); Spark 4.2's connector brings
# its own kafka-clients, which talks to any broker from 2.1 on.
KAFKA = "4.1.1"
# The broker's logging: Kafka 4.1's distribution ships log4j 2 with the SLF4J 2 binding.
LOG4J = "2.24.3"
SLF4J = "2.0.17"  # the log4j binding above is for SLF4J 2; Kafka's poms ask for 1.7
JACKSON = "2.21.2"  # the pyspark wheel's Jackson
# S3 (``s3a://`` storage roots): hadoop-aws for the wheel's Hadoop client (3.5.0), and the
# AWS SDK v2 it was built against. hadoop-aws asks for the SDK's whole ``bundle`` (~600 MB,
# every AWS service); S3A needs only S3 and its transfer manager, ~18 MB with their
# dependencies (docs/how-to/object-storage.md).
HADOOP = "3.5.0"
AWS_SDK = "2.35.4"


@dataclass(frozen=True)
class Artifact:
    """A Maven artifact: ``group:name:version``, less the dependencies ``excludes`` names
    (``group:name``)."""

    group: str
    name: str
    version: str
    excludes: tuple[str, ...] = ()

    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"


_SPARK_MINOR = ".".join(SPARK.split(".")[:2])

# spark-protobuf is left out: the registry this project installs from serves no version
# of it (probed 2026-11-27; docs/development.md). Protobuf values are decoded and encoded
# in Python instead (streamsmith.io.protobuf_values, mapInArrow): about half the rate of
# Avro in the JVM (benchmarks/protobuf_decode.py), and not in Real-time Mode.
# Added to the driver's classpath (and shipped to a cluster's executors) beside the jars
# of the pyspark wheel; what the wheel already has is left out at resolution.
SPARK_EXTRAS = (
    Artifact("org.apache.spark", f"spark-sql-kafka-0-10_{SCALA}", SPARK),
    Artifact("org.apache.spark", f"spark-avro_{SCALA}", SPARK),
    Artifact("io.delta", f"delta-spark_{_SPARK_MINOR}_{SCALA}", DELTA),
    # Delta's Unity Catalog client asks for an older jdk8 module than the wheel's Jackson.
    Artifact("com.fasterxml.jackson.datatype", "jackson-datatype-jdk8", JACKSON),
    Artifact(
        "org.apache.hadoop", "hadoop-aws", HADOOP, excludes=("software.amazon.awssdk:bundle",)
    ),
    Artifact("software.amazon.awssdk", "s3", AWS_SDK),
    Artifact("software.amazon.awssdk", "s3-transfer-manager", AWS_SDK),
)

# The broker's own classpath, in a JVM of its own (never mixed with Spark's).
KAFKA_BROKER = (
    Artifact("org.apache.kafka", f"kafka_{SCALA}", KAFKA),
    Artifact("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J),
    Artifact("org.apache.logging.log4j", "log4j-core", LOG4J),
    Artifact("org.slf4j", "slf4j-api", SLF4J),
)

GROUPS: dict[str, tuple[Artifact, ...]] = {"spark": SPARK_EXTRAS, "kafka": KAFKA_BROKER}


def describe() -> str:
    """The version set in one line, for ``--version`` style output and the docs."""
    return f"Spark {SPARK} (Scala {SCALA}), Delta Lake {DELTA}, Apache Kafka {KAFKA}"
