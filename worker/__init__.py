"""derender-worker: LLM token streams in, OpenAI-shaped responses out."""

__version__ = "0.1.0"
