"""Build this experiment's compact copy of ZeroEval's MATH level-5 results (run from this folder).

    python compact.py /path/to/ZeroEval   # a checkout of github.com/yuchenlin/ZeroEval at 570c6269

Writes zeroeval_math/<model>.json.gz: the same JSON list per model as upstream `result_dirs/math-l5/`,
keeping the fields the `zeroeval` answer format reads for this task (`session_id`, `id`, `problem`,
`answer`, `output`, `generator`, `dataset`) and dropping the prompt (`chat_history`, `model_input`,
most of every file) and run settings; gzip brings 84 MB to a few MB. Also copies ZeroEval's own
leaderboard for the task (`math-l5.summary.json`, for the leaderboard check) and its LICENSE.
SHA256SUMS lists the sha256 of every upstream file this copy was made from
(`upstream/result_dirs/math-l5/<model>.json`) and of every file written here.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gsm_compact", Path(__file__).parent / "../../zeroeval_gsm8k/data_src/compact.py")
GSM = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GSM)  # the GSM8K experiment's compaction, the one way both copies are made

KEEP = ("session_id", "id", "problem", "answer", "output", "generator", "dataset")
OUT = Path(__file__).parent / "zeroeval_math"


def main(upstream: Path) -> None:
    files = sorted((upstream / "result_dirs" / "math-l5").glob("*.json"))
    if not files:
        sys.exit(f"{upstream / 'result_dirs' / 'math-l5'}: no <model>.json result files")
    sums = GSM.compact_files(files, OUT, KEEP, "upstream/result_dirs/math-l5")
    summary = upstream / "result_dirs" / "math-l5.summary.json"
    shutil.copyfile(summary, OUT.parent / summary.name)
    sums.append(f"{GSM.sha256(summary)}  upstream/result_dirs/{summary.name} (../{summary.name})")
    shutil.copyfile(upstream / "LICENSE", OUT / "LICENSE")
    (OUT / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    print(f"{len(files)} models -> {OUT} ({sum(p.stat().st_size for p in OUT.glob('*.gz')) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
