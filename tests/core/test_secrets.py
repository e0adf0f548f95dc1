"""Secrets out of every text: each encoding a server or library may echo a secret in is
masked, and so is the userinfo of any URL."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, strategies as st

from sync.core.secrets import public_url, redact, secret_forms, url_secrets, without_userinfo


def encodings(secret: str) -> list[str]:
    b64 = base64.b64encode(secret.encode()).decode()
    once = json.dumps(secret)[1:-1]
    return [
        secret,
        quote(secret, safe=""),
        quote(secret, safe="").lower(),
        quote_plus(secret),
        b64,
        b64.rstrip("="),
        base64.urlsafe_b64encode(secret.encode()).decode(),
        once,
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(once)[1:-1],
        repr(secret)[1:-1],
        repr(secret.encode())[2:-1],
        repr(once.encode())[2:-1],
        repr({"api-key": secret}),
    ]


@pytest.mark.parametrize("secret", ['K"ey\\secret1', "p@ss:w/rd%é", "sk-abc123", "me:hunter2pw"])
def test_every_encoding_of_a_secret_is_masked(secret):
    for echo in encodings(secret):
        out = redact(f"server said: {echo} (end)", secret)
        assert out.count("***") >= 1 and "end" in out, (echo, out)
        for form in encodings(secret)[:3]:
            assert form not in out, (echo, out)


@given(st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=6, max_size=24))
def test_any_secret_in_any_form_leaves_no_trace(secret):
    for echo in encodings(secret):
        out = redact(f"<{echo}>", secret)
        assert secret not in out and base64.b64encode(secret.encode()).decode() not in out, (echo, out)


def test_userinfo_of_any_url_is_masked_whatever_the_secrets():
    text = "at https://me:pw@host:8080/v1 and http://token@h/x, not mail me@example.com"
    assert without_userinfo(text) == "at https://***@host:8080/v1 and http://***@h/x, not mail me@example.com"
    assert redact(text, None) == without_userinfo(text)


def test_the_secrets_of_a_url_are_its_password_and_user_colon_password_as_written_and_decoded():
    assert set(url_secrets("https://me:p%40ss@host/v1")) == {"p%40ss", "me:p%40ss", "p@ss", "me:p@ss"}
    assert url_secrets("https://host/v1") == [] and url_secrets(None) == []
    assert url_secrets("https://tok123@host/") == ["tok123"]
    basic = base64.b64encode(b"me:p@ss").decode()  # what httpx sends for that URL
    assert basic in secret_forms("me:p@ss")


def test_a_public_url_has_no_userinfo():
    assert public_url("https://me:pw@host:8443/v1?x=1") == "https://host:8443/v1?x=1"
    assert public_url("https://host/v1") == "https://host/v1"


def test_a_short_secret_is_masked_only_as_a_word_of_its_own():
    assert redact("pw=abc; abcdef", "abc") == "pw=***; abcdef"
