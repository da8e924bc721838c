"""The share of queries whose own image has an older key in a first-in, first-out queue (MoCo's
queue, NNCLR's support set): mitool.vision.common.own_image_share against a simulation of the
training order, and the values the docs state."""

from __future__ import annotations

import random

import pytest

from mitool.vision.common import own_image_share


def _simulated(images: int, batch: int, queue: int, epochs: int, seed: int = 0) -> float:
    """Queries of epochs 2.. whose image's latest key is among the ``queue`` latest keys written
    before their step (a fresh shuffle per epoch, the last partial batch dropped)."""
    rng = random.Random(seed)
    latest: dict[int, int] = {}
    keys = hits = queries = 0
    for epoch in range(epochs):
        order = list(range(images))
        rng.shuffle(order)
        for start in range(0, images - batch + 1, batch):
            step = order[start : start + batch]
            if epoch:
                hits += sum(1 for image in step if image in latest and latest[image] >= keys - queue)
                queries += len(step)
            for offset, image in enumerate(step):
                latest[image] = keys + offset
            keys += len(step)
    return hits / queries


@pytest.mark.parametrize(
    ("images", "batch", "queue"),
    [(1000, 20, 100), (1000, 20, 500), (1000, 20, 1000), (1000, 20, 1500), (1000, 20, 2000), (1010, 20, 300)],
)
def test_the_formula_matches_a_simulation_of_the_training_order(images: int, batch: int, queue: int) -> None:
    assert _simulated(images, batch, queue, epochs=60) == pytest.approx(
        own_image_share(images, queue, batch), abs=0.006
    )


def test_the_shares_the_docs_state() -> None:
    """(K / N)^2 / 2 for a queue much smaller than the data; half the queries at K = N, all at 2N."""
    assert own_image_share(50000, 4096, 256) == pytest.approx(0.0036, abs=5e-5)  # CIFAR-10, MoCo demo
    assert own_image_share(60000, 4096, 128) == pytest.approx(0.0024, abs=5e-5)  # Fashion-MNIST
    assert own_image_share(1281167, 65536, 256) == pytest.approx(0.0013, abs=5e-5)  # ImageNet, MoCo v2
    assert own_image_share(1281167, 98304, 4096) == pytest.approx(0.0031, abs=5e-5)  # ImageNet, NNCLR
    assert own_image_share(10000, 1000, 100) == pytest.approx(0.1**2 / 2 * 1.1)  # K (K + B) / 2N^2
    assert own_image_share(10000, 10000, 100) == pytest.approx(0.505)
    assert own_image_share(10000, 20000, 100) == 1.0
