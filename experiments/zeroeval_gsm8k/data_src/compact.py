"""Build this experiment's compact copy of ZeroEval's GSM8K results (run from this folder).

    python compact.py /path/to/shared/data/zeroeval_gsm

Writes zeroeval_gsm/<model>.json.gz: the same JSON list per model as upstream, keeping the fields
the `zeroeval` answer format reads (`session_id`, `id`, `question`, `answer`, `output`,
`generator`) and dropping the prompt (`chat_history`, the bulk of every file) and run settings;
gzip brings 113 MB to about 11 MB. SHA256SUMS lists the sha256 of every upstream file this copy was
made from (`upstream/gsm/<model>.json`, as in the shared copy's SHA256SUMS) and of every file
written here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path

KEEP = ("session_id", "id", "question", "answer", "output", "generator")
OUT = Path(__file__).parent / "zeroeval_gsm"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compact_files(files: list[Path], out: Path, keep: tuple[str, ...], upstream: str) -> list[str]:
    """Each result file less the fields not in `keep`, gzipped into `out`; their SHA256SUMS lines (the
    upstream file as `<upstream>/<name>`, then the written one). zeroeval_math's compact.py uses it too."""
    out.mkdir(exist_ok=True)
    sums = []
    for path in files:
        records = json.loads(path.read_text())
        compact = [{key: record[key] for key in keep if key in record} for record in records]
        target = out / f"{path.stem}.json.gz"
        # mtime=0: the same input gives byte-identical output
        target.write_bytes(gzip.compress(json.dumps(compact, ensure_ascii=False).encode(), 9, mtime=0))
        sums.append(f"{sha256(path)}  {upstream}/{path.name}")
        sums.append(f"{sha256(target)}  {target.name}")
    return sums


def main(source: Path) -> None:
    files = sorted((source / "gsm").glob("*.json"))
    if not files:
        sys.exit(f"{source / 'gsm'}: no <model>.json result files")
    sums = compact_files(files, OUT, KEEP, "upstream/gsm")
    for name in ("LICENSE",):
        shutil.copyfile(source / name, OUT / name)
    (OUT / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    print(f"{len(files)} models -> {OUT} ({sum(p.stat().st_size for p in OUT.glob('*.gz')) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
