"""How Spark is started: the one place a SparkSession is built (``session``), the jars
``make setup`` resolved for the pinned version set (``stack``, ``jars``), the JVM's
class-data-sharing archive (``jvm_archive``), PySpark's private JVM handles (``jvm``) and
a local standalone cluster (``cluster``)."""
