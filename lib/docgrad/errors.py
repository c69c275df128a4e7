"""The project's error base. Anything a user can cause (a bad option, a missing or corrupt file, data the
analysis must refuse) raises a subclass of DocgradError whose message names the problem and the fix; the
command line prints that one line and exits with status 2 instead of showing a traceback."""

from __future__ import annotations


class DocgradError(Exception):
    """Base of every error a user can cause; the message is one line naming the problem and the fix."""


class AnalysisError(DocgradError, ValueError):
    """The analysis cannot run on these inputs (parameters out of range, impossible data)."""
