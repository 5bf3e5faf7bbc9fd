"""A choice's token ids -> text: detokenization, stop strings and tokens, logprobs, and
decode.py, which runs them in that order for one choice."""
