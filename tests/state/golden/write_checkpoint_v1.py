"""Write ``checkpoint_v1.bin`` once, by hand.

Run ``uv run python tests/state/golden/write_checkpoint_v1.py``.

The bytes are committed; tests only read them back. Never regenerate an existing file:
a changed byte means the format changed, and old checkpoints must stay readable.
"""

from __future__ import annotations

import sys
from pathlib import Path

from icefloe.state import Checkpoint, Position, encode

GOLDEN = Path(__file__).with_name("checkpoint_v1.bin")

CHECKPOINT = Checkpoint(
    table="demo.sub.events",
    table_identity="3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b",
    ref="main",
    plan_fingerprint="pf1-0123456789abcdef",
    position=Position("scan", 8765432101234567890, 42, 7),
    acked_beyond=("8765432101234567890-00112233445566778899", "8765432101234567890-aabb"),
    offsets=(("8765432101234567890-ccdd", 1234), ("8765432101234567890-eeff", 0)),
    nessie_hashes=(
        (8765432101234567890,
         "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"),
        (123, "abcdef0123456789"),
    ),
    created_ms=1_717_171_717_171,
    writer="icefloe 0.1.0",
)

if __name__ == "__main__":
    if GOLDEN.exists():
        sys.exit(f"{GOLDEN} exists; golden bytes are never regenerated")
    GOLDEN.write_bytes(encode(CHECKPOINT))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
