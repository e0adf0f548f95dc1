#!/bin/sh
# FastAPI's English docs built by its own tool, for bench/retrieval.py (--fastapi-html).
#
#   bench/build_fastapi_docs.sh OUT [GIT_DIR]
#
# GIT_DIR: a clone of https://github.com/fastapi/fastapi (default $FASTAPI_GIT_DIR, else
# /work/.mirror/fastapi+fastapi/repo). Its tree at the bench's commit goes to OUT/src, a venv of
# its own to OUT/venv with the docs tools at the versions FastAPI's uv.lock pins (zensical,
# mkdocstrings-python for its API reference pages, its include extensions), and the site its
# own `scripts/docs.py build-lang en` makes to OUT/html. Nothing of FastAPI's is kept in this
# repository; the pages are read as any built site is.
set -eu
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
GIT_DIR=${2:-${FASTAPI_GIT_DIR:-/work/.mirror/fastapi+fastapi/repo}}
COMMIT=c3f316b7e814667e8ee81e03a7330d00ee61e45c  # bench/retrieval.py's FASTAPI_COMMIT
. "$(dirname "$0")/docs_site.sh"

docs_checkout FastAPI "$OUT" "$GIT_DIR" "$COMMIT"
"$OUT/venv/bin/pip" install -q \
    zensical==0.0.51 'mkdocstrings[python]==1.0.4' mkdocstrings-python==2.0.3 griffelib==2.0.0 \
    griffe-typingdoc==0.3.1 griffe-warnings-deprecated==1.1.1 markdown==3.10.1 pymdown-extensions==11.0.1 \
    mdx-include==1.4.2 markdown-include-variants==0.0.8 starlette==1.3.1 pydantic==2.13.4 httpx==0.28.1 \
    black==26.5.1 cairosvg==2.9.0 pillow==12.3.0 jieba==0.42.1 python-slugify==8.0.4 pyyaml==6.0.3 \
    typer==0.27.0 annotated-doc==0.0.4 typing-extensions==4.16.0 'typing-inspection>=0.4.2' ruff==0.15.22 \
    jinja2==3.1.6
# mkdocstrings reads the checkout's own fastapi package
"$OUT/venv/bin/pip" install -q --no-deps -e "$OUT/src"
(cd "$OUT/src" && PATH="$OUT/venv/bin:$PATH" python scripts/docs.py build-lang en)
cp -a "$OUT/src/site" "$OUT/html"
docs_built FastAPI "$OUT" "$COMMIT"
