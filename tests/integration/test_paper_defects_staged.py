"""Issue 12, defect 8, on the staged InstructIR queries (the other defects: tests/unit/test_paper_defects.py)."""

from __future__ import annotations


# -- 8: InstructIR query text ---------------------------------------------------------------------------------------
def test_8_instructir_query_is_instruction_sep_query():
    """kaistAI/InstructIR data_creation/format_data.after_filtering.py writes queries.jsonl with `prev_text`
    ('<instruction> [SEP] <query>') and splits it on '[SEP]' for only_instruction_queries.jsonl (the instruction)
    and metadata.origin_query (the query); the paper read that queries.jsonl (HF kaist-ai/InstructIR)."""
    from irgrid.data import datasets

    topics = datasets.get("instructir").topics().set_index("qid")["query"]
    assert len(topics) == 9_906
    q = topics["1078446_1"]
    assert q.startswith("I am an interior designer") and q.endswith(" [SEP] wine cabinets definition")

