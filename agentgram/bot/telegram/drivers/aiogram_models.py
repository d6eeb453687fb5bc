"""aiogram's models, built when first used instead of all at import.

Importing aiogram 3 builds the pydantic schema of every one of its ~450 Telegram types: the
``aiogram.types`` package ends by calling ``model_rebuild(_types_namespace=…)`` on each. Here that
took about 7.5 s of CPU, more than the rest of agentgram's start-up together, for a bot that uses
a few dozen of those types (``bench/README.md``; every aiogram process the tests start paid it).

Imported before aiogram (the aiogram driver's first import), :func:`import_aiogram` makes those
calls record the namespace on the model instead (``__pydantic_parent_namespace__``, where
pydantic's own rebuild looks for names), so pydantic builds each model on its first use, resolving
the same forward references to the same schema. The API methods (``aiogram.methods``), which
aiogram leaves for pydantic to build on first use, get that namespace too. ``model_rebuild`` is
restored as soon as aiogram is imported; a process that imported aiogram before is left as it is.
A model built inside another (a method's ``Response[Message]``) resolves names in its own
module, where aiogram imports them only for type checkers: those modules get the names too.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from pydantic import BaseModel


def import_aiogram() -> None:
    if "aiogram" in sys.modules:  # imported already, the ordinary way
        return
    original = BaseModel.model_rebuild.__func__  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {}
    modules: set[str] = set()

    def record(
        cls: type[BaseModel],
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: dict[str, Any] | None = None,
    ) -> bool | None:
        if _types_namespace is None or force or cls.__pydantic_complete__:
            return original(  # type: ignore[no-any-return]
                cls,
                force=force,
                raise_errors=raise_errors,
                _parent_namespace_depth=_parent_namespace_depth,
                _types_namespace=_types_namespace,
            )
        namespace.update(_types_namespace)
        cls.__pydantic_parent_namespace__ = namespace
        modules.add(cls.__module__)
        return None

    BaseModel.model_rebuild = classmethod(record)  # type: ignore[method-assign,assignment]
    try:
        importlib.import_module("aiogram")
        methods = importlib.import_module("aiogram.methods")
    finally:
        BaseModel.model_rebuild = classmethod(original)  # type: ignore[method-assign,assignment]
    for name in methods.__all__:
        model = getattr(methods, name)
        if isinstance(model, type) and issubclass(model, BaseModel) and not model.__pydantic_complete__:
            model.__pydantic_parent_namespace__ = namespace
            modules.add(model.__module__)
    for module in modules:  # a model built inside another (``Response[Message]``) reads its module's
        for key, value in namespace.items():  # names: those aiogram imports only for type checkers
            vars(sys.modules[module]).setdefault(key, value)


import_aiogram()
