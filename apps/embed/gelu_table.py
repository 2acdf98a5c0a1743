#!/usr/bin/python3
"""Print the GELU table of apps/embed/vmath.h (embed_gelu16).

GELU(x) = x/2 (1 + erf(x / sqrt 2)) (Hendrycks and Gimpel, 2016) on
[-6, 6), cut into 32 intervals of 0.375: on interval k, with u in [0, 1)
the position inside it, a polynomial of degree 4 in u,

    GELU(-6 + 0.375 (k + u)) ~ c0[k] + c1[k] u + c2[k] u^2 + c3[k] u^3 + c4[k] u^4.

Each interval's coefficients are a near-minimax fit (least squares on 64
Chebyshev nodes, reweighted towards the largest errors, 30 rounds) to the
exact function in double precision. The script then evaluates the kernel
as vmath.h does it, in float32, every 1e-4 over [-12, 12], and prints the
largest error it found beside the table (vmath.h quotes it). Past 6 the
kernel returns x (GELU(6) = 6 - 6e-9); below -6 the clamp gives
interval 0 at u = 0, GELU(-6) = -6e-9.

  apps/embed/gelu_table.py > /tmp/table.txt

Needs /usr/bin/python3 and numpy (Debian: python3-numpy).
"""

import math

import numpy as np

INTERVALS, LOW, WIDTH, DEGREE = 32, -6.0, 0.375, 4


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def fit(k):
    nodes = 64
    u = 0.5 - 0.5 * np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    y = gelu(LOW + WIDTH * (k + u))
    w = np.ones(nodes)
    for _ in range(30):
        c = np.polynomial.polynomial.polyfit(u, y, DEGREE, w=w)
        err = np.abs(np.polynomial.polynomial.polyval(u, c) - y)
        w = w * (1.0 + err / err.max())
    return c


def kernel(table, x):
    """embed_gelu16 in float32, step by step."""
    f = np.float32
    t = np.minimum(f(31.999998), np.maximum(f(0), x * f(1 / WIDTH) + f(-LOW / WIDTH)))
    k = np.floor(t)
    u = (t - k).astype(f)
    i = k.astype(np.int32)
    p = table[DEGREE][i]
    for j in range(DEGREE - 1, -1, -1):
        p = (p * u + table[j][i]).astype(f)
    return np.where(x >= f(-LOW), x, p)


def main():
    table = np.array([fit(k) for k in range(INTERVALS)], dtype=np.float32).T
    x = np.arange(-12.0, 12.0, 1e-4).astype(np.float32)
    err = np.abs(kernel(table, x).astype(np.float64) - gelu(x.astype(np.float64)))
    print(f"/* largest error every 1e-4 over [-12, 12]: {err.max():.2g} absolute, "
          f"{(err / (1 + np.abs(x))).max():.2g} (1 + |x|) */")
    for j in range(DEGREE + 1):
        print("    {" + ", ".join(f"{v:.9g}f" for v in table[j]) + "},")


if __name__ == "__main__":
    main()
