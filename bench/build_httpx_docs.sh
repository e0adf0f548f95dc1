#!/bin/sh
# HTTPX's docs built by plain MkDocs (Material theme), for bench/retrieval.py (--httpx-html).
#
#   bench/build_httpx_docs.sh OUT [GIT_DIR]
#
# GIT_DIR: a clone of https://github.com/encode/httpx (default $HTTPX_GIT_DIR, else
# /work/.mirror/encode+httpx/repo). Its tree at the pinned commit goes to OUT/src, a venv of
# its own to OUT/venv with the docs tools at the versions HTTPX's requirements.txt pins
# (mkdocs 1.6.1, mkautodoc 0.2.0, mkdocs-material 9.6.18; their dependencies pinned here as
# resolved), and the site `mkdocs build` makes from its mkdocs.yml (use_directory_urls left
# at its default, true) to OUT/html. mkautodoc imports the checkout's own httpx package for
# the "Developer Interface" page, so the checkout is installed --no-deps -e with only what
# `import httpx` needs (certifi, httpcore, h11, anyio, idna).
set -eu
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
GIT_DIR=${2:-${HTTPX_GIT_DIR:-/work/.mirror/encode+httpx/repo}}
COMMIT=ae1b9f66238f75ced3ced5e4485408435de10768  # bench/retrieval.py's HTTPX_COMMIT (master, 2025-12-10)
. "$(dirname "$0")/docs_site.sh"

docs_checkout HTTPX "$OUT" "$GIT_DIR" "$COMMIT"
"$OUT/venv/bin/pip" install -q \
    mkdocs==1.6.1 mkautodoc==0.2.0 mkdocs-material==9.6.18 \
    mkdocs-material-extensions==1.3.1 mkdocs-get-deps==0.2.2 markdown==3.11.3 \
    pymdown-extensions==10.21.3 pygments==2.21.0 jinja2==3.1.6 markupsafe==3.0.4 \
    pyyaml==6.0.4 pyyaml-env-tag==1.1 mergedeep==1.3.4 ghp-import==2.1.0 \
    python-dateutil==4.0.0 click==8.2.1 watchdog==7.1.1 pathspec==1.1.1 packaging==26.4 \
    platformdirs==4.14.9 babel==2.19.0 backrefs==5.9 colorama==0.4.6 paginate==0.5.7 \
    requests==2.34.2 charset-normalizer==3.5.3 urllib3==2.8.0 tzdata==2026.6 \
    certifi==2026.10.19.post1 httpcore==1.0.9 h11==0.16.0 anyio==4.16.0 idna==3.20 \
    typing-extensions==4.16.0 \
    hatchling==1.33.0 hatch-fancy-pypi-readme==25.1.0 pluggy==1.7.0 trove-classifiers==2026.9.21.13 editables==0.6
# mkautodoc reads the checkout's own httpx package (built with the pinned hatchling above)
"$OUT/venv/bin/pip" install -q --no-deps --no-build-isolation -e "$OUT/src"
# the sitemap's <lastmod> dates: the commit's, not the build day's
SOURCE_DATE_EPOCH=$(git --git-dir="$GIT_DIR" log -1 --format=%ct "$COMMIT")
export SOURCE_DATE_EPOCH
(cd "$OUT/src" && "$OUT/venv/bin/mkdocs" build --site-dir "$OUT/html")
docs_built HTTPX "$OUT" "$COMMIT"
