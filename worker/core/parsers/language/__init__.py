"""The language every format is written in, and what the engine keeps and says.

grammar.py: engine states, transition actions, `ReasoningFormat` and `ToolFormat` (what a
format holds); markers.py: marker literals more than one format writes; state.py: the
parser's per-choice state and the `Call` union (plain msgspec data, kept in the request
state); events.py: the neutral events a feed produces; scope.py: what one feed works
with. The bottom layer: at run time these import nothing else of the parsers (only
annotations look up at arguments/ and machine/).
"""
