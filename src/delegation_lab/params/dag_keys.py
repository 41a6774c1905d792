"""The params keys the DAG's stages name (each stage's `params:` list in dvc.yaml), checked against a
params file before anything runs.

The typed model fills a default for every key a file leaves out, but only in memory: DVC reads the
file itself and refuses a stage whose named key is absent (`Parameters 'ability_map.bucket_edges'
are missing from 'params.yaml'`) when `dvc repro` reaches that stage, minutes in. The DAG stays
structural (a stage names every key its outputs depend on, whatever the configuration ignores, so
that changing it reruns the stage); instead `dlab params check` reads the dvc.yaml beside the params
file, expands `foreach` stages as DVC does, and names every missing key with the stages that name it
and the line to add (the model's default, which is what the stages run with anyway).

DVC's own loader (`dvc.dvcfile.load_file`) needs an initialised DVC repository and takes ~2 s to
resolve the DAG's 57 stages; this reads the YAML, which holds only `${...}` references to params
keys and foreach's `${key}` / `${item}`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from delegation_lab.params.root import Params, read_yaml

_REFERENCE = re.compile(r"\$\{\s*([^}]+?)\s*\}")
_MISSING = object()


def lookup(data: Any, dotted: str) -> Any:
    """The value at a dotted key as DVC reads it (a mapping key, or a list index); `_MISSING` if absent."""
    current = data
    for part in dotted.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _substitute(text: str, scope: dict[str, Any], params: dict[str, Any]) -> str | None:
    """`text` with every `${name}` replaced from the foreach scope, else from the params; None if one is unknown."""
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        name = match.group(1)
        head, _, rest = name.partition(".")
        found = lookup(scope[head], rest) if head in scope and rest else scope.get(head, _MISSING)
        if found is _MISSING:
            found = lookup(params, name)
        if found is _MISSING:
            unknown = True
            return match.group(0)
        return str(found)

    out = _REFERENCE.sub(value, text)
    return None if unknown else out


def _iterations(stage: dict[str, Any], params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name suffix, scope) per copy of a stage: one for a plain stage, one per foreach entry."""
    if "foreach" not in stage:
        return [("", {})]
    over = stage["foreach"]
    if isinstance(over, str):
        match = _REFERENCE.fullmatch(over.strip())
        over = lookup(params, match.group(1)) if match else _MISSING
    if isinstance(over, dict):
        return [(f"@{k}", {"key": k, "item": v}) for k, v in over.items()]
    if isinstance(over, list):
        return [(f"@{i}", {"item": v}) for i, v in enumerate(over)]
    return []  # a foreach over a key the params lack: the model's own check names that key


def named_keys(dag: dict[str, Any], params: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """(stage, params file named or None for the default params.yaml, key) for every `params:` entry of
    every stage, foreach expanded; a key with a reference nothing resolves is returned as written."""
    out = []
    for name, stage in (dag.get("stages") or {}).items():
        if not isinstance(stage, dict):
            continue
        body = stage.get("do", stage)
        for suffix, scope in _iterations(stage, params):
            for entry in body.get("params") or []:
                pairs = [(None, entry)] if isinstance(entry, str) else [
                    (file, key) for file, keys in (entry or {}).items() for key in (keys or [])]
                for file, key in pairs:
                    resolved = _substitute(str(key), scope, params)
                    out.append((name + suffix, file, resolved if resolved is not None else str(key)))
    return out


def _field_default(dotted: str) -> Any:
    """The params model's default for a dotted key: a value, `BaseModel` for a section whose keys all
    have defaults, `_MISSING` where the model has no default or no such key."""
    current: Any = Params
    field = None
    for part in dotted.split("."):
        if get_origin(current) is dict:
            current, field = get_args(current)[1], None
            continue
        members = [a for a in get_args(current) if isinstance(a, type) and issubclass(a, BaseModel)]
        current = members[0] if members else current
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return _MISSING
        field = current.model_fields[part]
        current = field.annotation
    if field is None or field.default is PydanticUndefined:
        return _MISSING
    return BaseModel if isinstance(field.default, BaseModel) else field.default


def _line_to_add(dotted: str) -> str:
    """What to write for a missing key: its default under its section, or why there is none."""
    default = _field_default(dotted)
    if default is _MISSING:
        return "no default to add: set it, or take it out of the stage's params list in dvc.yaml"
    *section, leaf = dotted.split(".")
    value = "{}" if default is BaseModel else yaml.safe_dump(default, default_flow_style=True).strip()
    value = value.removesuffix("\n...").strip()
    under = f" under `{'.'.join(section)}:`" if section else ""
    return f"add `{leaf}: {value}`{under} (the default the stages already run with)"


def missing_key_problems(params_path: Path) -> list[str]:
    """One line per params key a stage of the dvc.yaml beside `params_path` names and the file lacks:
    the key, the stages, the file and the line to add. None when there is no dvc.yaml there."""
    dvc_yaml = params_path.parent / "dvc.yaml"
    if not dvc_yaml.exists():
        return []
    params = read_yaml(params_path)
    dag = read_yaml(dvc_yaml)
    if not isinstance(params, dict) or not isinstance(dag, dict):
        return []
    files: dict[str | None, Any] = {None: params}
    by_key: dict[tuple[str | None, str], list[str]] = {}
    for stage, file, key in named_keys(dag, params):
        if file not in files:
            other = params_path.parent / file
            files[file] = read_yaml(other) if other.exists() else {}
        if lookup(files[file], key) is _MISSING:
            by_key.setdefault((file, key), []).append(stage)
    problems = []
    for (file, key), stages in by_key.items():
        where = params_path if file is None else params_path.parent / file
        named = ", ".join(stages[:3]) + (f" and {len(stages) - 3} more" if len(stages) > 3 else "")
        fix = _line_to_add(key) if file is None else "add it to that file"
        problems.append(f"{key}: missing from {where}, and stage(s) {named} of {dvc_yaml} name it "
                        f"(DVC refuses them when `dvc repro` reaches them); {fix}")
    return problems
