"""docs/params.md from the params models: every key, its type, default and docstring."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from pydantic_core import PydanticUndefined

from delegation_lab.params.root import Params
from delegation_lab.params.model import ParamsModel

HEADER = """# params.yaml reference

Generated from `src/delegation_lab/params/root.py` by `dlab params docs` (a test keeps it current).
`<name>` stands for a key you choose (a solver name). Types follow Python notation; `null` in YAML
is `None`. Unknown keys are errors: every model is strict and closed.

| key | type | default | description |
|---|---|---|---|
"""


def _model_in(annotation: Any) -> tuple[type[ParamsModel] | None, str]:
    """The ParamsModel inside an annotation (direct, Optional, or dict value) and the key suffix."""
    if isinstance(annotation, type) and issubclass(annotation, ParamsModel):
        return annotation, ""
    origin = get_origin(annotation)
    if origin is dict:
        model, suffix = _model_in(get_args(annotation)[1])
        return model, ".<name>" + suffix
    for arg in get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, ParamsModel):
            return arg, ""
    return None, ""


def _type_name(annotation: Any) -> str:
    text = repr(annotation) if get_origin(annotation) else getattr(annotation, "__name__", repr(annotation))
    return text.replace("typing.", "").replace("NoneType", "None").replace("delegation_lab.", "")


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default if field.default is not PydanticUndefined else field.default_factory()
    if isinstance(value, ParamsModel):
        return "(section)"
    return f"`{value!r}`" if value is not None else "`null`"


def rows(model: type[ParamsModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        sub, suffix = _model_in(field.annotation)
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        type_name = _type_name(field.annotation).replace("|", "\\|")
        out.append(f"| `{key}` | {type_name} | {_default(field)} | {desc} |")
        if sub is not None:
            out.extend(rows(sub, f"{key}{suffix}."))
    return out


def undocumented(model: type[ParamsModel] = Params, prefix: str = "") -> list[str]:
    missing = []
    for name, field in model.model_fields.items():
        if not (field.description or "").strip():
            missing.append(prefix + name)
        sub, suffix = _model_in(field.annotation)
        if sub is not None:
            missing.extend(undocumented(sub, f"{prefix}{name}{suffix}."))
    return missing


def render_params_docs() -> str:
    return HEADER + "\n".join(rows(Params)) + "\n"
