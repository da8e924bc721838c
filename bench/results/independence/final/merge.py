"""Merge into bench/results/independence/final/: the scenarios run whole with peers (runs/ind-final);
mitool's rows rerun after a change (runs/ind-final-mitool: the min-p tie-break; ind-final-mitool2:
Ross's k = 20; ind-final-mitool3: Frenzel & Pompe k = 20 alone given Z), each beside the peers' rows
of an earlier run of the same scenario (same seeds and replicates; the peers do not depend on
mitool's code): see README.md here."""

import json
from pathlib import Path

root = Path("runs")
out = Path("bench/results/independence/final")
out.mkdir(parents=True, exist_ok=True)
merged = {p.name: json.loads(p.read_text()) for p in (root / "ind-final").glob("*.json")}
for name in ("ind-final-mitool", "ind-final-mitool2", "ind-final-mitool3"):
    for path in (root / name).glob("*.json"):
        new = json.loads(path.read_text())
        sources = [root / "ind-final-peers" / path.name, root / "ind-old" / path.name]
        earlier = merged.get(path.name) or next(json.loads(p.read_text()) for p in sources if p.exists())
        peers = {m: r for m, r in earlier["methods"].items() if not m.startswith("mitool")}
        new["methods"] = {**new["methods"], **peers}
        new["peer_notes"] = earlier.get("peer_notes", [])
        new["peers_from"] = (
            "an earlier run of the same scenario with the peers (same seeds and replicates; "
            "the peers do not depend on mitool's code)"
        )
        merged[path.name] = new
for name, data in merged.items():
    (out / name).write_text(json.dumps(data, indent=1))
print(sorted(merged))
