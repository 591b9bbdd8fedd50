"""Every use of PySpark's private JVM handles (``_jvm``, ``_jsc``, ``_jsparkSession``, ``_jdf``).

Each function here does one thing public PySpark cannot, and says why. Keeping them in one
module keeps the rest of streamsmith on the public API, so a PySpark upgrade that moves a
handle, or a port to Spark Connect (where the client has no JVM and every handle raises
``PySparkAttributeError`` with ``JVM_ATTRIBUTE_NOT_SUPPORTED``), is one file's work.
streamsmith builds classic sessions only (``streamsmith.spark.session.build_session``).

This module sits at the bottom layer: it imports pyspark, py4j and the standard library only.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JVMView
from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.errors import PySparkAttributeError
from pyspark.sql import Column, DataFrame, SparkSession


def _jvm(spark: SparkSession) -> JVMView:
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set while the session's context is up
    return jvm


def class_available(spark: SparkSession, name: str) -> bool:
    """Whether the driver's classpath has the class ``name`` (e.g. an optional connector).

    PySpark has no public way to ask whether a class can be loaded: the ``spark.jars*``
    settings name what was asked for, not the JARs of the Spark distribution or image, and
    a wrong guess fails only when a query starts. Under Spark Connect the
    client cannot see the server's classpath, so this answers ``False`` and a caller falls
    back to what needs no extra JAR (for Kafka: streamsmith's own Python data source, which
    Connect runs too).
    """
    try:
        jvm = _jvm(spark)
    except PySparkAttributeError:  # Spark Connect: no JVM on this side
        return False
    try:
        jvm.org.apache.spark.util.Utils.classForName(name, True, False)
    except Py4JError:
        return False
    return True


def wait_for_listener_bus(spark: SparkSession, timeout_ms: int) -> None:
    """Block until Spark's listener bus has delivered every pending event to its listeners.

    Streaming progress reaches a ``StreamingQueryListener`` asynchronously; after
    ``query.stop()`` the last events may still be queued, and PySpark has no public flush.
    The monitor drains the bus before it stops so the last batch's progress is recorded.
    Under Spark Connect listener events come over the network and there is no bus to reach:
    this raises ``PySparkAttributeError``, and the caller cannot drain it.
    """
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)


def analyzed_plan(frame: DataFrame) -> Any:
    """The frame's analyzed logical plan: the JVM ``LogicalPlan`` node at its root.

    The checkpoint fingerprint walks it (``children()``, ``nodeName()``, ``isStreaming()``,
    ``simpleString(n)``) to find the stateful operators whose state a checkpoint keeps.
    PySpark exposes plans only as text (``explain``), which names no node and changes
    between releases. Under Spark Connect the client holds an unresolved protobuf plan:
    ``frame._jdf`` raises ``PySparkAttributeError`` and the fingerprint fails with it.
    """
    return frame._jdf.queryExecution().analyzed()


def start_thrift_server(spark: SparkSession) -> Any:
    """Start Spark's Thrift JDBC/ODBC server (``HiveThriftServer2``) inside ``spark``'s JVM;
    returns the server's handle (its ``stop()`` ends it, the session stays up).

    There is no Python API for it, and ``start-thriftserver.sh`` starts a new application
    that would not see this session's views and memory tables. It reads its
    ``hive.server2.*`` settings from the session's conf, so set them first. Under Spark
    Connect this raises ``PySparkAttributeError``: the server has to be started on the
    Connect server's side instead.
    """
    jvm = _jvm(spark)
    # Logins go through the JVM's first SASL provider for PLAIN. A Kafka client with a
    # SASL login (any pipeline reading `streamsmith broker start`'s broker) registers
    # Kafka's, which checks Kafka's users: once it came first, every JDBC login failed
    # ("credentials for user could not be verified"). Hive's goes first.
    auth = jvm.org.apache.hive.service.auth
    hive_plain = getattr(auth, "PlainSaslServer$SaslPlainProvider")()
    jvm.java.security.Security.removeProvider(hive_plain.getName())
    jvm.java.security.Security.insertProviderAt(hive_plain, 1)
    server_class = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
    return server_class.startWithContext(spark._jsparkSession.sqlContext())


def set_system_property(spark: SparkSession, name: str, value: str) -> None:
    """Set a Java system property in ``spark``'s driver JVM (read by streamsmith's own
    classes, e.g. the JDBC server's password check)."""
    _jvm(spark).java.lang.System.setProperty(name, value)


def exit_and_wait(timeout: float = 300.0) -> None:
    """End this process's driver JVM and wait until it has exited.

    PySpark leaves its JVM running until the Python process ends; the JVM then notices
    its stdin close and exits on its own, after Python is gone. Whatever the JVM writes
    as it exits (a class-data-sharing archive, ``streamsmith.spark.jvm_archive``) is then not
    finished when the command returns. This stops the session, closes the JVM's stdin
    (PySpark's own signal to exit) and waits for the process PySpark keeps as
    ``gateway.proc``.
    """
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None) if gateway is not None else None
    if process is None:
        return
    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout)


def column_sql(column: Column) -> str | None:
    """The SQL text of a column made by ``F.col(name)`` or ``F.expr(sql)``; None for any
    other (an operator's node prints as ``=(a, 'b')``, not SQL).

    An SDP project may give ``create_auto_cdc_flow`` its keys and conditions as Columns,
    and streamsmith's change data capture keeps them as SQL text (its spec, its state
    tables); classic PySpark exposes a column's expression only through its JVM node.
    """
    handle: Any = column._jc
    node = handle.node()
    if node.getClass().getSimpleName() not in ("UnresolvedAttribute", "SqlExpression"):
        return None
    return str(node.sql())
