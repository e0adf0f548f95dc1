"""Turning fetched pages into text: main-content extraction and chunk splitting."""

from .extract import EXTRACTOR_ID, GUIDE, PAGE_KINDS, REFERENCE, Extracted, extract_page
from .normalise import normalise_markdown
from .split import Splitter

__all__ = [
    "Extracted",
    "extract_page",
    "EXTRACTOR_ID",
    "GUIDE",
    "REFERENCE",
    "PAGE_KINDS",
    "Splitter",
    "normalise_markdown",
]
