"""Write ``checkpoint_v3.bin`` once, by hand: the v2 golden checkpoint with its watermark.

Run ``uv run python tests/state/golden/write_checkpoint_v3.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from write_checkpoint_v2 import CHECKPOINT as CHECKPOINT_V2

from icefloe.state import encode

GOLDEN = Path(__file__).with_name("checkpoint_v3.bin")

CHECKPOINT = dataclasses.replace(CHECKPOINT_V2, watermark_ms=1_700_000_000_789)

if __name__ == "__main__":
    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(encode(CHECKPOINT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
