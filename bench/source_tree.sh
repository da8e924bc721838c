# Source this file (`. bench/source_tree.sh`) to run mitool from the repository without installing
# it, e.g. on a machine whose python3 already has torch: the package mitool (with mitool.toy,
# mitool.vision and mitool.cli) is the folder mitool/ of the repository, so the repository root on
# PYTHONPATH is all it takes (bench/ is found there too). Then `python3 -m mitool.cli.main` is the
# mitool command.
MITOOL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONPATH="$MITOOL_ROOT${PYTHONPATH:+:$PYTHONPATH}"
