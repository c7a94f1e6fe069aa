"""Small helpers shared by the vtakit Sphinx extensions: build MyST Markdown text and
parse it where a directive stands (headings allowed; the pages are MyST Markdown, so a
directive's nested content is Markdown too)."""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles


def escape(text) -> str:
    """``text`` safe as one line of Markdown inline text or a table cell."""
    text = " ".join(str(text).split())
    for ch in "\\`*_|<>[]":
        text = text.replace(ch, "\\" + ch)
    return text


def literal(text) -> str:
    """``text`` as inline code (safe in a table cell)."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def heading(title: str, level: int) -> list[str]:
    return ["#" * level + " " + title, ""]


def table(header, rows) -> list[str]:
    """A pipe table; cells are Markdown inline text (use :func:`escape`/:func:`literal`)."""
    def line(cells):
        return "| " + " | ".join(str(c) if str(c) else " " for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows), ""]


def code_block(text: str, language: str = "text") -> list[str]:
    body = str(text).rstrip()
    fence = "````" if "```" in body else "```"
    return [f"{fence}{language}", *body.splitlines(), fence, ""]


def parse(directive, lines: list[str]) -> list[nodes.Node]:
    """Parse Markdown ``lines`` in ``directive``'s place; headings become sections."""
    node = nodes.section()
    node.document = directive.state.document
    source = directive.state.document["source"]
    content = StringList(lines, source=source)
    nested_parse_with_titles(directive.state, content, node)
    return node.children
