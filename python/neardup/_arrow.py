"""Arrow arrays handed to the Rust extension as NumPy views of their
buffers, with no Python object per value (the Spark job's stages)."""

from typing import Any, Tuple


def buffers(column: Any) -> Tuple[Any, Any]:
    """An Arrow string (or binary) column as (``offsets``: ``int64``, n + 1
    positions into ``data``; ``data``: ``uint8``), without a Python object
    per value; a null is an empty value."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
    if column.null_count:
        column = pc.fill_null(column, b"" if binary else "")
    if not binary and not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = column.cast(pa.large_string())  # a string view, say
    n = len(column)
    if n == 0:  # its buffers may be absent
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint8)
    wide = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    _, offset_buf, data_buf = column.buffers()
    offsets = np.frombuffer(offset_buf, dtype=np.int64 if wide else np.int32)[column.offset:column.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, dtype=np.uint8)
    data = data[offsets[0]:offsets[-1]]
    offsets -= offsets[0]
    return offsets, data
