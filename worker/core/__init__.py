"""The pure derender core: no I/O, no clock, no asyncio (checked by a test).

`step` (derender.py) is the entry point; `load_state` turns a stored blob into what it
takes, and a Step carries the blob to store back.
"""

from worker.core.derender import Output, Step, fail, step, step_invalid
from worker.core.model import Model, Registry
from worker.core.render import error_output
from worker.core.state import CorruptState, RequestState, decode_state, encode_state, load_state

__all__ = [
    "CorruptState",
    "Model",
    "Output",
    "Registry",
    "RequestState",
    "Step",
    "decode_state",
    "encode_state",
    "error_output",
    "fail",
    "load_state",
    "step",
    "step_invalid",
]
