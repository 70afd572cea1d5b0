"""Write ``checkpoint_v2.bin`` once, by hand: the v1 golden checkpoint with its stream schema.

Run ``uv run python tests/state/golden/write_checkpoint_v2.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from write_checkpoint_v1 import CHECKPOINT as CHECKPOINT_V1

from icefloe.state import encode

GOLDEN = Path(__file__).with_name("checkpoint_v2.bin")

CHECKPOINT = dataclasses.replace(CHECKPOINT_V1, schema_id=3, schema_since=41)

if __name__ == "__main__":
    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(encode(CHECKPOINT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
