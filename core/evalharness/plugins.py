"""Plugin loading: entry points, local plugin files, and the registry built from their hooks.

There is one way in: :func:`load_plugins` builds a fresh plugin manager, registers the core's
own hook implementations, every installed ``evalharness`` entry point (the built-in plugins are
entry points too) and any local plugin files, checks that every implemented hook exists, then
asks each plugin what it registers.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from evalharness import hookspecs
from evalharness.context import not_a_file
from evalharness.declarations import Metric, call_with, check_arguments, undeclared
from evalharness.errors import EvalHarnessDeprecationWarning, PluginError
from evalharness.importing import import_file
from evalharness.registry import (
    ANY_KIND,
    ORACLE_ARGUMENTS,
    AlertSender,
    ComponentKind,
    Evaluator,
    Executor,
    JudgeBackend,
    Oracle,
    Registry,
)

ENTRY_POINT_GROUP = "evalharness"
LOAD_ENV = "EVALHARNESS_LOAD_PLUGINS"
CORE_PLUGIN = "evalharness"
CORE_MODULE = "evalharness.builtin"
"""The core's own hook implementations: the four component kinds, judge backends and
executors."""


@dataclass
class PluginInfo:
    """A loaded plugin: where it came from, its version, and its module."""

    name: str
    version: str
    source: str  # "core", "entry point" or "file"
    module: ModuleType
    location: str = ""


@dataclass
class PluginHost:
    """A plugin manager with its loaded plugins and what they registered."""

    pm: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    registry: Registry = field(default_factory=Registry)
    _callers: dict[tuple[str, str], Any] = field(default_factory=dict)

    # -- calling -------------------------------------------------------------------------

    def call_for_plugin(self, hook: str, plugin: str, **kwargs: Any) -> Any:
        """Call ``hook`` on one plugin only (e.g. the one that registered an evaluator)."""
        key = (hook, plugin)
        if key not in self._callers:
            others = [p for p in self.pm.get_plugins() if self.pm.get_name(p) != plugin]
            self._callers[key] = self.pm.subset_hook_caller(hook, remove_plugins=others)
        return self._callers[key](**kwargs)

    def oracle_output(self, component: str, kind: str, case: Any, context: Any
                      ) -> tuple[str | None, Any]:
        """The oracle output of ``component`` (of ``kind``) for ``case``: ``(plugin, output)``
        from the kind's registered :class:`Oracle`, else from the deprecated ``oracle_output``
        hook (plugin ``None``); ``(None, None)`` when nothing offers one. Raises what the
        oracle raises (:class:`evalharness.errors.NoOracle` when the case lacks the gold)."""
        registered = self.registry.oracles.get(kind)
        if registered is not None:
            return registered.plugin, call_with(registered.item.output, case=case,
                                                context=context, component=component,
                                                kind=kind)
        return None, self.pm.hook.oracle_output(component=component, kind=kind, case=case,
                                                context=context)

    # -- describing ----------------------------------------------------------------------

    def hooks_of(self, plugin: str) -> list[str]:
        """Names of the hooks ``plugin`` implements."""
        obj = self.pm.get_plugin(plugin)
        callers = self.pm.get_hookcallers(obj) or []
        return sorted(c.name for c in callers)

    def evaluators_of(self, plugin: str) -> list[Evaluator]:
        return [r.item for r in self.registry.evaluators.values() if r.plugin == plugin]

    def component_kind(self, name: str) -> ComponentKind | None:
        registered = self.registry.component_kinds.get(name)
        return registered.item if registered else None

    def oracle(self, kind: str) -> Oracle | None:
        registered = self.registry.oracles.get(kind)
        return registered.item if registered else None

    def judge_backend(self, name: str) -> JudgeBackend | None:
        registered = self.registry.judge_backends.get(name)
        return registered.item if registered else None

    def executor(self, name: str) -> Executor | None:
        registered = self.registry.executors.get(name)
        return registered.item if registered else None

    def alert_sender(self, name: str) -> AlertSender | None:
        registered = self.registry.alert_senders.get(name)
        return registered.item if registered else None

    def describe(self) -> list[dict[str, Any]]:
        """What ``evalharness plugins --json`` prints."""
        out = []
        for name in sorted(self.plugins, key=lambda n: (n != CORE_PLUGIN, n)):
            info = self.plugins[name]
            out.append(
                {
                    "name": name,
                    "version": info.version,
                    "source": info.source,
                    "location": info.location,
                    "hooks": self.hooks_of(name),
                    "evaluators": [
                        {
                            "name": ev.name,
                            "component": ev.component,
                            "metrics": ev.metric_names(ev.settings())
                            if _defaults_valid(ev)
                            else ["(depends on settings)"],
                            "declarations": [m.view() for m in
                                             [*ev.declared(), *ev.declared("run")]],
                            "needs_judge": ev.needs_judge,
                            "needs_database": ev.needs_database,
                            "settings": ev.settings.model_json_schema().get("properties", {}),
                            "description": ev.description,
                        }
                        for ev in sorted(self.evaluators_of(name), key=lambda e: (e.component, e.name))
                    ],
                    "component_kinds": sorted(
                        k for k, r in self.registry.component_kinds.items() if r.plugin == name
                    ),
                    "judge_backends": sorted(
                        k for k, r in self.registry.judge_backends.items() if r.plugin == name
                    ),
                    "executors": sorted(
                        k for k, r in self.registry.executors.items() if r.plugin == name
                    ),
                    "alert_senders": sorted(
                        k for k, r in self.registry.alert_senders.items() if r.plugin == name
                    ),
                    "oracles": sorted(
                        k for k, r in self.registry.oracles.items() if r.plugin == name
                    ),
                }
            )
        return out


def _defaults_valid(evaluator: Evaluator) -> bool:
    try:
        evaluator.settings()
    except Exception:
        return False
    return True


def make_plugin_manager() -> pluggy.PluginManager:
    """A fresh plugin manager with evalharness's hook specifications; nothing registered."""
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    return pm


def _allowed_names() -> set[str] | None:
    raw = os.environ.get(LOAD_ENV)
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def _register(host: PluginHost, module: ModuleType, info: PluginInfo) -> None:
    if info.name in host.plugins:
        raise PluginError(
            f"two plugins are named {info.name!r} ({host.plugins[info.name].location} and "
            f"{info.location}); rename one of the files or entry points"
        )
    try:
        host.pm.register(module, name=info.name)
    except pluggy.PluginValidationError as exc:
        detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise PluginError(f"plugin {info.name!r} ({info.location}) is invalid: {detail}. "
                          "A hook implementation may only take arguments its hook "
                          "specification declares (see docs/hooks.md)") from None
    host.plugins[info.name] = info


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def load_plugin_file(path: str | Path) -> ModuleType:
    """Import a local plugin file under a private module name; errors name the file."""
    path = Path(path)
    problem = not_a_file(path)
    if problem is not None:
        raise PluginError(
            f"plugin file {str(path)!r} {problem}; give the path to a .py file "
            "(relative to the scenario file when listed under `plugins:`)"
        )
    try:
        return import_file(path, "evalharness_local")
    except Exception as exc:
        raise PluginError(
            f"plugin file {str(path)!r} failed to import: {type(exc).__name__}: {exc}"
        ) from exc


def load_plugins(
    files: Iterable[str | Path] = (),
    *,
    entry_points: bool = True,
    modules: Iterable[Any] = (),
) -> PluginHost:
    """Build a :class:`PluginHost` with the core, entry-point plugins and local files loaded.

    ``EVALHARNESS_LOAD_PLUGINS`` (comma-separated plugin names) limits which entry-point
    plugins load; set it to an empty string to load none. Local files and ``modules`` (used by
    tests) always load: they were named explicitly.
    """
    host = PluginHost(pm=make_plugin_manager())
    # The core's own plugin is loaded by name, as an entry point is: a plugin sits above the
    # machinery it registers (the Ray executor, the run), so this loader never imports one.
    builtin = importlib.import_module(CORE_MODULE)
    _register(host, builtin,
              PluginInfo(CORE_PLUGIN, _version(), "core", builtin, CORE_MODULE))

    if entry_points:
        allowed = _allowed_names()
        for ep in _entry_points():
            if allowed is not None and ep.name not in allowed:
                continue
            try:
                module = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {ep.name!r} (entry point {ep.value!r}) failed to import: "
                    f"{type(exc).__name__}: {exc}. Reinstall it, or leave it out with "
                    f"{LOAD_ENV}"
                ) from exc
            version = ep.dist.version if ep.dist is not None else "unknown"
            _register(host, module, PluginInfo(ep.name, version, "entry point", module, ep.value))

    for module in modules:
        name = getattr(module, "__name__", None) or type(module).__name__
        version = str(getattr(module, "__version__", "module"))
        _register(host, module, PluginInfo(name, version, "module", module, name))

    for file in files:
        module = load_plugin_file(file)
        path = Path(file)
        version = str(getattr(module, "__version__", "file"))
        _register(host, module, PluginInfo(path.stem, version, "file", module, str(path)))

    _collect(host)
    return host


def _version() -> str:
    from evalharness.version import __version__

    return __version__


def _per_plugin(host: PluginHost, hook: str, table: str, key) -> None:
    for name in list(host.plugins):
        def register(item: Any, _plugin: str = name) -> None:
            host.registry.add(table, key(item), _plugin, item)

        try:
            host.call_for_plugin(hook, name, register=register)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin {name!r} failed in hook {hook!r}: "
                              f"{type(exc).__name__}: {exc}") from exc


def _collect(host: PluginHost) -> None:
    """Ask every plugin what it registers; add the hookspecs of new component kinds first."""
    _per_plugin(host, "register_component_kinds", "component_kinds", lambda k: k.name)
    for registered in host.registry.component_kinds.values():
        kind: ComponentKind = registered.item
        if kind.hookspecs is not None:
            host.pm.add_hookspecs(kind.hookspecs)
    host._callers.clear()
    _check_pending(host)
    _per_plugin(host, "register_judge_backends", "judge_backends", lambda b: b.name)
    _per_plugin(host, "register_executors", "executors", lambda x: x.name)
    _per_plugin(host, "register_alert_senders", "alert_senders", lambda a: a.name)
    _per_plugin(host, "register_oracles", "oracles", lambda o: o.kind)
    _per_plugin(host, "register_evaluators", "evaluators", lambda e: (e.component, e.name))
    known = ", ".join(sorted(host.registry.component_kinds))
    for (kind, name), registered in host.registry.evaluators.items():
        if kind == ANY_KIND and registered.item.evaluate is None:
            raise PluginError(f"plugin {registered.plugin!r} registers evaluator {name!r} for "
                              "every component kind without `evaluate`; give "
                              "Evaluator(evaluate=...)")
        if kind not in host.registry.component_kinds and kind != ANY_KIND:
            raise PluginError(
                f"plugin {registered.plugin!r} registers evaluator {name!r} for component kind "
                f"{kind!r}, which no plugin defines; known kinds: {known}"
            )
        registered.item.check(registered.plugin)
    for kind, registered in host.registry.oracles.items():
        if kind not in host.registry.component_kinds:
            raise PluginError(f"plugin {registered.plugin!r} registers an oracle for component "
                              f"kind {kind!r}, which no plugin defines; known kinds: {known}")
        check_arguments(registered.item.output, ORACLE_ARGUMENTS,
                        f"plugin {registered.plugin!r}: the oracle of {kind!r}")
    _deprecations(host)


MIGRATION = ('docs/writing-a-plugin.md, "Migrating from the evaluate hooks"')
"""Where the deprecation warnings send a plugin's author."""


def _deprecations(host: PluginHost) -> None:
    """Warn about plugins that still use the evaluation hooks of evalharness 0.1."""
    for (kind, name), registered in sorted(host.registry.evaluators.items()):
        evaluator: Evaluator = registered.item
        if evaluator.evaluate is None:
            hook = host.component_kind(kind).hook
            if hook is None:
                raise PluginError(
                    f"plugin {registered.plugin!r} registers evaluator {name!r} without "
                    f"`evaluate`, and component kind {kind!r} has no evaluator hook to call "
                    "instead; give Evaluator(evaluate=...): a function of the batch "
                    f"({MIGRATION})")
            _deprecated(f"plugin {registered.plugin!r}: evaluator {name!r} has no `evaluate`, "
                        f"so the core calls the plugin's {hook} hook; that hook goes in the "
                        "next release (0.3): give Evaluator(evaluate=...) instead")
        if evaluator.evaluate_run is None and evaluator.run_metrics:
            _deprecated(f"plugin {registered.plugin!r}: evaluator {name!r} has run metrics but "
                        "no `evaluate_run`, so the core calls the plugin's evaluate_run hook; "
                        "that hook goes in the next release (0.3): give "
                        "Evaluator(evaluate_run=...) instead")
    for name in host.plugins:
        if "oracle_output" in host.hooks_of(name):
            _deprecated(f"plugin {name!r} implements the oracle_output hook, which goes in the "
                        "next release (0.3): register an evalharness.Oracle per component kind "
                        "with the register_oracles hook instead")


def _deprecated(message: str) -> None:
    warnings.warn(f"{message} ({MIGRATION})", EvalHarnessDeprecationWarning, stacklevel=2)


def _check_pending(host: PluginHost) -> None:
    known = sorted(n for n in dir(host.pm.hook) if not n.startswith("_"))
    specified = [n for n in known if getattr(host.pm.hook, n).spec is not None]
    for name, caller in ((n, getattr(host.pm.hook, n)) for n in known):
        if caller.spec is not None:
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook:
                continue
            close = difflib.get_close_matches(name, specified, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise PluginError(
                f"plugin {impl.plugin_name!r} implements hook {name!r}, which does not exist; "
                f"{hint}known hooks: {', '.join(specified)}"
            )
    host.pm.check_pending()  # pluggy's own check; the loop above gives the friendlier message


@functools.cache
def _installed() -> PluginHost | None:
    """The installed plugins, loaded once; ``None`` when they do not load."""
    try:
        return load_plugins()
    except Exception:  # a broken plugin costs the fallback, not the reader
        return None


def installed_declaration(kind: str, evaluator: str, metric: str, scope: str = "case"
                          ) -> Metric | None:
    """The declaration the installed plugin's evaluator gives ``metric``, for reading a run
    whose report.json predates stored declarations; ``None`` when nothing installed declares
    it."""
    host = _installed()
    registered = host.registry.evaluator(kind, evaluator) if host is not None else None
    if registered is None:
        return None
    for where in (scope, "run" if scope == "case" else "case"):
        found = registered.item.declaration(metric, where)
        if found.declared:
            return found
    return None


def declarations_of(report: Any) -> dict[tuple[str, str], Metric]:
    """(component, metric) -> its declaration, for every metric of a run's report (a
    :class:`evalharness.models.Report`): as stored in report.json, else as the installed
    plugins declare it, else a bare one."""
    return {(component, metric): _declaration_of(comp, metric, summary)
            or undeclared(metric, summary.scope)
            for component, comp in report.components.items()
            for metric, summary in comp.metrics.items()}


def complete_declarations(report: Any) -> None:
    """Fill in the declarations a report written before they were stored lacks (in place),
    from the installed plugins, so that a page rebuilt from it (``evalharness agreement``
    rewrites report.html) draws its metrics as a new run's page does."""
    for comp in report.components.values():
        for metric, summary in comp.metrics.items():
            summary.declaration = _declaration_of(comp, metric, summary)


def _declaration_of(comp: Any, metric: str, summary: Any) -> Metric | None:
    """A report's metric's declaration: as stored, else as the installed plugins give it."""
    return summary.declaration or installed_declaration(comp.kind, summary.evaluator, metric,
                                                        summary.scope)
