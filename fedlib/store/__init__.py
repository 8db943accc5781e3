"""The results store: one folder per config hash.

    <results>/<hash>/config.json     the full RunConfig (location fields included, for the record)
    <results>/<hash>/rounds.jsonl    one JSON line of metrics per evaluated round
    <results>/<hash>/meta.json       fedlib version, code revision, environment, as the run started;
                                     ``resumes``: one entry per resume (revision, threads, host, ...)
    <results>/<hash>/checkpoint.pt   while the run trains: global model + algorithm state after the
                                     last finished round (the resume checkpoint), naming ...
    <results>/<hash>/clients/*.pt    ... one file per client holding that client's state (MOON's
                                     previous model, SCAFFOLD's control variate, FedCurv's Fisher)
    <results>/<hash>/final.pt        once the run is over: the final global model and the server's
                                     run-level state; checkpoint.pt and clients/ are then deleted
    <results>/<hash>/summary.json    its presence means the run is complete
    <results>/<hash>/digest.json     written last: the SHA-256 of each file above (not the checkpoints),
                                     checked at every read; an edited file is refused
    <results>/<hash>/claim.json      while a process trains the run: its host, pid and heartbeat
    <results>/.superseded/<old>/     a run ``migrate_hashes`` set aside when it renamed folders after a
                                     change of the hash rule: the same computation as a run it kept

Every file is written to a temporary name and moved into place (``os.replace`` is atomic on one
file system), so a crash never leaves a half-written file that reads as complete. A run folder has
one writer at a time, the process that holds its claim. One concept per module:

- :mod:`.paths` -- where the working and the reference store are, a run's folder in them
- :mod:`.serving` -- which store serves a run (the reference store before the working store)
- :mod:`.record` -- ``RunRecord``, one run's folder: config, meta, round log, checkpoints, summary
- :mod:`.restore` -- a server rebuilt from a run's checkpoint or final state (model, extras, round)
- :mod:`.client_tables` -- per-client state split out of a checkpoint, one file per client
- :mod:`.claim` -- ``Claim``, the lock a training holds on its run folder, and its heartbeat
- :mod:`.consistency` -- whether a complete run's files agree with each other and its hash
- :mod:`.digest` -- a finished run's seal: its files' digests, so that an edit is noticed
- :mod:`.files` -- atomic writes, JSON, bytes on disk
- :mod:`.migration` -- renaming run folders stored under an old config hash
- :mod:`.near_misses` -- stored runs that differ from a config in one or two settings
- :mod:`.provenance` -- code revision, environment, resumes, ``ProvenanceWarning``
- :mod:`.publishing` -- copying a finished run's metrics into the reference store

Every public name is re-exported here (``store.RunRecord``, ``store.run_dir``, ``store.code_revision``).
A module reads the names of its own module, so a test that monkeypatches one (``HEARTBEAT_SECONDS``,
``code_revision``) patches the module that owns it (``fedlib.store.claim``).
"""

from __future__ import annotations

from fedlib.store.claim import (CLAIM_FILE, HEARTBEAT_SECONDS, HUNG_RUN_SECONDS, STALE_CLAIM_SECONDS, Claim,
                                     ClaimedError)
from fedlib.store.client_tables import (CLIENT_TABLE, client_bundles, is_client_table, join_client_tables,
                                             split_client_tables)
from fedlib.store.consistency import inconsistency, rounds_problem
from fedlib.store.digest import DIGEST_FILE, is_sealed, seal, seal_problem, warn_unsealed
from fedlib.store.files import disk_bytes, human_bytes, read_json, write_atomic, write_json
from fedlib.store.migration import ASIDE_DIR, Migration, migrate_hashes
from fedlib.store.near_misses import describe_near, field_differences, near_runs, stored_records
from fedlib.store.paths import (DEFAULT_RESULTS, REFERENCE_ENV, REFERENCE_FILES, REFERENCE_RESULTS,
                                     WRITE_REFERENCE_ENV, analysis_cache, check_writable, reference_root, results_root,
                                     run_dir, same_folder)
from fedlib.store.provenance import (STAMP_FILE, ProvenanceWarning, code_revision, code_revision_stamp,
                                          environment, fedlib_digest, is_clean_revision, resume_entry,
                                          trained_revisions)
from fedlib.store.publishing import publish
from fedlib.store.record import CHECKPOINT_FILE, CLIENTS_DIR, FINAL_FILE, MODEL_READS_ENV, RunRecord, list_runs
from fedlib.store.restore import restore_server, saved_state, to_device
from fedlib.store.serving import (RunState, is_stored, reference_record, run_state, run_states, same_metrics,
                                 served_record, stored_record)
