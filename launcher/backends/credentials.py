"""Credentials among the user's files, by name and by content: the one detector every place that ships files calls.

Contract: ``NAME_PATTERNS`` (``.dockerignore`` syntax) name credential files by name (``by_name``
gives the reason). ``detect(path)`` / ``what_is(data, whole)`` say what kind of credential a regular
file holds by content, or None, reading at most ``PREFIX_BYTES``, never following a link or blocking
on a FIFO; a binary file counts as none; ``OSError`` propagates. The reason names the rule, never
the secret. Rules: tfcluster's ``CONTENT_RULES`` (structured files, a kubeconfig, a service-account
key, Docker ``auths``, by parsing them whole as JSON or YAML, whatever their layout), then the
shape-specific ``detect-secrets`` plugins (``plugins()``), imported lazily. Why these rules:
docs/architecture.md (Decisions).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import re2
import yaml

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin

#: Credentials by name, in ``.dockerignore`` syntax, at any depth.
NAME_PATTERNS = (
    "**/.env*", "**/*.pem", "**/*.key", "**/*.p12", "**/*.pfx", "**/*.ppk",
    "**/id_rsa*", "**/id_dsa*", "**/id_ecdsa*", "**/id_ed25519*",
    "**/.ssh", "**/.aws", "**/.azure", "**/.gcloud", "**/.config/gcloud", "**/.kube", "**/.docker/config.json",
    "**/.netrc", "**/_netrc", "**/.git-credentials", "**/.pypirc", "**/.npmrc", "**/.pgpass", "**/.htpasswd",
    "**/.vault-token", "**/*credentials*.json", "**/*.tfstate*",
)
#: How much of a file the content rules read (a key, a kubeconfig, a service-account key fit many times over).
PREFIX_BYTES = 64 << 10


def by_name(pattern: str) -> str:
    """The reason shown for a file or directory left out by its name: the pattern that matched."""
    return f"name matches {pattern}"


@dataclass(frozen=True)
class ContentRule:
    """A credential recognised by content: ``what`` it is (shown) when ``matches`` the decoded prefix (and whether
    that is the whole file). The test runs only when one of ``keywords`` (lower case) occurs in the file, in any
    case, none meaning always: one cheap scan keeps the regular expressions off most files, as gitleaks' keywords do."""

    what: str
    matches: Callable[[str, bool], bool]
    keywords: tuple[str, ...] = ()


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    return options


def _search(*patterns: str) -> Callable[[str, bool], bool]:
    """A test that holds when every one of ``patterns`` (RE2: linear time, whatever the file) is found."""
    compiled = [re2.compile(f"(?m){pattern}", _options()) for pattern in patterns]
    return lambda text, whole: all(regex.search(text) is not None for regex in compiled)


def _every_line(pattern: str) -> Callable[[str, bool], bool]:
    """A test that holds when every line that is not blank nor a ``#`` comment matches ``pattern`` whole (one line
    at least); a cut prefix's last line, maybe cut too, is not judged. The first other line ends the test."""
    line = re2.compile(pattern, _options())

    def matches(text: str, whole: bool) -> bool:
        found = False
        for entry in _lines(text if whole else text[:text.rfind("\n") + 1]):
            entry = entry.strip()
            if not entry or entry.startswith("#"):
                continue
            if line.fullmatch(entry) is None:
                return False
            found = True
        return found

    return matches


def _documents(text: str) -> Iterator[Any]:
    """The documents of a whole JSON or YAML file (JSON first: YAML refuses a JSON file's tabs), none if it is
    neither. Bounded by the file (``PREFIX_BYTES`` at most): the safe loader makes no object but plain data, an
    alias is one shared object (never expanded), and nesting too deep to build is no document (libyaml refuses
    over 1000 levels)."""
    try:
        yield json.loads(text)
        return
    except (ValueError, RecursionError):
        pass
    try:
        yield from yaml.load_all(text, Loader=_YAML_LOADER)
    except (yaml.YAMLError, RecursionError):
        return


#: libyaml's safe loader: ~40 times as fast as PyYAML's own (0.13 s for a 64 KiB YAML file), which stands in
#: where PyYAML was built without libyaml.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parsed(test: Callable[[dict[Any, Any]], bool]) -> Callable[[str, bool], bool]:
    """A test that holds when a document of the whole file is a mapping that passes ``test`` (a cut prefix is
    not parsed). ``test`` looks up fixed fields, never walks the document, so an alias-built one costs no more."""
    return lambda text, whole: whole and any(isinstance(doc, dict) and test(doc) for doc in _documents(text))


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _filled(value: Any) -> bool:
    """Whether ``value`` is a scalar with something in it (a secret's value, not an empty or nested field)."""
    return isinstance(value, str | bytes | int | float) and str(value).strip() != ""


#: The fields of a kubeconfig user (and of its ``auth-provider``'s ``config``) that are secrets themselves.
_KUBECONFIG_SECRETS = ("client-key-data", "token", "password", "access-token", "refresh-token", "id-token",
                       "client-secret")


def _kubeconfig_with_secrets(doc: dict[Any, Any]) -> bool:
    """A kubeconfig (``kind: Config``, or no kind) one of whose ``users`` holds a key, a token or a password."""
    if doc.get("kind", "Config") != "Config" or not isinstance(doc.get("users"), list):
        return False
    for entry in doc["users"]:
        user = _mapping(_mapping(entry).get("user"))
        fields = user | _mapping(_mapping(user.get("auth-provider")).get("config"))
        if any(_filled(fields.get(name)) for name in _KUBECONFIG_SECRETS):
            return True
    return False


def _service_account_key(doc: dict[Any, Any]) -> bool:
    key = doc.get("private_key")
    return doc.get("type") == "service_account" and isinstance(key, str) and key.lstrip().startswith("-----BEGIN")


def _registry_logins(doc: dict[Any, Any]) -> bool:
    """Docker's (or Podman's) ``auths``: a registry with a login or an identity token in the file."""
    return any(_filled(_mapping(login).get(name)) for login in _mapping(doc.get("auths")).values()
               for name in ("auth", "identitytoken", "registrytoken"))


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text``, one at a time (a test that stops at the first line splits no more)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


#: A field of a ``.pgpass`` line (``\:`` and ``\\`` escaped); the password, the last, may hold blanks.
_PGPASS_FIELD, _PGPASS_PASSWORD = r"(?:[^:\\\s]|\\.)+", r"(?:[^:\\]|\\.)+"
_HASH_CHARS = "[./0-9A-Za-z]"
#: A whole file that is one token of Vault before 1.10 (``s.`` and 24 characters), as ``~/.vault-token`` holds.
_LEGACY_VAULT_TOKEN = re2.compile(r"\s*s\.[A-Za-z0-9]{24}\s*", _options())

CONTENT_RULES = (
    ContentRule("a cloud service-account key", _parsed(_service_account_key), ("service_account",)),
    ContentRule("a kubeconfig with a client key, token or password", _parsed(_kubeconfig_with_secrets), ("users",)),
    ContentRule("a container registry login, Docker auths", _parsed(_registry_logins), ("auths",)),
    ContentRule("an encrypted PKCS#8 private key", _search(r"-{5}BEGIN ENCRYPTED PRIVATE KEY-{5}"), ("encrypted private key",)),
    ContentRule("a Vault token", _search(r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"), ("hvs.", "hvb.", "hvr.")),
    ContentRule("a legacy Vault token",
                lambda text, whole: whole and len(text) < 64 and _LEGACY_VAULT_TOKEN.fullmatch(text) is not None),
    ContentRule("PostgreSQL passwords, .pgpass lines",
                _every_line(rf"{_PGPASS_FIELD}:(?:\*|\d+):{_PGPASS_FIELD}:{_PGPASS_FIELD}:{_PGPASS_PASSWORD}")),
    ContentRule("password hashes, .htpasswd lines",
                _every_line(rf"[^:\s]+:(?:\$apr1\${_HASH_CHARS}{{0,8}}\${_HASH_CHARS}{{22}}|\$2[abxy]?\$\d\d\${_HASH_CHARS}{{53}}"
                            rf"|\{{SHA\}}[A-Za-z0-9+/]{{27}}=|\$[156]\$[^$:\s]{{1,16}}\${_HASH_CHARS}{{22,86}})")),
)

#: The ``detect-secrets`` plugins used, each with the keywords (lower case) one of which every pattern of its
#: ``denylist`` needs, as of detect-secrets 1.5 (``tests/unit/backends/test_credentials.py`` pins those patterns).
PLUGIN_KEYWORDS = {
    "PrivateKeyDetector": ("private key", "putty-user-key-file-2"),
    "AWSKeyDetector": ("a3t", "abia", "acca", "akia", "asia", "aws"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
                            "glagent-", "gloas-"),
    "JwtTokenDetector": ("eyj",),
    "NpmDetector": ("/:_authtoken=",),
    "OpenAIDetector": ("t3blbkfj",),
    "PypiTokenDetector": ("pypi-age",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
}


@functools.cache
def plugins() -> tuple[tuple[BasePlugin, tuple[str, ...]], ...]:
    """The ``detect-secrets`` plugins used, each with its keywords (imported here, on first use)."""
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector

    classes: tuple[type[BasePlugin], ...] = (
        PrivateKeyDetector, AWSKeyDetector, AzureStorageKeyDetector, GitHubTokenDetector, GitLabTokenDetector,
        JwtTokenDetector, NpmDetector, OpenAIDetector, PypiTokenDetector, SendGridDetector, SlackDetector,
        SquareOAuthDetector, StripeDetector)
    return tuple((cls(), PLUGIN_KEYWORDS[cls.__name__]) for cls in classes)


def _keyword_scan() -> Callable[[bytes], list[bytes]]:
    """One pass over a file's bytes finding every rule's and plugin's keywords (RE2, any case)."""
    options = _options()
    options.case_sensitive = False
    words = {word for rule in CONTENT_RULES for word in rule.keywords} | {w for ws in PLUGIN_KEYWORDS.values() for w in ws}
    return re2.compile("|".join(re2.escape(word) for word in sorted(words)).encode(), options).findall


_KEYWORDS = _keyword_scan()


def what_is(data: bytes, whole: bool) -> str | None:
    """What credential ``data`` (a file's first bytes; ``whole``: all of it) holds by content, or None."""
    if b"\0" in data and not whole:
        return None  # a long binary: its first bytes are a header, not a credential
    found = {word.decode().lower() for word in _KEYWORDS(data)}
    text = data.decode(errors="replace")
    for rule in CONTENT_RULES:
        if (not rule.keywords or found.intersection(rule.keywords)) and rule.matches(text, whole):
            return rule.what
    for plugin, keywords in plugins():
        if found.intersection(keywords) and any(_standalone(text, secret) for secret in plugin.analyze_string(text)):
            return f"detect-secrets: {plugin.secret_type}"  # (the secret it found is dropped unseen)
    return None


def _standalone(text: str, found: str) -> bool:
    """Whether ``found`` occurs in ``text`` other than right after a letter or digit: a key id's shape inside
    base64 data (a font, an image in a notebook) is no key. (Only the left side: a pattern may end lazily, a
    JWT's does, before the rest of its token.)"""
    start = text.find(found)
    while start >= 0:
        before = text[start - 1] if start else " "
        if not (before.isascii() and before.isalnum()):
            return True
        start = text.find(found, start + 1)
    return False


def detect(path: Path) -> str | None:
    """What credential the regular file at ``path`` holds by content (its first ``PREFIX_BYTES``), or None; a
    path that is no longer a regular file (replaced by a link, a FIFO) counts as none."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:  # a symbolic link now, which does not ship
            return None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = handle.read(PREFIX_BYTES + 1)
    return what_is(data[:PREFIX_BYTES], whole=len(data) <= PREFIX_BYTES)
