# Source this file (`. bench/source_tree.sh`) to run mitool from the repository without installing
# it, e.g. on a machine whose python3 already has torch: it assembles the package mitool, with the
# folders toy/, vision/ and cli/ as mitool.toy, mitool.vision and mitool.cli (as pip installs
# them), from symbolic links in a temporary folder, and puts that folder and the repository root
# (for bench/) on PYTHONPATH. Then `python3 -m mitool.cli.main` is the mitool command.
MITOOL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MITOOL_SOURCE=$(mktemp -d)/source
mkdir -p "$MITOOL_SOURCE/mitool"
ln -s "$MITOOL_ROOT"/mitool/*.py "$MITOOL_SOURCE/mitool/"
for part in toy vision cli; do ln -s "$MITOOL_ROOT/$part" "$MITOOL_SOURCE/mitool/$part"; done
export PYTHONPATH="$MITOOL_SOURCE:$MITOOL_ROOT${PYTHONPATH:+:$PYTHONPATH}"
