"""The short name of a CUDA kernel in an Nsight Compute CSV (bench/profile_kernels.sh,
bench/profile_cli.sh): template arguments and parameters dropped, the last namespace component
kept, so that one row covers a kernel family (every instantiation of rmsnorm_forward_kernel<...>)."""
import re


def short(name: str) -> str:
    name = re.sub(r"\(.*", "", name)
    depth, out = 0, []
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    return "".join(out).split("::")[-1].strip()[:60]
