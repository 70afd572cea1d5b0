"""Write ``split_v3.bin`` once, by hand: the v2 golden split as a changelog group split.

Run ``uv run python tests/splits/golden/write_split_v3.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from write_split_v2 import SPLIT as SPLIT_V2

from icefloe.splits.split import CHANGE_EXISTING, CHANGE_REMOVED, ChangeFile

GOLDEN = Path(__file__).with_name("split_v3.bin")

SPLIT = dataclasses.replace(
    SPLIT_V2,
    changes=(
        ChangeFile(CHANGE_REMOVED, SPLIT_V2.file_path, "PARQUET", 0, 4194304, 4194304, 4000,
                   3, SPLIT_V2.partition, 17, deletes_before=SPLIT_V2.delete_files[:1]),
        ChangeFile(CHANGE_EXISTING, "s3://bucket/wh/db/events/data/other.orc", "ORC", 0, 900,
                   900, 12, 3, SPLIT_V2.partition, 12, deletes_before=(),
                   deletes_after=SPLIT_V2.delete_files[1:]),
    ),
    change_ordinal=7,
    commit_timestamp_ms=1_700_000_000_123,
)

if __name__ == "__main__":
    from icefloe.splits import serialize_split

    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(serialize_split(SPLIT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
