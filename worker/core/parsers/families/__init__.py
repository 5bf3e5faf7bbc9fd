"""The format tables of each model family, and the registry that names them.

formats.py maps every accepted `reasoning_parser` / `tool_parser` name
(docs/reference/parsers.md) to its table, aliases included; reasoning_formats.py holds the
reasoning formats; json_formats.py, markup_formats.py, longtail_formats.py the tool formats
by argument syntax; family_formats.py, cohere_formats.py, block_formats.py,
minicpm_formats.py, muse.py (Meta Muse's channels) and frames.py (Harmony's messages) one
family or vendor each; response_template.py the formats a checkpoint describes itself.
Tables only: they import language/ (and arguments/tools.py for the tool table), never the
engine.
"""
