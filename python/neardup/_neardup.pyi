import os

import numpy
from typing import Any, List, Optional, Sequence, Tuple, Union

DEFAULT_SEED: int

class Fingerprint:
    content_hash: str
    tokens: int
    features: "numpy.ndarray"  # uint64, sorted and unique
    signature: "numpy.ndarray"  # uint32
    band_keys: "numpy.ndarray"  # uint64
    degraded: bool

class Fingerprinter:
    def __init__(
        self,
        *,
        threshold: float = 0.8,
        shingle_width: int = 5,
        char_shingles: bool = False,
        normalizer: str = "default",
        num_perm: Optional[int] = None,
        bands: Optional[int] = None,
        rows: Optional[int] = None,
        signature: str = "oph",
        seed: int = ...,
    ) -> None: ...
    def fingerprint(self, text: str) -> Fingerprint: ...
    def fingerprint_many(self, texts: Sequence[str]) -> List[Fingerprint]: ...
    def _band_keys_arrow(
        self, offsets: "numpy.ndarray", data: "numpy.ndarray", posting: bool = False
    ) -> Tuple["numpy.ndarray", "numpy.ndarray", "numpy.ndarray"]: ...
    @property
    def fingerprint_version(self) -> str: ...
    @property
    def bands(self) -> int: ...
    @property
    def rows(self) -> int: ...

class _Dedup:
    """The batch decision rule of ``neardup dedup`` (used by ``neardup.dedup``)."""

    def __init__(self, like: "Index") -> None: ...
    def add_many(
        self, items: Sequence[Tuple[str, str]]
    ) -> List[Tuple[bool, Optional[str], Optional[float], List[Tuple[str, float]]]]: ...
    def _add_prior(
        self,
        ids: Sequence[str],
        kept: Sequence[bool],
        hashes: "numpy.ndarray",
        key_offsets: "numpy.ndarray",
        keys: "numpy.ndarray",
        sketch_offsets: "numpy.ndarray",
        sketches: "numpy.ndarray",
        feature_offsets: "numpy.ndarray",
        features: "numpy.ndarray",
    ) -> None: ...

class _Keep:
    """A keeper policy of ``neardup dedup --keep`` (used by ``neardup.dedup``
    and the Spark job): ``first``, ``longest``, ``max:FIELD`` or ``min:FIELD``."""

    def __init__(self, policy: str) -> None: ...
    @property
    def field(self) -> Optional[str]: ...
    @property
    def is_first(self) -> bool: ...
    def order(self, text: str, value: Any = None) -> int: ...

class Index:
    def __init__(
        self,
        *,
        threshold: float = 0.8,
        shingle_width: int = 5,
        char_shingles: bool = False,
        normalizer: str = "default",
        num_perm: Optional[int] = None,
        bands: Optional[int] = None,
        rows: Optional[int] = None,
        signature: str = "oph",
        seed: int = ...,
        max_candidates: int = 100,
        max_bucket_read: int = 1000,
    ) -> None: ...
    def add(self, item_id: str, text: str) -> List[Tuple[str, float]]: ...
    def add_many(self, items: Sequence[Tuple[str, str]]) -> List[List[Tuple[str, float]]]: ...
    def query(self, text: str) -> List[Tuple[str, float]]: ...
    def _image_arrow(self, offsets: "numpy.ndarray", data: "numpy.ndarray") -> Tuple["numpy.ndarray", ...]: ...
    def remove(self, item_id: str) -> bool: ...
    def __len__(self) -> int: ...
    def __contains__(self, item_id: str) -> bool: ...
    @property
    def threshold(self) -> float: ...
    def save(self, path: Union[str, "os.PathLike[str]"]) -> None: ...
    @staticmethod
    def load(path: Union[str, "os.PathLike[str]"]) -> "Index": ...

def jaccard(
    a: str, b: str, *, shingle_width: int = 5, char_shingles: bool = False, normalizer: str = "default"
) -> float: ...

def exact_pairs(sets: Sequence[Sequence[int]], threshold: float) -> List[Tuple[int, int, float]]: ...
def pair_score(a: Sequence[int], a_hash: str, b: Sequence[int], b_hash: str) -> float: ...
