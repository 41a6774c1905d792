"""Text as a UTF-8 table can store it: the one place a lone surrogate (a JSON `"\\ud800"` from an
endpoint, a client or an imported file) becomes U+FFFD, so no writer meets a value it cannot encode."""

from __future__ import annotations

import re

SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str | None) -> str | None:
    """`text` as UTF-8 can store it: each lone surrogate (JSON's `"\\ud800"`, a shell's undecodable
    byte) becomes U+FFFD; any other text is returned as it is (the same object)."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return SURROGATE.sub("\ufffd", text)
