"""Test collections: dataset specs and the catalog over ir_datasets, formats for collections it lacks
(InstructIR, FollowIR, local files, DisastQA and its derived retrieval collection)."""
