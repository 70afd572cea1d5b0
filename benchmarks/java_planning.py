"""Java Iceberg's ``table.newScan().planFiles()`` for the planning benchmark.

Runs ``benchmarks/java/PlanFiles.java`` in a JVM of the interop environment's jars
(``.venv-interop``: Iceberg 1.10.2's Spark runtime jar, which bundles Iceberg core, plus
PySpark 3.5's Hadoop and the relocated Jackson of ``interop/setup.sh``). No Spark session:
the driver loads the table from its metadata file (``StaticTableOperations`` over
``HadoopFileIO``) and times each ``planFiles()`` pass inside the JVM with
``System.nanoTime``, so JVM start-up, class loading and the table load are reported apart.
The driver is compiled once with ``javac`` (cached under ``benchmarks/data/``); without a
JDK, Java's single-file source launcher compiles it at start-up (counted in start-up only).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import DATA_DIR, ROOT

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
HOW_TO = ("create it with `make interop-env` (Java 17; see interop/setup.sh), then re-run "
          "`uv run python -m benchmarks.run --only planning`")


def interop_venv() -> Path:
    return Path(os.environ.get("ICEFLOE_INTEROP_VENV", ROOT.parent / ".venv-interop"))


def classpath() -> tuple[str | None, str]:
    """The driver's classpath, or None and why not."""
    venv = interop_venv()
    if shutil.which("java") is None:
        return None, "no `java` on PATH"
    site = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))
    if not site:
        return None, f"no interop environment at {venv}"
    runtime = Path(site[0]) / "snowpark_connect_deps_iceberg" / "jars" / RUNTIME_JAR
    spark_jars = Path(site[0]) / "pyspark" / "jars"
    shaded = venv / "jackson-iceberg-shaded.jar"
    missing = [str(p) for p in (runtime, spark_jars, shaded) if not p.exists()]
    if missing:
        return None, f"the interop environment lacks {', '.join(missing)}"
    return os.pathsep.join([str(runtime), str(shaded), str(spark_jars / "*")]), ""


def compiled_class(cp: str, name: str = "PlanFiles") -> list[str]:
    """The ``java`` arguments that run the driver ``benchmarks/java/<name>.java``: its
    compiled class (cached under ``benchmarks/data/``), or its source."""
    source = ROOT / "java" / f"{name}.java"
    javac = shutil.which("javac")
    if javac is None:
        return ["-cp", cp, str(source)]  # single-file source launch (JDK 11+)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = DATA_DIR / f"java-{name.lower()}-{digest}"
    if not (out / f"{name}.class").exists():
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run([javac, "-nowarn", "-d", str(tmp), "-cp", cp, str(source)], check=True,
                       capture_output=True)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return ["-cp", os.pathsep.join([str(out), cp]), name]


def plan_files(metadata_path: str, passes: int, threads: int | None = None,
               filter_ge: tuple[str, int] | None = None, timeout: float = 3600
               ) -> dict[str, Any]:
    """One fresh JVM: ``passes`` full ``planFiles()`` iterations of the table.

    Returns the driver's report (``startup_s``: JVM uptime when ``main`` began; ``load_s``:
    the table load; ``seconds``: each pass; ``count``: tasks of the last pass) plus
    ``process_s`` (the JVM's wall time, start-up included). ``threads`` sets Iceberg's
    worker pool (``iceberg.worker.num-threads``; default: the number of cores).
    """
    cp, why = classpath()
    if cp is None:
        raise RuntimeError(why)
    args = ["java"]
    if threads is not None:
        args.append(f"-Diceberg.worker.num-threads={threads}")
    args += [*compiled_class(cp), metadata_path, str(passes)]
    if filter_ge is not None:
        args += [filter_ge[0], str(filter_ge[1])]
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"PlanFiles failed ({proc.returncode}): {proc.stderr[-2000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    report: dict[str, Any] = json.loads(line)
    report["process_s"] = wall
    return report
