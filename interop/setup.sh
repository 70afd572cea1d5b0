#!/usr/bin/env bash
# The interop environment (`make interop-env`): Java Iceberg 1.10.2 on PySpark 3.5, apart
# from icefloe's own .venv (where PySpark 4.3 is icefloe's engine).
# - .venv-interop: exactly interop/uv.lock (pyspark 3.5.x, snowpark-connect-deps-iceberg, which
#   ships iceberg-spark-runtime-3.5_2.12-1.10.2.jar and the extensions jar);
# - Debian's libxerial-sqlite-jdbc-java, the JDBC driver of the SQLite catalog that Spark's
#   JdbcCatalog and PyIceberg's SqlCatalog share (installed here when missing: CI machines get
#   only what the repo's files install);
# - .venv-interop/jackson-iceberg-shaded.jar: PySpark's own Jackson relocated into
#   org.apache.iceberg.shaded.com.fasterxml.jackson, which the runtime jar references but
#   does not contain (see interop/relocate_jackson.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
UV=$(command -v uv 2>/dev/null || echo "$HOME/.local/bin/uv")

command -v java >/dev/null || { echo "interop: Java 17 is needed (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }

if [ ! -f /usr/share/java/sqlite-jdbc.jar ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libxerial-sqlite-jdbc-java >/dev/null
fi

UV_PROJECT_ENVIRONMENT="$ROOT/.venv-interop" "$UV" sync --frozen --project interop --quiet

SHADED="$ROOT/.venv-interop/jackson-iceberg-shaded.jar"
if [ ! -f "$SHADED" ]; then
    JARS=$("$ROOT/.venv-interop/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
    "$ROOT/.venv-interop/bin/python" interop/relocate_jackson.py "$SHADED.tmp" \
        "$JARS"/jackson-core-2.*.jar "$JARS"/jackson-databind-2.*.jar "$JARS"/jackson-annotations-2.*.jar
    mv "$SHADED.tmp" "$SHADED"
fi
echo "interop: environment ready (.venv-interop)"
