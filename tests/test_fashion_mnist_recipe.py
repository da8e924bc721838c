"""The Fashion-MNIST rows of the methods' defaults apply to that dataset only: the papers' values
stay for every other dataset (docs/vision-claims.md, "The Fashion-MNIST recipe")."""

from __future__ import annotations

import pytest

from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.method_specs import METHODS


@pytest.mark.parametrize("method", list(METHODS))
def test_fashion_mnist_rows_apply_to_fashion_mnist_only(method: str) -> None:
    recipe = resolve_defaults(PretrainConfig(method=method, dataset="fashion-mnist", arch="small-cnn"), 28)
    paper = resolve_defaults(PretrainConfig(method=method, dataset="imagefolder"), 224)
    row = METHODS[method].dataset_defaults["fashion-mnist"]
    assert {name: getattr(recipe, name) for name in row} == dict(row)
    assert (recipe.batch_size, recipe.base_lr, recipe.warmup_epochs) == (128, 0.8, 0.1)
    assert paper.batch_size == 256 and paper.base_lr == METHODS[method].defaults["base_lr"]
    assert paper.temperature == METHODS[method].defaults["temperature"]
    given = resolve_defaults(
        PretrainConfig(method=method, dataset="fashion-mnist", batch_size=64, base_lr=0.1), 28
    )
    assert (given.batch_size, given.base_lr) == (64, 0.1)  # options given win over the row
