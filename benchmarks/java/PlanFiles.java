// Java Iceberg's planning, timed inside the JVM (benchmarks/java_planning.py runs it).
//
//   java -cp <iceberg runtime + PySpark's jars> PlanFiles METADATA_JSON PASSES [COLUMN MIN]
//
// Loads the table from its metadata file (StaticTableOperations over HadoopFileIO, no
// catalog), then PASSES times iterates table.newScan().planFiles() to the end (optionally
// with filter COLUMN >= MIN, a long), counting the tasks. Prints one JSON line: the JVM's
// uptime when main was entered (start-up), the table load, and each pass's seconds.
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableScan;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.io.CloseableIterable;

public class PlanFiles {
  public static void main(String[] args) throws Exception {
    long startupMs = ManagementFactory.getRuntimeMXBean().getUptime();
    long t0 = System.nanoTime();
    HadoopFileIO io = new HadoopFileIO(new Configuration());
    Table table = new BaseTable(new StaticTableOperations(args[0], io), "bench");
    table.currentSnapshot();
    double loadS = (System.nanoTime() - t0) / 1e9;
    int passes = Integer.parseInt(args[1]);
    List<String> seconds = new ArrayList<>();
    long count = -1;
    for (int p = 0; p < passes; p++) {
      TableScan scan = table.newScan();
      if (args.length > 3) {
        scan = scan.filter(Expressions.greaterThanOrEqual(args[2], Long.parseLong(args[3])));
      }
      long start = System.nanoTime();
      long n = 0;
      try (CloseableIterable<FileScanTask> tasks = scan.planFiles()) {
        for (FileScanTask task : tasks) {
          n++;
        }
      }
      seconds.add(Double.toString((System.nanoTime() - start) / 1e9));
      count = n;
    }
    System.out.println("{\"startup_s\": " + startupMs / 1e3 + ", \"load_s\": " + loadS
        + ", \"count\": " + count + ", \"threads\": "
        + Runtime.getRuntime().availableProcessors() + ", \"seconds\": ["
        + String.join(", ", seconds) + "]}");
  }
}
