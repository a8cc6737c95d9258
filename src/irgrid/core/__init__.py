"""What irgrid is about, as plain data with no heavy imports: the retriever entry schema and its registry, the
paper's settings and profiles, grid cells, model references, experiment-file schemas, significance statistics and
the index artifacts (`irgrid list` imports only this layer and `irgrid.util`)."""
