"""The names the vision settings choose from, and the evaluation protocol's constants, in one
torch-free place: the settings (:mod:`mitool.vision.config`), the command line and the modules that
implement them all read these (the backbones build exactly :data:`ARCHITECTURES`, the datasets load
exactly :data:`DATASETS`; tests hold them to it)."""

from __future__ import annotations

__all__ = [
    "ARCHITECTURES",
    "DATASETS",
    "DEVICE_AUGMENT_MODES",
    "EMBEDDING_DIM",
    "KNN_K",
    "KNN_TEMPERATURE",
    "LARS_TRUST_COEFFICIENT",
    "OPTIMIZERS",
    "smoke_test_note",
]

ARCHITECTURES: tuple[str, ...] = ("small-cnn", "resnet18", "resnet34", "resnet50")
"""The encoders (:func:`mitool.vision.backbones.build_backbone`)."""

DATASETS: tuple[str, ...] = ("imagefolder", "cifar10", "stl10", "fashion-mnist", "synthetic")
"""The datasets (:func:`mitool.vision.datasets.load_dataset`)."""

DEVICE_AUGMENT_MODES: tuple[str, ...] = ("decode", "jpeg")
"""How the views are made on the device (:mod:`mitool.vision.gpu_augment`): the loader workers only
decode ("decode"), or only read the JPEG bytes ("jpeg")."""

OPTIMIZERS: tuple[str, ...] = ("sgd", "lars")
"""The optimizers of a pretraining run (:func:`mitool.vision.step.make_optimizer`): momentum SGD, and
LARS (:class:`mitool.vision.lars.LARS`)."""

LARS_TRUST_COEFFICIENT = 0.001
"""LARS's trust coefficient eta: You et al. (2017) and SimCLR's."""

EMBEDDING_DIM = 128
"""Width of the embeddings the heads produce (every method's paper uses 128)."""

KNN_K = 200
"""Neighbours of the kNN classifier (cosine similarity, weighted vote): the protocol of the MoCo and
InstDisc papers, and of the public CIFAR-10 benchmarks."""

KNN_TEMPERATURE = 0.1
"""Temperature t of the kNN vote, weights exp(similarity / t)."""


def smoke_test_note(dataset: str) -> str:
    """What to say beside a kNN accuracy: on the synthetic images it is a smoke test only."""
    return "a smoke test only: the synthetic images are easy" if dataset == "synthetic" else ""
