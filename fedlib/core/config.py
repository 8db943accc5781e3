"""RunConfig: every knob of one federated run, validated on creation, with a stable hash.

The hash is the run's key in the results store. It covers everything that changes the numbers
(dataset, partition, model, method and its arguments, optimiser, budget, seed) and leaves out
what only says *where* a run happens (device, data folder, results folder), so a store filled
on a GPU machine is found again when a notebook renders on a laptop.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from fedlib.core import determinism
from fedlib.core.registry import canonical_method, check_method, method_class, resolve_hparams
from fedlib.errors import FedlibError, one_of
from fedlib.folders import user_folder

# Bump when a change in fedlib alters what an existing config computes; old results are then
# recomputed instead of being returned from the store.
RESULTS_VERSION = 1

# Fields that do not change the numbers a run produces (only where and how fast it runs).
# ``backend`` and ``channels_last`` are here too: the stacked and graphed paths and the channels-last
# memory layout agree with the reference to float tolerance (not bitwise), so they share its stored results.
# ``deterministic`` too: on CUDA it picks repeatable kernels (the same sums, in a fixed order), not other numbers.
LOCATION_FIELDS = ("device", "data_dir", "results_dir", "download", "backend", "channels_last", "deterministic")
PRECISIONS = ("fp32", "bf16")
# Fields added after runs were stored: they enter the hash only when set to something else.
_LATER_DEFAULTS = {"quantity_split": "symmetric", "drop_last": False, "global_balance": False}
BACKENDS = ("sequential", "threads", "stacked", "graphed", "auto")
DEFAULT_BACKEND = "auto"  # the fast path; "sequential" is the reference the tests compare against
BACKEND_ENV = "FEDLIB_BACKEND"

# What a RunConfig made without ``backend`` or ``deterministic`` gets. fedlib never reads the
# environment for them: an edge (the command line, reproduce, a notebook's set-up, a tool's main)
# reads $FEDLIB_BACKEND and $FEDLIB_DETERMINISTIC once (:func:`defaults_from`) and sets them here
# (:func:`set_defaults`); :func:`reset_defaults` puts back fedlib's own.
_DEFAULTS = {"backend": DEFAULT_BACKEND, "deterministic": True}


def defaults_from(environ: Mapping[str, str]) -> dict[str, Any]:
    """The run defaults ``environ`` (an edge's ``os.environ``) asks for: ``backend`` from
    $FEDLIB_BACKEND (unset or blank: auto), ``deterministic`` from $FEDLIB_DETERMINISTIC
    (:func:`fedlib.core.determinism.switch`); a value that is neither is one line."""
    backend = (environ.get(BACKEND_ENV) or "").strip() or DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise one_of("backend", backend, BACKENDS)
    return {"backend": backend, "deterministic": determinism.switch(environ.get(determinism.ENV))}


def set_defaults(*, backend: str | None = None, deterministic: bool | None = None) -> dict[str, Any]:
    """Make ``backend`` and ``deterministic`` (those given) the defaults of every RunConfig made
    from now on in this process; returns the defaults before, for a caller that puts them back."""
    before = dict(_DEFAULTS)
    if backend is not None:
        if backend not in BACKENDS:
            raise one_of("backend", backend, BACKENDS)
        _DEFAULTS["backend"] = backend
    if deterministic is not None:
        _DEFAULTS["deterministic"] = bool(deterministic)
    return before


def reset_defaults() -> None:
    """fedlib's own run defaults again: backend auto, deterministic kernels."""
    _DEFAULTS.update(backend=DEFAULT_BACKEND, deterministic=True)


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one federated run.

    Accuracies and budgets follow the papers' vocabulary: ``clients`` is K, ``participation`` the
    fraction of clients sampled each round, ``local_epochs`` E, ``beta`` the Dirichlet
    concentration.
    """

    # data and partition
    dataset: str = "fashion_mnist"
    partition: str = "dirichlet"
    clients: int = 10
    beta: float = 0.5
    shards_per_client: int = 2
    classes_per_client: int = 2
    # quantity scheme: how a class is cut between its holders, "symmetric" or the FedVLS code's "official"
    quantity_split: str = "symmetric"
    min_client_size: int = 10
    # keep the smallest class count of every class before partitioning (PKD: global class balance);
    # read by every scheme but balanced (balanced already) and natural (refused),
    # fedlib.datasets.partition.globally_balanced
    global_balance: bool = False
    max_train_samples: int | None = None  # stratified subset for reduced-scale profiles
    max_test_samples: int | None = None
    # loader options (fedlib.datasets.data.load_dataset), e.g. {"digits_only": True} for FEMNIST, {"image_size": 64};
    # {"split": ...} re-splits train/test with the run's seed (fedlib.datasets.data.SPLITS, applied by the engine)
    dataset_options: dict = field(default_factory=dict)
    augmentation: str = "auto"  # a preset from fedlib.datasets.augment, or "auto" for the dataset default
    # model and method
    model: str = "lenet5"
    method: str = "fedavg"
    method_args: dict = field(default_factory=dict)
    # federated budget and local optimiser
    rounds: int = 20
    participation: float = 1.0
    local_epochs: int = 1
    batch_size: int = 50
    drop_last: bool = False  # drop each epoch's last partial local batch (torch DataLoader's drop_last)
    lr: float = 0.01
    lr_decay: float = 1.0  # multiplied into lr once per round
    momentum: float = 0.0
    weight_decay: float = 0.0
    eval_every: int = 1
    seed: int = 0
    # where it runs (not part of the hash)
    device: str = "auto"
    data_dir: str | None = None
    results_dir: str | None = None
    download: bool = False
    # local training: sequential | threads | stacked | graphed | auto (fedlib.engine.backends.threaded, .stacked,
    # .graphed: each client's steps replayed from a CUDA graph);
    # default auto (or what an edge set, set_defaults: $FEDLIB_BACKEND): threads on a CPU, on a GPU the fastest
    # path verified there (fedlib.engine.backend_choice; fast paths fall back to sequential where a method needs it)
    backend: str = field(default_factory=lambda: _DEFAULTS["backend"])
    channels_last: bool = False  # image batches and conv weights in NHWC memory layout
    # on CUDA, deterministic kernels (bit-identical repeat runs); False trades that for speed (fedlib.core.determinism);
    # default True (or what an edge set, set_defaults: $FEDLIB_DETERMINISTIC). CPU runs are bit-identical either way.
    deterministic: bool = field(default_factory=lambda: _DEFAULTS["deterministic"])
    # numbers-defining: bf16 autocast of the local forward passes (fp32 master weights and losses)
    precision: str = "fp32"

    def __post_init__(self) -> None:
        for name in ("method_args", "dataset_options"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):
                raise FedlibError(f"{name} must be a dict such as {{'mu': 0.01}}, got {value!r}")
        if isinstance(self.method, str):  # one spelling per method, so one hash per computation
            object.__setattr__(self, "method", canonical_method(self.method))
        object.__setattr__(self, "method_args", dict(self.method_args or {}))
        options = {k: v for k, v in (self.dataset_options or {}).items() if (k, v) != ("split", "standard")}
        object.__setattr__(self, "dataset_options", dict(sorted(options.items())))  # the default split is no option
        for name in ("data_dir", "results_dir"):  # ~ is the home folder; a blank folder is an error, not the default
            if isinstance(getattr(self, name), (str, os.PathLike)):
                object.__setattr__(self, name, str(user_folder(getattr(self, name), name)))
        validate(self)
        _canonicalise(self)

    # ----------------------------------------------------------------- identity
    def hashed_fields(self) -> dict[str, Any]:
        """The fields that define the numbers, as plain JSON-able values.

        ``method_args`` enters with every default filled in (the paper's per-dataset values
        included), so leaving an argument at its default and passing the default explicitly are
        one run, and a changed default is a new run rather than a stale store hit.

        Partition settings the scheme does not read (``fedlib.datasets.partition.FIELDS_READ``) enter at
        their dataclass defaults: ``iid`` with beta 0.5 and with beta 0.1 split the data alike, so
        they are one run. They are replaced rather than dropped so that a config whose unread
        settings sit at their defaults keeps the hash it had before this rule (most stored runs);
        one with a non-default unread setting (``classes_per_client=1`` on a dirichlet split) got
        a new hash, and ``fedlib migrate`` renames its stored folder (``store.migrate_hashes``).
        """
        return _hashed_values(self, {**self.to_dict(), **unread_partition_defaults(self.partition)})

    def resolved_method_args(self) -> dict[str, Any]:
        """The method's full hyperparameters: defaults <- per-dataset defaults <- method_args."""
        return resolve_hparams(method_class(self.method), self.method_args, self.dataset)

    def hashed_method_args(self) -> dict[str, Any]:
        """The resolved arguments minus those at a later-added default (Algorithm.later_defaults)."""
        later = method_class(self.method).later_defaults
        return {k: v for k, v in sorted(self.resolved_method_args().items())
                if not (k in later and v == later[k])}

    def method_revision(self) -> int:
        """The method's result revision under these arguments (see Algorithm.result_revision)."""
        return method_class(self.method).result_revision(self.resolved_method_args())

    def hash(self) -> str:
        """A stable 12-hex-digit key: same numbers-defining fields, same hash.

        Computed once per config object (a render asks it many times): the fields are frozen, and
        the cache is keyed by what could still change under it (the two dicts, which could be
        edited in place, the method's class and the results version), so it is never stale."""
        key = (json.dumps([self.method_args, self.dataset_options], sort_keys=True, default=repr),
               method_class(self.method), RESULTS_VERSION)
        cached = self.__dict__.get("_hash_cache")
        if cached is None or cached[0] != key:
            cached = (key, _digest(self.hashed_fields()))
            object.__setattr__(self, "_hash_cache", cached)  # frozen: not a field, so not in eq, repr or asdict
        return cached[1]

    # ----------------------------------------------------------------- conversion
    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-able dict (method_args sorted for stability)."""
        values = dataclasses.asdict(self)
        values["method_args"] = dict(sorted(self.method_args.items()))
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RunConfig":
        """Build from a dict; unknown keys are an error, not silently dropped."""
        if not isinstance(values, dict):
            raise FedlibError(f"a RunConfig is built from a dict of fields, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        _check_field_names({k: v for k, v in values.items() if k != "results_version"})
        return cls(**{k: v for k, v in values.items() if k in known})

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with some fields changed (validated again); an unknown field is one line."""
        _check_field_names(changes)
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=True)

    @classmethod
    def from_yaml(cls, text: str) -> "RunConfig":
        """Build from YAML text; invalid YAML, a key given twice or a non-mapping is one line."""
        from fedlib.yaml_input import load_yaml

        values = load_yaml(text, "RunConfig YAML") or {}
        if not isinstance(values, dict):
            raise FedlibError(f"RunConfig YAML must be a mapping of fields, got {type(values).__name__}")
        return cls.from_dict(values)


# --------------------------------------------------------------------- one form per config
FLOAT32_MAX = 3.4028234663852886e38  # training runs in float32: a larger setting overflows there


def _check_field_names(values: dict[str, Any]) -> None:
    """One line for a name that is no RunConfig field."""
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise FedlibError(f"unknown RunConfig field(s) {unknown}; valid fields: {sorted(known)}")


def _canonicalise(cfg: RunConfig) -> None:
    """Give a validated config its one canonical form, so that one computation has one hash:
    whole numbers in float fields become floats (``lr=1`` is ``lr=1.0``), method arguments take
    their declared types (``mu=1`` is ``mu=1.0``), and a sample cap at least the size of the split
    it caps is no cap (the engine keeps the whole split either way)."""
    for item in dataclasses.fields(cfg):
        value = getattr(cfg, item.name)
        if str(item.type) == "float" and isinstance(value, int):
            object.__setattr__(cfg, item.name, float(value))
    object.__setattr__(cfg, "method_args", typed_method_args(cfg.method, cfg.method_args, cfg.dataset))
    if cfg.max_train_samples is None and cfg.max_test_samples is None:
        return
    sizes = uncapped_sizes(cfg.dataset, cfg.dataset_options)
    if sizes is not None:
        for name, size in zip(("max_train_samples", "max_test_samples"), sizes):
            if getattr(cfg, name) is not None and getattr(cfg, name) >= size:
                object.__setattr__(cfg, name, None)


BUNDLED = ("digits", "synthetic")  # made by fedlib itself: their sizes need no files


def uncapped_sizes(dataset: str, dataset_options: dict) -> tuple[int, int] | None:
    """(train, test) sizes a run trains and tests on before any cap: the published sizes
    (``data_check.split_sizes``), or those a bundled dataset is made with under its options; None
    where they vary with the copy on disk (FEMNIST, Office-Caltech-10)."""
    from fedlib.datasets.data_check import split_sizes

    sizes = split_sizes(dataset, dataset_options)
    if sizes is None and dataset in BUNDLED:
        sizes = _bundled_sizes(dataset, json.dumps(dataset_options, sort_keys=True))
    return sizes


@functools.lru_cache(maxsize=64)
def _bundled_sizes(dataset: str, options: str) -> tuple[int, int]:
    """The split sizes of bundled ``dataset`` made with ``options`` (JSON), split as they say."""
    from fedlib.datasets import data

    split, loader_options = data.split_option(json.loads(options))
    made = data.apply_split(data.load_dataset(dataset, **loader_options), split, seed=0)
    return len(made.train_y), len(made.test_y)


def typed_method_args(method: str, args: dict[str, Any], dataset: str | None = None) -> dict[str, Any]:
    """``args`` (only those given) converted to the types of the method's defaults."""
    resolved = resolve_hparams(method_class(method), args, dataset)
    return {key: resolved[key] for key in args}


# --------------------------------------------------------------------- hash helpers
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING}


def unread_partition_defaults(scheme: str) -> dict[str, Any]:
    """The partition settings ``scheme`` does not read, at their RunConfig defaults."""
    from fedlib.datasets.partition import FIELDS_READ, SCHEME_SETTINGS

    return {name: _FIELD_DEFAULTS[name] for name in SCHEME_SETTINGS if name not in FIELDS_READ[scheme]}


def hash_with_unread_settings(cfg: RunConfig) -> str:
    """``cfg``'s hash under the rule before unread partition settings left it (every setting hashed
    as given): the folder name a store written by older code holds it under."""
    return _digest(_hashed_values(cfg, cfg.to_dict()))


def _hashed_values(cfg: RunConfig, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (cfg's fields) reduced to what defines the numbers (see RunConfig.hashed_fields)."""
    values = {k: v for k, v in values.items() if k not in LOCATION_FIELDS}
    # defaults of fields added later stay out, so hashes from before those fields hold
    if values["precision"] == "fp32":
        del values["precision"]
    if not values["dataset_options"]:
        del values["dataset_options"]
    for name, default in _LATER_DEFAULTS.items():
        if values[name] == default:
            del values[name]
    values["method_args"] = cfg.hashed_method_args()
    revision = cfg.method_revision()
    if revision:  # a fixed method: results stored before the fix must not be served
        values["method_revision"] = revision
    values["results_version"] = RESULTS_VERSION
    return values


def _digest(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# --------------------------------------------------------------------- validation
def _require(condition: bool, message: str) -> None:
    if not condition:
        raise FedlibError(message)


def _check_names(cfg: RunConfig) -> None:
    """Unknown dataset / model / method / partition names give one line listing the valid ones."""
    from fedlib import models
    from fedlib.datasets import data, partition

    if cfg.dataset not in data.DATASETS:
        raise one_of("dataset", cfg.dataset, data.DATASETS)
    if cfg.model not in models.MODELS:
        raise one_of("model", cfg.model, models.MODELS)
    if cfg.partition not in partition.PARTITIONS:
        raise one_of("partition", cfg.partition, partition.PARTITIONS)
    if cfg.quantity_split not in partition.QUANTITY_SPLITS:
        raise one_of("quantity_split", cfg.quantity_split, partition.QUANTITY_SPLITS)
    partition.check_global_balance(cfg.partition, cfg.global_balance)
    check_method(cfg.method, cfg.method_args, cfg.dataset, cfg)
    data.check_dataset_options(cfg.dataset, cfg.dataset_options)
    if cfg.augmentation != "auto":
        from fedlib.datasets import augment

        augment.augment_spec(cfg.augmentation)


_KINDS = {  # a field's annotation -> (test, what the error message asks for)
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and _float32(v),
              "a number (finite, within float32's range)"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "dict": (lambda v: isinstance(v, dict), "a dict"),
    "int | None": (lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)), "a whole number or None"),
    "str | None": (lambda v: v is None or isinstance(v, (str, os.PathLike)), "a path string or None"),
}
MAX_SEED = 2 ** 63 - 1


def _float32(value: int | float) -> bool:
    """Whether ``value`` is a number float32 training can hold (not NaN, not infinite, not huge)."""
    try:
        return abs(float(value)) <= FLOAT32_MAX
    except OverflowError:
        return False


def _check_types(cfg: RunConfig) -> None:
    """Every field has its annotated type (``clients="10"``, ``rounds=1.5``, ``device=None`` are errors)."""
    for item in dataclasses.fields(cfg):
        test, wanted = _KINDS[str(item.type)]
        value = getattr(cfg, item.name)
        if not test(value):
            raise FedlibError(f"{item.name} must be {wanted}, got {value!r} ({type(value).__name__})")


def validate(cfg: RunConfig) -> None:
    """Raise FedlibError (one line) for any impossible or unknown setting."""
    _check_types(cfg)
    _require(0 <= cfg.seed <= MAX_SEED, f"seed must be between 0 and 2**63 - 1, got {cfg.seed}")
    _require(cfg.min_client_size >= 0, f"min_client_size must be >= 0, got {cfg.min_client_size}")
    _require(cfg.clients >= 1, f"clients must be >= 1, got {cfg.clients}")
    _require(cfg.beta > 0, f"beta (Dirichlet concentration) must be > 0, got {cfg.beta}")
    _require(0 < cfg.participation <= 1, f"participation must be in (0, 1], got {cfg.participation}")
    _require(cfg.rounds >= 1, f"rounds must be >= 1, got {cfg.rounds}")
    _require(cfg.local_epochs >= 1, f"local_epochs must be >= 1, got {cfg.local_epochs}")
    _require(cfg.batch_size >= 1, f"batch_size must be >= 1, got {cfg.batch_size}")
    _require(cfg.lr > 0, f"lr must be > 0, got {cfg.lr}")
    _require(0 < cfg.lr_decay <= 1, f"lr_decay must be in (0, 1], got {cfg.lr_decay}")
    _require(0 <= cfg.momentum < 1, f"momentum must be in [0, 1), got {cfg.momentum}")
    _require(cfg.weight_decay >= 0, f"weight_decay must be >= 0, got {cfg.weight_decay}")
    _require(cfg.eval_every >= 1, f"eval_every must be >= 1, got {cfg.eval_every}")
    _require(cfg.shards_per_client >= 1, f"shards_per_client must be >= 1, got {cfg.shards_per_client}")
    _require(cfg.classes_per_client >= 1, f"classes_per_client must be >= 1, got {cfg.classes_per_client}")
    _require(cfg.device in ("auto", "cpu") or cfg.device.startswith(("cuda", "mps")),
             f"device must be auto, cpu, cuda or cuda:N, got {cfg.device!r}")
    if cfg.precision not in PRECISIONS:
        raise one_of("precision", cfg.precision, PRECISIONS)
    if cfg.backend not in BACKENDS:
        raise one_of("backend", cfg.backend, BACKENDS)
    for name in ("max_train_samples", "max_test_samples"):
        value = getattr(cfg, name)
        _require(value is None or value >= 1, f"{name} must be >= 1 or None, got {value}")
    if cfg.max_train_samples is not None:
        _require(cfg.clients <= cfg.max_train_samples,
                 f"clients ({cfg.clients}) must be <= max_train_samples ({cfg.max_train_samples})")
    _check_names(cfg)
