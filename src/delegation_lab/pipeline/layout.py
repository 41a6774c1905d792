"""Where every file of a project lives: the one place that spells a path.

A project is a folder with `params.yaml` and the DAG (`dvc.yaml`): the repository root for the
embedded default, `experiments/<name>/` for a real-answers experiment. Stages run in that folder,
so every path here is relative to `root`; nothing else in `src/` or `stages/` writes `"data/..."`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """Every table, metric, plot and model of one project, relative to its root."""

    root: Path = Path(".")

    # ------------------------------------------------------------------ project files
    @property
    def params_file(self) -> Path:
        return self.root / "params.yaml"

    @property
    def dvc_yaml(self) -> Path:
        return self.root / "dvc.yaml"

    @property
    def dvc_dir(self) -> Path:
        return self.root / ".dvc"

    # ------------------------------------------------------------------ data/
    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def items_dir(self) -> Path:
        return self.data_dir / "items"

    def items(self, split: str) -> Path:
        return self.items_dir / f"{split}.parquet"

    @property
    def answers_dir(self) -> Path:
        return self.data_dir / "answers"

    def answers(self, solver: str) -> Path:
        return self.answers_dir / f"{solver}.parquet"

    def journal(self, cache_name: str) -> Path:
        """Checkpoints of a resumable answer cache (git-ignored)."""
        return self.data_dir / ".journal" / cache_name

    def judge_answers(self) -> Path:
        return self.data_dir / "judge" / "judge.parquet"

    @property
    def labels(self) -> Path:
        return self.data_dir / "labels.parquet"

    @property
    def ability_map(self) -> Path:
        return self.data_dir / "ability_map.parquet"

    @property
    def embeddings_dir(self) -> Path:
        """The `embed` stage's table, one `<embedder>.parquet`."""
        return self.data_dir / "embeddings"

    @property
    def served_dir(self) -> Path:
        """What `dlab serve` journalled: the answers it got (one answer cache per solver) and its decisions."""
        return self.data_dir / "served"

    def served_answers(self, solver: str) -> Path:
        return self.served_dir / "answers" / f"{solver}.parquet"

    def served_journal(self, name: str) -> Path:
        """Checkpoints of a served table (a solver's answers, or `decisions`) until the server compacts them."""
        return self.served_dir / ".journal" / name

    @property
    def served_decisions(self) -> Path:
        """One row per request `dlab serve` answered: the policy, its routing decision, who answered, the cost."""
        return self.served_dir / "decisions.parquet"

    @property
    def redref_cache(self) -> Path:
        """REDEREF's sentence-embedding cache of tasks and questions (persisted across runs)."""
        return self.data_dir / "redref"

    # ------------------------------------------------------------------ results/
    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def trajectories_dir(self) -> Path:
        """Hive-partitioned `study=<s>/method=<m>/seed=<k>/part-*.parquet`."""
        return self.results_dir / "trajectories"

    def trajectories(self, study: str) -> Path:
        return self.trajectories_dir / f"study={study}"

    @property
    def summaries_dir(self) -> Path:
        return self.results_dir / "summaries"

    def summaries(self, study: str) -> Path:
        return self.summaries_dir / f"{study}.parquet"

    @property
    def runs_dir(self) -> Path:
        """The MLflow run ids behind the summary rows: no stage depends on them (see RUN_INDEX_SCHEMA)."""
        return self.results_dir / "runs"

    def runs(self, study: str) -> Path:
        return self.runs_dir / f"{study}.parquet"

    @property
    def outcomes_dir(self) -> Path:
        return self.results_dir / "outcomes"

    def outcomes(self, study: str) -> Path:
        return self.outcomes_dir / f"{study}.parquet"

    @property
    def frontier(self) -> Path:
        return self.results_dir / "frontier.parquet"

    @property
    def credit_dir(self) -> Path:
        """Per-agent Shapley credit of stored trajectories (`dlab credit`)."""
        return self.results_dir / "credit"

    def credit(self, study: str) -> Path:
        return self.credit_dir / f"{study}.parquet"

    def study_results(self, study: str) -> Path:
        """A study's own intermediate files (margent's collection, history_game's tables)."""
        return self.results_dir / study

    # ------------------------------------------------------------------ metrics/, plots/, models/
    @property
    def metrics_dir(self) -> Path:
        return self.root / "metrics"

    def metrics(self, name: str) -> Path:
        return self.metrics_dir / f"{name}.json"

    def timings(self, label: str) -> Path:
        """Seconds, CPU seconds and phases of one stage run (`dlab report --timings`)."""
        return self.metrics_dir / "timings" / f"{label}.json"

    def solve_run(self, solver: str) -> Path:
        """Backend calls and errors of the solver's last run in stage `solve`."""
        return self.metrics_dir / "solve_runs" / f"{solver}.json"

    def plots(self, study: str) -> Path:
        return self.root / "plots" / study

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    def router(self, name: str) -> Path:
        """A saved router (`dlab route`, `dlab serve`)."""
        return self.models_dir / "routers" / f"{name}.npz"
