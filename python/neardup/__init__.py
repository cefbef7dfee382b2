"""neardup: near-duplicate detection with a Rust core.

Candidates come from MinHash-LSH; every candidate is verified with exact
Jaccard on canonical shingle sets, so a reported score is the true
similarity, not an estimate. Parameters, names and defaults are those of the
``neardup`` command line (``neardup dedup --help``).

    >>> import neardup
    >>> idx = neardup.Index(threshold=0.75, shingle_width=2, normalizer="seed")
    >>> idx.add("A", "red fox runs very fast")
    []
    >>> idx.add("B", "red fox runs very fast today")
    [('A', 0.8)]
"""

from ._neardup import DEFAULT_SEED, Fingerprint, Fingerprinter, Index, jaccard

__all__ = ["DEFAULT_SEED", "Fingerprint", "Fingerprinter", "Index", "jaccard"]
