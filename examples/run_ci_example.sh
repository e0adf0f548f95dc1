#!/usr/bin/env bash
# The CI example's steps as plain shell, against whatever QDRANT_URL / --qdrant-path says:
# sync, audit, and fail like the workflow does. Used by tests/test_examples.py with the
# embedded store; usage: run_ci_example.sh SITEMAP_URL WORKDIR [extra pagesync args...]
set -uo pipefail
sitemap="$1"; work="$2"; shift 2
py="${PYTHON:-python3}"
cd "$work"
"$py" -m sync run --sitemap "$sitemap" --collection docs --report report.json "$@"
run_rc=$?
"$py" -m sync audit --collection docs --json "$@" > audit.json
audit_rc=$?
if [ "$run_rc" -ne 0 ] || [ "$audit_rc" -ne 0 ]; then
  echo "nightly sync failed: run exit $run_rc, audit exit $audit_rc" >&2
  exit 1
fi
echo "nightly sync ok"
