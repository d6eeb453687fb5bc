"""The models a session can run on: ``llm.model`` (named ``default``) and ``llm.models``.

:class:`ModelRegistry` owns one :class:`~runtime.llm.types.LLMClient` per
named model. The default's client is the one the runtime was given (the
OpenAI client, or a test's scripted one); every other model's is made on first
use from the ``llm`` section with that entry's ``model``, ``base_url`` and
``api_key`` (each falling back to the section's own) and no fallback models —
a fallback is a property of the default — and closed by :meth:`aclose`.

A name the registry does not know (a model removed from config.yml since a
session chose it) resolves to the default: a session never fails for it.

What a session used is counted from its stored rounds (:class:`TokenUsage`,
one per wire model); :func:`session_cost` prices them with the configured
``prices`` (per million tokens) of the named model that sends that wire model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentgram.runtime.infra.config import DEFAULT_MODEL_NAME, LLMSettings, ModelSettings, PriceSettings
from agentgram.runtime.infra.llm.types import LLMClient

ClientFactory = Callable[[LLMSettings], LLMClient]
"""Makes the client of one named model from its effective ``llm`` settings."""


@dataclass(slots=True, frozen=True)
class Price:
    """Per million tokens."""

    input: float
    output: float

    @classmethod
    def of(cls, settings: PriceSettings | None) -> Price | None:
        return None if settings is None else cls(settings.input, settings.output)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


@dataclass(slots=True, frozen=True)
class ModelInfo:
    """One model as ``/model`` lists it."""

    name: str
    model: str
    base_url: str
    capabilities: tuple[str, ...] = ()
    price: Price | None = None


@dataclass(slots=True, frozen=True)
class TokenUsage:
    """What a session's rounds on one wire model used (``model`` as the endpoint named it)."""

    model: str
    rounds: int
    input_tokens: int
    output_tokens: int


@dataclass(slots=True, frozen=True)
class ModelCost:
    usage: TokenUsage
    cost: float | None  # None: no prices configured for this model


@dataclass(slots=True, frozen=True)
class SessionCost:
    """A session's usage per model, and the cost where prices are known."""

    lines: tuple[ModelCost, ...]

    @property
    def input_tokens(self) -> int:
        return sum(line.usage.input_tokens for line in self.lines)

    @property
    def output_tokens(self) -> int:
        return sum(line.usage.output_tokens for line in self.lines)

    @property
    def rounds(self) -> int:
        return sum(line.usage.rounds for line in self.lines)

    @property
    def cost(self) -> float | None:
        """The total over the priced lines; ``None`` when no line has a price."""
        priced = [line.cost for line in self.lines if line.cost is not None]
        return sum(priced) if priced else None

    @property
    def fully_priced(self) -> bool:
        return all(line.cost is not None for line in self.lines)


def _default_factory(settings: LLMSettings) -> LLMClient:
    from agentgram.runtime.infra.llm.openai_client import OpenAIClient

    return OpenAIClient(settings)


def _info(settings: LLMSettings, entry: ModelSettings) -> ModelInfo:
    return ModelInfo(
        name=entry.name,
        model=entry.model,
        base_url=entry.base_url or settings.base_url,
        capabilities=tuple(entry.capabilities),
        price=Price.of(entry.prices),
    )


class ModelRegistry:
    """Named models and their clients; the default's client is the runtime's own."""

    def __init__(
        self, settings: LLMSettings, default: LLMClient, *, factory: ClientFactory | None = None
    ) -> None:
        self._settings = settings
        self._factory = factory or _default_factory
        default_info = ModelInfo(
            DEFAULT_MODEL_NAME, settings.model, settings.base_url, (), Price.of(settings.prices)
        )
        self._infos = {default_info.name: default_info} | {
            m.name: _info(settings, m) for m in settings.models
        }
        self._entries = {m.name: m for m in settings.models}
        self._clients: dict[str, LLMClient] = {DEFAULT_MODEL_NAME: default}

    @property
    def infos(self) -> tuple[ModelInfo, ...]:
        """Every model, the default first, then in config order."""
        return tuple(self._infos.values())

    @property
    def several(self) -> bool:
        """More than the default is configured (otherwise no session needs a lookup)."""
        return len(self._infos) > 1

    def info(self, name: str | None) -> ModelInfo:
        """The named model, or the default for ``None`` or a name no longer configured."""
        return self._infos.get(name or DEFAULT_MODEL_NAME) or self._infos[DEFAULT_MODEL_NAME]

    def knows(self, name: str) -> bool:
        return name in self._infos

    def client(self, name: str | None) -> LLMClient:
        """The client of :meth:`info`'s model, made on first use."""
        info = self.info(name)
        client = self._clients.get(info.name)
        if client is None:
            client = self._factory(self._effective(self._entries[info.name]))
            self._clients[info.name] = client
        return client

    def _effective(self, entry: ModelSettings) -> LLMSettings:
        update: dict[str, object] = {"model": entry.model, "fallback_models": [], "models": []}
        if entry.base_url is not None:
            update["base_url"] = entry.base_url
        if entry.api_key is not None:
            update["api_key"] = entry.api_key
        return self._settings.model_copy(update=update)

    def price(self, wire_model: str, preferred: str | None = None) -> Price | None:
        """The prices of the model that sends ``wire_model``; ``preferred`` (the session's choice)
        wins when several named models send the same one."""
        matching = [info for info in self._infos.values() if info.model == wire_model]
        matching.sort(key=lambda info: info.name != preferred)
        return next((info.price for info in matching if info.price is not None), None)

    async def aclose(self) -> None:
        """Close the clients made here (the default's belongs to whoever gave it)."""
        made = [client for name, client in self._clients.items() if name != DEFAULT_MODEL_NAME]
        self._clients = {DEFAULT_MODEL_NAME: self._clients[DEFAULT_MODEL_NAME]}
        for client in made:
            closer = getattr(client, "aclose", None)
            if closer is not None:
                await closer()


def session_cost(registry: ModelRegistry, usage: Sequence[TokenUsage], chosen: str | None) -> SessionCost:
    """Price each wire model's usage (see :meth:`ModelRegistry.price`)."""
    lines = []
    for used in usage:
        price = registry.price(used.model, chosen)
        cost = price.cost(used.input_tokens, used.output_tokens) if price is not None else None
        lines.append(ModelCost(used, cost))
    return SessionCost(tuple(lines))


__all__ = [
    "ClientFactory",
    "ModelCost",
    "ModelInfo",
    "ModelRegistry",
    "Price",
    "SessionCost",
    "TokenUsage",
    "session_cost",
]
