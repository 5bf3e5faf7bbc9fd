"""The pure derender core: no I/O, no clock, no asyncio (checked by a test)."""

from worker.core.derender import Output, Step, step, step_invalid
from worker.core.model import Model, Registry
from worker.core.state import RequestState, decode_state, encode_state

__all__ = [
    "Model",
    "Output",
    "Registry",
    "RequestState",
    "Step",
    "decode_state",
    "encode_state",
    "step",
    "step_invalid",
]
