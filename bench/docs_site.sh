# Shared steps of the bench's docs builds (bench/build_*_docs.sh), sourced by each:
#
#   . "$(dirname "$0")/docs_site.sh"
#   docs_checkout NAME OUT GIT_DIR COMMIT   # done already: exits 0; else OUT/src and OUT/venv ready
#   ... the script's own pip install and build into OUT/html ...
#   docs_built NAME OUT COMMIT              # the stamp that makes the next run a no-op
#
# OUT/src holds the tree at COMMIT (`git archive`, no work tree needed), OUT/venv a venv of its
# own made with $PY (default python3): nothing of the project's is kept in this repository.

docs_checkout() {
    if [ -f "$2/html/.built-$4" ]; then
        echo "$1's docs: built already in $2/html"
        exit 0
    fi
    rm -rf "$2/src" "$2/html"
    mkdir -p "$2/src"
    git --git-dir="$3" archive "$4" | tar -x -C "$2/src"
    if [ ! -x "$2/venv/bin/python" ]; then
        "${PY:-python3}" -m venv "$2/venv"
        "$2/venv/bin/pip" install -q --upgrade pip
    fi
}

docs_built() {
    touch "$2/html/.built-$3"
    echo "$1's docs: $(find "$2/html" -name index.html | wc -l) pages in $2/html"
}
