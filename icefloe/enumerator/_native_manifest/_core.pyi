"""Type stubs of the C core (``_core.c``); see ``__init__.py`` for the contract."""

from collections.abc import Sequence

def header(content: bytes, /) -> tuple[bytes, dict[str, bytes], bytes, int]: ...
def decode(content: bytes, offset: int, sync: bytes, deflate: bool, program: bytes, root: int,
           manifest_seq: int, added_by: int | None, added_only: bool,
           stats_ids: Sequence[int], /) -> tuple[int, list[bytes | None]]: ...
def split_ids(snapshot_id: int, path_offsets: bytes, path_data: object, path_index: object,
              starts: object, lengths: object, /) -> bytes: ...
