"""The IDX format of MNIST and Fashion-MNIST: a small header, then the array of unsigned bytes.

Header: two zero bytes, the type code 0x08 (unsigned byte), the number of dimensions n, then n
big-endian int32 sizes; the data follow in C order. Files may be gzipped (name ending in .gz).
"""

from __future__ import annotations

import gzip
import math
import os
import struct

import numpy as np

from mitool.checks import ParameterError

__all__ = ["find_idx", "read_idx"]


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the MNIST format, gzipped when the name ends in .gz) as a uint8 array.

    Header: two zero bytes, the type code 0x08 (unsigned byte), the number of dimensions n, then n
    big-endian int32 sizes; the data follow in C order. Raises ValueError for anything else.
    """
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as file:
            content = file.read()
    except (EOFError, gzip.BadGzipFile) as error:
        raise ValueError(f"{path} is not a whole gzip file ({type(error).__name__})") from None
    if len(content) < 4 or content[0] != 0 or content[1] != 0 or content[2] != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    dims = content[3]
    header = 4 + 4 * dims
    shape = struct.unpack(f">{dims}i", content[4:header])
    expected = header + math.prod(shape)
    if len(content) != expected:
        raise ValueError(f"{path} is truncated or padded: {len(content)} bytes, its header says {expected}")
    return np.frombuffer(content, dtype=np.uint8, offset=header).reshape(shape)


def find_idx(directory: str, stem: str) -> str:
    """The path of IDX file ``stem`` (or ``stem``.gz) in ``directory``; ParameterError naming
    ``data_dir`` when there is neither."""
    for candidate in (stem, stem + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    raise ParameterError(
        "data_dir",
        f"{directory} has no IDX file {stem}[.gz] (expected the four Fashion-MNIST files; the Debian "
        f"package dataset-fashion-mnist installs them in its default directory)",
    )
