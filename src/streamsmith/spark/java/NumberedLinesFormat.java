package io.streamsmith.lines;

import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.Text;
import org.apache.spark.TaskContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.execution.datasources.HadoopFileLinesReader;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.text.TextFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;
import org.apache.spark.util.TaskCompletionListener;
import scala.Function1;
import scala.Option;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Spark's text source, each line with its number in its file: {@code value} (the line as
 * its bytes, without its line end) and {@code line} (from 1; blank lines count). Lines end
 * at {@code \n}, {@code \r\n} or {@code \r}, as Spark's text reader splits them, and are
 * streamed: no file is ever whole in memory.
 *
 * <p>Spark's own line readers say no line's number, and a quarantined record is worth
 * little to a user without it. A number needs every line before it, so a file is read by
 * one task (not split); compressed files are read as Spark's text source reads them.
 * Read it as {@code spark.readStream.format("io.streamsmith.lines.NumberedLinesFormat")}
 * with the schema {@code value string, line bigint} (a stream's schema is given).
 */
public class NumberedLinesFormat extends TextFileFormat {
  static final String VALUE = "value";
  static final String LINE = "line";
  static final StructType SCHEMA =
      new StructType().add(VALUE, DataTypes.StringType).add(LINE, DataTypes.LongType);

  @Override
  public String shortName() {
    return "streamsmith-numbered-lines";
  }

  @Override
  public String toString() {
    return "NumberedLines";
  }

  @Override
  public boolean isSplitable(SparkSession session, Map<String, String> options, Path path) {
    return false;
  }

  @Override
  public boolean supportDataType(DataType type) {
    return type instanceof StringType || type instanceof LongType;
  }

  @Override
  public Option<StructType> inferSchema(
      SparkSession session, Map<String, String> options, Seq<FileStatus> files) {
    return Option.apply(SCHEMA);
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReader(
      SparkSession session,
      StructType dataSchema,
      StructType partitionSchema,
      StructType requiredSchema,
      Seq<Filter> filters,
      Map<String, String> options,
      Configuration hadoopConf) {
    Broadcast<SerializableConfiguration> conf = broadcast(session, hadoopConf);
    String[] fields = requiredSchema.fieldNames();
    int[] kinds = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      kinds[i] = VALUE.equals(fields[i]) ? 0 : 1;
    }
    return new Reader(conf, kinds);
  }

  /** A file's lines as rows of the required columns (0: value, 1: line). */
  static final class Reader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Broadcast<SerializableConfiguration> conf;
    private final int[] kinds;

    Reader(Broadcast<SerializableConfiguration> conf, int[] kinds) {
      this.conf = conf;
      this.kinds = kinds;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      return new Numbered(open(conf, file), kinds);
    }
  }

  /** The Hadoop configuration, sent once to the executors that read the files. */
  static Broadcast<SerializableConfiguration> broadcast(
      SparkSession session, Configuration hadoopConf) {
    return session
        .sparkContext()
        .broadcast(
            new SerializableConfiguration(hadoopConf),
            ClassTag$.MODULE$.apply(SerializableConfiguration.class));
  }

  /** A file's lines, closed when the task that reads them ends. */
  static HadoopFileLinesReader open(
      Broadcast<SerializableConfiguration> conf, PartitionedFile file) {
    HadoopFileLinesReader lines = new HadoopFileLinesReader(file, conf.value().value());
    TaskContext task = TaskContext.get();
    if (task != null) {
      TaskCompletionListener close = context -> lines.close();
      task.addTaskCompletionListener(close);
    }
    return lines;
  }

  /** The reader's lines, numbered from 1; one row reused (Spark copies it on). */
  static final class Numbered extends AbstractIterator<InternalRow> {
    private final HadoopFileLinesReader lines;
    private final int[] kinds;
    private final GenericInternalRow row;
    private long number = 0;

    Numbered(HadoopFileLinesReader lines, int[] kinds) {
      this.lines = lines;
      this.kinds = kinds;
      this.row = new GenericInternalRow(kinds.length);
    }

    @Override
    public boolean hasNext() {
      return lines.hasNext();
    }

    @Override
    public InternalRow next() {
      Text line = lines.next();
      number++;
      for (int i = 0; i < kinds.length; i++) {
        if (kinds[i] == 0) {
          row.update(i, UTF8String.fromBytes(line.getBytes(), 0, line.getLength()));
        } else {
          row.setLong(i, number);
        }
      }
      return row;
    }
  }
}
