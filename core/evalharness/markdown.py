"""A little Markdown as HTML, for the plugin sections of the report page.

Paragraphs, ``#`` headings, ``-``/``*`` lists, ``|`` tables (a ``--:`` column right-aligned),
fenced code, and inline ``code``, **bold** and *emphasis*. Everything is escaped first: the
result is :class:`~evalharness.pages.Html` in which no text of the input becomes markup.
"""

from __future__ import annotations

import re

from evalharness.pages import Html


def _inline(text: str) -> Html:
    """Escape, then ``code``, **bold** and *emphasis*.

    >>> _inline("a `x<y` **b** *c* <i>")
    Html('a <code>x&lt;y</code> <strong>b</strong> <em>c</em> &lt;i&gt;')
    """
    out = []
    for i, part in enumerate(re.split(r"`([^`]+)`", text)):
        if i % 2:
            out.append(Html("<code>{}</code>").format(part))
            continue
        # the patterns only wrap escaped text in tags: nothing of ``part`` becomes markup
        escaped = str(Html.escape(part))
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
        escaped = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", escaped)
        out.append(Html(escaped))
    return Html("").join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def markdown(text: str) -> Html:
    """Markdown of a plugin section as HTML (tables become tables); its text is escaped.

    >>> markdown("| a | b |\\n|---|--:|\\n| <x> | 2 |")
    Html('<table class="tbl compact"><thead><tr><th>a</th><th class="r">b</th></tr></thead><tbody><tr><td>&lt;x&gt;</td><td class="r">2</td></tr></tbody></table>')
    >>> markdown("# Title\\n\\n- <b>one</b>\\n- *two*\\n\\n```\\n<pre>\\n```")
    Html('<h4>Title</h4><ul><li>&lt;b&gt;one&lt;/b&gt;</li><li><em>two</em></li></ul><pre>&lt;pre&gt;</pre>')
    """
    lines = text.splitlines()
    out: list[Html] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("```"):
            code = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            i += 1
            out.append(Html("<pre>{}</pre>").format("\n".join(code)))
        elif stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_md_table(block))
        elif m := re.match(r"(#{1,6})\s+(.*)", stripped):
            out.append(Html("<h4>{}</h4>").format(_inline(m.group(2))))
            i += 1
        elif re.match(r"[-*]\s+", stripped):
            items = []
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                items.append(Html("<li>{}</li>").format(_inline(item)))
                i += 1
            out.append(Html("<ul>{}</ul>").format(Html("").join(items)))
        else:
            para = []
            while (i < len(lines) and lines[i].strip()
                   and not re.match(r"\s*(\||```|#{1,6}\s|[-*]\s)", lines[i])):
                para.append(lines[i].strip())
                i += 1
            out.append(Html("<p>{}</p>").format(_inline(" ".join(para))))
    return Html("").join(out)


def _md_table(block: list[str]) -> Html:
    rows = [_cells(line) for line in block]
    align: list[str] = []
    if len(rows) > 1 and all(re.fullmatch(r":?-{2,}:?", c) for c in rows[1] if c):
        align = ["r" if c.endswith(":") and not c.startswith(":") else "" for c in rows[1]]
        head, body = rows[0], rows[2:]
    else:
        head, body = [], rows

    def cells(tag: str, row: list[str]) -> Html:
        return Html("").join(
            Html('<{tag} class="{cls}">{text}</{tag}>' if j < len(align) and align[j]
                 else "<{tag}>{text}</{tag}>").format(
                tag=tag, cls=align[j] if j < len(align) else "", text=_inline(text))
            for j, text in enumerate(row))

    thead = Html("<thead><tr>{}</tr></thead>").format(cells("th", head)) if head else ""
    tbody = Html("").join(Html("<tr>{}</tr>").format(cells("td", r)) for r in body)
    return Html('<table class="tbl compact">{}<tbody>{}</tbody></table>').format(thead, tbody)
