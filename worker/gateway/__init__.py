"""`derender-worker gateway`: an OpenAI-compatible front door for the disaggregated loop.

A client's request is rendered by vLLM (engine.py), generated as a token stream whose
events become ChunkRecords on the input topic (requests.py), and answered from the output
topic, read on this replica's reply partitions only (replies.py); exchange.py runs one
request from end to end, app.py holds the routes and service.py starts it all.
"""
