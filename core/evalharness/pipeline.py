"""The pipeline graph: which components exist, their kinds, their order and the router's routes."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from pydantic import BaseModel, ConfigDict, Field


class ComponentSpec(BaseModel):
    """One component of the pipeline, as written under ``pipeline:`` in a scenario."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: str | None = None
    """Component kind; defaults to the component's name (router, text2sql, retriever,
    generator, or a kind a plugin adds)."""

    after: list[str] = Field(default_factory=list)
    """Components whose output this one consumes."""

    routes: dict[str, list[str]] = Field(default_factory=dict)
    """For a router: route name -> the components that route runs."""


SHOP_PIPELINE: dict[str, dict] = {
    "router": {"routes": {"sql": ["text2sql"], "blog": ["retriever"]}},
    "text2sql": {"after": ["router"]},
    "retriever": {"after": ["router"]},
    "generator": {"after": ["text2sql", "retriever"]},
}
"""The default pipeline: the shop architecture of the brief."""


class Pipeline:
    """A validated pipeline: components in topological order, with kinds and routes."""

    def __init__(self, components: dict[str, ComponentSpec]) -> None:
        self.components = components
        graph = {name: set(spec.after) for name, spec in components.items()}
        for name, spec in components.items():
            for targets in spec.routes.values():
                for target in targets:
                    graph.setdefault(target, set()).add(name)
        self.order: list[str] = list(TopologicalSorter(graph).static_order())

    def kind(self, component: str) -> str:
        spec = self.components[component]
        return spec.kind or component

    def routes(self) -> dict[str, list[str]]:
        """Route name -> components, over every router in the pipeline."""
        out: dict[str, list[str]] = {}
        for spec in self.components.values():
            out.update(spec.routes)
        return out

    def problems(self, known_kinds: set[str]) -> list[tuple[tuple, str]]:
        """``[(field path, problem)]`` for unknown kinds, dangling references and cycles."""
        found: list[tuple[tuple, str]] = []
        names = set(self.components)
        for name, spec in self.components.items():
            if self.kind(name) not in known_kinds:
                found.append(((name, "kind"), f"unknown component kind {self.kind(name)!r}; "
                              f"known kinds: {', '.join(sorted(known_kinds))} (a plugin can add "
                              "more)"))
            for i, dep in enumerate(spec.after):
                if dep not in names:
                    found.append(((name, "after", i), f"{dep!r} is not a component of this "
                                  f"pipeline; components: {', '.join(sorted(names))}"))
            for route, targets in spec.routes.items():
                for i, target in enumerate(targets):
                    if target not in names:
                        found.append(((name, "routes", route, i), f"route {route!r} targets "
                                      f"{target!r}, which is not a component of this pipeline"))
        return found

    @staticmethod
    def check_acyclic(components: dict[str, ComponentSpec]) -> str | None:
        graph = {name: set(spec.after) for name, spec in components.items()}
        try:
            list(TopologicalSorter(graph).static_order())
        except CycleError as exc:
            return f"the pipeline has a cycle: {' -> '.join(map(str, exc.args[1]))}"
        return None
