"""Statistical nearest neighbours ("peers") of communes (docs/methods/inequity.md, "Peers").

Each covariate is standardised to a z-score over the communes given, (x - mean) / sd with the
sample sd (ddof = 1), so that no covariate weighs more for its unit; a commune's peers are the
k other communes at the smallest Euclidean distance in that space, ties broken by commune code.
Fingertips' CIPFA peers follow the same idea on other covariates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OUTPUT_COLUMNS = ["commune_code", "peer_rank", "peer_code", "distance"]


def standardise(values: np.ndarray) -> np.ndarray:
    """Column-wise z-scores; a covariate without variation cannot rank anyone and is refused."""
    sd = values.std(axis=0, ddof=1)
    if (sd == 0).any():
        raise ValueError(f"covariate column(s) {np.flatnonzero(sd == 0).tolist()} take one value only")
    return (values - values.mean(axis=0)) / sd


def nearest_peers(covariates: pd.DataFrame, k: int) -> pd.DataFrame:
    """Rows (commune_code, peer_rank 1..k, peer_code, distance) from a frame indexed by commune
    code with one numeric column per covariate; every value must be present."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"the number of peers must be a whole number >= 1, got {k!r}")
    if len(covariates) <= k:
        raise ValueError(f"{k} peers need more than {k} communes; got {len(covariates)}")
    if covariates.index.has_duplicates:
        raise ValueError(f"commune(s) listed twice: {sorted(covariates.index[covariates.index.duplicated()])}")
    values = covariates.to_numpy(dtype=float)
    missing = ~np.isfinite(values).all(axis=1)
    if missing.any():
        raise ValueError(f"commune(s) without every covariate: {sorted(covariates.index[missing])[:10]}")
    z = standardise(values)
    distance = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(axis=2))
    codes = covariates.index.to_numpy()
    by_code = np.argsort(codes, kind="stable")
    rows = []
    for i, code in enumerate(codes):
        # Sort on distance, then on code (the stable sort of the code-ordered positions).
        order = by_code[np.argsort(distance[i, by_code], kind="stable")]
        order = order[order != i][:k]
        rows.extend((code, rank + 1, codes[j], distance[i, j]) for rank, j in enumerate(order))
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
