"""The machinery that runs a format: compile once per model, then feed text.

spec.py compiles a model's formats against its tokenizer (`ParserSpec`); lexer.py
finds markers on text or token ids, holding back a suffix that could still become one;
engine.py is the one streaming engine every format configures (`feed`); prose.py routes
text outside tool calls to content or reasoning (and Harmony / Muse message bodies);
escapes.py recovers MiniCPM-V's escaped newlines. The top layer below the entry points:
it imports families/, arguments/ and language/, and nothing imports it back at run time.
"""
