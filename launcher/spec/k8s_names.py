"""Kubernetes' names and keys, checked as Kubernetes checks them: the one home of those rules in tfcluster.

Contract: each type below refuses exactly what the Kubernetes API server (``k8s.io/apimachinery/pkg/util/
validation``: ``IsDNS1123Label``, ``IsDNS1123Subdomain``, ``IsQualifiedName``, ``IsValidLabelValue``;
``ValidateAnnotations``) refuses for that kind of name, with one message saying what the name must be. Every match
is of the whole text (``re.fullmatch``: a ``$`` would let a final newline through). The kubernetes Python client
has no validators; these follow Kubernetes' definitions:

- ``DnsLabel``: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit
  (namespaces, pod volume names);
- ``DnsSubdomain``: at most 253 characters, DNS labels joined by '.' (Secrets, ServiceAccounts, claims,
  StorageClasses);
- ``QualifiedName``: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' and '.',
  starting and ending with a letter or digit (label keys, taint and toleration keys; a scheduler's name too: the
  scheduler reports its events under it, and the events API takes only a qualified name there);
- ``LabelValue``: empty or a qualified name's name part; ``AnnotationKey``: a qualified name once lower-cased;
  ``Annotations``: keys so, and keys and values together at most 256 KiB.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
#: A qualified name's name part, and a non-empty label value.
QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX, QUALIFIED_NAME_MAX, LABEL_VALUE_MAX = 63, 253, 63, 63
#: ``TotalAnnotationSizeLimitB``: the keys and values of an object's annotations together.
ANNOTATIONS_MAX_BYTES = 256 * 1024

_DNS_LABEL_MEANS = "at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
_SUBDOMAIN_MEANS = ("at most 253 characters: lowercase letters, digits, '-' and '.', each '.'-separated part "
                    "starting and ending with a letter or digit")
_NAME_PART_MEANS = "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
_QUALIFIED_MEANS = f"an optional DNS subdomain and '/', then {_NAME_PART_MEANS}"


def is_dns_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and DNS1123_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and DNS1123_SUBDOMAIN.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    return (not slash or is_dns_subdomain(prefix)) and len(name) <= QUALIFIED_NAME_MAX \
        and QUALIFIED_NAME_PART.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= LABEL_VALUE_MAX and QUALIFIED_NAME_PART.fullmatch(value) is not None)


def _checked(test: Callable[[str], bool], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not test(value):
            raise ValueError(f"is not {what}")
        return value

    return AfterValidator(check)


def _schema(pattern: str, longest: int) -> WithJsonSchema:
    """The JSON Schema of a name (``tfcluster schema``, for editors): anchored as JSON Schema searches."""
    return WithJsonSchema({"type": "string", "pattern": f"^{pattern}$", "maxLength": longest})


_QUALIFIED = rf"({DNS1123_SUBDOMAIN.pattern}/)?{QUALIFIED_NAME_PART.pattern}"
DnsLabel = Annotated[str, _checked(is_dns_label, f"a DNS-1123 label: {_DNS_LABEL_MEANS}"),
                     _schema(DNS1123_LABEL.pattern, DNS1123_LABEL_MAX)]
DnsSubdomain = Annotated[str, _checked(is_dns_subdomain, f"a DNS-1123 subdomain: {_SUBDOMAIN_MEANS}"),
                         _schema(DNS1123_SUBDOMAIN.pattern, DNS1123_SUBDOMAIN_MAX)]
QualifiedName = Annotated[str, _checked(is_qualified_name, f"a Kubernetes qualified name: {_QUALIFIED_MEANS}"),
                          _schema(_QUALIFIED, DNS1123_SUBDOMAIN_MAX + 1 + QUALIFIED_NAME_MAX)]
#: A label key (each bad key reported at its own path; the keys tfcluster sets itself are refused by
#: ``launcher.plan.checks``, which knows them from ``launcher.plan.naming``).
LabelKey = Annotated[str, _checked(is_qualified_name, f"a Kubernetes label key: {_QUALIFIED_MEANS}"),
                     _schema(_QUALIFIED, DNS1123_SUBDOMAIN_MAX + 1 + QUALIFIED_NAME_MAX)]
LabelValue = Annotated[str, _checked(is_label_value, f"a Kubernetes label value: empty or {_NAME_PART_MEANS}"),
                       _schema(f"({QUALIFIED_NAME_PART.pattern})?", LABEL_VALUE_MAX)]
#: An annotation key: the API server checks it as a label key, lower-cased first.
AnnotationKey = Annotated[str, _checked(lambda key: is_qualified_name(key.lower()),
                                        f"a Kubernetes annotation key: {_QUALIFIED_MEANS} (any case)")]


def _annotations_fit(annotations: dict[str, str]) -> dict[str, str]:
    size = sum(len(text.encode(errors="surrogatepass")) for pair in annotations.items() for text in pair)
    if size > ANNOTATIONS_MAX_BYTES:
        raise ValueError(f"keys and values hold {size} bytes together; Kubernetes takes at most "
                         f"{ANNOTATIONS_MAX_BYTES} (256 KiB)")
    return annotations


Annotations = Annotated[dict[AnnotationKey, str], AfterValidator(_annotations_fit)]
