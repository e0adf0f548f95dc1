"""Turning fetched pages into text: main-content extraction and chunk splitting."""

from .extract import EXTRACTOR_ID, Extracted, extract_page
from .normalise import normalise_markdown
from .split import Splitter

__all__ = ["Extracted", "extract_page", "EXTRACTOR_ID", "Splitter", "normalise_markdown"]
