"""The BYM2 model of ``infant_mortality.statistics.bym2`` fitted by full MCMC (PyMC's NUTS): the
reference its Laplace approximation is checked against (docs/methods/maps.md, "BYM2 smoothing and spatial clusters").

Runs in its own environment, not the warehouse's (PyMC is not a dependency of the build):

    python3 -m venv .venv-mcmc && .venv-mcmc/bin/pip install pymc==5.28.5

Reads JSON on stdin: {"deaths": [...], "births": [...], "edges": [[i, j], ...], "thresholds":
[...], "draws": 5000, "chains": 4, "seed": 46, "target_accept": 0.95}; writes JSON on stdout with, per area, the
posterior mean, sd, 2.5% and 97.5% quantiles of the rate exp(η_i) (per live birth) and
P(rate > threshold_i), the posterior mean of φ and the sampler's diagnostics. It scales the
ICAR itself (dense generalised inverse) rather than importing the package, so that the two fits
share only the model's definition.

The ICAR with its sum-to-zero constraint per connected component is written exactly in the
component's eigenbasis, u_c = V_c diag(λ_c)^(-1/2) z_c over the non-zero eigenvalues λ_c of the
scaled structure, z_c ~ N(0, I); an island's u_i ~ N(0, 1) (its b_i is then N(0, 1/τ), the
unstructured part alone). Priors: μ flat; σ = 1/√τ ~ Exponential(-log(0.01)) (PC prior, P(σ > 1)
= 0.01); φ with INLA's PC prior, P(φ < 0.5) = 0.5.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def scaled_components(n, edges):
    """Per component of two or more nodes: (nodes, non-zero eigenvalues, their eigenvectors) of
    the scaled ICAR structure; the islands; and γ for the PC prior of φ."""
    w = np.zeros((n, n))
    for i, j in edges:
        w[i, j] = w[j, i] = 1.0
    laplacian = np.diag(w.sum(axis=1)) - w
    seen = np.full(n, -1)
    label = 0
    for start in range(n):
        if seen[start] >= 0:
            continue
        stack = [start]
        seen[start] = label
        while stack:
            node = stack.pop()
            for other in np.flatnonzero(w[node]):
                if seen[other] < 0:
                    seen[other] = label
                    stack.append(other)
        label += 1
    parts, islands, gamma = [], [], []
    for c in range(label):
        nodes = np.flatnonzero(seen == c)
        if len(nodes) == 1:
            islands.append(int(nodes[0]))
            gamma.append(1.0)
            continue
        block = laplacian[np.ix_(nodes, nodes)]
        factor = np.exp(np.mean(np.log(np.diag(np.linalg.pinv(block)))))
        values, vectors = np.linalg.eigh(block * factor)
        parts.append((nodes, values[1:], vectors[:, 1:]))
        gamma.extend([0.0, *(1.0 / values[1:])])
    return parts, islands, np.array(gamma)


def main() -> int:
    import pymc as pm
    import pytensor.tensor as pt

    spec = json.load(sys.stdin)
    y = np.asarray(spec["deaths"], float)
    births = np.asarray(spec["births"], float)
    n = len(y)
    parts, islands, gamma = scaled_components(n, spec["edges"])
    g1 = gamma - 1.0

    def distance(phi):
        x = phi * g1
        return pt.sqrt(pt.sum(x - pt.log1p(x)))

    lam_phi = -np.log(1 - 0.5) / float(np.sqrt(np.sum(0.5 * g1 - np.log1p(0.5 * g1))))
    with pm.Model():
        mu = pm.Flat("mu")
        sigma = pm.Exponential("sigma", lam=-np.log(0.01) / 1.0)
        logit_phi = pm.Flat("logit_phi")
        phi = pm.Deterministic("phi", pm.math.sigmoid(logit_phi))
        d = distance(phi)
        d_prime = pt.sum(g1 ** 2 * phi / (1 + phi * g1)) / (2 * d)
        pm.Potential("pc_phi", np.log(lam_phi) - lam_phi * d + pt.log(d_prime) + pt.log(phi) + pt.log1p(-phi))
        u = pt.zeros(n)
        for c, (nodes, values, vectors) in enumerate(parts):
            z = pm.Normal(f"z{c}", 0.0, 1.0, shape=len(values))
            u = pt.set_subtensor(u[nodes], pt.dot(vectors / np.sqrt(values), z))
        if islands:
            z_island = pm.Normal("z_island", 0.0, 1.0, shape=len(islands))
            u = pt.set_subtensor(u[islands], z_island)
        v = pm.Normal("v", 0.0, 1.0, shape=n)
        eta = mu + sigma * (pt.sqrt(phi) * u + pt.sqrt(1 - phi) * v)
        pm.Deterministic("rate", pt.exp(eta))
        pm.Poisson("y", mu=births * pt.exp(eta), observed=y)
        trace = pm.sample(draws=spec.get("draws", 5000), tune=spec.get("tune", 1500), chains=spec.get("chains", 4),
                          cores=1, random_seed=spec.get("seed", 46), target_accept=spec.get("target_accept", 0.95),
                          progressbar=False, compute_convergence_checks=False)
    rate = trace.posterior["rate"].values.reshape(-1, n)
    phi_draws = trace.posterior["phi"].values.ravel()
    import arviz as az

    summary = az.summary(trace, var_names=["rate", "phi", "sigma"], kind="diagnostics")
    thresholds = np.asarray(spec.get("thresholds", np.full(n, np.nan)), float)
    json.dump({
        "mean": rate.mean(axis=0).tolist(),
        "sd": rate.std(axis=0).tolist(),
        "lower": np.quantile(rate, 0.025, axis=0).tolist(),
        "upper": np.quantile(rate, 0.975, axis=0).tolist(),
        "prob_exceeds": (rate > thresholds).mean(axis=0).tolist(),
        "phi_mean": float(phi_draws.mean()),
        "draws": int(rate.shape[0]),
        "min_ess_bulk": float(summary["ess_bulk"].min()),
        "max_r_hat": float(summary["r_hat"].max()),
        "divergences": int(trace.sample_stats["diverging"].values.sum()),
    }, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
