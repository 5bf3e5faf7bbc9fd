"""Tool calls and their arguments: one scanner module per argument syntax.

scanners.py picks the scanner by the kind of call (the `Call` union's type): json_args.py
(JSON as written), params.py (key/value markup), call_list.py (JSON call lists, checked by
json_check.py), pythonic.py (Python call lists), gemma.py (Gemma 4), elements.py (MiniMax
M3), held.py (blocks read whole when they end). calls.py holds what they share (a call's
header, its id, giving a block back as content), convert.py turns non-JSON values into
JSON, tools.py is the request's tool table by name. Imports only language/.
"""
