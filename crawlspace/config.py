"""Typed, validated, immutable crawl configuration.

One flat set of keys, each with its type, bounds and documentation in one place, so that a TOML
file, the CLI and the Python API all go through the same validation, and the configuration
reference (docs) is generated from this class and cannot drift. A misspelled key is an error that
names the closest valid key: silent string settings are what we do not copy from Scrapy.
"""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any

import msgspec

DEFAULT_ROBOTS_AGENT = "crawlspace"
DEFAULT_USER_AGENT = "crawlspace/0.1 (+https://github.com/crawlspace/crawlspace; crawler)"


class ConfigError(ValueError):
    """A configuration that cannot be used, with the reason in one line."""


def _doc(text: str, **bounds: Any) -> msgspec.Meta:
    return msgspec.Meta(description=text, **bounds)


PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class CrawlConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Everything a crawl can be told. Keys are the same in TOML, in Python and (with dashes) on the CLI."""

    # identity
    user_agent: Annotated[str, _doc("User-Agent header sent with every request: product token and contact URL.")] = (
        DEFAULT_USER_AGENT
    )
    robots_agent: Annotated[
        str,
        _doc("Product token matched against robots.txt User-agent groups (RFC 9309). Defaults to crawlspace's own."),
    ] = DEFAULT_ROBOTS_AGENT
    from_header: Annotated[
        str | None, _doc("Value of the From header (an e-mail address to contact the operator).")
    ] = None

    # termination
    max_pages: Annotated[PositiveInt | None, _doc("Stop after this many fetches (None: no limit).")] = None
    max_seconds: Annotated[PositiveFloat | None, _doc("Stop after this many seconds of crawling (None: no limit).")] = (
        None
    )
    max_bytes: Annotated[
        PositiveInt | None, _doc("Stop after this many body bytes were downloaded (None: no limit).")
    ] = None

    # concurrency and politeness
    concurrency: Annotated[int, _doc("Fetches in flight at once across all hosts.", ge=1, le=100_000)] = 64
    min_delay: Annotated[
        float,
        _doc("Least seconds between two requests to one host; robots.txt Crawl-delay can only lengthen it.", ge=0),
    ] = 1.0
    delay_factor: Annotated[
        float, _doc("Mercator's k: the next request to a host waits k times the last fetch's duration.", ge=0)
    ] = 10.0
    max_delay: Annotated[float, _doc("Upper bound in seconds of the delay between requests to one host.", ge=0)] = 60.0
    max_conn_per_host: Annotated[int, _doc("Requests in flight at once to one host.", ge=1, le=64)] = 1

    # network
    resolve: Annotated[
        dict[str, str], _doc("Fixed host name to IP address mappings, consulted before the hosts file and DNS.")
    ] = {}
    hosts_file: Annotated[str | None, _doc("A hosts file (format of /etc/hosts) consulted before /etc/hosts.")] = None
    allow_private_addresses: Annotated[
        bool, _doc("Allow fetching from loopback, private and link-local addresses (refused by default: SSRF).")
    ] = False
    connect_timeout: Annotated[float, _doc("Seconds to establish a TCP (and TLS) connection.", gt=0)] = 10.0
    read_timeout: Annotated[float, _doc("Seconds without receiving a byte before a fetch is abandoned.", gt=0)] = 30.0
    total_timeout: Annotated[float, _doc("Seconds a whole fetch may take, body included.", gt=0)] = 60.0
    max_body_bytes: Annotated[int, _doc("Bodies are truncated (and marked so) beyond this many bytes.", ge=1024)] = (
        10 * 1024 * 1024
    )

    # robots.txt
    robots_ttl: Annotated[float, _doc("Seconds a fetched robots.txt stays valid in the per-host cache.", gt=0)] = (
        86400.0
    )

    # seen sets
    seen_cache_bytes: Annotated[
        int,
        _doc(
            "Memory for the cache of recent and popular URL fingerprints in front of the disk-resident URL set "
            "(8.25 bytes per fingerprint); 0 disables it.",
            ge=0,
            le=1 << 40,
        ),
    ] = 64 << 20
    seen_buffer_urls: Annotated[
        int,
        _doc(
            "New URLs held back and then checked in one batch against the disk URL set; they reach the frontier "
            "after the check: when the buffer is full, when the frontier runs low, or at a checkpoint.",
            ge=1,
            le=100_000_000,
        ),
    ] = 65_536
    near_duplicate_threshold: Annotated[
        float,
        _doc("Estimated Jaccard similarity of word 4-shingles from which a page is a near-duplicate.", gt=0, le=1),
    ] = 0.9
    store_near_duplicates: Annotated[
        bool,
        _doc(
            "Write near-duplicate pages to the WARC files; when false only the duplicate-of relation is kept "
            "(DIR/seen/content). Exact duplicates are always written as revisit records."
        ),
    ] = True

    # scope
    max_depth: Annotated[
        NonNegativeInt | None, _doc("Links further than this many hops from a seed are not followed.")
    ] = None
    max_redirects: Annotated[int, _doc("Redirect hops followed from one original URL.", ge=0)] = 10

    # output
    warc_max_bytes: Annotated[
        int, _doc("A WARC file is closed and a new one started beyond this size.", ge=1 << 16)
    ] = 1 << 30
    progress_interval: Annotated[float, _doc("Seconds between progress reports.", gt=0)] = 2.0

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self), include_extras=True)
        for name in self.__struct_fields__:
            try:
                msgspec.convert(getattr(self, name), hints[name], strict=False)
            except msgspec.ValidationError as exc:
                raise ConfigError(f"{name}: {_clean(str(exc))}") from None
        if self.max_delay < self.min_delay:
            raise ConfigError(f"max_delay ({self.max_delay}) is less than min_delay ({self.min_delay})")

    @classmethod
    def from_mapping(cls, values: dict[str, Any], *, source: str = "config") -> CrawlConfig:
        unknown = [key for key in values if key not in cls.__struct_fields__]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, cls.__struct_fields__, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{source}: unknown key {key!r}{hint}")
        try:
            return msgspec.convert(values, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"{source}: {_clean(str(exc))}") from None

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> CrawlConfig:
        """Read a TOML file (if given) and apply keyword overrides on top of it."""
        values: dict[str, Any] = {}
        if path is not None:
            try:
                with open(path, "rb") as handle:
                    values = tomllib.load(handle)
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"invalid TOML in {path}: {exc}") from None
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls.from_mapping(values, source=str(path) if path else "config")

    def replace(self, **changes: Any) -> CrawlConfig:
        return msgspec.structs.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]

    def differences(self, other: CrawlConfig) -> dict[str, tuple[Any, Any]]:
        """Keys whose values differ, as (self's, other's): reported when a resumed crawl changes its config."""
        return {
            name: (getattr(self, name), getattr(other, name))
            for name in self.__struct_fields__
            if getattr(self, name) != getattr(other, name)
        }


def _clean(message: str) -> str:
    return message.replace(" - at `$`", "").replace("`$.", "`")


def reference_markdown() -> str:
    """The configuration reference, generated from CrawlConfig so that it cannot drift from the code."""
    info = msgspec.inspect.type_info(CrawlConfig)
    assert isinstance(info, msgspec.inspect.StructType)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for field_info in info.fields:
        kind = field_info.type
        description = ""
        if isinstance(kind, msgspec.inspect.Metadata):
            description = (kind.extra_json_schema or {}).get("description", "")
            kind = kind.type
        default = field_info.default
        if default is msgspec.NODEFAULT and field_info.default_factory is not msgspec.NODEFAULT:
            default = field_info.default_factory()
        shown = "none" if default is None else _json(default)
        rows.append(f"| `{field_info.name}` | {_type_name(kind)} | `{shown}` | {description} |")
    return "\n".join(rows) + "\n"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _type_name(kind: msgspec.inspect.Type) -> str:
    if isinstance(kind, msgspec.inspect.Metadata):
        return _type_name(kind.type)
    if isinstance(kind, msgspec.inspect.UnionType):
        return " or ".join(_type_name(member) for member in kind.types)
    names = {
        msgspec.inspect.IntType: "integer",
        msgspec.inspect.FloatType: "number",
        msgspec.inspect.StrType: "string",
        msgspec.inspect.BoolType: "boolean",
        msgspec.inspect.NoneType: "none",
        msgspec.inspect.DictType: "table",
        msgspec.inspect.ListType: "list",
    }
    bounds = []
    for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        value = getattr(kind, attr, None)
        if value is not None:
            bounds.append(f"{symbol} {value}")
    return names.get(type(kind), type(kind).__name__) + (f" ({', '.join(bounds)})" if bounds else "")
