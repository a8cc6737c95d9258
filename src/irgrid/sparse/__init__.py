"""Term-based indexes: Lucene (the paper's BM25), PISA impact indexes (BM25, learned sparse), SPLADE encoding."""
