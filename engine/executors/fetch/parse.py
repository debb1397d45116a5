"""Bytes → text → what the model reads: charset detection, HTML → Markdown, JSON.

Also the bounded decompressor: Content-Encoding is undone here, chunk by chunk, never
producing more output than asked for, so a gzip bomb costs no more memory than the cap.

What leaves this module is fit for every listener (engine.untrusted): no lone surrogate
(`"\\ud800"` in a JSON page becomes U+FFFD, with a note), no JSON value nested deeper than
MAX_DEPTH or with numbers no JSON reader agrees on (the page is then given as text).
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from ...errors import SkillyardError
from ...safety.untrusted import (
    MAX_DEPTH,
    find_problem,
    loads,
    replace_lone_surrogates,
    scrub_surrogates,
    text_may_hide_problem,
)

# ─── content encodings ──────────────────────────────────────────────────────────────────

ACCEPT_ENCODING = "gzip, deflate"


class UnsupportedEncoding(SkillyardError):
    """A Content-Encoding this fetch cannot undo."""


class BoundedDecoder:
    """Undo one Content-Encoding; `decode(data, limit)` returns at most `limit` bytes."""

    def __init__(self, encoding: str | None):
        names = [e.strip().lower() for e in (encoding or "").split(",") if e.strip() and e.strip().lower() != "identity"]
        if len(names) > 1:
            raise UnsupportedEncoding(f"stacked content encodings are not supported ({encoding})")
        self.name = names[0] if names else "identity"
        if self.name in ("gzip", "x-gzip"):
            self._wbits = 16 + zlib.MAX_WBITS
        elif self.name == "deflate":
            self._wbits = zlib.MAX_WBITS
        elif self.name != "identity":
            raise UnsupportedEncoding(f"the server used Content-Encoding {self.name!r}, which is not supported")
        self._zlib = zlib.decompressobj(self._wbits) if self.name != "identity" else None
        self._first = True

    def decode(self, data: bytes, limit: int) -> bytes:
        if self._zlib is None:
            return data[:limit]
        out = bytearray()
        while data and len(out) < limit:
            try:
                piece = self._zlib.decompress(data, limit - len(out))
            except zlib.error:
                if self.name == "deflate" and self._first:
                    # Some servers send raw deflate without the zlib header.
                    self._wbits = -zlib.MAX_WBITS
                    self._zlib = zlib.decompressobj(self._wbits)
                    self._first = False
                    continue
                raise
            self._first = False
            out += piece
            if self._zlib.unconsumed_tail:
                data = self._zlib.unconsumed_tail  # output limit reached
            elif self._zlib.eof and self._zlib.unused_data:
                data = self._zlib.unused_data  # a further gzip member
                self._zlib = zlib.decompressobj(self._wbits)
            else:
                data = b""
        return bytes(out)


# ─── charsets ───────────────────────────────────────────────────────────────────────────

# Labels browsers treat as windows-1252 (the WHATWG Encoding standard).
_AS_CP1252 = {"iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "ansi_x3.4-1968", "windows-1252", "cp1252"}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9._-]+)""")


_NOT_CHARSETS = frozenset({"unicode-escape", "raw-unicode-escape", "unicode_escape", "raw_unicode_escape"})


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in _AS_CP1252:
        return "cp1252"
    try:
        info = codecs.lookup(label)
    except LookupError:
        return None
    # Not bytes→bytes codecs (hex, zlib…), and not the escape codecs, which turn `\\ud800` into a lone surrogate
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return info.name


def media_type(content_type: str | None) -> tuple[str, dict[str, str]]:
    """`text/html; charset=UTF-8` → ("text/html", {"charset": "UTF-8"})."""
    if not content_type:
        return "", {}
    kind, *params = content_type.split(";")
    parsed = {}
    for param in params:
        key, _, value = param.partition("=")
        parsed[key.strip().lower()] = value.strip().strip('"')
    return kind.strip().lower(), parsed


def detect_charset(body: bytes, content_type: str | None) -> str:
    """BOM, then the declared charset, then an HTML/XML declaration, then UTF-8 if it fits, else windows-1252."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    kind, params = media_type(content_type)
    declared = _codec(params.get("charset"))
    if declared:
        return declared
    head = body[:4096]
    if kind in ("text/html", "application/xhtml+xml", "") and (match := _META_CHARSET.search(head)):
        found = _codec(match.group(1).decode("ascii", "replace"))
        if found:
            return found
    if match := _XML_ENCODING.match(head):
        found = _codec(match.group(1).decode("ascii", "replace"))
        if found:
            return found
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(body) - 3:  # only a character cut off at the end (truncation)
            return "utf-8"
    return "cp1252"


def decode_text(body: bytes, content_type: str | None, *, complete: bool) -> tuple[str, str]:
    """The body as text and the charset used. An incomplete body drops a cut-off last character."""
    charset = detect_charset(body, content_type)
    decoder = codecs.getincrementaldecoder(charset)(errors="replace")
    return replace_lone_surrogates(decoder.decode(body, final=complete)), charset  # as "replace" does for bad bytes


_BINARY_TYPES = re.compile(r"^(image|audio|video|font)/|^application/(octet-stream|pdf|zip|gzip|x-tar|x-7z-compressed|vnd\.ms-|vnd\.openxmlformats|wasm)")


def looks_binary(body: bytes, content_type: str | None) -> bool:
    kind, _ = media_type(content_type)
    if kind and _BINARY_TYPES.match(kind) and not kind.endswith(("+xml", "+json")):
        return True
    return b"\0" in body[:1024] and not body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def is_html(body_text: str, content_type: str | None) -> bool:
    kind, _ = media_type(content_type)
    if kind in ("text/html", "application/xhtml+xml"):
        return True
    if kind in ("", "text/plain", "application/octet-stream"):
        start = body_text.lstrip()[:256].lower()
        return start.startswith(("<!doctype html", "<html")) or ("<head" in start and "<body" in body_text[:4096].lower())
    return False


# ─── HTML → Markdown ────────────────────────────────────────────────────────────────────

# Dropped with their content: nothing in them is text a reader sees.
_DROP = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas", "head", "link", "meta")
_LANG_CLASS = re.compile(r"^(?:language|lang|highlight|sourceCode)-?([A-Za-z0-9_+#-]+)$")


@dataclass(frozen=True, slots=True)
class Markdown:
    text: str
    title: str | None
    degraded: bool = False


def _code_language(element: Any) -> str:
    for node in (element, element.find("code") if hasattr(element, "find") else None, element.parent):
        for cls in (node.get("class") or []) if node is not None and hasattr(node, "get") else []:
            match = _LANG_CLASS.match(cls)
            if match and match.group(1).lower() not in ("source", "default"):
                return match.group(1).lower()
    return ""


def html_to_markdown(html: str, base_url: str) -> Markdown:
    """Readable Markdown: scripts/styles dropped, links absolute, code blocks fenced, tables kept."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    base = soup.find("base", href=True)
    if base is not None:
        base_url = urljoin(base_url, str(base["href"]))
    for tag in soup(list(_DROP)):
        tag.decompose()
    for comment in soup.find_all(string=lambda s: type(s).__name__ == "Comment"):
        comment.extract()
    for anchor in soup.find_all("a"):
        href = str(anchor.get("href") or "").strip()
        if not href or href.lower().startswith(("javascript:", "data:", "vbscript:")):
            anchor.attrs.pop("href", None)
        else:
            anchor["href"] = urljoin(base_url, href)
    for image in soup.find_all("img"):
        src = str(image.get("src") or "").strip()
        if not src or src.lower().startswith("data:"):
            alt = image.get("alt")
            image.replace_with(f"[{alt}]" if alt else "")
        else:
            image["src"] = urljoin(base_url, src)
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        escape_underscores=False,
        escape_asterisks=False,
        code_language_callback=_code_language,
        table_infer_header=True,
    )
    try:
        text = converter.convert_soup(soup)
    except RecursionError:  # absurdly deep nesting: plain text is still worth having
        return Markdown(_tidy(soup.get_text("\n")), title, degraded=True)
    return Markdown(_tidy(text), title)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# ─── JSON ───────────────────────────────────────────────────────────────────────────────


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None) or (the raw text, why it is not JSON). See `parse_json_noted`."""
    value, problem, _ = parse_json_noted(text)
    return value, problem


def parse_json_noted(text: str) -> tuple[Any, str | None, str | None]:
    """(value, None, note) or (the raw text, why it is not usable JSON, None).

    Lone surrogates in the value become U+FFFD; `note` then says how many strings changed
    (None when nothing did). JSON nested deeper than MAX_DEPTH, NaN, or numbers of more than
    MAX_NUMBER_DIGITS digits are not usable: the text is given instead.
    """
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        return text, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", None
    except ValueError as exc:
        return text, f"not usable JSON: {exc}", None
    if not text_may_hide_problem(text):
        return value, None, None
    problem = find_problem(value, MAX_DEPTH, numbers=False)
    if problem is not None and "nested" in problem.message:
        return text, f"not usable JSON: {problem}", None
    value, changed = scrub_surrogates(value)
    if not changed:
        return value, None, None
    return value, None, f"{changed} string{'s' if changed != 1 else ''} held lone UTF-16 surrogates (not valid Unicode), replaced with U+FFFD"
