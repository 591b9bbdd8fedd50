package io.streamsmith.lines;

import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.Text;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.CreateJacksonParser;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.execution.datasources.HadoopFileLinesReader;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;
import scala.Function1;
import scala.Option;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;

/**
 * JSON lines, each parsed as it is read and kept with its text and its number: the
 * given schema holds the record's fields, the corrupt-record column named by the
 * {@code columnNameOfCorruptRecord} option, {@code _line_text} (the line) and
 * {@code _line_number} (its number from 1; blank lines count but make no row).
 *
 * <p>Why not {@link NumberedLinesFormat} and {@code from_json}: {@code from_json} hands
 * each value to Jackson through a character reader, Spark's JSON source hands it the
 * line's bytes, and the second parses a line in about two thirds of the time (a million
 * YSB lines, every field: 2.1-2.4 s against 1.3-1.4 s on two cores, read by hand; {@code
 * benchmarks/ysb.py}, the app from files: 6.31 s to 4.70 s). The parse is otherwise
 * {@code from_json}'s (Spark's {@code JacksonParser} under a {@code FailureSafeParser},
 * every field of the record parsed whatever the query reads, no JSON array taken as
 * records), so a record is accepted or rejected as before, but for bytes that are not
 * UTF-8: rejected now, as Spark's JSON reader rejects them, where the character reader
 * put U+FFFD in their place.
 */
public class NumberedJsonLinesFormat extends NumberedLinesFormat {
  static final String CORRUPT_OPTION = "columnNameOfCorruptRecord";
  static final String TEXT = "_line_text";
  static final String NUMBER = "_line_number";

  @Override
  public String shortName() {
    return "streamsmith-numbered-json-lines";
  }

  @Override
  public String toString() {
    return "NumberedJsonLines";
  }

  @Override
  public boolean supportDataType(DataType type) {
    return true;
  }

  @Override
  public Option<StructType> inferSchema(
      SparkSession session, Map<String, String> options, Seq<FileStatus> files) {
    return Option.empty(); // the record's schema is always given
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
    Option<String> named = options.get(CORRUPT_OPTION);
    if (named.isEmpty()) {
      throw new IllegalArgumentException(CORRUPT_OPTION + " is required");
    }
    String corrupt = named.get();
    StructType record = new StructType();
    for (StructField field : dataSchema.fields()) {
      if (!TEXT.equals(field.name()) && !NUMBER.equals(field.name())) {
        record = record.add(field);
      }
    }
    String[] fields = requiredSchema.fieldNames();
    int[] sources = new int[fields.length]; // -2: the line, -1: its number, else record's
    for (int i = 0; i < fields.length; i++) {
      sources[i] =
          TEXT.equals(fields[i]) ? -2 : NUMBER.equals(fields[i]) ? -1 : record.fieldIndex(fields[i]);
    }
    String zone = session.sessionState().conf().sessionLocalTimeZone();
    return new Reader(conf, record, corrupt, options, zone, sources, requiredSchema);
  }

  /** A file's non-blank lines as rows of the required columns. */
  static final class Reader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Broadcast<SerializableConfiguration> conf;
    private final StructType record;
    private final String corrupt;
    private final Map<String, String> options;
    private final String zone;
    private final int[] sources;
    private final StructType required;

    Reader(
        Broadcast<SerializableConfiguration> conf,
        StructType record,
        String corrupt,
        Map<String, String> options,
        String zone,
        int[] sources,
        StructType required) {
      this.conf = conf;
      this.record = record;
      this.corrupt = corrupt;
      this.options = options;
      this.zone = zone;
      this.sources = sources;
      this.required = required;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      HadoopFileLinesReader lines = open(conf, file);
      JSONOptions parsed = new JSONOptions(options, zone, corrupt);
      StructType fields = new StructType();
      for (StructField field : record.fields()) {
        if (!corrupt.equals(field.name())) {
          fields = fields.add(field);
        }
      }
      JacksonParser jackson = new JacksonParser(fields, parsed, false, parserFilters());
      FailureSafeParser<Text> safe =
          new FailureSafeParser<>(
              text ->
                  jackson.parse(
                      text,
                      (factory, line) -> CreateJacksonParser.text(factory, line),
                      line -> UTF8String.fromBytes(line.getBytes(), 0, line.getLength())),
              parsed.parseMode(),
              record,
              corrupt);
      return new Parsed(lines, safe, sources, required);
    }

    private static Seq<Filter> parserFilters() {
      return scala.collection.immutable.List$.MODULE$.empty();
    }
  }

  /** The parsed rows of a file's lines, with each line's text and number. */
  static final class Parsed extends AbstractIterator<InternalRow> {
    private final HadoopFileLinesReader lines;
    private final FailureSafeParser<Text> safe;
    private final DataType[] types;
    private final int[] sources;
    private final GenericInternalRow row;
    private long number = 0;
    private InternalRow next = null;
    private Text text = null;

    Parsed(
        HadoopFileLinesReader lines,
        FailureSafeParser<Text> safe,
        int[] sources,
        StructType required) {
      this.lines = lines;
      this.safe = safe;
      this.sources = sources;
      this.types = new DataType[sources.length];
      for (int i = 0; i < sources.length; i++) {
        types[i] = required.fields()[i].dataType();
      }
      this.row = new GenericInternalRow(sources.length);
    }

    @Override
    public boolean hasNext() {
      while (next == null && lines.hasNext()) {
        text = lines.next();
        number++;
        Iterator<InternalRow> rows = safe.parse(text);
        if (rows.hasNext()) { // a blank line is no record
          next = rows.next();
        }
      }
      return next != null;
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      for (int i = 0; i < sources.length; i++) {
        int source = sources[i];
        if (source == -2) {
          row.update(i, UTF8String.fromBytes(text.getBytes(), 0, text.getLength()));
        } else if (source == -1) {
          row.setLong(i, number);
        } else {
          row.update(i, next.get(source, types[i]));
        }
      }
      next = null;
      return row;
    }
  }
}
