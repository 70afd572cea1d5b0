"""Write ``split_v4.bin`` once, by hand: the v3 golden split read in schema 3 of its stream.

Run ``uv run python tests/splits/golden/write_split_v4.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from write_split_v3 import SPLIT as SPLIT_V3

GOLDEN = Path(__file__).with_name("split_v4.bin")

SPLIT = dataclasses.replace(SPLIT_V3, schema_id=3)

if __name__ == "__main__":
    from icefloe.splits import serialize_split

    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(serialize_split(SPLIT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
