"""One NCCL for the whole process, the newer one.

PyTorch's wheels ship their own libnccl.so.2 (the ``nvidia-nccl-cu*`` package) and need its newer
symbols, while the engine links the CUDA toolkit's. A process holds one library per soname, the
first loaded: importing surogate before torch would leave torch with the toolkit's older NCCL and
``import torch`` failing with "undefined symbol: ncclCommResume". So when that package is installed
its library is loaded first, and the engine runs on it too (NCCL keeps its ABI within 2.x: a newer
library has every function an older one has). Without it nothing changes.
"""
import ctypes
import glob
import importlib.util
import os


def load_the_wheels_nccl() -> None:
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(glob.glob(os.path.join(root, "nccl", "lib", "libnccl.so.2"))):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return
            except OSError:
                continue
