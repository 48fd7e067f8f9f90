#!/usr/bin/env python3
# Desk check of the fragment addressing in src/cuda/kernels/low_rank_backward.cu, for work without a
# GPU: emulates one block of low_rank_partials_kernel (2 token tiles; the stage ring aside) lane by
# lane with the PTX semantics of ldmatrix.x4 (.trans) and mma.m16n8k16 (as attention_tiles.cuh
# describes them), with the kernel's shared-memory layouts and index expressions copied by hand, and
# compares the d_x and d_Wᵀ partials with numpy. It checks the index math only, not the CUDA code;
# the GPU test is tests/cuda/test_low_rank_backward.cpp. Keep the expressions in step with the
# kernel when it changes. Usage: python3 scripts/emulate_low_rank_fragments.py   (about a minute;
# prints the max errors)
import numpy as np
rng = np.random.default_rng(0)
kTile, kPad = 128, 8
S = kTile + kPad

def ldmatrix_x4(smem, addr_of_lane, trans):
    # smem: 1-D array; addr_of_lane(l) -> element offset of the row start for lane l
    regs = np.zeros((32, 4, 2))
    for j in range(4):
        rows = [smem[addr_of_lane(8 * j + i): addr_of_lane(8 * j + i) + 8] for i in range(8)]
        M = np.array(rows)  # 8x8 as stored
        for l in range(32):
            g, t = l // 4, l % 4
            if not trans:
                regs[l, j] = M[g, 2 * t:2 * t + 2]
            else:
                regs[l, j] = [M[2 * t, g], M[2 * t + 1, g]]
    return regs

def mma(C, A, b0, b1):
    # C: (32, 4), A: (32, 4, 2), b0/b1: (32, 2)
    Am = np.zeros((16, 16)); Bm = np.zeros((16, 8))
    for l in range(32):
        g, t = l // 4, l % 4
        Am[g, 2*t:2*t+2] = A[l, 0]; Am[g+8, 2*t:2*t+2] = A[l, 1]
        Am[g, 2*t+8:2*t+10] = A[l, 2]; Am[g+8, 2*t+8:2*t+10] = A[l, 3]
        Bm[2*t:2*t+2, g] = b0[l]; Bm[2*t+8:2*t+10, g] = b1[l]
    Cm = Am @ Bm
    for l in range(32):
        g, t = l // 4, l % 4
        C[l, 0] += Cm[g, 2*t]; C[l, 1] += Cm[g, 2*t+1]; C[l, 2] += Cm[g+8, 2*t]; C[l, 3] += Cm[g+8, 2*t+1]

def run(R, CT, T=256, N=None):
    N = N or 128 * CT
    RS = R + kPad
    dy = rng.standard_normal((T, N)); x = rng.standard_normal((T, R)); W = rng.standard_normal((N, R))
    # shared x_tile [256][RS], w_tile [CT*128][RS]
    xs = np.zeros(256 * RS); ws = np.zeros(4 * 128 * RS)
    for t in range(min(T, 256)): xs[t*RS:t*RS+R] = x[t]
    for n in range(min(N, CT*128)): ws[n*RS:n*RS+R] = W[n]
    dx_sums = np.zeros((8, 2, R // 8, 32, 4)); dw_sums = np.zeros((8, CT, R // 16, 2, 32, 4))
    for step in range(2 * CT):
        tt, ct = step // CT, step % CT
        tile = np.zeros(128 * S)
        for r in range(128):
            tok = tt * 128 + r
            if tok < T:
                cols = dy[tok, ct*128: ct*128 + 128]
                tile[r*S: r*S + len(cols)] = cols
        for w in range(8):
            for k in range(8):
                a = ldmatrix_x4(tile, lambda l: (w*16 + (l & 15)) * S + k*16 + (l >> 4) * 8, False)
                for j in range(R // 16):
                    b = ldmatrix_x4(ws, lambda l: (ct*128 + k*16 + (l & 7) + ((l >> 3) & 1) * 8) * RS + j*16 + (l >> 4)*8, True)
                    mma(dx_sums[w, tt, 2*j], a, b[:, 0], b[:, 1]); mma(dx_sums[w, tt, 2*j+1], a, b[:, 2], b[:, 3])
                b = ldmatrix_x4(tile, lambda l: (k*16 + (l & 7) + ((l >> 3) & 1) * 8) * S + w*16 + (l >> 4) * 8, True)
                for m in range(R // 16):
                    xa = ldmatrix_x4(xs, lambda l: (tt*128 + k*16 + (l & 7) + (l >> 4) * 8) * RS + m*16 + ((l >> 3) & 1) * 8, True)
                    mma(dw_sums[w, ct, m, 0], xa, b[:, 0], b[:, 1]); mma(dw_sums[w, ct, m, 1], xa, b[:, 2], b[:, 3])
    dx = np.zeros((T, R)); dwT = np.zeros((R, N))
    for w in range(8):
        for l in range(32):
            g, t = l // 4, l % 4
            for tt in range(2):
                for half in range(2):
                    tok = tt*128 + w*16 + g + 8*half
                    if tok >= T: continue
                    for n in range(R // 8):
                        dx[tok, n*8 + 2*t: n*8 + 2*t + 2] = dx_sums[w, tt, n, l, 2*half: 2*half + 2]
            for ct in range(CT):
                for m in range(R // 16):
                    for n in range(2):
                        col = ct*128 + w*16 + n*8 + 2*t
                        if col >= N: continue
                        for half in range(2):
                            r = m*16 + g + 8*half
                            dwT[r, col:col+2] = dw_sums[w, ct, m, n, l, 2*half: 2*half + 2]
    ref_dx = dy @ W; ref_dwT = (dy.T @ x).T
    print(f"R={R} CT={CT} T={T} N={N}: dx err {np.abs(dx - ref_dx).max():.2e}, dW err {np.abs(dwT - ref_dwT).max():.2e}")

run(16, 1); run(32, 1); run(16, 2, T=200, N=200)
