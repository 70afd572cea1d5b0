"""Write ``split_v1.bin`` once, by hand.

Run ``uv run python tests/splits/golden/write_split_v1.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sys
import uuid
from pathlib import Path

from icefloe.splits import DeleteFileRef, FileSplit, serialize_split

GOLDEN = Path(__file__).with_name("split_v1.bin")

SPLIT = FileSplit(
    split_id="6512078345112847-0a1b2c3d4e5f60718293",
    file_path="s3://bucket/wh/db/events/data/day=2024-01-02/00000-0-data.parquet",
    file_format="PARQUET",
    start=4,
    length=1048576,
    record_count=1000,
    file_size=4194304,
    file_record_count=4000,
    spec_id=3,
    partition=(
        19724,
        "kind-a",
        dt.date(2024, 1, 2),
        dt.datetime(2024, 1, 2, 3, 4, 5, 678901),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        decimal.Decimal("12.345"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        b"\x00\xffbin",
        2.5,
        True,
        None,
        -(2**63),
    ),
    snapshot_id=6512078345112847,
    sequence_number=17,
    ordinal=5,
    delete_files=(
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/pos-deletes.parquet", content=1,
            file_format="PARQUET", sequence_number=18, record_count=3, file_size=1200,
            referenced_data_file="s3://bucket/wh/db/events/data/day=2024-01-02/00000-0-data.parquet",
        ),
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/eq-deletes.parquet", content=2,
            file_format="PARQUET", sequence_number=19, record_count=2, file_size=900,
            equality_ids=(1, 2),
        ),
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/dv.puffin", content=1, file_format="PUFFIN",
            sequence_number=20, record_count=4, file_size=5000,
            referenced_data_file="s3://bucket/wh/db/events/data/day=2024-01-02/00000-0-data.parquet",
            content_offset=4, content_size=60,
        ),
    ),
    resume_rows=250,
)

if __name__ == "__main__":
    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(serialize_split(SPLIT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
