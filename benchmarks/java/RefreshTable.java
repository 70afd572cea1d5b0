// Java Iceberg's refresh of an unchanged table, timed inside the JVM
// (benchmarks/bench_history.py runs it).
//
//   java -cp <iceberg runtime + PySpark's jars> RefreshTable TABLE_DIR REFRESHES POLL_MS
//
// Loads a Hadoop-catalog table directory (HadoopTables: metadata/version-hint.text names
// the current vN.metadata.json), then REFRESHES times calls table.refresh() with nothing
// committed in between. HadoopTableOperations.refresh reads the version hint and parses
// nothing when the version did not move: Java's pointer check. The first half runs back
// to back and warms the JIT; the last 60 run as a stream polls, one refresh every
// POLL_MS, each measured as this thread's CPU time (ThreadMXBean). Prints one JSON line.
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.Table;
import org.apache.iceberg.hadoop.HadoopTables;

public class RefreshTable {
  public static void main(String[] args) throws Exception {
    Table table = new HadoopTables(new Configuration()).load(args[0]);
    int refreshes = Integer.parseInt(args[1]);
    int warm = refreshes - Math.min(60, refreshes / 2);
    for (int i = 0; i < warm; i++) {
      table.refresh();
    }
    long pollMs = Long.parseLong(args[2]);
    ThreadMXBean bean = ManagementFactory.getThreadMXBean();
    long cpu = 0;
    long wall = 0;
    int measured = refreshes - warm;
    for (int i = 0; i < measured; i++) {
      Thread.sleep(pollMs);
      long cpu0 = bean.getCurrentThreadCpuTime();
      long wall0 = System.nanoTime();
      table.refresh();
      cpu += bean.getCurrentThreadCpuTime() - cpu0;
      wall += System.nanoTime() - wall0;
    }
    double cpuMs = cpu / 1e6 / measured;
    double wallMs = wall / 1e6 / measured;
    System.out.println("{\"snapshots\": " + table.snapshots().spliterator().getExactSizeIfKnown()
        + ", \"cpu_ms_per_refresh\": " + cpuMs + ", \"wall_ms_per_refresh\": " + wallMs + "}");
  }
}
