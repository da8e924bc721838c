"""The wheel's package list, found rather than listed: every package under the repository's
folders mitool/, toy/, vision/ and cli/, which install as mitool, mitool.toy, mitool.vision and
mitool.cli. Everything else about the build is in pyproject.toml.

Why a setup.py: pyproject.toml cannot both map toy/ to mitool.toy and find toy's subpackages.
``[tool.setuptools.packages.find]`` names a package by its path below the folder it searches
(vision/sweep/ is found as ``sweep`` under where = ["vision"], or as ``vision.sweep`` under
where = ["."]), never as ``mitool.vision.sweep``; and ``package-dir`` only says where a listed
package lives, it adds none to the list. A hand-kept list is what left mitool.estimators,
mitool.critics, mitool.benchmark and mitool.vision.sweep out of the wheel.
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent

# installed package -> its folder in the repository (relative, as setuptools requires)
PACKAGE_FOLDERS = {"mitool": "mitool", "mitool.toy": "toy", "mitool.vision": "vision", "mitool.cli": "cli"}


def packages_in(package: str, folder: str) -> list[str]:
    """``package`` and every regular package (a folder with an __init__.py) below ``folder``,
    named under ``package``."""
    return [package, *(f"{package}.{sub}" for sub in find_packages(str(HERE / folder)))]


setup(
    package_dir=PACKAGE_FOLDERS,
    packages=[name for package, folder in PACKAGE_FOLDERS.items() for name in packages_in(package, folder)],
)
