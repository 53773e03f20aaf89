"""Whether a frame shares memory with a configured frame (``pd.DataFrame(df)`` in pandas 3).

Such a frame drops ``df.attrs`` (so it carries no marker) yet holds the configured frame's
buffers; ``configure`` compares the address ranges of the column buffers (numpy, masked,
categorical, Arrow), read without copying, and refuses any overlap.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd


def _buffer_ranges(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """Address ranges of the frame's column buffers (numpy, masked, categorical, Arrow).

    Read without copying; a column whose storage is not recognised contributes nothing (the
    check can then miss sharing, never invent it).
    """
    ranges: list[tuple[int, int]] = []
    for i in range(frame.shape[1]):
        # storage that cannot be inspected zero-copy is skipped
        with contextlib.suppress(Exception):
            ranges.extend(_column_ranges(frame.iloc[:, i]))
    return [r for r in ranges if r[1] > r[0]]


def _column_ranges(s: pd.Series) -> list[tuple[int, int]]:
    arr = s.array
    if isinstance(s.dtype, np.dtype):
        return [_np_range(s.to_numpy())]
    if isinstance(arr, pd.arrays.ArrowExtensionArray):
        chunked = arr.__arrow_array__()
        return [(b.address, b.address + b.size)
                for chunk in getattr(chunked, "chunks", [chunked])
                for b in chunk.buffers() if b is not None and b.size]
    if isinstance(arr, pd.Categorical):
        return [_np_range(arr.codes)]
    if isinstance(arr, (pd.arrays.IntegerArray, pd.arrays.FloatingArray,
                        pd.arrays.BooleanArray)):
        return [_np_range(arr._data), _np_range(arr._mask)]
    if isinstance(getattr(arr, "_ndarray", None), np.ndarray):  # e.g. python-backed strings
        return [_np_range(arr._ndarray)]
    return []


def _np_range(a: np.ndarray) -> tuple[int, int]:
    if a.size == 0:
        return (0, 0)
    lo, hi = np.lib.array_utils.byte_bounds(a)
    return (int(lo), int(hi))


def _shares_memory(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    if not a or not b:
        return False
    events = sorted([(lo, hi, 0) for lo, hi in a] + [(lo, hi, 1) for lo, hi in b])
    reach = [0, 0]  # furthest end seen so far from each side
    for lo, hi, side in events:
        if lo < reach[1 - side]:
            return True
        reach[side] = max(reach[side], hi)
    return False

