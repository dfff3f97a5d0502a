"""The diagonal of the inverse of a symmetric positive definite band (envelope) matrix from its
Cholesky factor, compiled with numba.

The BYM2 fit (``bym2.BandedFactor``) needs the latent variances, the diagonal of the inverse of
S = R* + φ diag(w) (about 350 unknowns, bandwidth 30), at each of the 70 to 90 grid points it
keeps per indicator and period. Takahashi's recursion is a loop over the columns with a small
product in each; in Python it held the interpreter lock for 10 of the 34 s that the national
build's BYM2 fits held it (py-spy), 1.2 ms a call; compiled over the whole band it took 0.13 to 0.17 ms;
over the envelope alone (below), which is all the factor fills, 0.05 ms.

Storage: the envelope layout of ``bym2_kernels`` (its factor is the input): ``factor[i, w + p - i]``
= L[i, p] for p = first[i]..i, w the bandwidth, zero before ``first[i]``. Z = S⁻¹ is computed on
the same envelope: the recursion for Z's entries in it only reads entries in it (if L[k, j] and
L[i, j] are in the envelope, so is Z[i, k]). Checked against numpy's dense inverse in
``tests/maps/test_bym2.py``. The numba cache (``cache=True``) keeps the machine code beside this
file after the first compilation; the explicit signature loads it when the module is imported.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit("float64[::1](float64[:, ::1], int64[::1])", cache=True, nogil=True)
def inverse_diagonal(factor: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Diagonal of S⁻¹ from its envelope Cholesky factor L, by Takahashi's recursion, last column
    first: with K the rows below j where column j of L is nonzero, Z = S⁻¹ gives
    Z[i, j] = -Σ_{k in K} Z[i, k] L[k, j] / L[j, j] for i in K and
    Z[j, j] = (1 / L[j, j] - Σ_{k in K} L[k, j] Z[k, j]) / L[j, j]."""
    n, width = factor.shape[0], factor.shape[1] - 1
    z = np.zeros((n, width + 1))  # Z's lower envelope, Z[i, p] at [i, width + p - i]
    rows = np.empty(width, dtype=np.int64)  # K
    column = np.empty(width)  # L[K, j]
    out = np.empty(n)
    for j in range(n - 1, -1, -1):
        m = 0
        for k in range(j + 1, min(n, j + width + 1)):
            if first[k] <= j:
                rows[m], column[m] = k, factor[k, width + j - k]
                m += 1
        pivot = factor[j, width]
        diagonal = 1.0 / pivot
        for a in range(m):
            i = rows[a]
            total = 0.0
            for c in range(m):
                k = rows[c]
                total += (z[i, width + k - i] if k <= i else z[k, width + i - k]) * column[c]
            z[i, width + j - i] = -total / pivot
            diagonal -= column[a] * z[i, width + j - i]
        z[j, width] = diagonal / pivot
        out[j] = z[j, width]
    return out
