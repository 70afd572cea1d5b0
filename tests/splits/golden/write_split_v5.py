"""Write ``split_v5.bin`` once, by hand: the v4 golden split with its event-time bound.

Run ``uv run python tests/splits/golden/write_split_v5.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from write_split_v4 import SPLIT as SPLIT_V4

GOLDEN = Path(__file__).with_name("split_v5.bin")

SPLIT = dataclasses.replace(SPLIT_V4, watermark_ms=1_700_000_000_456)

if __name__ == "__main__":
    from icefloe.splits import serialize_split

    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(serialize_split(SPLIT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
