"""The one credential detector: what it finds by content (its own rules and detect-secrets' plugins), what it
leaves alone, how much it reads, and that it says which rule matched, never the secret."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from helpers.workspaces import CONTENT_CREDENTIAL_FILES, PLAIN_FILES
from launcher.backends.credentials import CONTENT_RULES, PLUGIN_KEYWORDS, PREFIX_BYTES, detect, plugins, what_is

#: What each example of issue 32 is recognised as.
EXPECTED = {
    "keys/prod": "detect-secrets: Private Key",
    "keys/deploy": "detect-secrets: Private Key",
    "keys/pkcs8-encrypted": "an encrypted PKCS#8 private key",
    "gcp/trainer.json": "a cloud service-account key",
    "deploy/prod-cluster.yaml": "a kubeconfig with a client key, token or password",
    "deploy/ci.kubeconfig": "a kubeconfig with a client key, token or password",
    "deploy/kubeconfig": "a kubeconfig with a client key, token or password",  # flow-style YAML
    "deploy/cluster.json": "a kubeconfig with a client key, token or password",  # minified JSON
    "registry/auth.json": "a container registry login, Docker auths",
    "vault/token": "a Vault token",
    "vault/legacy-token": "a legacy Vault token",
    "db/pgpass": "PostgreSQL passwords, .pgpass lines",
    "web/htpasswd": "password hashes, .htpasswd lines",
    "aws_settings.py": "detect-secrets: AWS Access Key",
}
#: The patterns of the detect-secrets plugins used, as ``PLUGIN_KEYWORDS`` was written for (detect-secrets 1.5.0):
#: a changed pattern may need a keyword that the scan lacks, so a change fails here until the keywords are checked.
PATTERNS_SHA256 = {
    "PrivateKeyDetector": "6cc6a1f2", "AWSKeyDetector": "c56e62ea", "AzureStorageKeyDetector": "b3c6b30b",
    "GitHubTokenDetector": "7a15b9dc", "GitLabTokenDetector": "0c63db6a", "JwtTokenDetector": "9467ffe8",
    "NpmDetector": "74e20259", "OpenAIDetector": "b9978c1a", "PypiTokenDetector": "44445878", "SendGridDetector": "de485eaa",
    "SlackDetector": "2c700b0d", "SquareOAuthDetector": "3ec2b9ac", "StripeDetector": "1cd68ff6",
}


def fingerprint(plugin: object) -> str:
    patterns = "\n".join(f"{regex.pattern}\0{regex.flags}" for regex in plugin.denylist)  # type: ignore[attr-defined]
    return hashlib.sha256(patterns.encode()).hexdigest()[:8]


@pytest.mark.parametrize("name", sorted(CONTENT_CREDENTIAL_FILES))
def test_each_credential_of_the_issue_is_found_by_its_content_and_named_by_its_rule(name: str) -> None:
    assert what_is(CONTENT_CREDENTIAL_FILES[name].encode(), whole=True) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(PLAIN_FILES))
def test_code_and_data_are_no_credentials(name: str) -> None:
    """A certificate, a header string in code, a Job manifest, a kubeconfig without users' secrets, a Docker
    config with credential helpers only, CSV rows, binary bytes."""
    assert what_is(PLAIN_FILES[name].encode(), whole=True) is None


def test_structured_credentials_are_parsed_whole_whatever_their_layout() -> None:
    """JSON or YAML, block or flow style, minified, one document of several: what counts is the structure. A cut
    prefix is not parsed; a document nested too deep or built from aliases is none, never an error."""
    kubeconfig = CONTENT_CREDENTIAL_FILES["deploy/kubeconfig"]
    assert what_is(("kind: List\n---\n" + kubeconfig).encode(), whole=True) == EXPECTED["deploy/kubeconfig"]
    assert what_is(kubeconfig.encode(), whole=False) is None
    key = json.loads(CONTENT_CREDENTIAL_FILES["gcp/trainer.json"])
    assert what_is(yaml.safe_dump(key, default_flow_style=True).encode(), whole=True) == "a cloud service-account key"
    logins = '{"auths":\t{"r.example.com":{"auth":"cm9ib3Q6czNjcjN0"}}}'
    assert what_is(logins.encode(), whole=True) == "a container registry login, Docker auths"
    assert what_is(b'{"auths": {"r.example.com": {"auth": ""}}}', whole=True) is None
    nested = "users: " + "[" * 5000 + "]" * 5000
    aliases = "users: &a [{user: {}}]\n" + "".join(f"l{i}: &l{i} [{', '.join([f'*{a}' for a in ['a' if i == 0 else f'l{i - 1}'] * 9])}]\n"
                                                for i in range(30))
    for text in (nested, "{" + '"users":' + "[" * 5000 + "]" * 5000 + "}", aliases):
        assert what_is(text.encode(), whole=True) is None


def test_a_token_shape_inside_base64_data_is_no_token() -> None:
    """An embedded font's base64 held 'AKIA' and 16 capitals (detect-secrets' AWS pattern, unanchored)."""
    key = "AKIA" + "Q3EGRAVF6N2XYZ7P"
    assert what_is(f"FONT = b'AgAHAGQAAQAAAAAAAwAa{key}AAQAAAAAABQ'\n".encode(), whole=True) is None
    assert what_is(f"KEY = '{key}'\n".encode(), whole=True) == "detect-secrets: AWS Access Key"


def test_line_rules_need_every_line_so_records_of_other_shapes_pass() -> None:
    pgpass = "db:5432:train:me:pw\n"
    assert what_is(pgpass.encode(), whole=True) == "PostgreSQL passwords, .pgpass lines"
    assert what_is((pgpass + "a line of prose\n").encode(), whole=True) is None
    fingerprint_lines = "16384:64:0:60:M512,N,W%2,N,N,T:\t\tAIX:4.3-5.2:3:AIX 4.3.3-5.2\n"  # nftables' pf.os: more fields
    assert what_is(fingerprint_lines.encode(), whole=True) is None
    assert what_is(b"# only a comment\n\n", whole=True) is None


def test_a_cut_prefix_is_judged_without_its_last_line_and_a_long_binary_is_not_read() -> None:
    pgpass = b"db:5432:train:me:pw\n" * 3
    assert what_is(pgpass + b"db:5432:tr", whole=False) == "PostgreSQL passwords, .pgpass lines"
    key = CONTENT_CREDENTIAL_FILES["keys/prod"].encode()
    assert what_is(b"\0\1" + key, whole=True) == "detect-secrets: Private Key"  # a small binary is read
    assert what_is(b"\0\1" + key, whole=False) is None  # the first bytes of a model or an archive: skipped


def test_detect_reads_a_bounded_prefix_of_a_regular_file_and_never_blocks_or_follows(tmp_path: Path) -> None:
    key = CONTENT_CREDENTIAL_FILES["keys/prod"]
    (tmp_path / "early").write_text(key + "x" * (4 * PREFIX_BYTES))
    (tmp_path / "late").write_text("x\n" * PREFIX_BYTES + key)  # past the prefix: not read
    (tmp_path / "link").symlink_to(tmp_path / "early")
    os.mkfifo(tmp_path / "fifo")  # opening it for reading without O_NONBLOCK would wait for a writer
    assert detect(tmp_path / "early") == "detect-secrets: Private Key"
    assert [detect(tmp_path / name) for name in ("late", "link", "fifo")] == [None, None, None]
    (tmp_path / "unreadable").write_text(key)
    (tmp_path / "unreadable").chmod(0)
    if os.geteuid() != 0:  # root reads it anyway
        with pytest.raises(PermissionError):
            detect(tmp_path / "unreadable")


def test_the_reason_is_a_rule_never_the_secret() -> None:
    reasons = {rule.what for rule in CONTENT_RULES} | {f"detect-secrets: {plugin.secret_type}" for plugin, _ in plugins()}
    assert {what_is(text.encode(), whole=True) for text in CONTENT_CREDENTIAL_FILES.values()} <= reasons


def test_the_detect_secrets_plugins_keep_the_patterns_their_keywords_were_written_for() -> None:
    assert {type(plugin).__name__ for plugin, _ in plugins()} == set(PLUGIN_KEYWORDS)
    assert {type(plugin).__name__: fingerprint(plugin) for plugin, _ in plugins()} == PATTERNS_SHA256


def test_a_plugin_runs_only_where_its_keywords_occur_and_its_keywords_occur_in_what_it_finds() -> None:
    samples = {  # each put together here, so that this file holds none whole
        "GitHubTokenDetector": "ghp" + "_" + "a" * 36, "SlackDetector": "xox" + "b-123-456-abc",
        "StripeDetector": "sk_" + "live_" + "a1" * 12, "PypiTokenDetector": "pypi-" + "AgEIcHlwaS5vcmc" + "x" * 70,
        "JwtTokenDetector": "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "GitLabTokenDetector": "glpat" + "-" + "a" * 20,
        "NpmDetector": "//registry.npmjs.org/" + ":_authToken=npm_abc", "AzureStorageKeyDetector": "Account" + "Key=" + "a" * 88,
        "SendGridDetector": "SG" + "." + "a" * 22 + "." + "b" * 43, "SquareOAuthDetector": "sq0" + "csp-" + "a" * 43,
        "OpenAIDetector": "sk-" + "a" * 20 + "T3Blbk" + "FJ" + "b" * 20,
    }
    for plugin, keywords in plugins():
        sample = samples.get(type(plugin).__name__)
        if sample is None:
            continue  # private keys and AWS keys: the examples of the issue
        assert what_is(f"token = '{sample}'\n".encode(), whole=True) == f"detect-secrets: {plugin.secret_type}"
        assert any(word in sample.lower() for word in keywords)


def test_the_detector_is_imported_on_first_use_only() -> None:
    import subprocess
    import sys

    probe = "import sys, launcher.backends.workspace, launcher.cli.commands; print('detect_secrets' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"
