"""The diagonal of the inverse of a symmetric positive definite band matrix from its Cholesky
factor, compiled with numba.

The BYM2 fit (``bym2.BandedFactor``) needs the latent variances, the diagonal of the inverse of
a band of about 350 unknowns and bandwidth 30, at each of the 70 to 90 grid points it keeps per
indicator and period. Takahashi's recursion is a loop over the columns with a small product in
each; in Python it held the interpreter lock for 10 of the 34 s that the national build's BYM2
fits held it (py-spy), 1.2 ms a call; compiled it takes 0.13 ms and releases the lock. LAPACK
factorises and solves (``dpbtrf``, ``dpbtrs``); compiled loops for those were slower than LAPACK.

Storage: ``factor[j, d]`` = L[j + d, j] for d = 0..w (w the bandwidth): one row per column of L,
the transpose of LAPACK's lower band storage (``dpbtrf``'s output, which is Fortran-ordered, is
this array without a copy), so that the inner loop runs along contiguous memory. Checked against
numpy's dense inverse in ``tests/maps/test_bym2.py``. The numba cache (``cache=True``) keeps the
machine code beside this file after the first compilation (about 0.4 s, once per checkout); the
explicit signature loads it when the module is imported (0.18 s, and numba's own import 0.2 s:
more than the bundled build's three fits save, 0.3 s, but 7 s less on the national build's 77).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit("float64[:](float64[:, ::1])", cache=True, nogil=True)
def inverse_diagonal(factor: np.ndarray) -> np.ndarray:
    """Diagonal of A⁻¹ from its band Cholesky factor, by Takahashi's recursion, last column first:
    with l the column of L below its diagonal, Z = A⁻¹ gives Z[below, j] = -Z[below, below] l / L[j, j]
    and Z[j, j] = (1 / L[j, j] - lᵀ Z[below, j]) / L[j, j]. Z[below, below] lies within the band,
    so only the band of Z is ever computed (held in a square array for contiguous rows)."""
    n, width = factor.shape[0], factor.shape[1] - 1
    z = np.empty((n, n))
    column = np.empty(width + 1)
    for j in range(n - 1, -1, -1):
        below = min(width, n - 1 - j)
        for a in range(1, below + 1):
            total = 0.0
            for b in range(1, below + 1):
                total += z[j + a, j + b] * factor[j, b]
            column[a] = -total / factor[j, 0]
        diagonal = 1.0 / factor[j, 0]
        for a in range(1, below + 1):
            z[j + a, j] = column[a]
            z[j, j + a] = column[a]
            diagonal -= factor[j, a] * column[a]
        z[j, j] = diagonal / factor[j, 0]
    return np.diag(z).copy()
