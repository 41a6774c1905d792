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

import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path

KEEP = ("session_id", "id", "problem", "answer", "output", "generator", "dataset")
OUT = Path(__file__).parent / "zeroeval_math"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(upstream: Path) -> None:
    files = sorted((upstream / "result_dirs" / "math-l5").glob("*.json"))
    if not files:
        sys.exit(f"{upstream / 'result_dirs' / 'math-l5'}: no <model>.json result files")
    OUT.mkdir(exist_ok=True)
    sums = []
    for path in files:
        records = json.loads(path.read_text())
        compact = [{key: record[key] for key in KEEP if key in record} for record in records]
        target = OUT / f"{path.stem}.json.gz"
        # mtime=0: the same input gives byte-identical output
        target.write_bytes(gzip.compress(json.dumps(compact, ensure_ascii=False).encode(), 9, mtime=0))
        sums.append(f"{sha256(path)}  upstream/result_dirs/math-l5/{path.name}")
        sums.append(f"{sha256(target)}  {target.name}")
    summary = upstream / "result_dirs" / "math-l5.summary.json"
    shutil.copyfile(summary, OUT.parent / summary.name)
    sums.append(f"{sha256(summary)}  upstream/result_dirs/{summary.name} (../{summary.name})")
    shutil.copyfile(upstream / "LICENSE", OUT / "LICENSE")
    (OUT / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    print(f"{len(files)} models -> {OUT} ({sum(p.stat().st_size for p in OUT.glob('*.gz')) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
