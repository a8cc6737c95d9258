"""Text generation for expansion retrievers: prompts and decoding as data (`spec`, light), the cached causal-LM
generator and query expansion stage (`engine`), docT5query's document stage (`doc2query`)."""
