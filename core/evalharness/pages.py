"""The HTML pages' one Jinja environment: templates in ``templates/``, every one autoescaped.

A page is a template and its data a model (datasette's way): :func:`render` fills a template
with objects, and the template decides the markup. Everything a template prints with
``{{ … }}`` is escaped unless it is markup already (:class:`Html`, a macro's output), so case
text — questions, answers, SQL, chunk texts, metric details — cannot become markup by
forgetting to escape it; ``|safe`` is never needed. Undefined names raise
(``StrictUndefined``) instead of printing nothing.

The layout every page extends is ``templates/base.html``: the doctype, the
Content-Security-Policy from the ``csp`` variable (a page passes its own; ``nonce``, if given,
goes on the layout's ``<script>`` and ``<style>``), the inline CSS of ``base.css``, the
console-error hooks of ``console_errors.js``, and the blocks ``title``, ``head``, ``nav``,
``content``, ``footer`` and ``scripts``. ``macros.html`` holds what pages share (``nav``,
``pill``, ``kpi``). A page stays one file that names no URL: CSS and scripts are included
inline. Templates are plain files side by side (package data is ``templates/*``); a page's
partials share its name as a prefix (``report_*.html``). In them, a line starting with
``{#- #}`` continues the line before it without a space, where whitespace would show.

Escaping is spelt as the standard library's :func:`html.escape` spells it (``&#x27;``,
``&quot;``) rather than as markupsafe does (``&#39;``, ``&#34;``), in templates and in
:class:`Html` alike, so a text reads the same in the source wherever it was escaped — and
report.html as it did before it was a template.
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
from markupsafe import Markup

from evalharness import formatting

TEMPLATES = Path(__file__).parent / "templates"
"""Where the pages' templates, their CSS and their scripts live (package data)."""


CONTROLS = {**{c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A, 0x0C, 0x0D)},
            0x7F: 0x2421, **{c: 0xFFFD for c in range(0x80, 0xA0)}}
"""Control characters, which HTML forbids in a page's text (a NUL makes browsers cut or
mangle it), shown as their Unicode pictures (``␀``, ``␛``, ``␡``) or, for C1 controls, as
``�``; tab, line feed, form feed and carriage return stay."""


def visible(text: str) -> str:
    """``text`` with its control characters replaced as :data:`CONTROLS` says.

    >>> visible("a\\x00b\\x1b[0m\\tc\\x85")
    'a␀b␛[0m\\tc�'
    """
    return text.translate(CONTROLS)


class Html(Markup):
    """Markup whose pieces are escaped with :func:`html.escape`: build it with
    :meth:`format`, :meth:`join` or ``+`` and every argument that is not markup is escaped.

    >>> Html('<b title="{}">{}</b>').format("it's", "<i>")
    Html('<b title="it&#x27;s">&lt;i&gt;</b>')
    >>> Html("<br>").join(["a&b", Html("<hr>")])
    Html('a&amp;b<br><hr>')
    """

    __slots__ = ()

    @classmethod
    def escape(cls, s: Any, /) -> Html:
        """``s`` as markup: kept if it is markup already, else escaped."""
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(html.escape(str(s), quote=True).translate(CONTROLS))


def escape(value: Any) -> Html:
    """Any value as text in HTML (a text node or an attribute value in quotes).

    >>> escape('<script>alert("x")</script>')
    Html('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;')
    >>> escape(Html("<b>kept</b>"))
    Html('<b>kept</b>')
    """
    return Html.escape(value)


def quoted_attr(value: Any) -> Html:
    """``value`` inside a double-quoted attribute, apostrophes left as they are (a CSP's
    ``'none'`` stays readable in the page's source).

    >>> quoted_attr("default-src 'none'; x=\\"<y>\\"")
    Html("default-src 'none'; x=&quot;&lt;y&gt;&quot;")
    """
    return Html(html.escape(str(value), quote=False).replace('"', "&quot;").translate(CONTROLS))


def _finalize(value: Any) -> Any:
    """Every ``{{ … }}`` of a template goes through here before autoescaping: text is escaped
    the way :class:`Html` escapes it (autoescaping then leaves the markup as it is)."""
    return value if hasattr(value, "__html__") else Html.escape(value)


FILTERS = {
    "number": formatting.number,
    "percent": formatting.percent,
    "latency": formatting.latency,
    "ci_range": formatting.ci_range,
    "judge_cell": formatting.judge_cell,
    "clamp": formatting.clamp,
    "pyformat": format,
    "quoted_attr": quoted_attr,
    "e": escape,
    "escape": escape,
}
"""The filters templates may use beyond Jinja's own: ``{{ value|number }}``,
``{{ width|pyformat(".1f") }}`` (a Python format spec), ``{{ csp|quoted_attr }}``…; ``e`` and
``escape`` replace Jinja's, so an explicit escape is spelt as autoescaping spells it."""


class _Compiled(jinja2.FileSystemBytecodeCache):
    """Jinja's cache of compiled templates in its private folder under the temporary
    directory (made ``0700`` and checked to be this user's): a process that writes a page
    loads them instead of compiling every template again (a tenth of a second per run). A
    cache that cannot be read or written is skipped, never a reason to lose a page."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a torn or foreign file: compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # a full or read-only temporary directory
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _Compiled()
    except (OSError, RuntimeError):  # no temporary directory this user may safely use
        return None


@cache
def environment() -> jinja2.Environment:
    """The one environment, built on first use: templates are compiled once per process,
    or loaded compiled from :class:`_Compiled`."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,  # a line holding only a {% tag %} leaves no line behind
        lstrip_blocks=True,
        keep_trailing_newline=True,  # an included partial keeps its last newline
        auto_reload=False,  # templates are package data: no need to stat them per render
        bytecode_cache=_bytecode_cache(),
    )
    env.filters.update(FILTERS)
    return env


def render(template_name: str, /, **context: Any) -> str:
    """The page ``template_name`` (a file in ``templates/``) filled with ``context``.

    A page extending ``base.html`` must pass ``csp``, its Content-Security-Policy, and may
    pass ``nonce``, put on the layout's own ``<script>`` and ``<style>``.

    >>> page = render("base.html", csp="default-src 'none'")
    >>> page.startswith("<!DOCTYPE html>"), "content=\\"default-src 'none'\\"" in page
    (True, True)
    """
    return environment().get_template(template_name).render(**context)
