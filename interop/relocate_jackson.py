"""Relocate PySpark 3.5's Jackson jars into Iceberg's shaded package (one jar out).

Why: ``iceberg-spark-runtime-3.5_2.12-1.10.2.jar`` as shipped in the PyPI wheel
``snowpark-connect-deps-iceberg`` references Jackson as
``org.apache.iceberg.shaded.com.fasterxml.jackson.*`` (its build relocated the references)
but does not contain those classes, so every Iceberg commit fails with
``ClassNotFoundException: org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory``.

What: the same relocation maven-shade would do, in pure Python (no Maven Central here).
For each class of jackson-core, -databind and -annotations from ``pyspark/jars``:
- the entry is renamed from ``com/fasterxml/jackson/...`` to
  ``org/apache/iceberg/shaded/com/fasterxml/jackson/...``;
- every CONSTANT_Utf8 of its constant pool (class names, descriptors, signatures and
  string literals such as the names databind loads reflectively) has
  ``com/fasterxml/jackson/`` and ``com.fasterxml.jackson.`` prefixed the same way; the
  pool is parsed entry by entry, so lengths stay right and nothing else changes;
- ``META-INF/services/com.fasterxml.jackson.*`` files are renamed and rewritten alike.
Multi-release variants (``META-INF/versions/``), ``module-info`` and signatures are dropped:
the base classes run on Java 17.

Usage: ``python relocate_jackson.py OUT.jar JAR...``
"""

from __future__ import annotations

import struct
import sys
import zipfile

SLASH = (b"com/fasterxml/jackson/", b"org/apache/iceberg/shaded/com/fasterxml/jackson/")
DOT = (b"com.fasterxml.jackson.", b"org.apache.iceberg.shaded.com.fasterxml.jackson.")

# constant-pool tag -> size of its payload in bytes (Utf8, tag 1, is variable)
_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2,
          17: 4, 18: 4, 19: 2, 20: 2}


def relocate_bytes(text: bytes) -> bytes:
    """``text`` with both spellings of the Jackson package prefixed with Iceberg's shade."""
    return text.replace(SLASH[0], SLASH[1]).replace(DOT[0], DOT[1])


def relocate_class(data: bytes) -> bytes:
    """A class file with every CONSTANT_Utf8 relocated (the rest copied byte for byte)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            value = relocate_bytes(data[pos + 3:pos + 3 + length])
            out += bytes([1]) + struct.pack(">H", len(value)) + value
            pos += 3 + length
        else:
            size = _SIZES[tag]
            out += data[pos:pos + 1 + size]
            pos += 1 + size
        index += 2 if tag in (5, 6) else 1  # long and double take two slots
    out += data[pos:]
    return bytes(out)


def relocate(out_path: str, jars: list[str]) -> int:
    """Write ``out_path`` holding the relocated Jackson classes of ``jars``; return the count."""
    written = 0
    seen: set[str] = set()
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"
                     "Created-By: icefloe interop/relocate_jackson.py\n")
        for jar in jars:
            with zipfile.ZipFile(jar) as src:
                for info in src.infolist():
                    name = info.filename
                    if name.endswith("/") or name.startswith("META-INF/versions/"):
                        continue
                    if name.endswith(".class") and name.startswith("com/fasterxml/jackson/"):
                        target = SLASH[1].decode() + name[len(SLASH[0]):]
                        payload = relocate_class(src.read(info))
                    elif name.startswith("META-INF/services/com.fasterxml.jackson."):
                        target = "META-INF/services/" + relocate_bytes(
                            name[len("META-INF/services/"):].encode()).decode()
                        payload = relocate_bytes(src.read(info))
                    else:
                        continue
                    if target in seen:
                        continue
                    seen.add(target)
                    out.writestr(target, payload)
                    written += 1
    return written


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n = relocate(sys.argv[1], sys.argv[2:])
    print(f"relocated {n} entries into {sys.argv[1]}")
