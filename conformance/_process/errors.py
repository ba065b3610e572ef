"""What can go wrong with a process the kit talks to, as the exceptions the plumbing raises."""

from __future__ import annotations


class ProcessGone(Exception):
    """The process exited (or closed its stdout) while the kit waited for a line."""


class ReadTimeout(Exception):
    """No line arrived before the deadline."""


class LineTooLong(ProcessGone):
    """A line on stdout grew past ``MAX_LINE`` bytes; the stream is unusable from there on."""


class NotInTree(Exception):
    """A pid the kit was asked to kill is not the adapter or one of its descendants."""
