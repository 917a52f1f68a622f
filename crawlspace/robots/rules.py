"""RFC 9309 rules of one robots.txt: parsing and matching, our own port of Google's reference parser.

Why not Protego (DESIGN.md §6 picked it): on /work/shared/conformance/robots_google.json Protego
0.7 fails 10 of the 72 cases outside `google_only` (RFC behaviour): a user-agent line with a
second word (`User-Agent: FOO BAR` must match the token `foo`), an unknown line inside a run of
user-agent lines (it must not end the run), and the percent-encoding cases. The parse and
match rules below follow google/robotstxt (robots.cc), the reference implementation of
RFC 9309, line by line where the RFC leaves room:

- lines end at LF, CR or CRLF; a UTF-8 byte order mark (or a prefix of one) at the start is
  skipped; `#` starts a comment; lines are cut at 16,663 bytes; the key/value separator is `:`
  or, when missing, a single run of whitespace (`disallow /`); keys are matched
  case-insensitively by prefix with Google's frequent typos (`dissallow`, `useragent`, ...).
- a group is a run of user-agent lines followed by rules; only allow/disallow lines end the
  run (sitemap, crawl-delay and unknown lines do not); rules before any user-agent line are
  ignored. `*` (possibly followed by more words) names the global group; any other value
  counts up to its first character outside `[A-Za-z0-9_-]` (`FOO BAR` and `Foo/1.0` name
  `foo`). Google stops at digits too; we keep them because real tokens have them (`MJ12bot`,
  `360Spider`) and cutting them would let a group for `crawlspace2` govern `crawlspace`.
- the groups naming the crawler's product token are merged and used alone, even when they
  hold no rule; otherwise the merged `*` groups; otherwise everything is allowed.
- longest pattern wins, Allow wins a tie, empty patterns are ignored; `*` matches any run,
  `$` at the end anchors; matching is against path, params and query of the URL as given
  (google/robotstxt GetPathParamsQuery), which the caller percent-encodes (our URLs are).
- patterns are escaped as Google does: bytes outside ASCII become %XX and the hex digits of
  existing escapes are upper-cased; `/robots.txt` is always allowed; only the first 500 KiB
  are parsed (RFC 9309 §2.5), and a line cut by that limit is dropped rather than shortened
  (a shortened Allow would allow more than the owner wrote).

Percent-encoding equivalence (RFC 9309 §2.2.2: escaped unreserved characters of the URI are
decoded before comparison): a rule matches the URL's path as given (hex upper-cased) or with its
unreserved escapes decoded, so `Allow: /~mak` covers `/%7Emak/`, while `Allow: /%62%61%7A` still
does not cover `/baz` (robots_google ID_Encoding#6). Our URLs arrive normalized (unreserved
decoded, crawlspace.urls.normalize), so a Disallow pattern also matches the normalized spelling
of itself (`Disallow: /%7Ejoe/` blocks `/~joe/`); Allow patterns get no such variant, so this
addition only disallows more.

The ASCII characters RFC 3986 does not allow in a URI at all (space, `"`, `<`, `>`, backslash,
`^`, a backquote, `{`, `|`, `}`) are written raw in robots.txt files but travel escaped
(`<` is always `%3C` on the wire), and RFC 9309 §2.2.2 leaves their matching open. Google's
parser compares them as written, so `Disallow: /a<d.html` never matches the `/a%3Cd.html` a
crawler requests and the owner's rule is silently lost. We escape them on both sides, in
patterns (after Google's own escaping, so its conformance cases are unchanged) and in the path
of the URL asked about, so either spelling of a rule matches either spelling of a URL, for
Allow and Disallow alike, as Protego does. A rule's priority is the length of that escaped
pattern, so two spellings of one rule are one rule. Reserved characters (`[`, `]`, `/`, `?`,
`;`, `=` ...) keep their escapes distinct: `%2F` is not `/`. Non-ASCII in a URL is left as given:
Google escapes it in patterns only and expects the caller to escape URLs (ID_Encoding#3), as
our normalizer does.

Measured: all 72 RFC cases of robots_google.json pass, and 72 of its 73 `google_only` cases
(Google's missing-colon, typo, line-length, index.html-is-its-directory and empty-URL rules
are implemented). The one that does not, on purpose:
- GoogleOnly_AcceptUserAgentUpToFirstSpace#2: the caller's agent `Foo Bar` is not a valid
  product token; Google then matches no specific group, we use its product token `Foo`
  (so a configured `crawlspace/0.1` still obeys the groups for `crawlspace`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309 §2.5: parse at least the first 500 KiB
MAX_LINE_BYTES = 2083 * 8 - 1  # google/robotstxt kMaxLineLen, less its terminating NUL
MAX_SITEMAPS = 1000

_LINE_END = re.compile(rb"\r\n|\r|\n")
_AGENT_TOKEN = re.compile(r"[A-Za-z0-9_-]*")
_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_PATH_START = re.compile(r"[/?;]")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_OUTSIDE_URIS = ' "<>\\^`{|}'  # neither reserved nor unreserved (RFC 3986 §2): one resource escaped or not
_ESCAPE_OUTSIDE = str.maketrans({ch: f"%{ord(ch):02X}" for ch in _OUTSIDE_URIS})
_NEEDS_ESCAPE = re.compile(f"[{re.escape(_OUTSIDE_URIS)}]")
_WHITESPACE = b" \t\n\v\f\r"
_BOM = b"\xef\xbb\xbf"

_USER_AGENT_KEYS = (b"user-agent", b"useragent", b"user agent")
_DISALLOW_KEYS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
_SITEMAP_KEYS = (b"sitemap", b"site-map")
_CRAWL_DELAY_KEYS = (b"crawl-delay", b"crawl delay", b"crawldelay")


def product_token(user_agent: str) -> str:
    """The product token of a user-agent value, lower-cased: `Foo/1.0 (+x)` and `FOO BAR` give `foo`."""
    match = _AGENT_TOKEN.match(user_agent.strip())
    return match.group(0).lower() if match else ""


def _escape_pattern(raw: bytes) -> str:
    """Google's MaybeEscapePattern: bytes outside ASCII as %XX, hex of existing escapes upper-cased."""
    if raw.isascii() and b"%" not in raw:
        return raw.decode("ascii")
    raw = _ESCAPE.sub(lambda m: b"%" + m.group(1).upper(), raw)
    return "".join(chr(byte) if byte < 0x80 else f"%{byte:02X}" for byte in raw)


def _escape_outside_uris(text: str) -> str:
    """`text` with the ASCII characters URIs cannot carry raw percent-encoded, the way they travel in the
    URLs a crawler requests."""
    return text.translate(_ESCAPE_OUTSIDE)


def _normalized_variant(pattern: str) -> str:
    """The spelling of an escaped pattern that normalized URLs use (unreserved escapes decoded)."""
    return _URL_ESCAPE.sub(_decode_unreserved, pattern)


def _upper_hex(match: re.Match[str]) -> str:
    return match.group(0).upper()


def _decode_unreserved(match: re.Match[str]) -> str:
    code = int(match.group(0)[1:], 16)
    return chr(code) if code in _UNRESERVED else match.group(0)


def _matches(path: str, pattern: str) -> bool:
    """Does `pattern` (with `*` wildcards and an optional final `$`) match the start of `path`?

    Greedy leftmost matching of the literal pieces between stars is exact for patterns whose
    only wildcard is `*`, and runs in C (str.find) instead of a backtracking regex, which a
    hostile pattern like `/*a*a*a*a*b` could make exponential.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    if "*" not in pattern:
        return path == pattern if anchored else path.startswith(pattern)
    pieces = pattern.split("*")
    first = pieces[0]
    if not path.startswith(first):
        return False
    position = len(first)
    for piece in pieces[1:-1]:
        if piece:
            found = path.find(piece, position)
            if found < 0:
                return False
            position = found + len(piece)
    last = pieces[-1]
    if anchored:
        return len(path) - len(last) >= position and path.endswith(last)
    return not last or path.find(last, position) >= 0


@dataclass(frozen=True, slots=True)
class Rule:
    allow: bool
    pattern: str  # escaped as Google does; its length is the rule's priority
    variant: str | None = None  # normalized spelling also matched (Disallow only)

    @property
    def priority(self) -> int:
        return len(self.pattern)

    def matches(self, path: str) -> bool:
        return _matches(path, self.pattern) or (self.variant is not None and _matches(path, self.variant))


def _make_rules(allow: bool, raw: bytes) -> list[Rule]:
    pattern = _escape_outside_uris(_escape_pattern(raw))
    if not pattern:
        return []  # an empty pattern matches with priority 0, which never decides (RFC 9309 §2.2.2)
    if allow:
        rules = [Rule(True, pattern)]
        slash = pattern.rfind("/")
        if slash >= 0 and pattern.startswith("/index.htm", slash):
            rules.append(Rule(True, pattern[: slash + 1] + "$"))  # Google: index.htm(l) is its directory
        return rules
    variant = _normalized_variant(pattern)
    return [Rule(False, pattern, variant if variant != pattern else None)]


def _common_prefix(first: str, second: str) -> str:
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return first[:length]


_Check = tuple[int, str, bool, Rule | None]  # rank in decision order, literal prefix, allow, full check


class _Group:
    """The merged rules of every group naming one agent, in decision order."""

    __slots__ = ("_buckets", "_short", "crawl_delay", "rules")

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.crawl_delay: float | None = None
        self._buckets: dict[str, list[_Check]] = {}
        self._short: list[_Check] = []

    def merge(self, rules: list[Rule], crawl_delay: float | None) -> None:
        self.rules.extend(rules)
        if crawl_delay is not None:
            self.crawl_delay = crawl_delay if self.crawl_delay is None else max(self.crawl_delay, crawl_delay)

    def seal(self) -> None:
        """Index the rules for matching.

        Rules are ordered longest pattern first, Allow before Disallow at equal length, so the
        first match decides. Each rule gets the literal prefix every match of it starts with (a
        plain prefix rule is nothing more: one str.startswith), and rules are bucketed by the
        first two characters of that prefix, so a path is only tried against the rules of its
        own bucket and the few whose prefix is shorter (`/`, `*`, `/*.php$`).
        """
        self.rules.sort(key=lambda rule: (-rule.priority, not rule.allow))
        buckets: dict[str, list[_Check]] = {}
        short: list[_Check] = []
        for rank, rule in enumerate(self.rules):
            spellings = [rule.pattern] if rule.variant is None else [rule.pattern, rule.variant]
            heads = [spelling.split("*", 1)[0].removesuffix("$") for spelling in spellings]
            prefix = heads[0] if len(heads) == 1 else _common_prefix(heads[0], heads[1])
            simple = rule.variant is None and "*" not in rule.pattern and not rule.pattern.endswith("$")
            check = (rank, prefix, rule.allow, None if simple else rule)
            if len(prefix) >= 2:
                buckets.setdefault(prefix[:2], []).append(check)
            else:
                short.append(check)
        self._buckets = buckets
        self._short = short

    def _first_match(self, path: str) -> tuple[int, bool] | None:
        """(rank, allow) of the highest-priority rule matching `path`, if any."""
        best: tuple[int, bool] | None = None
        for checks in (self._buckets.get(path[:2], ()), self._short):
            for rank, prefix, allow, rule in checks:
                if best is not None and rank > best[0]:
                    break
                if path.startswith(prefix) and (rule is None or rule.matches(path)):
                    best = (rank, allow)
                    break
        return best

    def allowed(self, path: str, decoded: str | None) -> bool:
        best = self._first_match(path)
        if decoded is not None:
            other = self._first_match(decoded)
            if other is not None and (best is None or other[0] < best[0]):
                best = other
        return True if best is None else best[1]


def path_params_query(url: str) -> str:
    """Path, params and query of a URL, as google/robotstxt's GetPathParamsQuery extracts them."""
    start = 2 if url.startswith("//") else 0
    early_path = _path_start(url, start)
    protocol_end = url.find("://", start)
    if protocol_end < 0 or 0 <= early_path < protocol_end:
        protocol_end = start
    else:
        protocol_end += 3
    path_start = _path_start(url, protocol_end)
    if path_start < 0:
        return "/"
    hash_at = url.find("#", start)
    if 0 <= hash_at < path_start:
        return "/"
    path = url[path_start : hash_at if hash_at >= 0 else len(url)]
    return path if path.startswith("/") else "/" + path


def _path_start(text: str, start: int) -> int:
    """Index of the first '/', '?' or ';' from `start`, or -1."""
    match = _PATH_START.search(text, start)
    return -1 if match is None else match.start()


class RobotsRules:
    """What one robots.txt allows. `allow_all()` and `disallow_all()` stand for fetch outcomes."""

    __slots__ = ("_by_agent", "_default", "_global", "_specific", "directives", "sitemaps", "unknown_directives")

    def __init__(
        self,
        specific: dict[str, _Group] | None = None,
        global_group: _Group | None = None,
        sitemaps: list[str] | None = None,
        *,
        default: bool = True,
        directives: int = 0,
        unknown_directives: int = 0,
    ) -> None:
        self._specific = specific or {}
        self._global = global_group
        self._by_agent: dict[str, _Group | None] = {}  # the caller's agent strings, resolved once
        self._default = default
        self.sitemaps: list[str] = sitemaps or []
        self.directives = directives
        self.unknown_directives = unknown_directives

    @classmethod
    def allow_all(cls) -> RobotsRules:
        return cls(default=True)

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        return cls(default=False)

    def _group(self, user_agent: str) -> _Group | None:
        try:
            return self._by_agent[user_agent]
        except KeyError:
            group = self._by_agent[user_agent] = self._specific.get(product_token(user_agent), self._global)
            return group

    def allowed(self, url: str, user_agent: str) -> bool:
        """May `user_agent` (a product token, or a User-Agent value starting with one) fetch `url`?"""
        path = path_params_query(url)
        if path == "/robots.txt":
            return True  # RFC 9309 §2.2.2: implicitly allowed
        if not self._default:
            return False
        group = self._group(user_agent)
        if group is None:
            return True
        decoded = None
        if _NEEDS_ESCAPE.search(path):
            path = _escape_outside_uris(path)
        if "%" in path:
            path = _URL_ESCAPE.sub(_upper_hex, path)
            decoded = _URL_ESCAPE.sub(_decode_unreserved, path)
            if decoded == path:
                decoded = None
        return group.allowed(path, decoded)

    def rules_for(self, user_agent: str) -> list[Rule]:
        """The rules of the group that applies to `user_agent`, in decision order (the first that
        matches a path decides); [] when no group names it (everything allowed, unless disallow_all)."""
        group = self._group(user_agent)
        return [] if group is None else list(group.rules)

    def crawl_delay(self, user_agent: str) -> float | None:
        """Crawl-delay (seconds) of the group that applies to `user_agent`, if it names one."""
        group = self._group(user_agent)
        return None if group is None else group.crawl_delay

    @property
    def allows_everything(self) -> bool:
        return self._default and self._global is None and not self._specific

    def __repr__(self) -> str:
        if not self._default:
            return "RobotsRules(disallow all)"
        if self.allows_everything:
            return f"RobotsRules(allow all, {len(self.sitemaps)} sitemaps)"
        agents = sorted(self._specific) + (["*"] if self._global is not None else [])
        return f"RobotsRules(groups for {agents}, {len(self.sitemaps)} sitemaps)"


def _key_value(line: bytes) -> tuple[bytes, bytes] | None:
    """google/robotstxt GetKeyAndValueFrom: `key: value`, or `key value` when the colon is missing."""
    comment = line.find(b"#")
    if comment >= 0:
        line = line[:comment]
    line = line.strip(_WHITESPACE)
    sep = line.find(b":")
    if sep < 0:
        parts = line.split(None, 1)
        if len(parts) != 2 or len(parts[1].split()) != 1:
            return None
        key, value = parts
    else:
        key, value = line[:sep].strip(_WHITESPACE), line[sep + 1 :].strip(_WHITESPACE)
    if not key:
        return None
    return key.lower(), value


def _crawl_delay(value: bytes) -> float | None:
    try:
        delay = float(value.decode("ascii", "replace"))
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


@dataclass(slots=True)
class _RawGroup:
    agents: list[str]
    rules: list[Rule]
    crawl_delay: float | None = None


def _skip_bom(body: bytes) -> bytes:
    for length in (3, 2, 1):
        if body[:length] == _BOM[:length]:
            return body[length:]
    return body


def parse(body: bytes) -> RobotsRules:
    """Rules of a robots.txt body. Never raises: anything unparseable is an unknown line."""
    truncated = len(body) > MAX_ROBOTS_BYTES
    body = _skip_bom(body[:MAX_ROBOTS_BYTES])
    lines = _LINE_END.split(body)
    if truncated and len(lines) > 1:
        lines.pop()  # cut mid-line by the size limit
    groups: list[_RawGroup] = []
    current: _RawGroup | None = None
    in_rules = False
    sitemaps: list[str] = []
    directives = unknown = 0
    for line in lines:
        pair = _key_value(line[:MAX_LINE_BYTES])
        if pair is None:
            continue
        key, value = pair
        if key.startswith(_USER_AGENT_KEYS):
            directives += 1
            if current is None or in_rules:
                current = _RawGroup([], [])
                groups.append(current)
                in_rules = False
            agent = value.decode("utf-8", "replace")
            if agent.startswith("*") and (len(agent) == 1 or agent[1].isspace()):
                current.agents.append("*")
            else:
                token = product_token(agent)
                if token:
                    current.agents.append(token)
        elif key.startswith(b"allow") or key.startswith(_DISALLOW_KEYS):
            directives += 1
            if current is not None:
                in_rules = True
                current.rules.extend(_make_rules(key.startswith(b"allow"), value))
        elif key.startswith(_SITEMAP_KEYS):
            directives += 1
            sitemap = value.decode("utf-8", "replace")
            if sitemap and len(sitemaps) < MAX_SITEMAPS and sitemap not in sitemaps:
                sitemaps.append(sitemap)
        elif key.startswith(_CRAWL_DELAY_KEYS):
            directives += 1
            delay = _crawl_delay(value)
            if current is not None and delay is not None:
                current.crawl_delay = delay if current.crawl_delay is None else max(current.crawl_delay, delay)
        else:
            unknown += 1
    specific: dict[str, _Group] = {}
    global_group: _Group | None = None
    for group in groups:
        for agent in group.agents:
            if agent == "*":
                if global_group is None:
                    global_group = _Group()
                target = global_group
            else:
                target = specific.setdefault(agent, _Group())
            target.merge(group.rules, group.crawl_delay)
    for merged in [*specific.values(), *([global_group] if global_group else [])]:
        merged.seal()
    return RobotsRules(specific, global_group, sitemaps, directives=directives, unknown_directives=unknown)
