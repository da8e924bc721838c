"""The registry of contrastive methods: for each ``--method`` name its summary, its defaults (per
dataset where they differ), what K means for it, and the class that is the method.

The class (a :class:`~mitool.vision.common.ContrastiveMethod` in the method's own file:
:mod:`~mitool.vision.moco`, :mod:`~mitool.vision.simo`, :mod:`~mitool.vision.simclr`,
:mod:`~mitool.vision.nnclr`) holds the
forward pass and the method's rules (its size checks, what it can use of a batch shortened by
unreadable images, its BatchNorm). This table holds what the settings and the command line read,
and needs no torch: ``mitool vision pretrain --help`` lists every method with its defaults at once;
the class loads when a run builds it (:func:`mitool.vision.methods.method_class`). Adding a method:
write its file (see :mod:`mitool.vision.simclr`, the shortest) and add its :class:`MethodSpec` to
:data:`METHODS`. The class is named as ``module:Class`` (where the critics, all in one module, need
only a class name, and the bounds, plain functions, sit in their table): each method lives in a
module of its own that imports torch (:mod:`mitool.estimators` says why each registry has its form).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mitool import bounds, checks

__all__ = [
    "FASHION_MNIST_SHORT_SCHEDULE",
    "LARS_FROM_BATCH",
    "METHODS",
    "MethodSpec",
    "method_spec",
]

FASHION_MNIST_SHORT_SCHEDULE: dict[str, float] = dict(batch_size=128, base_lr=0.8, warmup_epochs=0.1)
"""What the methods share on Fashion-MNIST (their ``dataset_defaults``): a batch of 128 and a high
learning rate with a short warmup, for the short schedules of a CPU or of a few GPU minutes
(measured on a 2-core CPU with the small CNN; docs/vision-claims.md)."""

LARS_FROM_BATCH = 512
"""The global batch from which simclr and nnclr train with LARS when no optimizer is given (their
papers' optimizer at large batch; MoCo and SiMo keep SGD, as theirs); below it momentum SGD. 512:
the batch at which LARS was measured against SGD (docs/vision-claims.md, SGD against LARS), the
smallest where it is known to do better; smaller batches keep the SGD rows they were tuned with."""


@dataclass(frozen=True)
class MethodSpec:
    """One method of the registry.

    name: the ``--method`` value. summary: one line for ``--help``. defaults: what a setting of
    :class:`~mitool.vision.config.PretrainConfig` left unset becomes for this method (the paper's
    values); an option of a bound (eqco's alpha) applies when that loss is chosen. dataset_defaults:
    per dataset name, settings that replace ``defaults`` for that dataset. negatives_meaning: what
    ``negatives`` (K) means for the method; None when K is not a setting. implementation: the
    class, as ``module:Class``. lars_from_batch: the global batch from which the method trains with
    LARS when ``optimizer`` is not given (:meth:`default_optimizer`); None: always SGD."""

    name: str
    summary: str
    defaults: Mapping[str, Any]
    implementation: str
    dataset_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    negatives_meaning: str | None = None
    lars_from_batch: int | None = None

    def default_optimizer(self, batch_size: int) -> str:
        """The optimizer when none is given: lars at a global batch of at least
        :attr:`lars_from_batch`, else sgd."""
        large = self.lars_from_batch is not None and batch_size >= self.lars_from_batch
        return "lars" if large else "sgd"

    def defaults_for(self, dataset: str | None = None) -> dict[str, Any]:
        """The method's defaults, with those of ``dataset`` over them."""
        return {**self.defaults, **self.dataset_defaults.get(dataset or "", {})}

    def setting(self, name: str, value: Any) -> Any:
        """``value``, or the method's default for setting ``name`` when it is None."""
        return self.defaults[name] if value is None else value

    def options_of_loss(
        self, loss: str, given: Mapping[str, float | None] | None, dataset: str | None = None
    ) -> dict[str, float]:
        """The options of bound ``loss`` (:data:`mitool.bounds.BOUNDS`): those given (None counts as
        not given), else the method's defaults (for ``dataset``), else the table's, checked.
        ParameterError for an option the loss does not take; one that is the scores' temperature
        (dclw's) is the method's ``temperature`` and may not be given either."""
        bound = bounds.BOUNDS[loss]
        own = [option.name for option in bound.options if not option.score_temperature]
        given = {name: value for name, value in (given or {}).items() if value is not None}
        for name, value in given.items():
            if name not in own:
                raise checks.ParameterError(name, _not_an_option_of(loss, name, value))
        defaults = {name: value for name, value in self.defaults_for(dataset).items() if name in own}
        options = bound.pick_options({**defaults, **given})
        return {name: options[name] for name in own}


def _not_an_option_of(loss: str, name: str, value: object) -> str:
    if name in bounds.BOUNDS[loss].option_names:
        return f"of loss {loss!r} is the method's own temperature; leave it out (got {value!r})"
    takers = [
        bound.name
        for bound in bounds.BOUNDS.values()
        if bound.infonce_family and any(o.name == name and not o.score_temperature for o in bound.options)
    ]
    allowed = f"applies to the {' and '.join(takers)} loss only" if takers else "is not an option of any loss"
    return f"{allowed}, not {loss!r}; got {value!r}"


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            "moco",
            "MoCo v2: momentum encoder, a queue of K negative keys; head w-w-128 without BN, shuffle-BN",
            dict(loss="infonce", negatives=65536, temperature=0.2, key_momentum=0.999, base_lr=0.03,
                 warmup_epochs=0.0, alpha=256.0),
            "mitool.vision.moco:MoCo",
            # the queue must be much smaller than the training set: past the first epoch a queue of K keys
            # holds an older key of the query's own image, as a negative, for a share K (K + B) / 2N^2 ~
            # (K / N)^2 / 2 of the queries (mitool.vision.common.own_image_share, simulated by
            # bench/queue_share.py): 0.13% for ImageNet's 65 536, 0.36% for the MoCo CIFAR demo's 4096
            # on CIFAR-10 at batch 256, 0.24% on Fashion-MNIST at batch 128; half of them at K = N, all
            # at K = 2N, so K >= N is refused; Fashion-MNIST: as SiMo's, with that queue
            {"fashion-mnist": FASHION_MNIST_SHORT_SCHEDULE | dict(key_momentum=0.99, negatives=4096),
             "cifar10": dict(negatives=4096), "stl10": dict(negatives=4096),
             "synthetic": dict(negatives=256)},
            "the queue size",
        ),
        MethodSpec(
            "simo", "SiMo (EqCo paper): MoCo without the queue, K keys of the batch per query; head with BN",
            dict(loss="eqco", negatives=16, alpha=256.0, temperature=0.2, key_momentum=0.999, base_lr=0.03,
                 warmup_epochs=5.0),
            "mitool.vision.simo:SiMo",
            # Fashion-MNIST: the short-schedule settings with a faster momentum encoder (m 0.99, as the
            # MoCo CIFAR demo), measured on a 2-core CPU with the small CNN (docs/vision-claims.md)
            {"fashion-mnist": FASHION_MNIST_SHORT_SCHEDULE | dict(key_momentum=0.99)},
            "keys of the batch sampled per query",
        ),
        MethodSpec(
            "simclr",
            "SimCLR / DCL: one encoder, the 2N - 2 other views of the batch as negatives; head with BN",
            dict(loss="infonce", temperature=0.1, base_lr=0.3, warmup_epochs=10.0, alpha=256.0),
            "mitool.vision.simclr:SimCLR",
            {"fashion-mnist": FASHION_MNIST_SHORT_SCHEDULE | dict(temperature=0.2)},
            lars_from_batch=LARS_FROM_BATCH,
        ),
        MethodSpec(
            "nnclr",
            "NNCLR: SimCLR with each view's positive its nearest neighbour in a support set of past "
            "embeddings, a prediction head; the N - 1 other predictions of the batch as negatives",
            # the paper's (Dwibedi et al. 2021, section 3.3 and the support-set ablation; see
            # mitool.vision.nnclr): support set 98 304, embeddings of 256 (projection w-w-256 with BN,
            # prediction 256-2w-256), tau 0.1; with SGD (below lars_from_batch) SimCLR's lr and warmup,
            # with LARS (the paper's optimizer) config.LARS_DEFAULTS
            dict(loss="infonce", support_size=98304, embedding_dim=256, temperature=0.1, base_lr=0.3,
                 warmup_epochs=10.0, alpha=256.0),
            "mitool.vision.nnclr:NNCLR",
            # the support set must be much smaller than the training set, as MoCo's queue (the share of
            # the queries with an older embedding of their own image in it is the queue's, with K = S:
            # 0.31% for the paper's 98 304 of ImageNet's 1.28 M at batch 4096; half of them at S = N;
            # refused from S = N on): 4096 (0.24% on Fashion-MNIST at batch 128), and on the small
            # synthetic sets a batch of 64 and 128 embeddings; Fashion-MNIST: the short schedule and
            # tau 0.2, as simclr's row (not tuned for nnclr)
            {"fashion-mnist": FASHION_MNIST_SHORT_SCHEDULE | dict(support_size=4096, temperature=0.2),
             "cifar10": dict(support_size=4096), "stl10": dict(support_size=4096),
             "synthetic": dict(support_size=128, batch_size=64)},
            lars_from_batch=LARS_FROM_BATCH,
        ),
    )
}  # fmt: skip
"""The methods by name, in the order of the help text."""


def method_spec(name: str) -> MethodSpec:
    """The registry's entry for method ``name`` (ParameterError("method", ...) naming the choices)."""
    return METHODS[checks.choice("method", name, METHODS)]
