"""Hash migration: partition settings a scheme does not read left the config hash
(``RunConfig.hashed_fields``), so a run stored with such a setting off its default sits under its
old hash until :func:`migrate_hashes` renames its folder (``fedlib migrate``); until then, a run
asked for under its new hash warns once that the old folder is there. The same command seals the
complete runs stored before runs were sealed (:mod:`.digest`), once their files agree."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from fedlib.core.config import RunConfig, hash_with_unread_settings, unread_partition_defaults
from fedlib.errors import one_line
from fedlib.store.consistency import inconsistency
from fedlib.store.digest import is_sealed, seal, seal_problem
from fedlib.store.files import read_json, write_json
from fedlib.store.record import RunRecord, list_runs

ASIDE_DIR = ".superseded"  # where migrate_hashes moves a run that another run of its new hash replaces
_HINTED: set[Path] = set()


def hint_unmigrated(cfg: RunConfig, roots: list[Path]) -> None:
    """Warn once per folder (one line) when a store holds ``cfg``'s run under its old hash."""
    unread = unread_partition_defaults(cfg.partition)
    if all(getattr(cfg, name) == value for name, value in unread.items()):
        return  # both hashes agree
    old = hash_with_unread_settings(cfg)
    for root in roots:
        folder = Path(root) / old
        if folder not in _HINTED and (folder / "config.json").exists():
            _HINTED.add(folder)
            warnings.warn(f"{folder} holds run {cfg.hash()} under its old config hash; rename it with: "
                          f"fedlib migrate --results {root}", UserWarning, stacklevel=3)


@dataclass
class Migration:
    """What :func:`migrate_hashes` did to one store (with ``dry_run``: would do)."""

    root: Path
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (old hash, new hash)
    set_aside: list[tuple[str, str]] = field(default_factory=list)  # (folder moved to ASIDE_DIR, hash it lost)
    left: list[tuple[str, str]] = field(default_factory=list)  # (folders not touched, why)
    sealed: list[str] = field(default_factory=list)  # complete runs given a digest.json

    def lines(self) -> list[str]:
        """One line per change or refusal, then a count."""
        lines = [f"renamed {old} -> {new}" for old, new in self.renamed]
        lines += [f"moved {name} to {ASIDE_DIR}/{name}: the same computation as run {new}, which is kept (finished, "
                  "or more rounds)" for name, new in self.set_aside]
        lines += [f"left {name} alone: {why}" for name, why in self.left]
        lines += [f"sealed {name} (digest.json over its files)" for name in self.sealed]
        return lines + [f"{self.root}: {len(self.renamed)} renamed, {len(self.set_aside)} set aside, "
                        f"{len(self.left)} left alone, {len(self.sealed)} sealed"]


def migrate_hashes(root: str | os.PathLike, *, dry_run: bool = False) -> Migration:
    """Rename every run folder of ``root`` named by its old hash (``config.hash_with_unread_settings``)
    to its hash now, and set that hash in its summary.json, the only file of a run folder that
    records it (config.json, meta.json, rounds.jsonl and the checkpoints do not).

    Runs that now share a hash trained identically by construction: the complete one with the
    most rounds keeps it (the one already there on a tie) and the others move to ``ASIDE_DIR``,
    reported, never deleted. Left alone, and reported: a folder named by neither hash of its
    config (a stale run of an older results version or method revision) and a group some live
    process is writing. Running it again changes nothing; ``dry_run`` only reports.
    """
    migration, groups = Migration(Path(root)), {}
    for record in list_runs(root, complete_only=False):
        try:
            cfg = record.read_config()
        except (ValueError, TypeError, OSError) as exc:  # FedlibError is a ValueError
            migration.left.append((record.folder.name, f"its config.json cannot be read ({one_line(exc)})"))
            continue
        new, old = cfg.hash(), hash_with_unread_settings(cfg)
        if record.folder.name in (new, old):
            groups.setdefault(new, []).append((record, old))
        else:
            migration.left.append((record.folder.name, f"its config hashes to {new}, not to its name "
                                                       "(a stale run, or another hash rule changed)"))
    for new, members in groups.items():
        _migrate_group(Path(root), new, members, migration, dry_run)
    _seal_unsealed(Path(root), migration, dry_run)
    return migration


def _seal_unsealed(root: Path, migration: Migration, dry_run: bool) -> None:
    """Seal every complete run of ``root`` without a digest.json whose files agree with each
    other and with its folder's name; a run whose files disagree is left alone, reported."""
    for record in list_runs(root):
        if is_sealed(record.folder):
            continue
        try:
            problem = inconsistency(record.folder.name, record.read_config(), record.read_summary(),
                                    record.read_rounds())
            record.read_meta()
        except (ValueError, TypeError, KeyError, OSError) as exc:
            problem = f"its files cannot be read ({one_line(exc)})"
        if problem:
            migration.left.append((record.folder.name, f"not sealed: {problem}"))
            continue
        migration.sealed.append(record.folder.name)
        if not dry_run:
            seal(record.folder)


def _migrate_group(root: Path, new: str, members: list[tuple["RunRecord", str]], migration: Migration,
                   dry_run: bool) -> None:
    """Give hash ``new`` to the best of ``members`` (record, old hash) of the folders that now hash
    to it: the complete one with the most rounds, on a tie the one already named ``new``; move the
    others to ASIDE_DIR."""
    if [record.folder.name for record, _ in members] == [new]:
        if not dry_run:
            _set_summary_hash(members[0][0].folder, members[0][1], new)
        return
    keep, old = max(members, key=lambda m: (m[0].complete, m[0].rounds_logged(), m[0].folder.name == new))
    losers = [record.folder for record, _ in members if record is not keep]
    names = ", ".join(record.folder.name for record, _ in members)
    if any(record.in_progress() for record, _ in members):
        migration.left.append((names, "a live process is writing it; migrate again when it is done"))
    elif any((root / ASIDE_DIR / folder.name).exists() for folder in losers):
        migration.left.append((names, f"{ASIDE_DIR}/ already holds a folder of that name; compare the two and "
                                      "remove one by hand"))
    else:
        migration.set_aside += [(folder.name, new) for folder in losers]
        if keep.folder.name != new:
            migration.renamed.append((keep.folder.name, new))
        if not dry_run:
            _move(root, keep.folder, losers, old, new)


def _move(root: Path, keep: Path, losers: list[Path], old: str, new: str) -> None:
    """Move ``losers`` aside first (one may hold the name ``new``), then ``keep`` to ``new``."""
    for folder in losers:
        (root / ASIDE_DIR).mkdir(exist_ok=True)
        os.rename(folder, root / ASIDE_DIR / folder.name)
    if keep.name != new:
        os.rename(keep, root / new)
    _set_summary_hash(root / new, old, new)


def _set_summary_hash(folder: Path, old: str, new: str) -> None:
    """Rewrite summary.json's ``config_hash`` from ``old`` to ``new`` (nothing when it holds another)."""
    try:
        summary = read_json(folder / "summary.json")
    except (OSError, ValueError):  # no summary yet (an unfinished run), or an unreadable one
        return
    if old != new and isinstance(summary, dict) and summary.get("config_hash") == old:
        if seal_problem(folder):
            return  # an edited sealed run stays refused, never resealed over its edit
        sealed = is_sealed(folder)
        write_json(folder / "summary.json", {**summary, "config_hash": new})
        if sealed:
            seal(folder)  # the one sanctioned change to a finished run's files

