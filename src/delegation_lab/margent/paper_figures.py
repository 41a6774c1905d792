"""The paper's figures (seed 001, MARGENT), written beside ours under a `paper` key. They are
never read by the simulator or the training: they only stand next to our measurements.

Units follow the paper: accuracies in percent, net marginal values in points, calls per example,
call gaps and correction / corruption as fractions of all examples.
"""

# Table 1, macro mean over MedQA, AQuA-RAT, MMLU-Pro, GPQA (interventional collections).
TABLE1_MACRO = {"A0": 56.63, "A1": 78.56, "AD": 80.63, "gain_at_1": 91.7}

# Table 2, net marginal value of one forced call (points), per task; its macro mean is what pairs
# with ours (the paper prints no macro row).
TABLE2 = {
    "MedQA": {"Extractor": 2.0, "Reasoner": 6.8, "Verifier": 10.0},
    "MMLU-Pro": {"Extractor": -0.5, "Reasoner": 2.3, "Verifier": 15.1},
    "GPQA": {"Extractor": 0.5, "Reasoner": 4.1, "Verifier": 15.5},
    "AQuA-RAT": {"Extractor": -4.5, "Reasoner": -4.3, "Verifier": 29.4},
}
TABLE2_MACRO = {a: round(sum(t[a] for t in TABLE2.values()) / len(TABLE2), 3) for a in ("Extractor", "Reasoner", "Verifier")}

# Table 3, macro mean of the collection-disjoint evaluation.
TABLE3_MACRO = {"candidate_accuracy": 50.6, "accuracy": 67.7, "gain_pp": 17.1, "calls": 0.526}

# Table 5 / text: MMLU-Pro, selected MARGENT vs all three sub-agents forced.
MMLU_PRO_SELECTED_VS_FORCE_ALL = {
    "selected_accuracy": 71.5, "selected_calls": 1.065, "force_all_accuracy": 71.5, "force_all_calls": 3.0, "delta_accuracy": 0.0,
}

# Table 9, AQuA-RAT depth-3 collection: changing only ρ (0 -> all).
RHO_AQUA_RAT_D3 = {
    "0": {"accuracy": 81.1, "calls": 1.000, "call_gap": 0.000},
    "all": {"accuracy": 68.5, "calls": 0.626, "call_gap": 0.195},
}

# Section 5e: MedQA's selected subset against the matched-budget random replay (2000 resamples).
REPLAY_MEDQA = {"accuracy": 82.0, "low": 75.0, "high": 81.0}

# Section 5f: Verifier candidate ablation, AQuA-RAT, ρ = 0 checkpoint.
ABLATION_AQUA_RAT = {
    "with_candidate": {"accuracy": 81.1, "correction": 0.480, "corruption": 0.0240},
    "blank": {"accuracy": 74.0, "correction": 0.409, "corruption": 0.0236},
}

# Which paper-vs-ours rows are not outcomes of the method (paper.py's `provenance` block): the
# simulator defaults were chosen with the paper's Tables 1-2 in view (a ~55 % manager, a strong
# Verifier, an Extractor near zero, corruption near the paper's 2.4 %), so those rows agree by
# construction; the blank ablation's correction is the configured `blank_rescue_scale` read back.
_SIMULATOR = "the simulator default ({}) was chosen with the paper's Table {} in view, so this row agrees by construction"
PROVENANCE = {
    "table1.A0": {"kind": "calibrated", "why": _SIMULATOR.format("manager.skill 0.9, difficulty_slope 0.22", 1)},
    **{f"table1.{k}": {"kind": "calibrated", "why": _SIMULATOR.format("each sub-agent's rescue_at_d1 and rescue_correlation 0.6", 1)}
       for k in ("A1", "AD", "gain_at_1")},
    **{f"table2.{a}": {"kind": "calibrated", "why": _SIMULATOR.format(f"{a.lower()}.rescue_at_d1 and corruption_at_d1", 2)}
       for a in ("Extractor", "Reasoner", "Verifier")},
    **{f"ablation.{k}.corruption": {"kind": "calibrated", "why": "the simulator default verifier.corruption_at_d1 0.02 was chosen "
                                     "with the paper's corruption (0.024, section 5f) in view, so this row agrees by construction"}
       for k in ("with_candidate", "blank")},
    "eval.candidate_accuracy": {"kind": "calibrated", "why": "the candidate writer is the simulated manager (routing-only, fixed), "
                                "whose accuracy is set by manager.skill, chosen with the paper's Table 1 in view"},
    "ablation.blank.correction": {"kind": "setting", "why": "verifier.blank_rescue_scale 0.75 read back: blanking scales the rescue rate by it (0.164 / 0.221 = 0.74)"},
    "ablation.blank.accuracy": {"kind": "setting", "why": "follows from verifier.blank_rescue_scale 0.75 on the same routes; the simulator decides the drop, not the method"},
    "selected_vs_force_all.force_all_calls": {"kind": "setting", "why": "force-all calls every sub-agent of the pool: 3 by construction"},
    "rho.0.call_gap": {"kind": "setting", "why": "at ρ = 0 there is no commit example, so the manager calls on every item: the gap is 0 by construction"},
}
