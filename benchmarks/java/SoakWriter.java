// The soak's writer (benchmarks/bench_soak.py runs it): Java Iceberg 1.10.2's API in a plain
// JVM, committing small appends to a JDBC (SQLite) catalog that PyIceberg's SqlCatalog
// reads, with a compaction (`replace`) and snapshot expiry running against the table.
//
//   java -cp <iceberg runtime + sqlite-jdbc + PySpark's jars> SoakWriter \
//       DB WAREHOUSE CATALOG NAMESPACE TABLE RATE ROWS COMPACT_EVERY EXPIRE_EVERY RETAIN_S
//       HISTORY
//
// Creates the table (format version 2, unpartitioned, the schema of tests/helpers/tables.py
// EVENTS_SCHEMA: id long required, kind string, ts timestamp, day date, value double) and
// commits HISTORY appends back to back, then appends ROWS rows per commit at RATE commits a
// second (newAppend: manifests merged as Iceberg's defaults say). Row i has id i, kind
// "abc"[i % 3], day 2024-01-01 + i % 3, ts that day + i seconds, value i / 2 (as rows() in
// tests/helpers/tables.py). Every COMPACT_EVERY appends, the files of the appends since the
// last compaction are rewritten into one file holding the same rows (RewriteFiles: a
// `replace` snapshot). Every EXPIRE_EVERY appends, snapshots older than RETAIN_S seconds are
// expired (files no snapshot keeps are deleted, as a retention job does). Old metadata files
// are deleted after commit (previous-versions-max 100).
//
// Commands on stdin, one a line, each answered with one JSON status line on stdout:
// "status"; "pause" (answered once no commit is in flight: the status is final until
// "resume"); "resume"; "stop" (answers, then exits). Status: commits (appends), rows (ids
// 0 .. rows-1 committed), replaces, expiries, snapshots (in the table's metadata now),
// commit_ms (the appends' total wall time), paused, error (the first failure, or null).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.GenericAppenderFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.encryption.EncryptedFiles;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.types.Types;

public class SoakWriter {
  static final Schema SCHEMA = new Schema(
      Types.NestedField.required(1, "id", Types.LongType.get()),
      Types.NestedField.optional(2, "kind", Types.StringType.get()),
      Types.NestedField.optional(3, "ts", Types.TimestampType.withoutZone()),
      Types.NestedField.optional(4, "day", Types.DateType.get()),
      Types.NestedField.optional(5, "value", Types.DoubleType.get()));
  static final LocalDate EPOCH_DAY = LocalDate.of(2024, 1, 1);
  static final String KINDS = "abc";

  final Object lock = new Object();
  volatile boolean paused = false;
  volatile boolean stopped = false;
  volatile String error = null;
  long commits = 0;
  long rows = 0;
  long replaces = 0;
  long expiries = 0;
  double commitMs = 0;
  double writeMs = 0;
  Table table;

  static DataFile write(Table table, long start, int n) throws Exception {
    GenericAppenderFactory factory = new GenericAppenderFactory(table.schema(), table.spec());
    String path = table.locationProvider().newDataLocation(UUID.randomUUID() + ".parquet");
    DataWriter<Record> writer = factory.newDataWriter(
        EncryptedFiles.plainAsEncryptedOutput(table.io().newOutputFile(path)),
        FileFormat.PARQUET, null);
    try {
      GenericRecord record = GenericRecord.create(table.schema());
      for (long i = start; i < start + n; i++) {
        LocalDate day = EPOCH_DAY.plusDays(i % 3);
        record.setField("id", i);
        record.setField("kind", String.valueOf(KINDS.charAt((int) (i % 3))));
        record.setField("ts", LocalDateTime.of(day, java.time.LocalTime.MIDNIGHT).plusSeconds(i));
        record.setField("day", day);
        record.setField("value", i / 2.0);
        writer.write(record);
      }
    } finally {
      writer.close();
    }
    return writer.toDataFile();
  }

  String status() {
    synchronized (lock) {
      int snapshots = 0;
      for (Object ignored : table.snapshots()) {
        snapshots++;
      }
      return "{\"commits\": " + commits + ", \"rows\": " + rows + ", \"replaces\": " + replaces
          + ", \"expiries\": " + expiries + ", \"snapshots\": " + snapshots
          + ", \"commit_ms\": " + commitMs + ", \"write_ms\": " + writeMs + ", \"paused\": " + paused + ", \"error\": "
          + (error == null ? "null" : "\"" + error.replace("\\", "\\\\").replace("\"", "'")
              .replace("\n", " ") + "\"") + "}";
    }
  }

  public static void main(String[] args) throws Exception {
    new SoakWriter().run(args);
  }

  void run(String[] args) throws Exception {
    String db = args[0];
    String warehouse = args[1];
    String catalogName = args[2];
    Namespace namespace = Namespace.of(args[3]);
    TableIdentifier ident = TableIdentifier.of(namespace, args[4]);
    double rate = Double.parseDouble(args[5]);
    int rowsPer = Integer.parseInt(args[6]);
    int compactEvery = Integer.parseInt(args[7]);
    int expireEvery = Integer.parseInt(args[8]);
    long retainMs = (long) (Double.parseDouble(args[9]) * 1000);
    int history = Integer.parseInt(args[10]);

    JdbcCatalog catalog = new JdbcCatalog();
    Configuration conf = new Configuration();
    // local files without Hadoop's .crc side files (one write per file, not two)
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    conf.setBoolean("fs.file.impl.disable.cache", true);
    catalog.setConf(conf);
    Map<String, String> props = new HashMap<>();
    // WAL: the streams' pointer probes (readers) and this writer do not block each other
    props.put("uri", "jdbc:sqlite:" + db + "?journal_mode=WAL&synchronous=NORMAL");
    props.put("warehouse", warehouse);
    props.put("jdbc.schema-version", "V1");
    catalog.initialize(catalogName, props);
    if (!catalog.namespaceExists(namespace)) {
      catalog.createNamespace(namespace);
    }
    Map<String, String> tprops = new HashMap<>();
    tprops.put("format-version", "2");
    tprops.put("write.metadata.delete-after-commit.enabled", "true");
    tprops.put("write.metadata.previous-versions-max", "100");
    table = catalog.createTable(ident, SCHEMA, PartitionSpec.unpartitioned(), tprops);

    Thread commands = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
        String line;
        while ((line = in.readLine()) != null) {
          line = line.trim();
          if (line.equals("pause")) {
            paused = true;
          } else if (line.equals("resume")) {
            paused = false;
          } else if (line.equals("stop")) {
            stopped = true;
          }
          System.out.println(status());  // status() waits for a commit in flight
          System.out.flush();
          if (stopped) {
            break;
          }
        }
      } catch (Exception e) {
        error = String.valueOf(e);
      }
      stopped = true;
    });
    commands.setDaemon(true);

    List<DataFile> sinceCompaction = new ArrayList<>();
    long compactStart = 0;
    long intervalNs = (long) (1e9 / rate);
    long due = System.nanoTime();
    boolean started = false;
    try {
      while (!stopped) {
        if (commits >= history && !started) {
          started = true;
          commands.start();
          due = System.nanoTime();
        }
        if (started) {
          if (paused) {
            Thread.sleep(5);
            due = System.nanoTime();
            continue;
          }
          long wait = due - System.nanoTime();
          if (wait > 0) {
            Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
          } else if (-wait > 1_000_000_000L) {
            due = System.nanoTime();  // more than a second behind: no burst to catch up
          }
          due += intervalNs;
        }
        synchronized (lock) {
          if (paused || stopped) {
            continue;
          }
          long t0 = System.nanoTime();
          DataFile file = write(table, rows, rowsPer);
          writeMs += (System.nanoTime() - t0) / 1e6;
          AppendFiles append = table.newAppend();
          append.appendFile(file);
          append.commit();
          commitMs += (System.nanoTime() - t0) / 1e6;
          if (sinceCompaction.isEmpty()) {
            compactStart = rows;
          }
          sinceCompaction.add(file);
          rows += rowsPer;
          commits++;
          if (commits % compactEvery == 0) {
            DataFile compacted = write(table, compactStart, (int) (rows - compactStart));
            // one writer: nothing to validate against but the current snapshot (validation
            // from the table's start cannot walk a history that expiry cut)
            RewriteFiles rewrite = table.newRewrite()
                .validateFromSnapshot(table.currentSnapshot().snapshotId());
            for (DataFile old : sinceCompaction) {
              rewrite.deleteFile(old);
            }
            rewrite.addFile(compacted);
            rewrite.commit();
            sinceCompaction.clear();
            replaces++;
          }
          if (commits % expireEvery == 0) {
            table.expireSnapshots()
                .expireOlderThan(System.currentTimeMillis() - retainMs)
                .retainLast(1)
                .commit();
            expiries++;
          }
        }
      }
    } catch (Exception e) {
      error = String.valueOf(e);
      e.printStackTrace();
      // keep answering commands so the harness reads the error
      if (!started) {
        commands.start();
      }
      commands.join();
    }
    commands.join(10_000);
  }
}
