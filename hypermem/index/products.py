r"""The matrix product of the search's scan, ``S = Q K^T``, through the faster CPU BLAS.

Every exact search is one product of query and key directions per chunk
(:func:`hypermem.index.exact_topk`), and the product is most of its time.  On the CPU torch
calls its bundled MKL, NumPy its bundled OpenBLAS.  On some processors they differ by far:
on the AMD EPYC (Zen 5, AVX-512) this project is measured on, MKL's float32 GEMM took 1.45x
OpenBLAS's time for the search's ``(1000, 256) x (256, 1048)`` blocks and its GEMV 2.3x
(``benchmarks/RESULTS.md``, "A million memories"), which is most of what put the exact
``search_batch`` behind faiss ``IndexFlatIP`` there: MKL takes its fastest code paths on
Intel processors.  :func:`products` therefore multiplies through NumPy where
torch's BLAS is MKL and the processor is not Intel's; both compute the same IEEE products,
in a different summation order (results agree to rounding).  NumPy's OpenBLAS keeps its
own thread count (``OPENBLAS_NUM_THREADS``), not ``torch.set_num_threads``.

``BLAS`` overrides the choice: ``"torch"``, ``"numpy"`` or ``"auto"`` (the default).  Only
CPU tensors without gradients, outside ``torch.compile``, go through NumPy.
"""

from __future__ import annotations

import numpy as np
import torch

BLAS = "auto"
"""``"auto"`` (NumPy where MKL runs on a processor that is not Intel's), ``"torch"`` or ``"numpy"``."""

_choice: dict[torch.dtype, str] = {}


def _cpu_vendor() -> str:
    """The CPU's ``vendor_id`` from ``/proc/cpuinfo`` ("" where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def blas_for(dtype: torch.dtype) -> str:
    """``"torch"`` or ``"numpy"``: the library that multiplies ``dtype`` blocks on the CPU.
    ``"auto"`` takes NumPy's OpenBLAS where torch's BLAS is MKL on a processor that is not
    Intel's (MKL's slower code path there), else torch's."""
    if BLAS in ("torch", "numpy"):
        return BLAS
    if dtype not in _choice:
        other = torch.backends.mkl.is_available() and _cpu_vendor() not in ("", "GenuineIntel")
        _choice[dtype] = "numpy" if other else "torch"
    return _choice[dtype]


def products(queries: torch.Tensor, keys: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``queries @ keys.T`` ``(B, C)`` for ``queries`` ``(B, d)`` and ``keys`` ``(C, d)``,
    written into ``out`` (a contiguous ``(B, C)`` tensor of their dtype) when given: a
    reused block spares the allocation and page faults of a fresh one every chunk."""
    if (queries.device.type != "cpu" or keys.device.type != "cpu" or queries.dtype != keys.dtype
            or queries.dtype not in (torch.float32, torch.float64) or queries.requires_grad or keys.requires_grad
            or torch.compiler.is_compiling() or blas_for(queries.dtype) != "numpy"):
        return queries @ keys.T if out is None else torch.matmul(queries, keys.T, out=out)
    try:
        q, k = queries.numpy(), keys.numpy()
    except RuntimeError:  # a tensor without storage (torch.func's grad and vmap wrap them): torch's product
        return queries @ keys.T if out is None else torch.matmul(queries, keys.T, out=out)
    if out is None:
        return torch.from_numpy(np.matmul(q, k.T))
    np.matmul(q, k.T, out=out.numpy())
    return out
