"""Give every notebook a closing "Try it" cell: prompts that change one parameter each, and links to
the code of the methods the notebook compares.

    python tools/try_it.py            # write (or rewrite) the cell in notebooks/*.ipynb
    python tools/try_it.py --check    # exit 1 listing notebooks whose cell is missing or differs

The prompts live here, one entry per notebook; the cell is the notebook's last, found again by its
first line, so running the tool twice changes nothing. Outputs are left as they are; files are
written the way Jupyter writes them (indent 1, trailing newline).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fedlib.reporting.notebook import TRY_IT_KEY, load_profiles, read_profile_file  # noqa: E402

HEADING = "## Try it"
ASSIGNMENT = re.compile(r"`(\w+) = ([^`]+)`")  # how a prompt sets a parameter: `name = value` (value in YAML)
INTRO = ("Change one parameter in the parameters cell, write down what you expect the figure or table to "
         "do, run all cells, and compare. The cell under the parameters cell lists your edit; runs already in the "
         "store are reused, so only the changed runs train.")

# notebook -> (prompts, code links as (path in the repository, what to read there))
PROMPTS: dict[str, tuple[list[str], list[tuple[str, str]]]] = {
    "getting_started": ([
        "`beta = 0.05`: a far stronger skew. Does the worst class fall, and do FedAvg and FedProx part ways "
        "more than at 0.1?",
        "`prox_mu = 1.0`: a strong pull towards the global model. Does FedProx learn faster or slower per "
        "round than FedAvg?",
        "`local_epochs = 5`: more local steps drift further from the global model. Does FedProx's difference "
        "from FedAvg grow?",
    ], [("fedlib/algorithms/fedprox.py", "`proximal_term`, the whole of FedProx"),
        ("fedlib/algorithms/fedavg.py", "FedAvg: the plain cross-entropy every other method changes")]),
    "fedvls_fig3_partitions": ([
        "`beta = 0.5`: how many client-class cells are empty now, against 0.05?",
        "`seed = 1`: the same β, another draw. How much does the number of vacant classes move between "
        "draws? (At full scale it decides which seed scores best: see docs/results.md.)",
        "`classes_per_client = 5`: the quantity partition with half the classes per client. Which of the "
        "two panels now looks more skewed?",
    ], [("fedlib/datasets/partition/dirichlet.py", "`split`, the Dirichlet scheme drawn here"),
        ("fedlib/datasets/partition/quantity.py", "`split`, the quantity scheme drawn here")]),
    "fedvls_fig1_fig4_local_update": ([
        "`update_epochs = 1`: one local epoch instead of five. Predict the vacant classes' accuracy after "
        "it, for FedAvg and for FedVLS: does a single epoch already erase them?",
        "`rounds = 5`: a global model trained a quarter as long. Does the local update then have less to "
        "erase?",
        "`fedvls_lam = 1.0`: ten times the vacant-class distillation weight. Does FedVLS keep more of the "
        "vacant classes, and at what cost to the classes the client holds?",
    ], [("fedlib/algorithms/fedvls.py", "`vacant_distillation`, `official_suppression` and `local_loss`"),
        ("fedlib/algorithms/fedlc.py", "`calibrated_logits`, the calibration FedVLS starts from")]),
    "fedvls_fig2_confusion": ([
        "`update_epochs = 1`: one FedLC epoch instead of five. Do the minority classes' predictions stay "
        "on their own labels?",
        "`client = 0`: another client. Are its minority classes sent to the same majority classes?",
        "`beta = 0.3`: milder skew. Does the confusion matrix become more diagonal?",
    ], [("fedlib/algorithms/fedlc.py", "`calibrated_logits` and `local_loss`")]),
    "fedvls_fig5_convergence": ([
        "`betas = [0.5, 0.05]`: does FedVLS's gap to FedAvg grow as the skew grows, as the paper says?",
        "`methods = [\"fedavg\", \"fedlc\", \"fedvls\"]`: where does FedLC, the calibration alone, land "
        "between the two?",
        "`seeds = [0, 1, 2]`: with a band of one std, is the gap between the curves larger than the band?",
    ], [("fedlib/algorithms/fedvls.py", "`local_loss`: calibration, vacant-class distillation, logit "
                                        "suppression")]),
    "fedvls_fig6_sensitivity": ([
        "`participations = [0.3, 1.0]`: fewer clients per round. Which method loses more?",
        "`epoch_values = [1, 5]`: more local epochs. Predict which curve gains and which drifts.",
        "`client_counts = [10, 50]`: more, smaller clients. Does the ordering of the methods hold?",
    ], [("fedlib/algorithms/fedvls.py", "`local_loss`")]),
    "fedvls_table1_4_dirichlet": ([
        "`betas = [0.5, 0.1, 0.05]`: the paper's three columns. Predict the column where FedVLS's lead, "
        "if any, is largest.",
        "`methods = [\"fedavg\", \"fedlc\", \"fedrs\", \"fedvls\"]`: add FedRS, which restricts the logits "
        "of missing classes instead of calibrating them. Where does it rank?",
        "`seeds = [0, 1, 2]`: does one seed's ordering survive the mean over three? (At full scale on MNIST "
        "it does not for FedVLS: docs/results.md.)",
    ], [("fedlib/algorithms/fedvls.py", "`local_loss`"), ("fedlib/algorithms/fedlc.py", "`calibrated_logits`"),
        ("fedlib/algorithms/fedrs.py", "`restricted_logits`")]),
    "fedvls_table2_quantity": ([
        "`classes_per_client = {\"mnist\": 5}`: milder quantity skew, five classes per client. Do the methods "
        "move closer together?",
        "`quantity_split = \"official\"`: the authors' way of cutting a class between its holders. Does any "
        "number move by more than a point?",
        "`methods = [\"fedavg\", \"fedlc\", \"fedvls\"]`: is calibration alone (FedLC) enough here?",
    ], [("fedlib/algorithms/fedvls.py", "`local_loss`"), ("fedlib/datasets/partition/quantity.py", "`split`")]),
    "fedvls_table3_backbones": ([
        "`betas = [0.5, 0.05]`: does the backbone matter more under strong or mild skew?",
        "`local_epochs = 3`: does a deeper network drift more with more local steps?",
        "`methods = [\"fedavg\", \"fedlmd\", \"fedvls\"]`: FedLMD in FedNTD's place; it distils only the "
        "classes a client holds few of. Does it favour the same backbone as FedNTD?",
    ], [("fedlib/algorithms/fedvls.py", "`local_loss`"), ("fedlib/algorithms/fedntd.py", "`not_true_kl`")]),
    "fedvls_table5_6_7_ablation": ([
        "`beta = 0.1`: milder skew, the same four ablation rows. Does the same term, distillation or "
        "suppression, still carry the gain?",
        "`lams = [0.05, 0.1, 0.5, 1.0]`: is there a λ beyond which accuracy falls?",
        "`combination_methods = [\"fedvls\", \"fedvls+fedsam\"]`: does a flatter-minimum optimiser add to "
        "FedVLS or overlap with it?",
    ], [("fedlib/algorithms/fedvls.py", "the `distill` and `suppress` switches in `local_loss`"),
        ("fedlib/algorithms/fedsam.py", "FedSAM's sharpness-aware step")]),
    "fedlmd_fig2_prediction_distribution": ([
        "`beta = 1.0`: milder skew. Does the global model's prediction histogram still follow the sampled "
        "clients' labels?",
        "`participation = 1.0`: every client every round. Predict how the round-to-round swings change.",
        "`rounds = 12`: less than half the training. Is the mismatch larger earlier on?",
    ], [("fedlib/analysis/prediction_stats.py", "`total_variation` and `top_class_share`, the measures shown"),
        ("fedlib/algorithms/fedlmd.py", "`distillation_support`: the classes FedLMD distils, chosen from "
                                        "exactly this mismatch")]),
    "fedlmd_fig4_kd_variants": ([
        "`lmd_tau = 4.0`: a softer teacher. Predict whether FedLMD gains or loses against FedNTD.",
        "`beta = 0.05`: the paper's skew. Do the variants keep the order they have at 0.5, at this scale?",
        "`local_epochs = 3`: more local steps, more forgetting. Which variant protects best?",
    ], [("fedlib/algorithms/fedlmd.py", "`teacher_distribution` and `distillation_kl`"),
        ("fedlib/algorithms/fedntd.py", "`not_true_kl`"), ("fedlib/algorithms/fedavg_kd.py", "`local_loss`"),
        ("fedlib/algorithms/fedlmd_tf.py", "the teacher-free `teacher_distribution`")]),
    "fedlmd_fig5_light_baselines": ([
        "`participation = 0.5`: twice the clients per round. Does FedLMD-Tf's position among the light "
        "methods change?",
        "`rounds = 10`: a third of the training. Is FedLMD-Tf's lead with shards there from the start?",
        "`methods = [\"fedavg\", \"fedrs\", \"fedlmd_tf\", \"fedlmd\"]`: add FedLMD with its teacher (one "
        "more forward pass per batch). How much does the teacher buy?",
    ], [("fedlib/algorithms/fedlmd_tf.py", "`teacher_distribution`: a teacher made of the labels alone"),
        ("fedlib/algorithms/fedrs.py", "`restricted_logits`")]),
    "fedlmd_fig6_accuracy_rounds": ([
        "`methods = [\"fedavg\", \"fedntd\", \"fedlmd\"]`: does FedLMD's curve dip less than FedNTD's after "
        "its best round?",
        "`rounds = 15`: half the training. At α = 0.05, which curve is steadier in the first 15 rounds?",
        "`seeds = [0, 1]`: are the dips the same in both seeds, or noise?",
    ], [("fedlib/algorithms/fedlmd.py", "`local_loss`")]),
    "fedlmd_fig7_9_sensitivity": ([
        "`epochs_grid = [1, 2, 5]`: predict where FedLMD's accuracy peaks over the local epochs.",
        "`tau_grid = [0.5, 1.0, 4.0]`: is FedLMD sensitive to its temperature?",
        "`switch_rounds = [0, 1, 2, 3, 4]`: does switching the teacher on earlier always help?",
    ], [("fedlib/algorithms/fedlmd.py", "`distillation_scale` and `local_loss`"),
        ("fedlib/algorithms/fedlmd_tf.py", "`uses_teacher`: the switching round")]),
    "fedlmd_table1_2_kd_variants": ([
        "`lmd_tau = 3.0`: a softer FedLMD teacher. Predict Table 1's order first, then see whether FedLMD "
        "moves against full KD and FedNTD.",
        "`smoothing = 0.3`: three times the label smoothing. Is FedLMD-Tf more than label smoothing "
        "restricted to the client's classes?",
        "`beta = 0.05`: the paper's skew. Do both tables keep their order at this scale?",
    ], [("fedlib/algorithms/fedlmd.py", "`local_loss`"), ("fedlib/algorithms/fedlmd_tf.py", "`local_loss`"),
        ("fedlib/algorithms/label_smoothing.py", "label smoothing")]),
    "fedlmd_table3_partitions": ([
        "`methods = [\"fedavg\", \"fedprox\", \"fedntd\", \"fedlmd\"]`: the table without SCAFFOLD and FedRS, "
        "the two that lead at this scale. Where does FedLMD rank among the rest?",
        "`settings = [{\"dataset\": \"mnist\", \"partition\": \"dirichlet\", \"beta\": 0.5}]`: one column of "
        "mild skew. Do the methods move closer together, and which one leads?",
        "`rounds = 10`: the speedup column counts the rounds each method needs to reach FedAvg's accuracy. "
        "Predict it for FedLMD.",
    ], [("fedlib/algorithms/fedlmd.py", "`local_loss`"), ("fedlib/algorithms/fedntd.py", "`not_true_kl`")]),
    "fedlmd_table4_architectures": ([
        "`beta = 0.5`: does the architecture matter less under mild skew?",
        "`local_epochs = 3`: which method keeps its rank as local work grows?",
        "`rounds = 10`: do the differences between methods grow or shrink with the budget?",
    ], [("fedlib/algorithms/fedlmd.py", "`local_loss`"), ("fedlib/algorithms/fedcurv.py", "FedCurv's penalty")]),
    "fedlmd_table5_combinations": ([
        "`part_args = {fedlmd: {tau: 1.0, beta: 1.0}, fedprox: {mu: 0.1}, fedavgm: {server_momentum: 0.9, server_lr: 1.0}}`: "
        "FedProx's mu ten times the lesson's 0.01, the rest as it is. Does FedLMD + FedProx gain or lose?",
        "`beta = 0.05`: stronger skew. Do the combinations help more there?",
        "`rounds = 10`: a third of the training. Does server-side momentum (FedAvgM) help more early on?",
    ], [("fedlib/algorithms/fedlmd.py", "`local_loss`"), ("fedlib/algorithms/fedprox.py", "`proximal_term`"),
        ("fedlib/algorithms/fedavgm.py", "the server's momentum step")]),
    "fedcsd_fig1_drift": ([
        "`drift_epochs = 10`: predict how far the logits drift compared with the features.",
        "`beta = 0.1`: a stronger skew than the lesson's 0.5. Does the drift grow?",
        "`logit_mu = 0.01`: ten times the logit distillation. Does it hold the logits near the global "
        "model's?",
    ], [("fedlib/analysis/drift.py", "`drift_study`: the local epochs and what is measured after each"),
        ("fedlib/algorithms/fedcsd.py", "`csd_term`")]),
    "fedcsd_fig3_fig4_sensitivity": ([
        "`mus = [0.001, 0.01, 0.1, 1.0]`: the paper's grid. Where does accuracy fall off?",
        "`taus = [1.0, 4.0, 10.0, 20.0]`: is FedCSD sensitive to its temperature?",
        "`alphas = [0.0, 0.8, 0.9, 0.99]`: does a slower-moving teacher help?",
    ], [("fedlib/algorithms/fedcsd.py", "`csd_term` and `moving_average`")]),
    "fedcsd_fig5_mask_filter": ([
        "`rounds = 20`: twice the rounds. Does the share of filtered soft labels fall as the teacher improves?",
        "`tau = 4.0`: a lower temperature. More or fewer soft labels filtered?",
        "`betas = {\"mnist\": [0.05, 0.5]}`: is more filtered under strong skew?",
    ], [("fedlib/algorithms/fedcsd.py", "`teacher_mask`")]),
    "fedcsd_fig7_tsne": ([
        "`tsne_samples = 500`: do the clusters look clearer with more points, or only busier?",
        "`local_client = 3`: another client's local features. Are its missing classes scattered?",
        "`beta = 0.1`: stronger skew. Does FedCSD still keep the classes apart?",
    ], [("fedlib/algorithms/fedcsd.py", "`similarity_weights` and `local_loss`")]),
    "fedcsd_table1_3_4_label_skew": ([
        "`local_epochs = 1`: a fifth of the local training. Does FedCSD's lead at Dir(0.01) survive when the "
        "clients drift less?",
        "`ablations = [\"base\", \"no_similarity\", \"no_mask\", \"no_tma\"]`: the paper's ablation. Which "
        "component matters most?",
        "`mask_betas = [0.01, 0.5]`: does the adaptive mask's lead over the hard mask shrink under milder skew?",
    ], [("fedlib/algorithms/fedcsd.py", "`local_loss`, `teacher_mask`, `similarity_weights`")]),
    "fedcsd_table2_office_caltech": ([
        "`mu = 0.001`: Table I's weight instead of the Office setting's 0.5. Which rows move?",
        "`clients = 8`: more, smaller clients on the stand-in data. Does the ordering hold?",
        "`beta = 0.1`: stronger skew on the stand-in. Which method suffers most?",
    ], [("fedlib/algorithms/fedcsd.py", "`local_loss`"), ("fedlib/algorithms/moon.py", "MOON's contrastive term")]),
    "pkd_fig2_class_gap": ([
        "`rounds = 30`: three times the training. Does the gap between the best and worst class close?",
        "`classes_per_client = 2`: a milder pathological split. How much of the gap is left?",
        "`seeds = [0, 1, 2]`: is the weakest class the same in every seed?",
    ], [("fedlib/analysis/class_gap.py", "`mean_subtracted`: the class accuracies the figure plots"),
        ("fedlib/algorithms/pkd.py", "`partial_kd_loss`: what PKD does about the weak classes")]),
    "pkd_fig4_5_7_weak_class_discovery": ([
        "`confusion_ratio = 0.3`: a looser threshold. Predict whether the groups grow.",
        "`grouping = \"components\"`: connected components instead of cliques. Do the groups merge?",
        "`warmup_rounds = 3`: half the warm-up. Are the discovered groups the same as after 6 rounds, and "
        "the paper's?",
    ], [("fedlib/measures/weak_classes.py", "`weak_pairs` and `discover_groups`"),
        ("fedlib/algorithms/pkd.py", "`expert_assignment`: which samples an expert fires on")]),
    "pkd_fig3_6_9_class_accuracy_rounds": ([
        "`pkd_student_init = \"fresh\"`: start the KD stage from the initial weights, the reading the "
        "paper's cost study fits. Does PKD's worst class now rise above FedAvg's?",
        "`pkd_t_squared = True`: the KD term times T². Does the worst-class curve move?",
        "`temperature = 2.0`: a sharper expert. Predict the effect on the worst class.",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss` and `group_kl`")]),
    "pkd_fig11_expert_activation": ([
        "`temperature = 2.0`: does the firing rate depend on the temperature? (Look at where it is used.)",
        "`beta = 0.1`: stronger skew in setting (b). Do the experts fire more?",
        "`rounds = 10`: half the run. Do the experts fire more while the global model is younger?",
    ], [("fedlib/algorithms/pkd.py", "`expert_assignment`")]),
    "pkd_pilot_loss_normalisation": ([
        "`score_rounds = 2`: a shorter scoring window. Does the winning variant change?",
        "`score_rounds = 20`: score the whole PKD stage (rounds 21-40) instead of its last 5 rounds, from the same "
        "stored runs. Does any variant stand out from FedAvg?",
        "`tie_points = 0.0`: no ties, the highest score wins outright. Which variant wins, and by how much?",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss`: the `normalise` and `t_squared` options")]),
    "pkd_kd_stage_readings": ([
        "`window = [81, 120]` in the lesson or paper profile: the gain averaged over 40 rounds instead of 20, "
        "read from the same stored runs. Does reading (a) keep its sign on both seeds?",
        "`window = [21, 30]` in the paper profile (the first ten KD rounds): a fresh start should trail FedAvg "
        "there. By how much, and for how long?",
        "`focus_class = 0`: read T-shirt/top, the other class of Shirt's group, from the same stored runs. Where "
        "does the accuracy Shirt loses go?",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss` (`normalise`) and `PKD.begin_round` (`student_init`)"),
        ("fedlib/analysis/pkd_readings.py", "the readouts and `verdict`, the rule fixed before the runs")]),
    "pkd_table1_4_class_accuracy": ([
        "`pkd_student_init = \"fresh\"`: the other reading of where the KD stage starts. Which column "
        "changes most?",
        "`pkd_t_squared = True`: the KD term times T². Does Min move?",
        "`warmup_rounds = 1`: a shorter warm-up. Are weaker groups discovered, and does it matter?",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss`, `train_expert`")]),
    "pkd_table5_femnist": ([
        "`fractions = [0.1, 0.5, 1.0]`: the paper's three columns. Predict where PKD gains most.",
        "`beta = 0.1`: stronger skew on the stand-in. Does the worst class fall?",
        "`clients = 20`: more writers (or stand-in clients). Does the ordering hold?",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss`")]),
    "pkd_table6_7_baselines": ([
        "`rounds = 10`: half the training. Which method's worst class is ahead this early?",
        "`temperature = 2.0`: does PKD's row move, and the others stay put?",
        "`local_epochs = 3`: does Cutout or focal loss profit more from longer local training?",
    ], [("fedlib/algorithms/pkd.py", "`partial_kd_loss`"), ("fedlib/algorithms/focal.py", "the focal loss")]),
    "pkd_table8_cifar100": ([
        "`max_groups = [1, 2, 3]`: a third expert. Does it help or dilute?",
        "`pkd_lam = 2.0`: twice the KD weight. Predict the effect on Min and on Ave.",
        "`rounds = 10`: half the run. Are the experts worth more or less in a shorter run?",
    ], [("fedlib/algorithms/pkd.py", "`train_expert` and `partial_kd_loss`")]),
    "pkd_table9_10_cost": ([
        "`expert_outputs = \"all\"`: count an expert's forward pass on every sample. How much does PKD's "
        "cost grow?",
        "`pkd_targets_from_pkd_stage = False`: count the warm-up's rounds towards PKD's targets too. Which "
        "targets does PKD reach sooner?",
        "`rounds = 10`: half the run. Which targets are still reached?",
    ], [("fedlib/algorithms/pkd.py", "`_expert_round` and `partial_kd_loss`: what the cost counts")]),
    "cross_paper_table": ([
        "`settings = [{\"dataset\": \"mnist\", \"partition\": \"dirichlet\", \"beta\": 0.5}]`: milder "
        "skew. Do the nine methods bunch together?",
        "`rounds = 10`: half the training. Is the ordering at 20 rounds already there at 10?",
        "`seeds = [0, 1]`: which differences are larger than the seed-to-seed spread?",
    ], [("fedlib/algorithms/", "one file per method: compare `local_loss` in fedvls.py, fedlmd.py, "
                               "fedntd.py, fedlc.py, and `partial_kd_loss` in pkd.py")]),
}


SEE = "What you should see"  # the folded outcome under a prompt (the lesson profile's try_it entry)


def outcomes(stem: str) -> list[str | None]:
    """What each prompt of ``stem`` shows, from the ``try_it`` list of its lesson profile (one entry per
    prompt, in order; None where none is written yet)."""
    path = ROOT / "profiles" / f"{stem}.yaml"
    load_profiles(ROOT / "profiles", stem)  # the file's checks, the try_it list's kind among them
    entries = ((read_profile_file(path) or {}).get("lesson") or {}).get(TRY_IT_KEY) or []
    if len(entries) > len(PROMPTS[stem][0]):
        raise SystemExit(f"{path}: try_it has {len(entries)} entries for {len(PROMPTS[stem][0])} prompts")
    return [(" ".join(e["see"].split()) if e else None) for e in entries] + [None] * (len(PROMPTS[stem][0]) - len(entries))


def cell_text(stem: str) -> str:
    """The Try it cell of notebook ``stem``: heading, the prompts numbered (each with its folded outcome
    where the lesson profile states one), the code links."""
    prompts, code = PROMPTS[stem]
    lines = [HEADING, "", INTRO, ""]
    for number, (prompt, seen) in enumerate(zip(prompts, outcomes(stem)), 1):
        lines.append(f"{number}. {prompt}")
        if seen:
            lines.append(f"   <details><summary>{SEE}</summary>{html.escape(seen, quote=False)} "
                         "(checked against the committed runs)</details>")
    links = "; ".join(f"[`{path}`](../{path}): {what}" for path, what in code)
    lines += ["", f"**The code behind it.** {links}."]
    return "\n".join(lines)


def with_try_it(notebook: dict, stem: str) -> dict:
    """``notebook`` ending in its Try it cell (an earlier one replaced, wherever it was)."""
    cells = [c for c in notebook["cells"]
             if not (c["cell_type"] == "markdown" and "".join(c["source"]).startswith(HEADING + "\n"))]
    source = cell_text(stem).splitlines(keepends=True)
    cells.append({"cell_type": "markdown", "id": "try-it", "metadata": {}, "source": source})
    return {**notebook, "cells": cells}


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, only compare) every notebook's Try it cell."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell is missing or stale")
    args = parser.parse_args(argv)
    stale = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if path.stem not in PROMPTS:
            stale.append(f"{path.name}: no prompts in tools/try_it.py")
            continue
        text = path.read_text(encoding="utf-8")
        fresh = json.dumps(with_try_it(json.loads(text), path.stem), indent=1, ensure_ascii=False) + "\n"
        if fresh != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(fresh, encoding="utf-8")
    for name in stale:
        print(f"{'stale' if args.check else 'written'}: {name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
