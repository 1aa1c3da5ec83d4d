"""Records the shop monitor's traffic (scenarios/shop-monitor.yaml): 45 questions of the
reference assistant, then 15 with the generator fault, as OpenInference spans in traffic/,
and the simulated users' feedback in feedback.jsonl. Run it from the repository's root::

    python scenarios/shop/monitor/record.py

The fault is applied inside the instrumented ``generate`` call, so the generator's span
carries the faulty answer — what ``traced.traffic(..., fault="generator")`` now does too
(the recorded files were written by this script; kept so they can be written again
byte-identical).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHOP = HERE.parent


def _traced():
    spec = importlib.util.spec_from_file_location("shop_traced_script", SHOP / "traced.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    traced = _traced()
    (HERE / "traffic").mkdir(exist_ok=True)
    for old in (HERE / "traffic").glob("spans-*.jsonl"):
        old.unlink()
    feedback = [HERE / "feedback-0001.jsonl", HERE / "feedback-0002.jsonl"]
    traced.traffic(45, out=HERE / "traffic" / "spans-0001.jsonl", seed=1,
                   feedback=feedback[0])
    plain = traced.load_assistant

    def faulty():
        assistant = plain()
        generate, invent = assistant.generate, assistant.faults.invent_figures
        assistant.generate = lambda *args, **kw: invent(generate(*args, **kw))
        return assistant

    traced.load_assistant = faulty
    traced.traffic(15, out=HERE / "traffic" / "spans-0002.jsonl", seed=2,
                   feedback=feedback[1])
    with open(HERE / "feedback.jsonl", "w", encoding="utf-8") as out:
        for part in feedback:
            out.write(part.read_text(encoding="utf-8"))
            part.unlink()


if __name__ == "__main__":
    main()
