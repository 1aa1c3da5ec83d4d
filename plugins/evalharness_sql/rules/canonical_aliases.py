"""Table aliases are names the author chose: rename them canonically, scope by scope."""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope


def canonical_aliases(tree: exp.Expression, state: dict[str, Any]) -> exp.Expression:
    """Give every table the alias of its own name (``name_1``, ``name_2``, ... when the query
    reads it several times, in order of appearance), every derived table ``_d1``, ``_d2``,
    ..., and every CTE ``_cte1``, ... — renaming the columns that refer to them, in their own
    scope and in correlated subqueries.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT t1.name FROM singer AS t1 WHERE t1.age > "
    ...                          "(SELECT AVG(t2.age) FROM singer AS t2 WHERE t2.c = t1.c)")
    >>> canonical_aliases(tree, {"qualified": True}).sql()
    'SELECT singer_1.name FROM singer AS singer_1 WHERE singer_1.age > (SELECT AVG(singer_2.age) FROM singer AS singer_2 WHERE singer_2.c = singer_1.c)'
    """
    if not state.get("qualified"):
        return tree
    ctes = [c for c in tree.find_all(exp.CTE)]
    cte_names = {c.alias: f"_cte{i}" for i, c in enumerate(ctes, 1)}
    for table in tree.find_all(exp.Table):
        if not table.args.get("db") and table.name in cte_names:
            table.set("this", exp.to_identifier(cte_names[table.name]))
    for cte in ctes:
        cte.set("alias", exp.TableAlias(this=exp.to_identifier(cte_names[cte.alias])))
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, AttributeError, TypeError, ValueError):
        return tree
    if root is None:
        return tree
    definers: list[exp.Expression] = [
        n for n in tree.find_all(exp.Table, exp.Subquery, bfs=False)
        if isinstance(n, exp.Table) or (n.alias and isinstance(n.parent, exp.From | exp.Join))]
    position = {id(n): i for i, n in enumerate(definers)}
    counts: dict[str, int] = {}
    for n in definers:
        if isinstance(n, exp.Table):
            counts[n.name] = counts.get(n.name, 0) + 1
    seen: dict[str, int] = {}
    new_name: dict[int, str] = {}
    derived = 0
    for n in definers:
        if isinstance(n, exp.Table):
            if counts[n.name] == 1:
                new_name[id(n)] = n.name
            else:
                seen[n.name] = seen.get(n.name, 0) + 1
                new_name[id(n)] = f"{n.name}_{seen[n.name]}"
        else:
            derived += 1
            new_name[id(n)] = f"_d{derived}"
    mappings: dict[int, dict[str, str]] = {}
    scopes = list(root.traverse())
    for scope in scopes:
        mapping: dict[str, str] = {}
        for alias, (node, _source) in scope.selected_sources.items():
            definer = node.parent if isinstance(node, exp.Select | exp.SetOperation) else node
            if id(definer) in new_name:
                mapping[alias] = new_name[id(definer)]
        mappings[id(scope)] = mapping
    renames: list[tuple[exp.Column, str]] = []
    for scope in scopes:
        for column in scope.columns:
            target = _lookup(scope, column.table, mappings)
            if target is not None:
                renames.append((column, target))
    for n in definers:
        if id(n) in new_name and id(n) in position:
            n.set("alias", exp.TableAlias(this=exp.to_identifier(new_name[id(n)])))
    for column, target in renames:
        column.set("table", exp.to_identifier(target))
    return tree


def _lookup(scope: Scope | None, alias: str, mappings: dict[int, dict[str, str]]) -> str | None:
    while scope is not None and alias:
        mapping = mappings.get(id(scope), {})
        if alias in mapping:
            return mapping[alias]
        if alias in scope.sources:
            return None
        scope = scope.parent
    return None
