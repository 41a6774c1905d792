"""The study registry: every study stage's `Study` (pipeline/study.py), by name, imported on first
use. A stage imports its own study directly, never this module, so its DVC code deps stay its own
study's package (tests/test_stage_deps.py); tests and tools that need every study read it here."""

from __future__ import annotations

from delegation_lab.registry import Registry

STUDIES: Registry[type] = Registry("study", "stages")  # name -> Study class, imported on first get
for _name, _target in (  # one line per study stage; tests/test_pipeline_study.py checks dvc.yaml has each
    ("coordinator", "delegation_lab.coordinator.contract:CoordinatorStudy"),
    ("credit", "delegation_lab.credit.contract:CreditStudy"),
    ("margent", "delegation_lab.margent.contract:MargentStudy"),
    ("market", "delegation_lab.market.contract:MarketStudy"),
    ("redref", "delegation_lab.redref.study:RedrefStudy"),
    ("routers", "delegation_lab.routers.contract:RoutersStudy"),
):
    STUDIES.register(_name, _target)
